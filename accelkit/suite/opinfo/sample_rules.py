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
from typing import Any

import torch
from torch.utils import _pytree as pytree

from accelkit.suite.opinfo.records import entry_for
from accelkit.suite.opinfo.sample_tables import (
    BACKWARD_OVERFLOW,
    SAMPLE_CONDITION,
    SAMPLE_TERMS,
    SQUARED,
)
from accelkit.suite.opinfo.tolerances import Rules, least_precise, overflow_threshold


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
    condition = entry_for(SAMPLE_CONDITION, op_name, dtype)
    if condition is not None:
        kind, factor = condition.kind, condition.factor
        bound = factor * condition.kappa(op, ref)
        if not bound * eps < 1:
            raise NoDigits(f"{kind} condition {bound / factor:.3g}")
        if kind == "relative":
            rules = dataclasses.replace(rules, relative_condition=bound)
        elif kind == "normwise":
            rules = dataclasses.replace(rules, normwise_condition=bound)
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
