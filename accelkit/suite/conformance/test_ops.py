"""Operator numerics against a float64 CPU reference, per dtype the device supports.

Each op's bound is derived (accelkit.suite.reference): rtol is the dtype's, a few units of the
output's rounding; an op whose output elements accumulate K terms adds sqrt(K) * eps * terms,
with terms the sum of the terms' magnitudes per output element, computed from the inputs.
Shapes are chosen so that every reduction has a partial last tile (lengths that are not
multiples of 8, 16, 32 or 64) and every output has many elements: a kernel that is wrong only
in its tail, or wrong by one rounding's worth in bfloat16, still fails.

`matmul/tfloat32` tests TF32 on purpose, on backends that declare it (`Backend.tf32`), with
TF32's input rounding in its bound; every other float32 case runs with TF32 off
(conformance/conftest.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest
import torch
import torch.nn.functional as F

from accelkit.suite.numerics import allow_tf32
from accelkit.suite.reference import (
    absolute_terms,
    accumulation_eps,
    assert_matches_reference,
    make_input,
    reference,
    tf32_atol,
)

if TYPE_CHECKING:
    from accelkit.backends.base import Backend

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class OpCase:
    """An op, its inputs, and its bound: `count` terms per output element (the terms'
    magnitudes from `absolute_terms`), and/or `bound(inputs in float64, reference, dtype)`,
    an atol of its own."""

    fn: Callable[..., Any]
    inputs: tuple[torch.Tensor, ...]
    count: int = 1
    bound: Callable[[tuple[torch.Tensor, ...], torch.Tensor, torch.dtype], Any] | None = None


Inputs = tuple[torch.Tensor, ...]


def _softmax_bound(inputs: Inputs, ref: torch.Tensor, dtype: torch.dtype) -> Any:
    """p_i = exp(x_i - m) / S: exp's argument rounds relative to |x_i - m|, and S sums N
    positive terms (sqrt(N) eps relative), so p_i is off by eps (|x_i - m| + sqrt(N)) p_i."""
    eps = accumulation_eps(dtype)
    (x,) = inputs
    n = x.shape[-1]
    spread = (x - x.amax(-1, keepdim=True)).abs()
    return eps * (spread + math.sqrt(n)) * ref


def _layer_norm_bound(inputs: Inputs, ref: torch.Tensor, dtype: torch.dtype) -> Any:
    """y = (x - mu) / sigma * w + b over N: mu and sigma ** 2 accumulate N terms
    (sqrt(N) eps of sum|x| / N and of sigma ** 2), which reach y through |x - mu| / sigma
    and 1 / sigma, scaled by |w|; then w * . + b rounds (eps (|y - b| + |b|))."""
    eps = accumulation_eps(dtype)
    x, w, b = inputs
    n = x.shape[-1]
    mu = x.mean(-1, keepdim=True)
    sigma = x.var(-1, unbiased=False, keepdim=True).sqrt()
    centred = (x - mu).abs() / sigma
    accumulated = math.sqrt(n) * eps * (centred + x.abs().mean(-1, keepdim=True) / sigma)
    return accumulated * w.abs() + eps * ((ref - b).abs() + b.abs())


def _bias_rounding(bias: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A backend may round the product before it adds the bias (torch adds it after cuDNN's
    convolution): one more rounding in the output dtype, u (|y| + |b|) <= rtol |y| + u |b|
    (rtol is two units of rounding): this is the u |b|."""
    return torch.finfo(dtype).eps / 2 * bias.abs()


def _addmm_bound(inputs: Inputs, ref: torch.Tensor, dtype: torch.dtype) -> Any:
    return _bias_rounding(inputs[0], dtype)


def _conv2d_bound(inputs: Inputs, ref: torch.Tensor, dtype: torch.dtype) -> Any:
    return _bias_rounding(inputs[2], dtype).reshape(-1, 1, 1)


