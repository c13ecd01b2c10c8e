"""The shipped perf suite's gemm cases, unchanged (same case ids), for the A/A benchmark."""

from accelkit.suite.perf.test_gemm import *  # noqa: F403
