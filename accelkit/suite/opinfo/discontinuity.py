"""Step functions (`DISCONTINUOUS`): the reference's range over the inputs' rounding.

Where an op's exact answer jumps within the rounding of its inputs (a bin edge, an integer
quotient, a hinge, a clamp bound), the device may land on either side. `perturbed` makes
copies of the float64 reference sample with the inputs moved by PERTURB_EPS units of the case
dtype's rounding (or, for the "exponent" and "clamp" modes, the one or two samples at the
values the kernel rounds to); `reference_bracket` takes the elementwise range of the
reference's answers over them, which `comparison.compare` accepts (`Rules.bracket`).
`pinned_range` and `cumsum` serve histograms, whose counts are compared as cumulative sums
with the bin range pinned. `running` calls these only after a plain comparison failed.
"""

from __future__ import annotations

import itertools
from typing import Any

import torch
from torch.utils import _pytree as pytree

from accelkit.suite.opinfo.records import DiscontinuityMode
from accelkit.suite.opinfo.sample_measures import argument
from accelkit.suite.opinfo.tolerances import max_magnitude

# How far the inputs move, in units of the case dtype's rounding (eps * magnitude).
PERTURB_EPS = 2.0


def perturbed(
    ref: Any,
    dtype: torch.dtype,
    mode: DiscontinuityMode,
    pin_range: bool = False,
    op_name: str = "",
    *,
    numbers: bool = False,
    factor: float | None = None,
) -> list[Any]:
    """Copies of the reference sample with every floating input moved by `factor` units of
    `dtype`'s rounding, in every combination of directions (the two uniform ones beyond three
    inputs), or for mode "exponent" the one copy whose exponent is fl(e - 1) + 1. With
    `numbers`, Python floats among the arguments move too (mode "relative"). Inputs that need
    a gradient stay leaves that need one. `factor` None: PERTURB_EPS."""
    factor = PERTURB_EPS if factor is None else factor
    if mode == "exponent":
        return rounded_exponent(ref, dtype, op_name)
    if mode == "clamp":
        return rounded_clamp(ref, dtype)
    if mode == "coordinates":
        return moved_coordinates(ref, dtype, factor)
    pinned = pinned_range(ref, op_name) if pin_range else None
    parts = (ref.input, ref.args, ref.kwargs if pinned is None else pinned[0])
    leaves, spec = pytree.tree_flatten(parts)
    floating = [
        i
        for i, x in enumerate(leaves)
        if (isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex()))
        or (numbers and isinstance(x, float))
    ]
    scalars = [abs(x) for x in leaves if isinstance(x, (int, float)) and not isinstance(x, bool)]
    largest = max([max_magnitude(parts), *scalars])
    delta = factor * torch.finfo(dtype).eps
    if len(floating) <= 3:
        signs = list(itertools.product((-1.0, 1.0), repeat=len(floating)))
    else:
        signs = [(-1.0,) * len(floating), (1.0,) * len(floating)]
    samples = []
    for pattern in signs:
        moved = list(leaves)
        for i, sign in zip(floating, pattern, strict=True):
            if isinstance(leaves[i], float):
                moved[i] = leaves[i] + sign * delta * abs(leaves[i])
                continue
            x = leaves[i].detach()
            step = x.abs() if mode == "relative" else largest
            y = x + sign * delta * step
            if pinned is not None:  # elements in the range stay in it: each is counted
                low, high = pinned[1], pinned[2]
                y = torch.where((x >= low) & (x <= high), y.clamp(low, high), x)
            moved[i] = y.requires_grad_(leaves[i].requires_grad)
        inp, args, kwargs = pytree.tree_unflatten(moved, spec)
        samples.append(with_parts(ref, inp, args, kwargs))
    return samples


