"""The shipped perf suite's attention cases, unchanged (same case ids), for the A/A benchmark."""

from accelkit.suite.perf.test_attention import *  # noqa: F403
