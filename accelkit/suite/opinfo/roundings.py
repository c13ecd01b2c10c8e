"""How much the roundings inside a forward and backward move a gradient, per element.

An elementwise op's gradient in dtype d is a short chain of aten ops (pow's w * b * x**(b-1):
a subtraction, a power and two products), each of whose results the kernel rounds to d. A
rounding of intermediate v_i by delta_i times its unit max(|v_i|, tiny(d)) moves the
gradient element g_j by s_ij * max(|v_ij|, tiny) * delta_i, to first order.
`rounding_sensitivity` measures, on the float64 reference sample, S_j = sum_i |s_ij *
max(|v_ij|, tiny)| over every rounding of the forward and the backward: the graph is run
once as it is and once with each intermediate moved by STEP units (`_move`; v * (1 + STEP)
for a normal v), under a dispatch mode, and (g(i) - g) / STEP is that rounding's term. A
bound on what the roundings can do together is then a few eps(d) * S_j per element, with
no assumption about the formula: where its terms cancel (sinc's cos(x)/x - sin(x)/x**2
for small x), S_j is as large as the terms, not the difference. Below tiny(d), the
smallest normal number, a rounding is absolute (half a subnormal spacing: polar's float16
sgn(r) turns by up to 2^-24 / |r| where r's parts are subnormal). A complex intermediate
rounds its real and imaginary parts apart, each by up to u |v| (a product's parts are sums
of real products that may cancel inside the one op): two roundings, each part moved by
STEP |v|.

Intermediates that a kernel does not round are left out: views and other aliases, copies,
sign changes, selections (`EXACT`), and results that are neither floating nor complex. The
graph's ops are counted on the unperturbed run; a graph of more than MAX_INTERMEDIATES
roundings, or one whose op sequence changes under a move, gets None (the caller keeps its
normwise bound).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from accelkit.suite.opinfo.tolerances import overflow_threshold

STEP = 1e-6
"""Relative scaling of one intermediate (float64: the difference keeps ~10 digits)."""

MAX_INTERMEDIATES = 24
"""More roundings than this in one forward and backward: not measured (cost)."""

EXACT = frozenset(
    {
        "aten::abs",
        "aten::neg",
        "aten::clone",
        "aten::copy_",
        "aten::_to_copy",
        "aten::detach",
        "aten::where",
        "aten::masked_fill",
        "aten::masked_fill_",
        "aten::zeros_like",
        "aten::ones_like",
        "aten::full_like",
        "aten::empty_like",
        "aten::fill_",
        "aten::zero_",
        "aten::sign",
        "aten::sgn",
        "aten::lift_fresh",
        "aten::_conj",
        "aten::conj_physical",
    }
)
"""Ops whose floating results are exactly one of their inputs' values (or a constant):
no rounding of their own."""


def _rounds(func: Any, out: Any, args: tuple[Any, ...]) -> bool:
    """Whether `func`'s result is a rounded intermediate: a floating or complex tensor the op
    computed from tensor inputs, not a view or an exact op."""
    if not isinstance(out, torch.Tensor) or not (out.is_floating_point() or out.is_complex()):
        return False
    schema = func._schema
    if schema.name in EXACT:
        return False
    returns = schema.returns
    if returns and returns[0].alias_info is not None and not returns[0].alias_info.is_write:
        return False  # a view: it rounds nothing
    return any(isinstance(a, torch.Tensor) for a in args)


class _Intermediates(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Counts the roundings as the intermediates are computed, one per real intermediate and
    one per part of a complex one (`names`: the op of each); moves the `target`-th by STEP
    times its unit (`_move`; in place, so an in-place op's target carries it on)."""

    def __init__(
        self, target: int = -1, floor: float = 0.0, conditions: Mapping[str, float] | None = None
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.target, self.floor = target, floor
        self.conditions = conditions or {}
        self.names: list[str] = []
        self.ops = 0
        self.largest = 0.0
        """The largest finite magnitude among the rounding intermediates."""

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        factor = self.conditions.get(func._schema.name) if len(self.names) == self.target else None
        before = args[0].detach().clone() if factor else None
        out = func(*args, **kwargs)
        if _rounds(func, out, args):
            self.ops += 1
            for part in range(2 if out.is_complex() else 1):
                if len(self.names) == self.target:
                    spread = factor * _slope(func, before, args, kwargs) if factor else 0.0
                    _move(out, part, self.floor, spread)
                self.names.append(func._schema.name)
            if self.target < 0 and out.numel():
                with torch.no_grad():
                    size = out.detach().abs()
                    finite = size[torch.isfinite(size)]
                    if finite.numel():
                        self.largest = max(self.largest, float(finite.max()))
        return out


def _slope(func: Any, a: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """|a f'(a)| of a one-input kernel f at its input a (as it was before an in-place op), by
    a central difference in float64: what an error of eps in units of f's condition is."""
    h = 1e-5
    up, down = (func(a * (1 + s), *args[1:], **kwargs) for s in (h, -h))
    return ((up - down) / (2 * h)).abs().nan_to_num(nan=0.0, posinf=0.0)


def _move(v: torch.Tensor, part: int, floor: float, spread: Any = 0.0) -> None:
    """Move `v` in place by STEP times the unit its rounding is relative to, max(|v|, floor):
    a real v away from zero (v * (1 + STEP) where |v| >= floor), a complex v along its real
    (`part` 0) or imaginary part (1), each of which a kernel rounds apart and by up to u |v|
    (a product's parts sum real products, which may cancel: Re(a b) = Re a Re b - Im a Im
    b). Below `floor` (the dtype's smallest normal number) a rounding is absolute: half a
    subnormal spacing, u * floor. `spread`: a kernel's error beyond its rounding, in the
    same units (a "condition" exception's factor times |a f'(a)|, `_slope`)."""
    with torch.no_grad():
        unit = STEP * (v.abs().clamp_min(floor) + spread)
        if v.is_complex():
            v.add_(torch.complex(unit, torch.zeros_like(unit)) if part == 0 else unit * 1j)
        else:
            v.add_(torch.where(v < 0, -unit, unit))


@dataclass(frozen=True)
class Roundings:
    """What one `measure_graph` found."""

    terms: tuple[torch.Tensor | None, ...] | None
    """Per gradient, S = sum over the rounding intermediates of |d g / d ln v|; None for
    the whole graph where it cannot be measured (see the module docstring)."""
    largest: float
    """The largest finite magnitude among the rounding intermediates (`leaves_range`)."""
    weighted: tuple[str, ...] = ()
    """The kernels of `measure_graph`'s `ulps` and `conditions` among the intermediates."""
    ops: int = 0
    """How many of the graph's op calls rounded a result (a complex one counts once)."""


def measure_graph(
    gradients: Callable[[], tuple[Any, ...]],
    *,
    sensitivity: bool = True,
    ulps: Mapping[str, float] | None = None,
    conditions: Mapping[str, float] | None = None,
    floor: float = 0.0,
) -> Roundings:
    """The graph that `gradients()` runs (forward and backward on float64 leaves, anew each
    call): its largest intermediate from one run, and with `sensitivity` each gradient's S
    from one more run per rounding (`_move`; `floor`: the smallest normal number of the
    dtype the graph stands for). `ulps`: per aten op, how many roundings its kernel's
    error is worth (`exceptions.kernel_exceptions`); its intermediates' terms count that many
    times. `conditions`: per one-input aten op, its error in units of its function's
    condition; its intermediates move by that times |a f'(a)| as well (`_slope`)."""
    with _Intermediates() as counting:
        base = gradients()
    names, largest, ops = counting.names, counting.largest, counting.ops
    listed = {**(ulps or {}), **(conditions or {})}
    weighted = tuple(sorted({n for n in names if n in listed}))
    if not sensitivity or not names or len(names) > MAX_INTERMEDIATES:
        return Roundings(None, largest, weighted, ops)
    totals: list[torch.Tensor | None] = [
        torch.zeros(g.shape, dtype=g.real.dtype) if isinstance(g, torch.Tensor) else None
        for g in base
    ]
    for target in range(len(names)):
        with _Intermediates(target, floor, conditions) as scaled:
            moved = gradients()
        if scaled.names != names:
            return Roundings(None, largest)
        for i, (g, m) in enumerate(zip(base, moved, strict=True)):
            total = totals[i]
            if total is None or not isinstance(m, torch.Tensor):
                continue
            term = ((m - g) / STEP).abs().nan_to_num(nan=0.0, posinf=torch.inf)
            weight = ulps.get(names[target], 1.0) if ulps else 1.0
            totals[i] = total + weight * term.detach()
    return Roundings(tuple(totals), largest, weighted, ops)


def rounding_sensitivity(
    gradients: Callable[[], tuple[Any, ...]], floor: float = 0.0
) -> tuple[torch.Tensor | None, ...] | None:
    """`measure_graph(gradients, floor=floor).terms`."""
    return measure_graph(gradients, floor=floor).terms


def leaves_range(largest: float, dtype: torch.dtype, margin: float) -> bool:
    """Whether a graph whose largest rounding intermediate is `largest` (`Roundings`, in
    float64) reaches `dtype`'s overflow threshold, less a relative `margin` (the roundings
    before it may push it over). Computed in `dtype`, such a graph may legitimately return
    inf or NaN where the exact gradient is finite. (Intermediates that flush to zero are not
    counted: in float16 they would flag 8% of OpInfo's elementwise samples, erf's and
    tanh's among them, where a zero divides nothing.)"""
    return largest >= overflow_threshold(dtype) * (1 - margin)
