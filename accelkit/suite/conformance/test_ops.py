"""Operator numerics against a float64 CPU reference, per dtype the device supports.

Each op's bound is derived (accelkit.suite.numerics.reference): rtol is the dtype's, a few units of
the
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

import contextlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest
import torch
import torch.nn.functional as F

from accelkit.suite.numerics.mode import allow_tf32
from accelkit.suite.numerics.reference import (
    absolute_terms,
    accumulation_eps,
    assert_matches_reference,
    check_close,
    make_input,
    reference,
    tf32_atol,
)
from accelkit.suite.session import outputs

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


def _softmax_bound(inputs: Inputs, ref: torch.Tensor, dtype: torch.dtype, dim: int = -1) -> Any:
    """p_i = exp(x_i - m) / S: exp's argument rounds relative to |x_i - m|, and S sums N
    positive terms (sqrt(N) eps relative) whose arguments round too (sum_j p_j |x_j - m| eps
    relative), so p_i is off by eps (|x_i - m| + sum_j p_j |x_j - m| + sqrt(N)) p_i."""
    eps = accumulation_eps(dtype)
    (x,) = inputs
    n = x.shape[dim]
    spread = (x - x.amax(dim, keepdim=True)).abs()
    in_sum = (spread * ref).sum(dim, keepdim=True)
    return eps * (spread + in_sum + math.sqrt(n)) * ref


def _layer_norm_bound(inputs: Inputs, ref: torch.Tensor, dtype: torch.dtype) -> Any:
    """y = (x - mu) / sigma * w + b over N: mu and sigma ** 2 accumulate N terms
    (sqrt(N) eps of sum|x| / N and of sigma ** 2), which reach y through |x - mu| / sigma
    and 1 / sigma, scaled by |w|; then w * . + b rounds (eps (|y - b| + |b|))."""
    x, w, b = inputs
    return _normalised_bound(x, x.reshape(-1, w.numel()), ref, dtype, w, b)


def _normalised_bound(
    x: torch.Tensor,
    groups: torch.Tensor,
    ref: torch.Tensor,
    dtype: torch.dtype,
    w: torch.Tensor,
    b: torch.Tensor,
) -> Any:
    """_layer_norm_bound's terms for `x` normalised over each row of `groups` (x viewed as
    rows of the N elements that share a mean and a variance); `w` and `b` broadcast to x."""
    eps = accumulation_eps(dtype)
    n = groups.shape[-1]
    mu = groups.mean(-1, keepdim=True)
    sigma = groups.var(-1, unbiased=False, keepdim=True).sqrt()
    centred = ((groups - mu).abs() / sigma).reshape(x.shape)
    mean_abs = (groups.abs().mean(-1, keepdim=True) / sigma).expand_as(groups).reshape(x.shape)
    accumulated = math.sqrt(n) * eps * (centred + mean_abs)
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


def _check(
    case: OpCase, dtype: torch.dtype, what: str, extra: Any = None, actual: Any = None
) -> None:
    """`actual` (the op's answer; computed here when None) against the reference and bound."""
    if actual is None:
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


# Sizes that cross GPU kernels' block and tile boundaries (issue 44). GPU reductions, scans,
# softmax and norms pick their kernel by the reduced length and its stride: one block per row
# up to a few thousand elements, several blocks (a split reduction, a second pass, a
# multi-block scan) past that, and grid or index limits at 2 ** 16. Each op runs along
#   inner: the last dim, 66001 long (odd, past 2 ** 16: the last block of any power-of-two
#          size from 32 to 2 ** 16 is partial);
#   outer: the first dim, 65543 long with 2 elements after it (stride 2, not the last dim);
#   tiles: the last dim, 2053 long (5 past a 2048 block) in 33 rows (1 past a 32-row tile).
# The norms reduce the same lengths: layer_norm and rms_norm over the last dim (inner,
# tiles) or the last two (outer: 263 x 257 = 67591), group_norm over a group of channels
# (outer: 2 channels of 33003, so the reduction crosses the channel dim).
# One case per op and dtype runs the three (its message names the one that failed): a case
# costs its set-up, and these run in every default run.
LONG = 66001
OUTER = 65543
TILE_ROW = 2053
VARIANTS: dict[str, tuple[tuple[int, ...], int]] = {
    "inner": ((2, LONG), -1),
    "outer": ((OUTER, 2), 0),
    "tiles": ((33, TILE_ROW), -1),
}
NORM_VARIANTS: dict[str, tuple[tuple[int, ...], int]] = {
    # layer_norm and rms_norm: (shape, how many trailing dims are normalised)
    "inner": ((2, LONG), 1),
    "outer": ((2, 263, 257), 2),
    "tiles": ((33, TILE_ROW), 1),
}
GROUP_NORM_VARIANTS: dict[str, tuple[tuple[int, ...], int]] = {
    # group_norm: (shape, groups)
    "inner": ((1, 2, LONG), 2),
    "outer": ((1, 4, 33003), 2),
    "tiles": ((3, 6, TILE_ROW), 3),
}


def _var_terms(x: torch.Tensor, dim: int) -> torch.Tensor:
    """var = S2 / (N - 1), S2 = sum_i (x_i - mu) ** 2: S2 accumulates N terms and each
    deviation and its square round ((sqrt(N) + 2) eps S2), and the mean's rounding
    (sqrt(N) eps mean|x|) enters each deviation (2 sqrt(N) eps mean|x| sum|x_i - mu|): the
    bound of var in units of the accumulation eps."""
    n = x.shape[dim]
    deviation = (x - x.mean(dim, keepdim=True)).abs()
    s2 = (deviation**2).sum(dim)
    spread = (math.sqrt(n) + 2) * s2 + 2 * math.sqrt(n) * x.abs().mean(dim) * deviation.sum(dim)
    return spread / (n - 1)


def _reduction_bound(op: str, dim: int) -> Callable[[Inputs, torch.Tensor, torch.dtype], Any]:
    """The bound of an op reducing or scanning `dim` whose rounding is not the sum of its
    terms' magnitudes (those take `count`, and `absolute_terms`, instead)."""

    def bound(inputs: Inputs, ref: torch.Tensor, dtype: torch.dtype) -> Any:
        eps = accumulation_eps(dtype)
        (x,) = inputs
        n = x.shape[dim]
        if op == "var":
            return eps * _var_terms(x, dim)
        if op == "std":  # sqrt halves a relative error: d std = d var / (2 std)
            return eps * _var_terms(x, dim) / (2 * ref)
        if op == "norm":
            # sum x ** 2: N squares (each rounded) of one sign, (sqrt(N) + 1) eps relative,
            # halved by the square root: d ||x|| = d(||x|| ** 2) / (2 ||x||)
            return eps * (math.sqrt(n) + 1) / 2 * ref
        spread = (x - x.amax(dim, keepdim=True)).abs()
        if op == "logsumexp":
            # y = m + log S, S = sum_i exp(x_i - m) in [1, N]: S is off relatively by its N
            # terms' accumulation (sqrt(N) eps) and each exp's argument rounding and ulp
            # (eps (|x_i - m| + 1)), which log turns into an absolute error; then log S and
            # m + log S round (eps (|log S| + |m|))
            m = x.amax(dim)
            log_s = (ref - m).abs()
            return eps * (math.sqrt(n) + spread.amax(dim) + 1 + log_s + m.abs())
        if op == "logcumsumexp":
            # y_k = logaddexp(y_{k-1}, x_k), sequential or as a tree: each combine rounds
            # max + log1p(exp(min - max)) (eps (|y| + 1)) and passes its inputs' errors on
            # weighted by p and 1 - p (never amplified); at most N combines reach y_k, which
            # add up as N roundings do: sqrt(N) eps (the largest |y_j| so far + 1)
            return eps * math.sqrt(n) * (torch.cummax(ref.abs(), dim).values + 1)
        if op == "softmax":
            return _softmax_bound(inputs, ref, dtype, dim)
        if op == "log_softmax":
            # y_i = (x_i - m) - log S: x_i - m rounds (eps |x_i - m|); S is off relatively as
            # in softmax (eps (sum_j p_j |x_j - m| + sqrt(N))), absolutely in log S; log S and
            # the difference round (eps |log S|, with rtol's |y|)
            in_sum = (spread * ref.exp()).sum(dim, keepdim=True)
            log_s = (spread + ref).abs()  # y_i = -(|x_i - m| + log S)
            return eps * (spread + in_sum + math.sqrt(n) + log_s)
        raise KeyError(op)

    return bound


def _rms_norm_bound(
    inputs: Inputs, ref: torch.Tensor, dtype: torch.dtype, dims: tuple[int, ...]
) -> Any:
    """y = x rsqrt(mean(x ** 2)) w: mean(x ** 2) sums N squares of one sign ((sqrt(N) + 1)
    eps relative), halved by rsqrt; rsqrt's own ulp and the products x r and (x r) w round
    (2 eps): ((sqrt(N) + 1) / 2 + 2) eps of |x| r |w|."""
    x, w = inputs
    n = math.prod(x.shape[d] for d in dims)
    r = (x**2).mean(dims, keepdim=True).rsqrt()
    return accumulation_eps(dtype) * ((math.sqrt(n) + 1) / 2 + 2) * x.abs() * r * w.abs()


def _group_norm_case(variant: str, dt: torch.dtype, dev: str) -> OpCase:
    shape, groups = GROUP_NORM_VARIANTS[variant]
    x = make_input(shape, dt, dev)
    w, b = make_input(shape[1:2], dt, dev), make_input(shape[1:2], dt, dev)

    def bound(inputs: Inputs, ref: torch.Tensor, dtype: torch.dtype) -> Any:
        x_, w_, b_ = inputs
        grouped = x_.reshape(x_.shape[0], groups, -1)
        return _normalised_bound(x_, grouped, ref, dtype, w_[:, None], b_[:, None])

    return OpCase(lambda t, w_, b_: F.group_norm(t, groups, w_, b_), (x, w, b), bound=bound)


def _norm_case(op: str, variant: str, dt: torch.dtype, dev: str) -> OpCase:
    """layer_norm, rms_norm and group_norm over the variant's reduced length."""
    if op == "group_norm":
        return _group_norm_case(variant, dt, dev)
    shape, trailing = NORM_VARIANTS[variant]
    normalised = shape[-trailing:]
    dims = tuple(range(-trailing, 0))
    x, w = make_input(shape, dt, dev), make_input(normalised, dt, dev)
    if op == "rms_norm":
        return OpCase(
            lambda t, w_: F.rms_norm(t, normalised, w_),
            (x, w),
            bound=lambda i, r, d: _rms_norm_bound(i, r, d, dims),
        )
    b = make_input(normalised, dt, dev)

    def bound(inputs: Inputs, ref: torch.Tensor, dtype: torch.dtype) -> Any:
        x_, w_, b_ = inputs
        return _normalised_bound(x_, x_.reshape(-1, w_.numel()), ref, dtype, w_, b_)

    return OpCase(lambda t, w_, b_: F.layer_norm(t, normalised, w_, b_), (x, w, b), bound=bound)


# exp's terms: [-2, 2] keeps every term exp(x_i - m) within e ** -4 of the largest, well above
# the rounding unit of the partial sums, whose roundings then stay unbiased (the sqrt(N)
# model; terms below half a unit are lost, all in one direction, which a sequential kernel
# does over a long row). softmax alone takes [-8, 8]: over ~66000 elements its largest
# answers then stand well above the atol floor (1e-5), which they would not at [-2, 2].
WIDE = {"softmax": 8.0}
Along = Callable[[torch.Tensor, int], torch.Tensor]
LINEAR: dict[str, Along] = {
    "sum": lambda t, d: t.sum(d),
    "mean": lambda t, d: t.mean(d),
    "cumsum": lambda t, d: t.cumsum(d),
}
NONLINEAR: dict[str, Along] = {
    "var": lambda t, d: t.var(d),
    "std": lambda t, d: t.std(d),
    "norm": lambda t, d: torch.linalg.vector_norm(t, dim=d),
    "logsumexp": lambda t, d: t.logsumexp(d),
    "logcumsumexp": lambda t, d: torch.logcumsumexp(t, d),
    "softmax": lambda t, d: torch.softmax(t, d),
    "log_softmax": lambda t, d: torch.log_softmax(t, d),
}
# amax and argmax round nothing: their answers must be the reference's exactly (argmax the
# first maximal index, as torch documents: in bfloat16 ties are many).
EXACT: dict[str, Along] = {"amax": lambda t, d: t.amax(d), "argmax": lambda t, d: t.argmax(d)}
NORMS = ("layer_norm", "rms_norm", "group_norm")
BOUNDARY_OPS = (*LINEAR, *EXACT, *NONLINEAR, *NORMS)
BOUNDARY_PARAMS = [(op, dt) for op in BOUNDARY_OPS for dt in DTYPES]


def _boundary_case(op: str, variant: str, dt: torch.dtype, dev: str) -> OpCase:
    """The inputs of `op` along the variant's reduced dim (drawn from the case's seed), and
    its bound."""
    if op in NORMS:
        return _norm_case(op, variant, dt, dev)
    shape, dim = VARIANTS[variant]
    spread = WIDE.get(op, 2.0)
    x = make_input(shape, dt, dev, low=-spread, high=spread)
    if op in LINEAR:
        fn = LINEAR[op]
        return OpCase(lambda t: fn(t, dim), (x,), count=shape[dim])
    fn = {**NONLINEAR, **EXACT}[op]
    bound = None if op in EXACT else _reduction_bound(op, dim)
    return OpCase(lambda t: fn(t, dim), (x,), bound=bound)


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """One intra-op CPU thread for a long case's inputs, float64 reference and bound: they are
    most of its work, and a worker's threads beside the other workers' (one per CPU) wait on
    each other for longer than the work takes. The answer itself is computed outside, with
    the backend's own threads and kernel paths."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _check_exact(case: OpCase, what: str, got: torch.Tensor) -> None:
    with _one_thread():
        want = reference(case.fn, *case.inputs)
        outputs.record(what, got, 0.0, 0.0)
        check_close(got, want, rtol=0.0, atol=0.0, what=f"{what} (exact)")


@pytest.mark.parametrize(
    ("op", "dtype_name"), BOUNDARY_PARAMS, ids=[f"{op}/{dt}" for op, dt in BOUNDARY_PARAMS]
)
def test_boundary(op: str, dtype_name: str, device: str) -> None:
    """conformance/ops/boundary/<op>/<dtype>: the op along reduced lengths past GPU kernels'
    blocks and tiles (VARIANTS: inner, outer, tiles), each against its derived bound."""
    dtype = DTYPES[dtype_name]
    for variant in VARIANTS:
        with _one_thread():
            case = _boundary_case(op, variant, dtype, device)
        what = f"{op} ({variant}: {tuple(case.inputs[0].shape)})"
        actual = case.fn(*case.inputs)
        if op in EXACT:
            _check_exact(case, f"{what}, {dtype}", actual)
        else:
            with _one_thread():
                _check(case, dtype, what, actual=actual)
