"""Checking a device's answer against an independent reference.

The reference is the same computation in float64 on the CPU (complex128 for complex): never
the same device and dtype as the answer. Tolerances per dtype live here and only here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch.utils import _pytree as pytree

from accelkit.suite import outputs
from accelkit.suite.failures import add_failure_info

# (rtol, atol) for an answer computed in `dtype`, compared with a float64 reference.
# Start from torch.testing's defaults for the dtype; a case whose math accumulates error
# (reductions, matmul over K terms) scales them with `scale=`.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1.3e-6, 1e-5),
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.complex128: (1e-7, 1e-7),
    torch.complex64: (1.3e-6, 1e-5),
}


def tolerance(dtype: torch.dtype, scale: float = 1.0) -> tuple[float, float]:
    rtol, atol = TOLERANCES[dtype]
    return rtol * scale, atol * scale


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


def _to_reference(value: Any, device: str | None = None, *, grad: bool = False) -> Any:
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
    return fn(*_to_reference(args), **_to_reference(kwargs))


def assert_matches_reference(
    actual: Any, expected: Any, dtype: torch.dtype, *, scale: float = 1.0, what: str = ""
) -> None:
    """Fail with the worst element when `actual` (any device) differs from the reference."""
    rtol, atol = tolerance(dtype, scale)
    if isinstance(actual, (list, tuple)):
        assert len(actual) == len(expected), (
            f"{what}: {len(actual)} outputs, expected {len(expected)}"
        )
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_matches_reference(a, e, dtype, scale=scale, what=f"{what}[{i}]")
        return
    got = actual.detach().to("cpu")
    want = expected.to(torch.complex128 if got.is_complex() else torch.float64)
    outputs.record(what, got, rtol, atol)
    try:
        torch.testing.assert_close(
            got.to(want.dtype),
            want,
            rtol=rtol,
            atol=atol,
            equal_nan=True,
            msg=lambda m: f"{what} ({dtype}, rtol={rtol:g}, atol={atol:g}): {m}",
        )
    except AssertionError as error:
        if got.shape == want.shape:
            check = {"what": what, "rtol": rtol, "atol": atol}
            add_failure_info(error, check={**check, **worst_element(got.to(want.dtype), want)})
        raise


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


def make_input(shape: tuple[int, ...], dtype: torch.dtype, device: str, *, low: float = -2.0,
               high: float = 2.0) -> torch.Tensor:  # fmt: skip
    """Uniform random values drawn in float32 on the CPU (the case's seed decides them)."""
    values = torch.empty(shape, dtype=torch.float32).uniform_(low, high)
    return values.to(dtype).to(device)
