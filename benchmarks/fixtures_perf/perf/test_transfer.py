"""The shipped perf suite's transfer cases, unchanged (same case ids), for the A/A benchmark."""

from accelkit.suite.perf.test_transfer import *  # noqa: F403
