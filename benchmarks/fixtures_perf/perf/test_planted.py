"""A float32 GEMM kernel whose work grows by ACCELKIT_PLANT_SLOWDOWN (a fraction).

Only this benchmark folder reads the variable; the shipped suite never does. Each timed
call runs the same 64^3 GEMM BASE_CALLS times (a few hundred microseconds in all: short
calls keep a loaded machine's preemptions out of most samples); the planted run adds
round(fraction x BASE_CALLS) more of the very same GEMM (0.10 -> 22 instead of 20: exactly
10% more of identical work on the timed path; the fraction is applied in steps of 5%).
FLOP/s is reported for the nominal work, so it drops by the slowdown, measured like every
other case.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from accelkit.suite.perf.harness import PerfContext

PLANT_ENV = "ACCELKIT_PLANT_SLOWDOWN"
N = 64
BASE_CALLS = 20


def test_planted(perf: PerfContext, record_metric: Callable[..., None]) -> None:
    import torch

    fraction = float(os.environ.get(PLANT_ENV, "") or 0.0)
    calls = BASE_CALLS + round(BASE_CALLS * fraction)
    arg_sets = [(torch.randn(N, N), torch.randn(N, N)) for _ in range(4)]

    def work(a: Any, b: Any) -> None:
        for _ in range(calls):
            torch.mm(a, b)

    measurement = perf.measure(work, arg_sets=arg_sets)
    perf.record_flops(
        record_metric,
        "flops",
        measurement,
        BASE_CALLS * 2.0 * N**3,
        dtype="float32",
        planted_fraction=fraction,
    )
    perf.record_latency(record_metric, "latency", measurement, planted_fraction=fraction)
