"""GEMM throughput (FLOP/s) per dtype: square and LLM-shaped (tokens x out x in) sizes.

float32 is timed with TF32 off (torch's default); tfloat32 is the same GEMM with TF32
allowed (CUDA/ROCm only); float8 is `torch._scaled_mm` on e4m3 operands with unit scales,
bfloat16 output. Ids are `gemm/<dtype>/<m>x<n>x<k>`: (m x k) @ (k x n).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from accelkit.suite.perf.fixtures import tier_of
from accelkit.suite.perf.harness import (
    DTYPE_NAMES,
    PerfContext,
    element_size,
    gemm_function,
    gemm_operands,
    gemm_unsupported,
    tf32_mode,
)
from accelkit.suite.perf.rotation import rotation_count


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "gemm_case" not in metafunc.fixturenames:
        return
    tier = tier_of(metafunc.config)
    shapes = [(n, n, n) for n in tier.gemm_square] + list(tier.gemm_llm)
    cases = [(dtype, shape) for dtype in DTYPE_NAMES for shape in shapes]
    ids = [f"{dtype}/{m}x{n}x{k}" for dtype, (m, n, k) in cases]
    metafunc.parametrize("gemm_case", cases, ids=ids)


def test_gemm(
    gemm_case: tuple[str, tuple[int, int, int]],
    perf: PerfContext,
    record_metric: Callable[..., None],
) -> None:
    dtype, (m, n, k) = gemm_case
    reason = gemm_unsupported(dtype, perf.device_type, tf32=perf.spec.tf32)
    if reason:
        pytest.skip(reason)
    bytes_per_set = (m * k + k * n) * element_size(dtype)
    operands: list[tuple[Any, ...]] = gemm_operands(
        dtype, m, n, k, perf.device_type, rotation_count(bytes_per_set, perf.tier)
    )
    with tf32_mode(dtype):
        measurement = perf.measure(gemm_function(dtype), arg_sets=operands)
    operand_dtype = str(operands[0][0].dtype).removeprefix("torch.")
    perf.record_flops(
        record_metric,
        "flops",
        measurement,
        2.0 * m * n * k,
        dtype=dtype,
        shape=[m, n, k],
        operand_dtype=operand_dtype,
    )
    perf.record_latency(record_metric, "latency", measurement, shape=[m, n, k])
