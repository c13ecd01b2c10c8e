"""Special values: inf, -inf, nan, -0.0 and subnormals, where the op defines what they give.

`conformance/special_values/<op>/<dtype>` runs an op on a small set of special inputs (every
pair of them for a binary op, rows of them for a reduction) on the case's device, and
compares with the same op in float64 (or exactly, for predicates) on the CPU from the same
inputs, rounded into the dtype. IEEE 754 and C99 Annex F define the answers: exp(-inf) = +0,
log(+-0) = -inf, sqrt(-0.0) = -0.0, 1 / -0.0 = -inf, tanh(+-inf) = +-1, atan2 of signed
zeros, maximum/minimum propagate nan where fmax/fmin ignore it, a softmax row holding +inf
or nan, or of -inf only, is nan, and subnormals are numbers like any other (a kernel that
flushes them to zero, on input or output, fails: x * 1, x + 0, abs, neg, ceil of a
subnormal; the smallest subnormal times 0.5 rounds to +0, ties to even, and 3 times it
times 0.5 to 2 times it).

How an answer is judged, element by element:
- nan where the reference is nan, and only there (a nan's sign and payload are not compared);
- infinities equal, sign included;
- zeros equal, and of the reference's sign where the op defines it (`signed_zeros`):
  IEEE's arithmetic (+, *, /, sqrt, neg, abs, copysign), floor/ceil/round/trunc, C99's
  exp/log/tanh/atan2 and softmax's exp(-inf) = +0, and nan_to_num (the identity on zeros);
  not where torch leaves it open: maximum/minimum/fmax/fmin/clamp/relu of +-0 (IEEE 754-2008's
  maxNum and minNum leave it unspecified and the CPU returns -0.0 for maximum(-0.0, +0.0)),
  sign(+-0), and sums and matmuls (a kernel's accumulator starts at +0 or at the first term);
- other finite values: bit for bit where IEEE 754 defines the answer as the correctly rounded
  result (`exact`: +, *, /, neg, abs, copysign, the roundings to integers, nan_to_num,
  maximum and its kin, clamp, relu, and sums and matmuls whose terms are integer multiples of
  the smallest subnormal, so that every partial sum is exact); for the transcendentals within
  the dtype's rtol (accelkit.suite.numerics.reference) of the reference and 2 units of the smallest
  subnormal (a 1-2 ulp kernel near underflow), softmax adding its derived bound.

Inputs that the op leaves undefined are not used: nan for sign (torch gives 0) and for
signbit and copysign's sign argument (a nan's sign is not an answer), inf and nan in matmul
(BLAS kernels may skip a zero factor, so inf * 0 need not appear).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import torch

from accelkit.suite.numerics.reference import accumulation_eps, reference, tolerance

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
INF, NAN = math.inf, math.nan


def smallest_subnormal(dtype: torch.dtype) -> float:
    info = torch.finfo(dtype)
    return info.tiny * info.eps


def special_values(dtype: torch.dtype, *, with_nan: bool = True) -> list[float]:
    """Zeros of both signs, infinities, nan, subnormals (the smallest, an odd multiple, the
    largest), the smallest normal, halves, integers and the largest finite value."""
    info = torch.finfo(dtype)
    sub = smallest_subnormal(dtype)
    values = [0.0, -0.0, INF, -INF, sub, -sub, 3 * sub, info.tiny - sub, -(info.tiny - sub)]
    values += [info.tiny, -info.tiny, 0.5, -0.5, 1.0, -1.0, 2.5, -2.5, 3.0, info.max, -info.max]
    return values + ([NAN] if with_nan else [])


def _tensor(values: Any, dtype: torch.dtype, device: str) -> torch.Tensor:
    """Exactly these values (each representable in `dtype`) on the device."""
    return torch.as_tensor(values, dtype=torch.float64).to(dtype).to(device)


def _unary(dtype: torch.dtype, device: str, *, with_nan: bool = True) -> tuple[torch.Tensor]:
    # four copies: a vectorised kernel's full vectors and its scalar tail both see each value
    return (_tensor(special_values(dtype, with_nan=with_nan) * 4, dtype, device),)


def _pairs(
    dtype: torch.dtype, device: str, *, y_nan: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """Every pair (x, y) of special values, as two contiguous vectors."""
    xs = torch.tensor(special_values(dtype), dtype=torch.float64)
    ys = torch.tensor(special_values(dtype, with_nan=y_nan), dtype=torch.float64)
    x, y = torch.meshgrid(xs, ys, indexing="ij")
    return _tensor(x.reshape(-1), dtype, device), _tensor(y.reshape(-1), dtype, device)


ROW = 100  # a reduction's rows: past a vector's width, special values near the end too


def _rows(dtype: torch.dtype, device: str) -> tuple[torch.Tensor]:
    """Rows of ROW elements (+0 elsewhere) for sum and amax: inf, -inf, inf with -inf, nan,
    overflow, subnormals only (their sums exact: integer multiples of the smallest), and a
    row all -inf."""
    info = torch.finfo(dtype)
    sub = smallest_subnormal(dtype)
    big = info.tiny - sub  # the largest subnormal
    placed: list[dict[int, float]] = [
        {3: 1.0, 97: INF, 50: 2.0},
        {0: -INF, 61: 3.0, 99: -1.0},
        {5: INF, 98: -INF},
        {1: 1.0, 90: NAN},
        {0: info.max, 99: info.max},
        {i: sub for i in range(ROW)},
        {0: big, 77: sub},
        {2: big, 40: -sub, 96: 3 * sub},
        {i: -sub * (1 + i % 3) for i in range(ROW)},
        {4: -0.0, 88: -sub},
    ]
    rows = torch.zeros(len(placed) + 1, ROW, dtype=torch.float64)
    for r, values in enumerate(placed):
        for i, v in values.items():
            rows[r, i] = v
    rows[-1] = -INF
    return (_tensor(rows, dtype, device),)


def _softmax_rows(dtype: torch.dtype, device: str) -> tuple[torch.Tensor]:
    info = torch.finfo(dtype)
    sub = smallest_subnormal(dtype)
    rows = [
        [1.0, 2.0, INF, 0.0, -1.0, 0.5, 3.0],  # +inf: inf - inf = nan, the row is nan
        [-INF] * 7,  # -inf only: -inf - (-inf) = nan, the row is nan
        [0.0, -INF, 1.0, -INF, 2.0, 3.0, -INF],  # -inf among finite values: exactly +0
        [NAN, 0.0, 1.0, 2.0, 3.0, -1.0, 0.5],  # nan: the row is nan
        [info.max, info.max, 0.0, -1.0, 1.0, -info.max, 2.0],  # no overflow: max first
        [sub, -sub, info.tiny - sub, 0.0, -0.0, 3 * sub, -info.tiny],  # ~uniform
        [-INF, -INF, -INF, -INF, -INF, -INF, 0.0],  # one finite value: exactly 1
    ]
    return (_tensor(rows, dtype, device),)


def _matmul(dtype: torch.dtype, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Small integers times small multiples of the smallest subnormal: every product and
    partial sum is an integer multiple of it below 2 ** 8, so exact in every dtype."""
    sub = smallest_subnormal(dtype)
    k = 33
    a = (torch.arange(5 * k, dtype=torch.float64).reshape(5, k) * 7 % 4) - 1  # -1 .. 2
    b = ((torch.arange(k * 7, dtype=torch.float64).reshape(k, 7) * 5 % 5) - 2) * sub
    return _tensor(a, dtype, device), _tensor(b, dtype, device)


