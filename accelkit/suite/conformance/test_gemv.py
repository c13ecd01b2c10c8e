"""Single-token decode: F.linear with ONE input row (the GEMV path: MPS has a dedicated
kernel; cuBLAS/hipBLAS/oneDNN pick GEMV kernels for it) in float32/float16/bfloat16,
against the float64 CPU reference."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from accelkit.suite.numerics.reference import (
    absolute_terms,
    assert_matches_reference,
    make_input,
    reference,
)

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
# (K, N): in_features, out_features, including odd sizes that miss vector widths
SHAPES = [(64, 64), (4096, 11), (1000, 1027), (127, 4096)]


@pytest.mark.parametrize("bias", ["bias", "no_bias"])
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{k}x{n}" for k, n in SHAPES])
@pytest.mark.parametrize("dtype_name", list(DTYPES))
def test_gemv(dtype_name: str, shape: tuple[int, int], bias: str, device: str) -> None:
    dtype = DTYPES[dtype_name]
    k, n = shape
    x = make_input((1, k), dtype, device, low=-1.0, high=1.0)
    weight = make_input((n, k), dtype, device, low=-1.0, high=1.0) / math.sqrt(k)
    b = make_input((n,), dtype, device) if bias == "bias" else None
    out = F.linear(x, weight, b)
    assert out.shape == (1, n) and out.dtype == dtype, f"got {out.shape} {out.dtype}"
    # Each output accumulates K products (and the bias): sqrt(K + 1) * eps * sum|x w|.
    want = reference(F.linear, x, weight, b)
    terms = absolute_terms(F.linear, x, weight, b)
    assert_matches_reference(
        out, want, dtype, terms=terms, count=k + 1, what=f"linear 1x{k} -> {n}"
    )
    # A 3-D decode input (batch 1, one token) must agree with the reference too.
    out3 = F.linear(x.view(1, 1, k), weight, b)
    assert_matches_reference(
        out3.view(1, n), want, dtype, terms=terms, count=k + 1, what="(1, 1, K) input"
    )
