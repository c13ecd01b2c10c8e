"""accelkit: build, set up and test PyTorch accelerator variants with one shared suite."""

__version__ = "0.1.0"
