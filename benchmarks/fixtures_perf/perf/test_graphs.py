"""The shipped perf suite's graphs cases, unchanged (same case ids), for the A/A benchmark."""

from accelkit.suite.perf.test_graphs import *  # noqa: F403