def moved_coordinates(ref: Any, dtype: torch.dtype, factor: float = PERTURB_EPS) -> list[Any]:
    """Copies of a grid sampler's reference sample with the grid (the first argument, whose
    last dimension holds a point's coordinates) moved by `factor` units of `dtype`'s rounding
    of the sample's largest magnitude, each coordinate independently, in every combination of
    directions (4 in 2-d, 8 in 3-d). The kernel rounds each coordinate apart, and a gradient
    with respect to one coordinate moves with the others (bilinear interpolation: linear in
    each; the mixed difference of the pixels times the other coordinate's error): within a
    cell that gradient is multilinear in the other coordinates, so its range over the box of
    their roundings is taken at the box's corners, which the uniform moves of "normwise"
    (two corners) miss. None without a floating grid."""
    grid = ref.args[0] if ref.args else None
    if not (isinstance(grid, torch.Tensor) and grid.is_floating_point() and grid.ndim):
        return []
    step = factor * torch.finfo(dtype).eps * max_magnitude((ref.input, ref.args, ref.kwargs))
    g = grid.detach()
    samples = []
    for pattern in itertools.product((-1.0, 1.0), repeat=g.shape[-1]):
        moved = (g + step * torch.tensor(pattern, dtype=g.dtype)).requires_grad_(grid.requires_grad)
        samples.append(with_parts(ref, ref.input, (moved, *ref.args[1:]), ref.kwargs))
    return samples


def with_parts(ref: Any, inp: Any, args: Any, kwargs: Any) -> Any:
    from torch.testing._internal.opinfo.core import SampleInput

    return SampleInput(  # type: ignore[no-untyped-call]
        inp,
        args=args,
        kwargs=kwargs,
        output_process_fn_grad=ref.output_process_fn_grad,
        broadcasts_input=ref.broadcasts_input,
        name=ref.name,
    )


def rounded_exponent(ref: Any, dtype: torch.dtype, op_name: str) -> list[Any]:
    """The reference sample with the exponent e of a power (`pow`: the first argument,
    `__rpow__`: the input) replaced by fl(e - 1) + 1, e - 1 rounded to `dtype` as the
    backward forms it (none if the exponent is no floating tensor)."""
    on_input = op_name.split("/")[0] == "__rpow__"
    exponent = ref.input if on_input else (ref.args[0] if ref.args else None)
    if not (isinstance(exponent, torch.Tensor) and exponent.is_floating_point()):
        return []
    e = exponent.detach()
    rounded = ((e - 1).to(dtype).to(e.dtype) + 1).requires_grad_(exponent.requires_grad)
    if on_input:
        return [with_parts(ref, rounded, ref.args, ref.kwargs)]
    return [with_parts(ref, ref.input, (rounded, *ref.args[1:]), ref.kwargs)]


def rounded_exponent_grads(
    ref: Any, dtype: torch.dtype, op_name: str, weights: list[torch.Tensor]
) -> tuple[Any, ...] | None:
    """The base's gradient as the kernel forms it, w * e * b ** fl(e - 1): only e - 1 rounds
    to `dtype`, the factor e stays exact. (The sample of `rounded_exponent` rounds both: at
    e = 6.8e-5 in bfloat16, fl(e - 1) = -1 makes its exponent 0 and its gradient 0, where
    the kernel's is e / b.) Per differentiable input of the sample, None but the base's;
    None where the base and the exponent are not both floating tensors."""
    on_input = op_name.split("/")[0] == "__rpow__"
    parts: tuple[Any, Any] = (ref.input, ref.args[0] if ref.args else None)
    exponent, base = parts if on_input else (parts[1], parts[0])
    if not (isinstance(exponent, torch.Tensor) and exponent.is_floating_point()):
        return None
    if not (isinstance(base, torch.Tensor) and base.is_floating_point()):
        return None
    if not base.requires_grad or len(weights) != 1:
        return None
    e, b = exponent.detach(), base.detach()
    w = weights[0].to(e.dtype)
    grad = (w * e * b ** ((e - 1).to(dtype).to(e.dtype))).sum_to_size(b.shape)
    return tuple(
        grad if x is base else None
        for x in pytree.tree_leaves((ref.input, ref.args, ref.kwargs))
        if isinstance(x, torch.Tensor) and x.requires_grad
    )


