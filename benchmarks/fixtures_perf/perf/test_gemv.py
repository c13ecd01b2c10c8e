"""The shipped perf suite's gemv cases, unchanged (same case ids), for the A/A benchmark."""

from accelkit.suite.perf.test_gemv import *  # noqa: F403