def _softmax_bound(inputs: tuple[torch.Tensor, ...], ref: torch.Tensor, dtype: torch.dtype) -> Any:
    """p_i = exp(x_i - m) / S over N: exp's argument rounds relative to |x_i - m| and S sums
    N positive terms, so p_i is off by eps (|x_i - m| + N) p_i (rows with no inf or nan)."""
    (x,) = inputs
    spread = (x - x.amax(-1, keepdim=True)).abs()
    bound = accumulation_eps(dtype) * (spread + x.shape[-1]) * ref
    return torch.where(torch.isfinite(bound), bound, torch.zeros_like(bound))


Inputs = Callable[[torch.dtype, str], tuple[torch.Tensor, ...]]


@dataclass(frozen=True)
class Special:
    """An op on special inputs: `exact` (IEEE's correctly rounded answer, bit for bit) or
    within the dtype's tolerance; `signed_zeros`: a zero's sign is the op's to define."""

    fn: Callable[..., torch.Tensor]
    inputs: Inputs
    exact: bool = True
    signed_zeros: bool = True
    bound: Callable[[tuple[torch.Tensor, ...], torch.Tensor, torch.dtype], Any] | None = None
    # the answer in float64 from the float64 inputs where it depends on the dtype
    expected: Callable[[torch.dtype], Callable[..., torch.Tensor]] | None = None


