"""The shipped perf suite's canaries, unchanged (same case ids), for the A/A benchmark."""

from accelkit.suite.perf.test_canary import *  # noqa: F403
