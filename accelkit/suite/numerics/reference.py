"""Checking a device's answer against an independent reference.

The reference is the same computation in float64 on the CPU (complex128 for complex): never
the same device and dtype as the answer. Tolerances per dtype live here and only here.

The tolerance model of the focused cases (docs/design.md, "Tolerances"): an answer `y` in
`dtype` passes when, elementwise,

    |y - ref| <= rtol(dtype) * |ref| + max(atol(dtype), sqrt(K) * eps(acc) * terms)

- rtol is a few units of the output's rounding (`TOLERANCES`): never scaled by a case;
- atol(dtype) is a floor for answers near zero;
- the second atol is the rounding a kernel accumulates when each output element sums K terms
  whose magnitudes add up to `terms` (the sum of |a * b| over a matmul's K products: the
  function evaluated on the inputs' magnitudes, `absolute_terms`), accumulated in `acc`
  (`ACCUMULATION_DTYPE`: float32 for the 16-bit dtypes and float32, float64 for float64).
  sqrt(K) * eps is 2 sqrt(K) units of rounding: each partial sum s_k carries a rounding error
  of at most u |s_k| <= u * terms, and K independent ones add up to sqrt(K / 3) u * terms in
  standard deviation, so the bound is about 3.5 standard deviations of the worst case
  (terms of one sign), and much more for terms of mixed sign.

For example, a bfloat16 matmul with K = 128 whose element has terms 60 and value 4 gets
rtol 7.8e-3 and atol max(1e-5, sqrt(128) * 1.19e-7 * 60) = 8.1e-5: a kernel 1% off fails.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch.utils import _pytree as pytree

from accelkit.suite.session import outputs
from accelkit.suite.session.failures import add_failure_info

# (rtol, atol) for an answer computed in `dtype`, compared with a float64 reference.
# rtol: a few units of the output dtype's rounding, eps (two units of rounding, u = eps / 2)
# for the 16-bit dtypes; float32 and complex64 keep torch.testing's 1.3e-6 (11 eps: their
# kernels compose several float32 roundings and 1-4 ulp transcendental approximations).
# float64 keeps torch.testing's 1e-7: its reference is float64 too, so it compares two
# float64 implementations (see docs/design.md). atol: the floor for answers near zero.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1.3e-6, 1e-5),
    torch.float16: (torch.finfo(torch.float16).eps, 1e-5),
    torch.bfloat16: (torch.finfo(torch.bfloat16).eps, 1e-5),
    torch.complex128: (1e-7, 1e-7),
    torch.complex64: (1.3e-6, 1e-5),
}

# The precision kernels accumulate (and compute) in, per answer dtype: float32 for the
# 16-bit dtypes (every backend's matmul, reduction and elementwise kernels upcast; the suite
# switches off reduced-precision reductions, see conformance/conftest.py).
ACCUMULATION_DTYPE: dict[torch.dtype, torch.dtype] = {
    torch.float16: torch.float32,
    torch.bfloat16: torch.float32,
    torch.float32: torch.float32,
    torch.float64: torch.float64,
    torch.complex64: torch.float32,
    torch.complex128: torch.float64,
}

# TF32 rounds each float32 input of a product to 10 explicit mantissa bits (eps 2 ** -10).
TF32_EPS = 2.0**-10


def tolerance(dtype: torch.dtype) -> tuple[float, float]:
    """(rtol, atol floor) for an answer computed in `dtype`: never scaled."""
    return TOLERANCES[dtype]


def accumulation_eps(dtype: torch.dtype) -> float:
    """eps of the precision an answer in `dtype` is accumulated in."""
    return torch.finfo(ACCUMULATION_DTYPE[dtype]).eps


def accumulation_atol(dtype: torch.dtype, terms: Any, count: int) -> Any:
    """sqrt(count) * eps(accumulation dtype) * terms: the rounding of sums of `count` terms
    whose magnitudes add up to `terms` (a float, or a tensor per output element)."""
    return math.sqrt(max(count, 1)) * accumulation_eps(dtype) * terms


def tf32_atol(terms: Any) -> Any:
    """TF32's input rounding: each of a product's two factors rounded to 10 bits, relative
    error 2 * u_tf32 = eps_tf32 per term, so eps_tf32 * terms per output element."""
    return TF32_EPS * terms


def iteration_atol(
    dtype: torch.dtype, steps: int, roundings: int, growth: float, magnitude: float
) -> float:
    """The rounding of `steps` steps of an iterated map that rounds `roundings` values of at
    most `magnitude` per step (u each) and whose derivative is at most `growth`: a later step
    multiplies an earlier step's error by up to `growth`."""
    amplified = sum(growth**k for k in range(steps))
    return roundings * accumulation_eps(dtype) / 2 * amplified * magnitude