def _nan_to_num_in(dtype: torch.dtype) -> Callable[..., torch.Tensor]:
    """nan_to_num's infinities become the largest finite value of the answer's dtype."""
    largest = torch.finfo(dtype).max
    return lambda t: torch.nan_to_num(t, posinf=largest, neginf=-largest)


def _unary_inputs(with_nan: bool = True) -> Inputs:
    return lambda dt, dev: _unary(dt, dev, with_nan=with_nan)


def _pair_inputs(y_nan: bool = True) -> Inputs:
    return lambda dt, dev: _pairs(dt, dev, y_nan=y_nan)


UNARY, PAIRS = _unary_inputs(), _pair_inputs()
OPS: dict[str, Special] = {
    # C99 Annex F: exp(-inf) = +0, exp(+inf) = +inf, underflow to +0
    "exp": Special(torch.exp, UNARY, exact=False),
    # log(+-0) = -inf, log(x < 0) = nan, log(1) = +0, log(+inf) = +inf
    "log": Special(torch.log, UNARY, exact=False),
    # sqrt(-0.0) = -0.0 (IEEE), sqrt(x < 0) = nan; of a subnormal, a normal number
    "sqrt": Special(torch.sqrt, UNARY, exact=False),
    # 1 / +-0 = +-inf, 1 / +-inf = +-0, 1 / max = a subnormal
    "reciprocal": Special(torch.reciprocal, UNARY),
    # tanh(+-inf) = +-1, tanh(+-0) = +-0, tanh(subnormal) = itself
    "tanh": Special(torch.tanh, UNARY, exact=False),
    "abs": Special(torch.abs, UNARY),  # abs(-0.0) = +0.0
    "neg": Special(torch.neg, UNARY),
    # -0.0, -0.5 and -sub give -0.0 where they round to zero; ceil(sub) = 1
    "floor": Special(torch.floor, UNARY),
    "ceil": Special(torch.ceil, UNARY),
    "round": Special(torch.round, UNARY),  # half to even: 2.5 -> 2, -0.5 -> -0.0
    "trunc": Special(torch.trunc, UNARY),
    "sign": Special(torch.sign, _unary_inputs(with_nan=False), signed_zeros=False),
    "signbit": Special(torch.signbit, _unary_inputs(with_nan=False)),  # signbit(-0.0)
    "isinf": Special(torch.isinf, UNARY),
    "isnan": Special(torch.isnan, UNARY),
    "isfinite": Special(torch.isfinite, UNARY),  # subnormals are finite
    "relu": Special(torch.relu, UNARY, signed_zeros=False),  # relu(nan) = nan
    "clamp": Special(lambda t: torch.clamp(t, -1.0, 1.0), UNARY, signed_zeros=False),
    # nan -> 0, +-inf -> +-max of the dtype, the identity elsewhere (subnormals, -0.0)
    "nan_to_num": Special(torch.nan_to_num, UNARY, expected=_nan_to_num_in),
    "copysign": Special(torch.copysign, _pair_inputs(y_nan=False)),
    # atan2(+-0, +0) = +-0, atan2(+-0, -0) = +-pi, atan2(+-inf, -inf) = +-3pi/4, ...
    "atan2": Special(torch.atan2, PAIRS, exact=False),
    "maximum": Special(torch.maximum, PAIRS, signed_zeros=False),  # nan propagates
    "minimum": Special(torch.minimum, PAIRS, signed_zeros=False),
    "fmax": Special(torch.fmax, PAIRS, signed_zeros=False),  # nan is ignored
    "fmin": Special(torch.fmin, PAIRS, signed_zeros=False),
    # inf + -inf = nan, -0 + -0 = -0, -0 + +0 = +0, subnormal sums exact
    "add": Special(torch.add, PAIRS),
    # 0 * inf = nan, signs xor, sub * 0.5 rounds ties to even
    "mul": Special(torch.mul, PAIRS),
    # x / +-0 = +-inf, 0 / 0 = inf / inf = nan, x / inf = +-0
    "div": Special(torch.div, PAIRS),
    "sum": Special(lambda t: t.sum(-1), _rows, signed_zeros=False),
    "amax": Special(lambda t: t.amax(-1), _rows, signed_zeros=False),  # nan propagates
    "softmax": Special(
        lambda t: torch.softmax(t, -1), _softmax_rows, exact=False, bound=_softmax_bound
    ),
    "matmul": Special(torch.matmul, _matmul, signed_zeros=False),
}
PARAMS = [(op, dt) for op in OPS for dt in DTYPES]


