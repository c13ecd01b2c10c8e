"""Builds in containers: plans (plan.py) from per-backend recipes (recipes/), their execution
(execute.py, with incontainer.py running inside the builder), wheel checks (wheel.py) and
the backends' test images (testimage.py).

This package's __init__ stays empty of imports: incontainer.py runs inside builder images
that have nothing but the standard library.
"""
