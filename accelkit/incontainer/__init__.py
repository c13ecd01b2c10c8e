"""Code that runs INSIDE containers (builders, test-image install steps, smoke tests), with the
standard library only: nothing here imports accelkit's dependencies or any accelkit module
outside this package, so it runs under `python -I` in a bare image (tests/unit/test_architecture.py
checks it). The host side that starts these containers lives in accelkit.wheels and
accelkit.setup.
"""
