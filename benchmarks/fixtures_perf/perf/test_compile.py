"""The shipped perf suite's compile cases, unchanged (same case ids), for the A/A benchmark."""

from accelkit.suite.perf.test_compile import *  # noqa: F403