def rounded_clamp(ref: Any, dtype: torch.dtype) -> list[Any]:
    """logit's reference sample at each of its clamp bounds as the kernel rounds them to
    `dtype`: eps -> fl(eps) (the lower bound) and eps -> 1 - fl(1 - eps) (the upper one);
    none without an eps."""
    eps = argument(ref, 0, "eps", None)
    if not isinstance(eps, (int, float)) or isinstance(eps, bool):
        return []
    low = float(torch.tensor(eps, dtype=torch.float64).to(dtype))
    high = float(torch.tensor(1 - eps, dtype=torch.float64).to(dtype))
    samples = []
    for bound in (low, 1 - high):
        args = (bound, *ref.args[1:]) if ref.args else ref.args
        kwargs = ref.kwargs if ref.args else {**ref.kwargs, "eps": bound}
        samples.append(with_parts(ref, ref.input, args, kwargs))
    return samples


def pinned_range(ref: Any, op_name: str) -> tuple[dict[str, Any], float, float] | None:
    """A data-dependent bin range made explicit: histc's keyword arguments with min == max
    (the data's own extremes, widened by 1 when equal) or histogram's with no `range` and a
    bin count (the extremes, widened by 0.5 when equal) replaced by that range, with its
    bounds: perturbing the data must move the elements relative to the bin edges, not the
    edges with them. None where the range is given or the bins are edges."""
    if not isinstance(ref.input, torch.Tensor) or ref.input.numel() == 0:
        return None
    if op_name == "histogram":  # histogram(input, bins, *, range=None, weight=None, ...)
        if not (ref.args and isinstance(ref.args[0], int)) or ref.kwargs.get("range"):
            return None
        low, high = float(ref.input.min()), float(ref.input.max())
        if low == high:
            low, high = low - 0.5, high + 0.5
        return {**ref.kwargs, "range": (low, high)}, low, high
    kwargs = {"min": 0, "max": 0, **ref.kwargs}
    if ref.args:
        return None  # a positional range: left as it is
    if kwargs["min"] != kwargs["max"]:
        return kwargs, float(kwargs["min"]), float(kwargs["max"])
    low, high = float(ref.input.min()), float(ref.input.max())
    if low == high:
        low, high = low - 1, high + 1
    kwargs["min"], kwargs["max"] = low, high
    return kwargs, low, high


def cumsum(value: Any) -> Any:
    """The cumulative sum of the first output (the counts; histogram's edges stay as they are)."""
    leaves, spec = pytree.tree_flatten(value)
    first = next((i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)), None)
    if first is not None and leaves[first].dim():
        leaves[first] = leaves[first].cumsum(-1)
    return pytree.tree_unflatten(leaves, spec)


def reference_bracket(expected: Any, variants: list[Any]) -> tuple[Any, Any]:
    """Elementwise (low, high) of the reference and its perturbed evaluations (NaN ignored);
    for complex values the box of their real and imaginary parts (low and high complex)."""
    leaves, spec = pytree.tree_flatten(expected)
    lows, highs = list(leaves), list(leaves)
    for variant in variants:
        other = pytree.tree_leaves(variant)
        for i, (x, y) in enumerate(zip(leaves, other, strict=False)):
            if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)):
                continue
            if x.shape != y.shape or x.layout != torch.strided or y.layout != torch.strided:
                continue
            if x.is_floating_point() and y.is_floating_point():
                y = y.detach().to(x.dtype)
                lows[i], highs[i] = torch.fmin(lows[i], y), torch.fmax(highs[i], y)
            elif x.is_complex() and y.is_complex():
                y = y.detach().to(x.dtype)
                lows[i] = torch.complex(
                    torch.fmin(lows[i].real, y.real), torch.fmin(lows[i].imag, y.imag)
                )
                highs[i] = torch.complex(
                    torch.fmax(highs[i].real, y.real), torch.fmax(highs[i].imag, y.imag)
                )
    return pytree.tree_unflatten(lows, spec), pytree.tree_unflatten(highs, spec)
