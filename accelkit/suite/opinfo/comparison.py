"""Comparing a case's answer with the float64 reference, under `tolerances`' bounds.

`compare` walks an answer (tensors, lists and tuples of them, Python numbers): floating
values within the case's tolerance (`tolerances.case_tolerance`), integers, booleans and
shapes exactly, NaN and inf where the reference has them. Beyond the tolerance, rules derived
from how the answer may legitimately differ, never per case: an answer must overflow exactly
where the exact one rounds to inf (beyond max + ulp(max) / 2; with a bracket, where its whole
range does, and it may where any of it does), an intermediate that the
sample overflows (`Rules.may_overflow`) allows inf/NaN, and a step function's answer may be
anywhere in the reference's range over the inputs' rounding (`Rules.bracket`). A failure
raises `Mismatch` with the worst element, the dtype and the tolerances, and names each listed
exception (`exceptions`) that widened them (`tolerances.widening_rules`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch

from accelkit.suite.numerics.reference import worst_element
from accelkit.suite.opinfo.tolerances import (
    NO_RULES,
    Rules,
    case_tolerance,
    overflow_threshold,
    overrides,
    scalar_tolerance,
    widening_rules,
)
from accelkit.suite.session import outputs
from accelkit.suite.session.failures import add_failure_info


class Mismatch(AssertionError):
    """An answer that differs from the reference beyond what the case allows."""

    # Failure messages name the exception by its qualified name: keep the package's public
    # one (`accelkit.suite.opinfo.Mismatch`, exported there), as results files always had.
    __module__ = "accelkit.suite.opinfo"


def compare(
    actual: Any,
    expected: Any,
    case_dtype: torch.dtype,
    op_name: str,
    what: str,
    magnitude: float = 0.0,
    rules: Rules = NO_RULES,
) -> None:
    """Compare an answer with the float64 reference: floating values within tolerance,
    integers, booleans and shapes exactly, NaN and inf where the reference has them."""
    if isinstance(actual, torch.Tensor):
        if not isinstance(expected, torch.Tensor):
            raise Mismatch(f"{what}: a tensor where the reference has {type(expected).__name__}")
        _compare_tensors(actual, expected, case_dtype, op_name, what, magnitude, rules)
        return
    if isinstance(actual, (list, tuple)):
        if not isinstance(expected, (list, tuple)) or len(actual) != len(expected):
            raise Mismatch(
                f"{what}: {_describe(actual)} where the reference has {_describe(expected)}"
            )
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            sub = rules
            if rules.bracket is not None:
                low, high = rules.bracket
                sub = dataclasses.replace(rules, bracket=(low[i], high[i]))
                if low[i] is None:  # an output the bracket leaves out: the normwise bound
                    sub = dataclasses.replace(rules, bracket=None, elementwise=False)
            compare(a, e, case_dtype, op_name, f"{what}[{i}]", magnitude, sub)
        return
    if isinstance(actual, float) and isinstance(expected, (float, int)):
        rtol, atol = scalar_tolerance(case_dtype)
        if not (
            math.isclose(actual, expected, rel_tol=rtol, abs_tol=atol)
            or (math.isnan(actual) and math.isnan(expected))
        ):
            raise Mismatch(f"{what}: {actual!r} != reference {expected!r}")
        return
    if isinstance(actual, complex):
        rtol, atol = scalar_tolerance(case_dtype)
        if not math.isclose(abs(actual - expected), 0.0, abs_tol=atol + rtol * abs(expected)):
            raise Mismatch(f"{what}: {actual!r} != reference {expected!r}")
        return
    if actual != expected:
        raise Mismatch(f"{what}: {actual!r} != reference {expected!r}")


def _describe(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return f"{type(value).__name__} of {len(value)}"
    return type(value).__name__


def _compare_tensors(
    actual: torch.Tensor,
    expected: torch.Tensor,
    case_dtype: torch.dtype,
    op_name: str,
    what: str,
    magnitude: float,
    rules: Rules = NO_RULES,
) -> None:
    got = actual.detach().to("cpu")
    want = expected.detach()
    if got.is_sparse or got.layout != torch.strided:
        got = got.to_dense()
    if want.is_sparse or want.layout != torch.strided:
        want = want.to_dense()
    if got.shape != want.shape:
        raise Mismatch(f"{what}: shape {tuple(got.shape)}, reference {tuple(want.shape)}")
    floating = got.is_floating_point() or got.is_complex()
    if floating != (want.is_floating_point() or want.is_complex()):
        raise Mismatch(f"{what}: dtype {got.dtype}, reference {want.dtype}")
    if not floating:  # integers and booleans: exactly
        if got.dtype != want.dtype:
            raise Mismatch(f"{what}: dtype {got.dtype}, reference {want.dtype}")
        torch.testing.assert_close(
            got, want, rtol=0, atol=0, msg=lambda m: f"{what} (exact {got.dtype}): {m}"
        )
        return
    if got.is_complex() != want.is_complex():
        raise Mismatch(f"{what}: dtype {got.dtype}, reference {want.dtype}")
    target = torch.complex128 if got.is_complex() else torch.float64
    got, want = got.to(target), want.to(target)
    # Where the exact answer lies beyond the output dtype's range, the answer must overflow
    # (inf or NaN); the remaining elements are compared. Round to nearest overflows only at
    # max + ulp(max) / 2 (65520 in float16): below that the answer rounds to max, finite.
    # Low-precision kernels round a float32 result (double rounding): within one float32
    # rounding of the threshold either answer is right.
    # Where the answer is compared with a range of the reference (`rules.bracket`: its
    # values over the inputs' and the kernel's roundings), it must overflow only where the
    # whole range does, and may overflow where any of it reaches the threshold.
    threshold = overflow_threshold(actual.dtype)
    slack = torch.finfo(torch.float32).eps if actual.dtype.itemsize < 4 else 0.0
    bracket = _bracket(rules, want, target)
    least, most = _range_magnitudes(want, bracket)
    overflow = least >= threshold * (1 + slack)
    if bool(overflow.any()):
        finite_there = torch.isfinite(got) & overflow
        if bool(finite_there.any()):
            raise Mismatch(f"{what}: finite values where the reference overflows {actual.dtype}")
    overflow |= (most >= threshold * (1 - slack)) & ~torch.isfinite(got)
    if rules.may_overflow:  # an intermediate legitimately overflowed: inf/NaN here is right
        overflow |= ~torch.isfinite(got)
    if bool(overflow.any()):
        got, want = got.masked_fill(overflow, 0), want.masked_fill(overflow, 0)
    reference = want
    rtol, atol = case_tolerance(
        op_name, case_dtype, actual.dtype, reference, magnitude, rules.inputs_dtype, rules
    )
    outputs.record(what, actual, rtol, atol, expected, elementwise=rules.elementwise)
    if bracket is not None:
        # Where the reference jumps within the inputs' rounding (or, for an elementwise op,
        # moves with it), the answer is compared with the nearest value that the reference
        # takes there.
        low, high = (b.masked_fill(overflow, 0) for b in bracket)
        want = torch.where(torch.isfinite(got), _nearest(got, low, high), want)
    notes = "".join(
        f"; {o.describe()}"
        for o in overrides(
            op_name.partition("/")[0],
            case_dtype,
            rules.device_type,
            "grad" if op_name.endswith("/grad") else rules.kind,
        )
    )

    def message(m: str) -> str:
        listed = widening_rules(
            op_name, case_dtype, actual.dtype, reference, magnitude, rules.inputs_dtype, rules
        )
        named = "".join(f"; {e}" for e in listed)
        return f"{what} ({actual.dtype}, rtol={rtol:g}, atol={atol:g}{notes}{named}): {m}"

    try:
        torch.testing.assert_close(
            got,
            want,
            rtol=rtol,
            atol=atol,
            equal_nan=True,
            check_device=False,
            check_dtype=False,
            check_stride=False,
            msg=message,
        )
    except AssertionError as error:
        # For `accelkit repro`: the exact tolerance (the message rounds it) and the worst
        # element, which a reproducer must find again to fail the same way.
        check = {"what": what, "rtol": rtol, "atol": atol, **worst_element(got, want)}
        add_failure_info(error, check=check)
        raise


def _bracket(
    rules: Rules, want: torch.Tensor, target: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The reference's range (`rules.bracket`) as (low, high) in `target`, where the sample
    has one of the reference's shape; else None."""
    bracket = rules.bracket
    if bracket is None or not isinstance(bracket[0], torch.Tensor):
        return None
    if bracket[0].shape != want.shape:
        return None
    low, high = bracket
    return low.detach().to(target), high.detach().to(target)


def _range_magnitudes(
    want: torch.Tensor, bracket: tuple[torch.Tensor, torch.Tensor] | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The smallest and the largest magnitude, element by element, of the reference's range:
    |want| for both without a real bracket, else over [low, high] (0 the smallest where the
    range holds 0)."""
    if bracket is None or want.is_complex():
        return want.abs(), want.abs()
    low, high = torch.minimum(bracket[0], want), torch.maximum(bracket[1], want)
    straddles = (low <= 0) & (high >= 0)
    least = torch.where(straddles, 0.0, torch.minimum(low.abs(), high.abs()))
    return least, torch.maximum(low.abs(), high.abs())


def _nearest(got: torch.Tensor, low: torch.Tensor, high: torch.Tensor) -> torch.Tensor:
    """The point of [low, high] nearest to `got` (for complex values, of the box of their
    real and imaginary parts)."""
    if got.is_complex():
        return torch.complex(
            torch.minimum(torch.maximum(got.real, low.real), high.real),
            torch.minimum(torch.maximum(got.imag, low.imag), high.imag),
        )
    return torch.minimum(torch.maximum(got, low), high)