# The dtype the reference computes in, for each floating or complex dtype an answer may have.
REFERENCE_DTYPE: dict[torch.dtype, torch.dtype] = {
    torch.float16: torch.float64,
    torch.bfloat16: torch.float64,
    torch.float32: torch.float64,
    torch.float64: torch.float64,
    torch.complex32: torch.complex128,
    torch.complex64: torch.complex128,
    torch.complex128: torch.complex128,
}


def to_reference(value: Any, device: str | None = None, *, grad: bool = False) -> Any:
    """`value` (any nesting of lists, tuples and dicts) on the CPU in the reference's dtypes.

    Tensors go to the CPU, those of a REFERENCE_DTYPE key converted exactly (the same rounded
    values in float64/complex128), others copied; dtype arguments become their reference
    dtype. With `device` (the device type the answer ran on), device arguments naming it
    (factory kwargs: `torch.device("cuda")`, "cuda:0") become the CPU's; with `grad`, tensors
    that require a gradient give references that require one.
    """

    def convert(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            ref = x.detach().to("cpu")
            if ref.dtype in REFERENCE_DTYPE:
                ref = ref.to(REFERENCE_DTYPE[ref.dtype])
            else:
                ref = ref.clone()
            if grad and x.requires_grad:
                ref.requires_grad_(True)
            return ref
        if isinstance(x, torch.dtype) and x in REFERENCE_DTYPE:
            return REFERENCE_DTYPE[x]
        if device is None:
            return x
        if isinstance(x, torch.device) and x.type == torch.device(device).type:
            return torch.device("cpu")
        if isinstance(x, str) and x.partition(":")[0] == device:
            return "cpu"
        return x

    return pytree.tree_map(convert, value)


def reference(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`fn` evaluated in float64/complex128 on the CPU, on the same (rounded) inputs."""
    return fn(*to_reference(args), **to_reference(kwargs))


def absolute_terms(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`fn` in float64 on the CPU on the magnitudes of its floating inputs: for a function
    linear in each input (matmul, convolution, sum, cumsum) the sum of the magnitudes of each
    output element's terms, sum |a_k * b_k|."""

    def magnitude(x: Any) -> Any:
        if isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex()):
            return x.abs()
        return x

    inputs = pytree.tree_map(magnitude, to_reference(args))
    keywords = pytree.tree_map(magnitude, to_reference(kwargs))
    with torch.no_grad():
        return fn(*inputs, **keywords)


def assert_matches_reference(
    actual: Any,
    expected: Any,
    dtype: torch.dtype,
    *,
    terms: Any = None,
    count: int = 1,
    atol: Any = None,
    what: str = "",
) -> None:
    """Fail with the worst element when `actual` (any device) differs from the reference.

    `terms` and `count`: each output element accumulates `count` terms whose magnitudes add
    up to `terms` (a tensor shaped like the answer, or a float; None with count > 1: the
    reference's largest magnitude); `atol`: a further bound the case derived (a tensor or a
    float), added to the floor."""
    if isinstance(actual, (list, tuple)):
        assert len(actual) == len(expected), (
            f"{what}: {len(actual)} outputs, expected {len(expected)}"
        )
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_matches_reference(
                a, e, dtype, terms=terms, count=count, atol=atol, what=f"{what}[{i}]"
            )
        return
    got = actual.detach().to("cpu")
    want = expected.detach().to("cpu", torch.complex128 if got.is_complex() else torch.float64)
    rtol, floor = tolerance(dtype)
    bound: Any = floor
    how = f"atol={floor:g}"
    if count > 1 or terms is not None:
        if terms is None:
            terms = float(want.abs()[torch.isfinite(want)].max()) if want.numel() else 0.0
        accumulated = accumulation_atol(dtype, terms, count)
        bound = bound + accumulated
        largest = float(torch.as_tensor(accumulated).max()) if _numel(accumulated) else 0.0
        how += f" + sqrt({count}) * eps * terms (up to {largest:.3g})"
    if atol is not None:
        bound = bound + atol
        largest = float(torch.as_tensor(atol).max()) if _numel(atol) else 0.0
        how += f" + case bound (up to {largest:.3g})"
    widest = float(torch.as_tensor(bound).max()) if _numel(bound) else 0.0
    outputs.record(what, got, rtol, widest, want)
    try:
        described = f"{what} ({dtype}, rtol={rtol:g}, {how})"
        check_close(got, want, rtol=rtol, atol=bound, what=described)
    except AssertionError as error:
        if got.shape == want.shape:  # for `accelkit repro`: the widest atol, the worst element
            check = {"what": what, "rtol": rtol, "atol": widest}
            add_failure_info(error, check={**check, **worst_element(got.to(want.dtype), want)})
        raise


def _numel(value: Any) -> int:
    return value.numel() if isinstance(value, torch.Tensor) else 1


def check_close(
    actual: torch.Tensor, expected: torch.Tensor, *, rtol: float, atol: Any, what: str
) -> None:
    """|actual - expected| <= atol + rtol * |expected| elementwise (`atol` a float or a tensor
    that broadcasts to the answer), NaN where the reference has NaN and infinities equal;
    an AssertionError naming the worst element otherwise."""
    got = actual.detach().to("cpu")
    want = expected.detach().to("cpu")
    target = torch.complex128 if (got.is_complex() or want.is_complex()) else torch.float64
    got, want = got.to(target), want.to(target)
    if got.shape != want.shape:
        raise AssertionError(f"{what}: shape {tuple(got.shape)}, reference {tuple(want.shape)}")
    allowed = torch.as_tensor(atol, dtype=torch.float64) + rtol * want.abs()
    difference = (got - want).abs()
    same = (got == want) | (torch.isnan(got) & torch.isnan(want))
    bad = ~same & ~(difference <= allowed)
    count = int(bad.sum())
    if count == 0:
        return
    excess = torch.where(bad, difference - allowed, torch.zeros_like(difference))
    excess = torch.where(torch.isnan(excess), torch.full_like(excess, math.inf), excess)
    flat = int(excess.reshape(-1).argmax())
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), want.shape))
    g, w = got.reshape(-1)[flat].item(), want.reshape(-1)[flat].item()
    d, a = difference.reshape(-1)[flat].item(), allowed.reshape(-1)[flat].item()
    raise AssertionError(
        f"{what}: {count} / {want.numel()} elements beyond tolerance; worst at index "
        f"{index if index else '()'}: {g!r}, reference {w!r}, |difference| {d:.4g} > "
        f"allowed {a:.4g}"
    )


