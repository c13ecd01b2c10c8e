"""Scaled dot-product attention throughput (FLOP/s), full and causal.

FLOPs counted: 4 x batch x heads x seq^2 x head_dim (QK^T and PV), half of it for causal
masks. The fraction is against the dense matrix peak of the dtype: attention kernels run
their GEMMs on the same units.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from accelkit.suite.perf.fixtures import tier_of
from accelkit.suite.perf.harness import PerfContext, torch_dtype

MASKS = ("full", "causal")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "sdpa_mask" not in metafunc.fixturenames:
        return
    tier = tier_of(metafunc.config)
    b, h, s, d = tier.sdpa
    metafunc.parametrize(
        "sdpa_mask",
        list(MASKS),
        ids=[f"{tier.activation_dtype}/b{b}h{h}s{s}d{d}/{mask}" for mask in MASKS],
    )


def test_sdpa(sdpa_mask: str, perf: PerfContext, record_metric: Callable[..., None]) -> None:
    import torch
    import torch.nn.functional as F

    b, h, s, d = perf.tier.sdpa
    dtype_name = perf.tier.activation_dtype
    dtype = torch_dtype(dtype_name)
    causal = sdpa_mask == "causal"
    q, k, v = (torch.randn(b, h, s, d, device=perf.device_type, dtype=dtype) for _ in range(3))

    def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    with torch.no_grad():
        measurement = perf.measure(attention, args=(q, k, v))
    flop = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
    perf.record_flops(
        record_metric,
        "flops",
        measurement,
        flop,
        dtype=dtype_name,
        shape=[b, h, s, d],
        causal=causal,
    )
    perf.record_latency(record_metric, "latency", measurement, shape=[b, h, s, d])
