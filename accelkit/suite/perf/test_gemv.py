"""Single-token decode: `F.linear` with batch 1 reads the whole weight once per token, so
its speed is memory bandwidth (B/s, against the memory peak) and latency per token.

Ids are `gemv/<dtype>/1x<out>x<in>`. Weight sets rotate so caches cannot serve them. The
dtype is the tier's activation dtype: bfloat16 on accelerators (what LLM decoding uses);
float32 on a CPU, where torch's bfloat16 batch-1 path is far from memory-bound.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from accelkit.suite.perf.fixtures import tier_of
from accelkit.suite.perf.harness import PerfContext, element_size, torch_dtype
from accelkit.suite.perf.rotation import memory_rotation_count, rotating_sets


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "gemv_case" not in metafunc.fixturenames:
        return
    tier = tier_of(metafunc.config)
    shapes = list(tier.gemv)
    ids = [f"{tier.activation_dtype}/1x{n}x{k}" for n, k in shapes]
    metafunc.parametrize("gemv_case", shapes, ids=ids)


def test_gemv(
    gemv_case: tuple[int, int], perf: PerfContext, record_metric: Callable[..., None]
) -> None:
    import torch
    import torch.nn.functional as F

    n, k = gemv_case
    dtype = torch_dtype(perf.tier.activation_dtype)
    size = element_size(perf.tier.activation_dtype)
    weight_bytes = n * k * size
    sets = memory_rotation_count(weight_bytes, perf.tier, cap=16)
    first = (
        torch.randn(1, k, device=perf.device_type, dtype=dtype),
        torch.randn(n, k, device=perf.device_type, dtype=dtype),
    )
    arg_sets = rotating_sets(first, sets)
    measurement = perf.measure(F.linear, arg_sets=arg_sets)
    moved = weight_bytes + (k + n) * size
    perf.record_bandwidth(record_metric, "bandwidth", measurement, moved, shape=[1, n, k])
    perf.record_latency(record_metric, "latency", measurement, shape=[1, n, k])
