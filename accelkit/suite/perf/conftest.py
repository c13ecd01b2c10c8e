"""The perf suite's fixtures (defined in fixtures.py so other case folders can share them)."""

from accelkit.suite.perf.fixtures import perf

__all__ = ["perf"]