def _describe(inputs: tuple[torch.Tensor, ...], index: int, shape: torch.Size) -> str:
    """The inputs that gave the answer's element `index` (flat), for the failure message."""
    if all(t.shape == shape for t in inputs):
        values = ", ".join(repr(t.reshape(-1)[index].item()) for t in inputs)
        return f"input ({values})" if len(inputs) > 1 else f"input {values}"
    where = tuple(int(i) for i in torch.unravel_index(torch.tensor(index), shape))
    return f"element {where}"


def check_special(
    got: torch.Tensor,
    want: torch.Tensor,
    dtype: torch.dtype,
    *,
    exact: bool,
    signed_zeros: bool,
    atol: Any = 0.0,
    what: str = "",
    inputs: tuple[torch.Tensor, ...] = (),
) -> None:
    """`got` (any device) against `want`, the float64 reference rounded into `dtype`: nan
    where it is nan, infinities and (with `signed_zeros`) zeros of its sign, finite values
    bit for bit (`exact`) or within the dtype's rtol, 2 units of the smallest subnormal and
    `atol`. An AssertionError naming the first wrong element and its inputs."""
    got = got.detach().to("cpu")
    if got.shape != want.shape:
        raise AssertionError(f"{what}: shape {tuple(got.shape)}, reference {tuple(want.shape)}")
    if got.dtype != want.dtype:
        raise AssertionError(f"{what}: dtype {got.dtype}, expected {want.dtype}")
    if got.dtype == torch.bool:
        bad = got != want
    else:
        g, w = got.double(), want.double()
        nan = torch.isnan(w)
        bad = torch.isnan(g) != nan
        special = ~nan & (torch.isinf(w) | (w == 0))
        bad |= special & (g != w)
        if signed_zeros:
            bad |= (w == 0) & (torch.signbit(g) != torch.signbit(w))
        finite = ~nan & ~special
        if exact:
            bad |= finite & (g != w)
        else:
            rtol, _ = tolerance(dtype)
            allowed = rtol * w.abs() + 2 * smallest_subnormal(dtype) + atol
            bad |= finite & ~((g - w).abs() <= allowed)
    count = int(bad.sum())
    if count == 0:
        return
    first = int(bad.reshape(-1).nonzero()[0])
    g_, w_ = got.reshape(-1)[first].item(), want.reshape(-1)[first].item()
    rule = "bit for bit" if exact else f"rtol={tolerance(dtype)[0]:g}"
    zeros = "signed zeros" if signed_zeros else "zeros of either sign"
    raise AssertionError(
        f"{what} ({dtype}, nan and inf exact, {zeros}, finite values {rule}): {count} / "
        f"{want.numel()} elements wrong; first at {_describe(inputs, first, want.shape)}: "
        f"{g_!r}, expected {w_!r}"
    )


@pytest.mark.parametrize(("op", "dtype_name"), PARAMS, ids=[f"{op}/{dt}" for op, dt in PARAMS])
def test_special_values(op: str, dtype_name: str, device: str) -> None:
    dtype = DTYPES[dtype_name]
    case = OPS[op]
    inputs = case.inputs(dtype, device)
    got = case.fn(*inputs)
    ref = reference(case.fn if case.expected is None else case.expected(dtype), *inputs)
    want = ref if ref.dtype == torch.bool else ref.to(dtype)
    atol: Any = 0.0
    if case.bound is not None:
        cpu = tuple(t.detach().cpu().double() for t in inputs)
        atol = case.bound(cpu, ref, dtype)
    check_special(
        got,
        want,
        dtype,
        exact=case.exact,
        signed_zeros=case.signed_zeros,
        atol=atol,
        what=op,
        inputs=tuple(t.cpu() for t in inputs),
    )
