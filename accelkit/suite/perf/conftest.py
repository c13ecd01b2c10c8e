"""The perf suite's fixtures (defined in fixtures.py so other case folders can share them)."""

from accelkit.suite.perf.fixtures import perf, pytest_collection_modifyitems

__all__ = ["perf", "pytest_collection_modifyitems"]
