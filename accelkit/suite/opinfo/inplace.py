"""The in-place variant of an op (`exp_` for `exp`): it must mutate its input into the
reference's in-place answer.

`running` checks it after the out-of-place answer, on the same sample, under the same rules:
a step function (`DISCONTINUOUS`) is re-checked against the reference's range over the
inputs' rounding, and a device's answer that misses the bound may pass by the peer rule
(`peer`: the CPU's in-place answer at the same dtype).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch
from torch.utils import _pytree as pytree

from accelkit.suite.opinfo import peer
from accelkit.suite.opinfo.comparison import compare
from accelkit.suite.opinfo.discontinuity import perturbed, reference_bracket
from accelkit.suite.opinfo.sample_tables import DISCONTINUOUS
from accelkit.suite.opinfo.tolerances import NO_RULES, Rules


def _call(fn: Callable[..., Any], sample: Any) -> Any:
    return fn(sample.input, *sample.args, **sample.kwargs)


def clone(value: Any) -> Any:
    """A copy of every tensor in the same strides (a strided or transposed input stays so,
    so that an in-place variant writes through the same layout); a tensor with a stride-0
    dimension, which an in-place op cannot write, becomes a dense copy."""

    def copy(x: Any) -> Any:
        if not isinstance(x, torch.Tensor):
            return x
        x = x.detach()
        if any(stride == 0 and size > 1 for size, stride in zip(x.shape, x.stride(), strict=True)):
            return x.clone(memory_format=torch.contiguous_format)
        kept = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device)
        return kept.copy_(x)

    return pytree.tree_map(copy, value)


def fits_in_place(result: Any, target: Any) -> bool:
    """In place is defined when the result has the input's shape and dtype (no broadcast
    of the input, no type promotion beyond it, e.g. float_power_ needs a float64 input)."""
    return (
        isinstance(result, torch.Tensor)
        and isinstance(target, torch.Tensor)
        and result.shape == target.shape
        and result.dtype == target.dtype
    )


def check_inplace(
    inplace: Callable[..., Any],
    op_name: str,
    sample: Any,
    ref: Any,
    dtype: torch.dtype,
    label: str,
    magnitude: float,
    rules: Rules = NO_RULES,
    where: tuple[str, str] = (peer.PEER_DEVICE, ""),
) -> None:
    """The in-place variant mutates its input into the reference's in-place answer.
    `where`: the device, and the sample's label for the peer rule's note."""
    target = clone(sample.input)
    ref_target = clone(ref.input)
    with torch.no_grad():
        try:
            ref_result = inplace(ref_target, *ref.args, **ref.kwargs)
        except RuntimeError:
            return  # not valid in place for this sample (e.g. the result type does not fit)
        result = inplace(target, *sample.args, **sample.kwargs)
    del ref_result, result
    what = f"{op_name} (in place) {label}"
    try:
        _compare_inplace(inplace, op_name, ref, dtype, target, ref_target, what, magnitude, rules)
    except AssertionError as error:  # the CPU at the same dtype may be as far (`peer`)

        def mine() -> Any:
            cpu = peer.peer_sample(sample, where[0])
            with torch.no_grad():
                inplace(cpu.input, *cpu.args, **cpu.kwargs)
            return cpu.input

        peer.rescue(
            error,
            f"{where[1]} (in place)",
            target,
            ref_target,
            dtype,
            rules.elementwise,
            mine,
            lambda answer: compare(answer, ref_target, dtype, op_name, what, magnitude, rules),
        )


def _compare_inplace(
    inplace: Callable[..., Any],
    op_name: str,
    ref: Any,
    dtype: torch.dtype,
    target: Any,
    ref_target: Any,
    what: str,
    magnitude: float,
    rules: Rules,
) -> None:
    try:
        compare(target, ref_target, dtype, op_name, what, magnitude, rules)
    except AssertionError:
        step = DISCONTINUOUS.get(op_name)
        if step is None or step.cumulative:
            raise
        with torch.no_grad():  # the in-place answer is the out-of-place one
            variants = [
                _call(inplace, p)
                for p in perturbed(ref, dtype, step.mode, op_name=op_name, factor=step.factor)
            ]
        bracket = reference_bracket(ref_target, variants)
        compare(
            target,
            ref_target,
            dtype,
            op_name,
            what,
            magnitude,
            dataclasses.replace(rules, bracket=bracket),
        )