def _conv2d(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.conv2d(x, w, b, padding=1)


def _case(op: str, dt: torch.dtype, dev: str) -> OpCase:
    """The inputs of `op` (drawn from the case's seed) and its bound."""
    if op in ("add", "mul"):
        fn = torch.add if op == "add" else torch.mul
        return OpCase(fn, (make_input((64, 96), dt, dev), make_input((64, 96), dt, dev)))
    if op in ("exp", "tanh"):
        return OpCase(torch.exp if op == "exp" else torch.tanh, (make_input((4096,), dt, dev),))
    if op == "softmax":
        x = make_input((32, 257), dt, dev, low=-8, high=8)
        return OpCase(lambda t: torch.softmax(t, dim=-1), (x,), bound=_softmax_bound)
    if op == "sum":
        return OpCase(lambda t: t.sum(dim=-1), (make_input((64, 1000), dt, dev),), count=1000)
    if op == "cumsum":
        return OpCase(lambda t: t.cumsum(dim=-1), (make_input((16, 1000), dt, dev),), count=1000)
    if op == "matmul":
        a, b = make_input((48, 200), dt, dev), make_input((200, 40), dt, dev)
        return OpCase(torch.matmul, (a, b), count=200)
    if op == "addmm":
        bias = make_input((40,), dt, dev, low=-1.0, high=1.0)
        a, b = make_input((48, 200), dt, dev), make_input((200, 40), dt, dev)
        return OpCase(torch.addmm, (bias, a, b), count=201, bound=_addmm_bound)
    if op == "bmm":
        a, b = make_input((6, 24, 136), dt, dev), make_input((6, 136, 20), dt, dev)
        return OpCase(torch.bmm, (a, b), count=136)
    if op == "conv2d":
        x = make_input((2, 5, 12, 12), dt, dev)
        w = make_input((7, 5, 3, 3), dt, dev, low=-0.5, high=0.5)
        bias = make_input((7,), dt, dev, low=-1.0, high=1.0)
        return OpCase(_conv2d, (x, w, bias), count=5 * 3 * 3 + 1, bound=_conv2d_bound)
    if op == "layer_norm":
        x = make_input((32, 100), dt, dev)
        w, b = make_input((100,), dt, dev), make_input((100,), dt, dev)
        return OpCase(
            lambda t, w_, b_: F.layer_norm(t, (100,), w_, b_), (x, w, b), bound=_layer_norm_bound
        )
    raise KeyError(op)


OPS = (
    "add",
    "mul",
    "exp",
    "tanh",
    "softmax",
    "sum",
    "cumsum",
    "matmul",
    "addmm",
    "bmm",
    "conv2d",
    "layer_norm",
)
# (op, dtype name): every op in every dtype, and float32 matmul in TF32 on purpose.
PARAMS = [(op, dt) for op in OPS for dt in DTYPES] + [("matmul", "tfloat32")]


def _check(case: OpCase, dtype: torch.dtype, what: str, extra: Any = None) -> None:
    actual = case.fn(*case.inputs)
    assert actual.dtype == dtype, f"{what} returned {actual.dtype} for {dtype} inputs"
    want = reference(case.fn, *case.inputs)
    terms = absolute_terms(case.fn, *case.inputs) if case.count > 1 else None
    atol = extra
    if case.bound is not None:
        inputs64 = tuple(t.detach().cpu().double() for t in case.inputs)
        own = case.bound(inputs64, want, dtype)
        atol = own if atol is None else atol + own
    assert_matches_reference(
        actual, want, dtype, terms=terms, count=case.count, atol=atol, what=what
    )


@pytest.mark.parametrize(("op", "dtype_name"), PARAMS, ids=[f"{op}/{dt}" for op, dt in PARAMS])
def test_ops(op: str, dtype_name: str, device: str, backend: Backend) -> None:
    if dtype_name == "tfloat32":
        _check_tf32(op, device, backend)
        return
    dtype = DTYPES[dtype_name]
    _check(_case(op, dtype, device), dtype, op)


def _check_tf32(op: str, device: str, backend: Backend) -> None:
    """float32 with TF32 on, where the backend has it: TF32 rounds each factor of a product
    to 10 bits, so the bound adds eps_tf32 * terms; no more."""
    if not backend.tf32:
        pytest.skip(f"{backend.name} has no TF32 mode (Backend.tf32)")
    case = _case(op, torch.float32, device)
    terms = absolute_terms(case.fn, *case.inputs)
    with allow_tf32():
        _check(case, torch.float32, f"{op} (TF32)", extra=tf32_atol(terms))