def worst_element(got: torch.Tensor, want: torch.Tensor) -> dict[str, Any]:
    """The element of `got` farthest from `want` (NaN where the other is not NaN counts as
    infinitely far): its index, both values (magnitudes, if complex) and the absolute
    difference; what `accelkit repro` checks to see a reproducer fail the same way."""
    if got.numel() == 0:
        return {}
    diff = (got - want).abs().to(torch.float64)
    one_nan = got.isnan() != want.isnan()
    diff = torch.where(one_nan, torch.full_like(diff, math.inf), diff.nan_to_num(nan=0.0))
    flat = int(diff.reshape(-1).argmax())
    index = [int(i) for i in torch.unravel_index(torch.tensor(flat), got.shape)]
    a, e = got.reshape(-1)[flat], want.reshape(-1)[flat]
    if a.is_complex():
        a, e = a.abs(), e.abs()
    return {
        "index": index,
        "actual": float(a),
        "expected": float(e),
        "abs_diff": float(diff.reshape(-1)[flat]),
    }


def make_input(
    shape: tuple[int, ...], dtype: torch.dtype, device: str, *, low: float = -2.0, high: float = 2.0
) -> torch.Tensor:
    """Uniform random values drawn in float32 on the CPU (the case's seed decides them)."""
    values = torch.empty(shape, dtype=torch.float32).uniform_(low, high)
    return values.to(dtype).to(device)
