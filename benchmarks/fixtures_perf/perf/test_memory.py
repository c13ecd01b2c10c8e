"""The shipped perf suite's memory cases, unchanged (same case ids), for the A/A benchmark."""

from accelkit.suite.perf.test_memory import *  # noqa: F403
