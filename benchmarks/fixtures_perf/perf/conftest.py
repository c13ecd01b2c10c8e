"""The A/A benchmark's case folder: the shipped perf cases plus one planted-slowdown case.

Uses the shipped suite's fixtures. Nothing here is part of the shipped suite.
"""

from accelkit.suite.perf.fixtures import perf, pytest_collection_modifyitems

__all__ = ["perf", "pytest_collection_modifyitems"]
