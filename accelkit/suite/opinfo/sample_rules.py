"""Applying the per-sample rule tables to one sample: the bounds and allowances it gets.

`sample_rules` computes, from the float64 reference sample, the bounds of the case's
`SAMPLE_TERMS`, `SAMPLE_CONDITION` and `BACKWARD_OVERFLOW` entries (`sample_tables`) into the
`Rules` that `comparison.compare` applies, or raises `NoDigits` for a sample whose condition
(or an overflowed divisor of its backward) leaves the dtype no digits of the answer: such a
sample is not compared. `squared_rules` and `squares` do the same for `SQUARED`. A gradient's
rules see the random weights of the outputs (`weights`); a forward's get None.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import torch
from torch.utils import _pytree as pytree

from accelkit.suite.opinfo import sample_measures as measure
from accelkit.suite.opinfo.discontinuity import perturbed, reference_bracket
from accelkit.suite.opinfo.records import SampleCondition, entry_for
from accelkit.suite.opinfo.sample_tables import (
    BACKWARD_OVERFLOW,
    SAMPLE_CONDITION,
    SAMPLE_TERMS,
    SQUARED,
)
from accelkit.suite.opinfo.scales import (
    LINALG_CONDITION_FACTOR,
    LINALG_OPS_PREFIXES,
    RECURRENCE_OPS,
    WELL_CONDITIONED_LINALG,
)
from accelkit.suite.opinfo.tolerances import (
    CONDITION_EPS,
    Rules,
    is_elementwise,
    least_precise,
    overflow_threshold,
)
from accelkit.suite.reference import ACCUMULATION_DTYPE


class NoDigits(Exception):
    """A sample whose condition leaves the dtype no digits of the answer (SAMPLE_CONDITION)."""


def sample_rules(
    op: Any,
    op_name: str,
    dtype: torch.dtype,
    ref: Any,
    rules: Rules,
    weights: list[torch.Tensor] | None = None,
) -> Rules:
    """`rules` with this sample's SAMPLE_TERMS, SAMPLE_CONDITION and BACKWARD_OVERFLOW
    bounds; NoDigits if its condition leaves no digits to compare."""
    eps = torch.finfo(
        least_precise(dtype, *([rules.inputs_dtype] if rules.inputs_dtype else []))
    ).eps
    terms = entry_for(SAMPLE_TERMS, op_name, dtype)
    if terms is not None:
        found = terms.terms(op, ref, weights)
        if isinstance(found, list):
            rules = dataclasses.replace(rules, input_terms=tuple(terms.factor * t for t in found))
        else:
            rules = dataclasses.replace(rules, terms=terms.factor * found)
        if terms.own_units:
            rules = dataclasses.replace(rules, own_units=True)
    condition = entry_for(SAMPLE_CONDITION, op_name, dtype) or linalg_condition(op_name)
    if condition is not None:
        kind, factor = condition.kind, condition.factor
        bound = factor * condition.kappa(op, ref)
        if not bound * eps < 1:
            raise NoDigits(f"{kind} condition {bound / factor:.3g}")
        if kind == "relative":
            rules = dataclasses.replace(rules, relative_condition=bound)
        elif kind == "normwise":
            rules = dataclasses.replace(rules, normwise_condition=bound)
    if weights is None and is_elementwise(op) and op_name not in RECURRENCE_OPS:
        rules = dataclasses.replace(
            rules, elementwise=True, bracket=condition_bracket(op, dtype, ref, rules)
        )
    overflow = entry_for(BACKWARD_OVERFLOW, op_name, dtype)
    if overflow is not None and weights is not None:
        # The intermediates themselves round in the dtype: within a few roundings of the
        # threshold either outcome is right.
        threshold = overflow_threshold(dtype) * (1 - 4 * torch.finfo(dtype).eps)
        factors, divisors = overflow.intermediates(op, ref, weights)
        if any(reaches(x, threshold) for x in divisors):
            raise NoDigits("a divisor of the backward overflows")
        if any(reaches(x, threshold) for x in factors):
            rules = dataclasses.replace(rules, may_overflow=True)
    return rules


@functools.cache
def linalg_condition(op_name: str) -> SampleCondition | None:
    """The rule of a linear algebra op (LINALG_OPS_PREFIXES, not WELL_CONDITIONED_LINALG)
    without a SAMPLE_CONDITION entry of its own: a normwise bound of
    LINALG_CONDITION_FACTOR * n * kappa (kappa squared for a gradient)."""
    base, _, kind = op_name.partition("/")
    if not base.startswith(LINALG_OPS_PREFIXES) or base in WELL_CONDITIONED_LINALG:
        return None
    return SampleCondition(
        op=base,
        grad=bool(kind),
        kind="normwise",
        factor=LINALG_CONDITION_FACTOR,
        kappa=measure.linalg_condition_squared if kind else measure.linalg_condition,
        reason="linear algebra: errors of n * kappa * eps (scales.LINALG_CONDITION_FACTOR)",
    )


def condition_bracket(op: Any, dtype: torch.dtype, ref: Any, rules: Rules) -> tuple[Any, Any]:
    """An elementwise op's (low, high): the reference's range, element by element, over the
    sample's inputs (tensors and Python numbers) moved by CONDITION_EPS units of the precision
    the kernel computes in (`reference.ACCUMULATION_DTYPE`: float32 for the 16-bit dtypes)."""
    least = least_precise(dtype, *([rules.inputs_dtype] if rules.inputs_dtype else []))
    compute = ACCUMULATION_DTYPE.get(least, least)
    process = ref.output_process_fn_grad
    with torch.no_grad():
        expected = process(op(ref.input, *ref.args, **ref.kwargs))
        variants = [
            process(op(p.input, *p.args, **p.kwargs))
            for p in perturbed(ref, compute, "relative", numbers=True, factor=CONDITION_EPS)
        ]
    low, high = reference_bracket(expected, variants)
    centres, spec = pytree.tree_flatten(expected)
    lows, highs = pytree.tree_leaves(low), pytree.tree_leaves(high)
    for i, centre in enumerate(centres):
        if isinstance(centre, torch.Tensor) and centre.is_complex():
            lows[i], highs[i] = _square_box(centre, lows[i], highs[i])
    return pytree.tree_unflatten(lows, spec), pytree.tree_unflatten(highs, spec)


def _square_box(
    centre: torch.Tensor, low: torch.Tensor, high: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """A complex box made square around the reference: a relative perturbation moves a
    complex input along one direction only, and the kernel's error may lie in any."""
    parts = [(high - centre).real, (high - centre).imag, (centre - low).real, (centre - low).imag]
    radius = torch.stack(parts).nan_to_num(nan=0.0).amax(0)
    corner = torch.complex(radius, radius)
    return centre - corner, centre + corner


def squared_rules(op_name: str, ref: Any, rules: Rules) -> Rules | None:
    """`rules` for comparing this sample's outputs as squares (`squares`), with the normwise
    bound at the SQUARED entry's terms, or None where the sample is compared as it is."""
    squared = SQUARED.get(op_name)
    terms = squared.terms(ref) if squared is not None else None
    if squared is None or terms is None:
        return None
    return dataclasses.replace(rules, terms=max(rules.terms, squared.factor * terms))


def squares(value: Any) -> Any:
    """Floating tensors squared in float64 (on the CPU): exact for the float32 answer."""
    return pytree.tree_map(
        lambda x: (
            x.detach().to("cpu", torch.float64) ** 2
            if isinstance(x, torch.Tensor) and x.is_floating_point()
            else x
        ),
        value,
    )


def reaches(x: torch.Tensor, threshold: float) -> bool:
    """Whether a floating tensor (any layout) has an element of magnitude >= threshold."""
    if not (x.is_floating_point() or x.is_complex()):
        return False
    x = x.detach()
    if x.layout != torch.strided:
        x = x.to_dense()
    return bool((x.abs() >= threshold).any())
