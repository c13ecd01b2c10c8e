"""Memory-bound kernels in B/s against the memory peak: STREAM-style copy and triad, a
full reduction, and row-wise softmax / layer_norm.

Bytes are what the kernel must move at least: copy reads and writes N elements (2N),
triad reads two and writes one (3N), sum reads N, softmax/layer_norm read and write the
input once (2 x rows x cols).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from accelkit.suite.perf.fixtures import tier_of
from accelkit.suite.perf.harness import PerfContext, element_size, torch_dtype
from accelkit.suite.perf.rotation import memory_rotation_count, rotating_sets

STREAM_KERNELS = ("copy", "triad", "sum")
ROW_KERNELS = ("softmax", "layer_norm")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    tier = tier_of(metafunc.config)
    if "stream_case" in metafunc.fixturenames:
        n = tier.stream_elements
        metafunc.parametrize(
            "stream_case", list(STREAM_KERNELS), ids=[f"{k}/float32/{n}" for k in STREAM_KERNELS]
        )
    if "row_case" in metafunc.fixturenames:
        rows, cols = tier.rows_cols
        dtype = tier.activation_dtype
        metafunc.parametrize(
            "row_case", list(ROW_KERNELS), ids=[f"{k}/{dtype}/{rows}x{cols}" for k in ROW_KERNELS]
        )


def test_stream(stream_case: str, perf: PerfContext, record_metric: Callable[..., None]) -> None:
    import torch

    n = perf.tier.stream_elements
    device = perf.device_type
    sets = memory_rotation_count(2 * 4 * n, perf.tier)
    fn: Callable[..., object]
    if stream_case == "copy":
        first: tuple[Any, ...] = (torch.empty(n, device=device), torch.randn(n, device=device))
        fn, moved = (lambda dst, src: dst.copy_(src)), 2 * 4 * n
    elif stream_case == "triad":
        first = tuple(torch.randn(n, device=device) for _ in range(3))
        fn, moved = (lambda a, b, c: torch.add(b, c, alpha=3.0, out=a)), 3 * 4 * n
    else:
        first = (torch.randn(n, device=device),)
        fn, moved = torch.sum, 4 * n
    arg_sets = rotating_sets(first, sets)
    measurement = perf.measure(fn, arg_sets=arg_sets)
    perf.record_bandwidth(record_metric, "bandwidth", measurement, moved, elements=n)
    perf.record_latency(record_metric, "latency", measurement, elements=n)


def test_rows(row_case: str, perf: PerfContext, record_metric: Callable[..., None]) -> None:
    import torch
    import torch.nn.functional as F

    rows, cols = perf.tier.rows_cols
    dtype_name = perf.tier.activation_dtype
    dtype, size = torch_dtype(dtype_name), element_size(dtype_name)
    device = perf.device_type
    sets = memory_rotation_count(2 * rows * cols * size, perf.tier)
    inputs = rotating_sets((torch.randn(rows, cols, device=device, dtype=dtype),), sets)
    if row_case == "softmax":
        fn: Callable[..., object] = lambda x: torch.softmax(x, dim=-1)  # noqa: E731
    else:
        weight = torch.randn(cols, device=device, dtype=dtype)
        bias = torch.randn(cols, device=device, dtype=dtype)
        fn = lambda x: F.layer_norm(x, (cols,), weight, bias)  # noqa: E731
    measurement = perf.measure(fn, arg_sets=inputs)
    moved = 2 * rows * cols * size
    perf.record_bandwidth(record_metric, "bandwidth", measurement, moved, shape=[rows, cols])
    perf.record_latency(record_metric, "latency", measurement, shape=[rows, cols])
