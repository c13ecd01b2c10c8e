"""The shipped perf suite's collectives cases, unchanged (same case ids), for the A/A benchmark."""

from accelkit.suite.perf.test_collectives import *  # noqa: F403
