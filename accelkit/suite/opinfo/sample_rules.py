"""Applying the per-sample rule tables to one sample: the bounds and allowances it gets.

`sample_rules` computes, from the float64 reference sample, the bounds of the case's
`SAMPLE_TERMS`, `SAMPLE_CONDITION` and `BACKWARD_OVERFLOW` entries (`sample_tables`) into the
`Rules` that `comparison.compare` applies, or raises `NoDigits` for a sample whose condition
(or an overflowed divisor of its backward) leaves the dtype no digits of the answer: such a
sample is not compared. `squared_rules` and `squares` do the same for `SQUARED`. A gradient's
rules see the random weights of the outputs (`weights`); a forward's get None.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import types
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import torch
from torch.utils import _pytree as pytree

from accelkit.suite.numerics.reference import ACCUMULATION_DTYPE, REFERENCE_DTYPE, accumulation_atol
from accelkit.suite.opinfo import stability
from accelkit.suite.opinfo.discontinuity import perturbed, reference_bracket, with_parts
from accelkit.suite.opinfo.exceptions import exception_for, kernel_exceptions
from accelkit.suite.opinfo.magnitudes import propagate
from accelkit.suite.opinfo.records import ListedException, entry_for
from accelkit.suite.opinfo.roundings import (
    Roundings,
    leaves_range,
    measure_graph,
    rounding_sensitivity,
)
from accelkit.suite.opinfo.sample_measures import differentiable
from accelkit.suite.opinfo.sample_tables import (
    BACKWARD_OVERFLOW,
    SAMPLE_CONDITION,
    SAMPLE_TERMS,
    SQUARED,
)
from accelkit.suite.opinfo.scales import RECURRENCE_OPS
from accelkit.suite.opinfo.tolerances import (
    CONDITION_EPS,
    Rules,
    is_elementwise,
    least_precise,
    overflow_threshold,
)


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
        rules = dataclasses.replace(rules, entries=(*rules.entries, terms))
    condition = entry_for(SAMPLE_CONDITION, op_name, dtype)
    if condition is not None:
        kind, factor = condition.kind, condition.factor
        bound = factor * condition.kappa(op, ref)
        if not bound * eps < 1:
            raise NoDigits(f"{kind} condition {bound / factor:.3g}")
        if kind == "normwise":
            rules = dataclasses.replace(rules, normwise_condition=bound)
        rules = dataclasses.replace(rules, entries=(*rules.entries, condition))
    base = op_name.partition("/")[0]
    if is_elementwise(op) and base not in RECURRENCE_OPS:
        if weights is None:
            widen = exception_for("condition", op_name, dtype)
            factor = CONDITION_EPS * (widen.factor if widen else 1.0)
            rules = dataclasses.replace(
                rules,
                elementwise=True,
                bracket=condition_bracket(op, dtype, ref, rules, factor),
                exceptions=(*rules.exceptions, *([widen] if widen else [])),
            )
        else:
            graph = grad_brackets(op, dtype, ref, rules, weights)
            rules = dataclasses.replace(
                rules,
                input_brackets=graph.brackets,
                exceptions=(*rules.exceptions, *graph.exceptions),
            )
            if graph.may_overflow:
                rules = dataclasses.replace(rules, may_overflow=True)
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


def condition_bracket(
    op: Any, dtype: torch.dtype, ref: Any, rules: Rules, factor: float = CONDITION_EPS
) -> tuple[Any, Any]:
    """An elementwise op's (low, high): the reference's range, element by element, over the
    sample's inputs (tensors and Python numbers) moved by `factor` (CONDITION_EPS, times a
    "condition" listed exception's factor) units of the precision the kernel computes in
    (`reference.ACCUMULATION_DTYPE`: float32 for the 16-bit dtypes)."""
    least = least_precise(dtype, *([rules.inputs_dtype] if rules.inputs_dtype else []))
    compute = ACCUMULATION_DTYPE.get(least, least)
    process = ref.output_process_fn_grad
    with torch.no_grad():
        expected = process(op(ref.input, *ref.args, **ref.kwargs))
        variants = [
            process(op(p.input, *p.args, **p.kwargs))
            for p in perturbed(ref, compute, "relative", numbers=True, factor=factor)
        ]
    low, high = reference_bracket(expected, variants)
    centres, spec = pytree.tree_flatten(expected)
    lows, highs = pytree.tree_leaves(low), pytree.tree_leaves(high)
    for i, centre in enumerate(centres):
        if isinstance(centre, torch.Tensor) and centre.is_complex():
            lows[i], highs[i] = _square_box(centre, lows[i], highs[i])
    return pytree.tree_unflatten(lows, spec), pytree.tree_unflatten(highs, spec)


#: The dtypes whose elementwise gradients are compared element by element. A complex one
#: gets a square box (the kernel's error may lie in any direction: atanh's
#: w / conj(1 - z ** 2) near z = -1, seed 59), and each part of a complex intermediate
#: rounds by up to u |v| (`roundings`: tanh's w * conj(1 - y ** 2) was several units of |y|
#: off in a component).
GRAD_BRACKET_DTYPES = frozenset(
    {torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.complex64, torch.complex128}
)


class GradBrackets(NamedTuple):
    """What `grad_brackets` decides for one sample's gradients."""

    brackets: tuple[tuple[Any, Any] | None, ...]
    """Per differentiable input, (low, high), or None where it stays normwise; () for all."""
    may_overflow: bool
    """An intermediate leaves the dtype's range: inf or NaN are right (`Rules.may_overflow`)."""
    exceptions: tuple[ListedException, ...] = ()
    """The listed exceptions (kernels' ulps) that widened the brackets (`Rules.exceptions`)."""


def grad_brackets(
    op: Any,
    dtype: torch.dtype,
    ref: Any,
    rules: Rules,
    weights: list[torch.Tensor],
) -> GradBrackets:
    """An elementwise op's gradients compared element by element: per differentiable input,
    (low, high) or None where that gradient stays normwise.

    A gradient of an elementwise op is w * df/dx at each element, computed by a short chain
    of aten ops that each round to the dtype (atan's grad / (1 + x**2) rounds three times,
    exp's w * y reads the result the forward rounded, sinc's cos(x)/x - sin(x)/x**2 cancels).
    The bracket is the reference gradient's range over the inputs moved by CONDITION_EPS
    units of the precision the kernel computes in (as the forward's, `condition_bracket`),
    widened by CONDITION_EPS * eps(d) times what the roundings of every intermediate of the
    forward and backward move it (`roundings.measure_graph`, `_graph_brackets`): where the
    formula's terms cancel, that is the size of the terms, not of their difference. In
    float32 each intermediate of a kernel with a listed error in ulps
    (`exceptions.kernel_exceptions`) counts that many roundings, and one of a kernel with a
    listed "condition" error moves by its factor times |a f'(a)| too. An input that
    broadcasts has a gradient that sums K elements' terms: the sums of their brackets (a
    complex term's square box), widened by sqrt(K) * eps * sum |g| (`_summed_bracket`).
    None (normwise) outside GRAD_BRACKET_DTYPES, for an op of several outputs, and where the
    graph cannot be measured.

    With `GradBrackets.may_overflow`: whether an intermediate of the forward and backward
    leaves the range of the dtype the sample computes in (`roundings.leaves_range`; the
    margin: the CONDITION_EPS roundings of every intermediate before it): inf or NaN are
    then right where the gradient is finite (`Rules.may_overflow`), as BACKWARD_OVERFLOW's
    entries make them for other ops."""
    least = least_precise(dtype, *([rules.inputs_dtype] if rules.inputs_dtype else []))
    inputs = differentiable((ref.input, ref.args, ref.kwargs))
    if least not in GRAD_BRACKET_DTYPES or not inputs:
        return GradBrackets((), False)
    outputs = reference_outputs(op, ref)
    if len(outputs) != 1:
        return GradBrackets((), False)
    kernels = kernel_exceptions(least)
    ulps, conditions = (
        {n: e.factor for n, e in kernels.items() if e.kind == kind}
        for kind in ("kernel_ulps", "condition")
    )
    compute = ACCUMULATION_DTYPE.get(least, least)
    grads = weighted_grads(outputs, inputs, weights)
    variants = [
        reference_grads(op, p, weights)
        for p in perturbed(ref, compute, "relative", numbers=True, factor=CONDITION_EPS)
    ]
    run = functools.partial(reference_grads, op, ref, weights)
    found = measure_graph(run, ulps=ulps, conditions=conditions, floor=torch.finfo(least).tiny)
    graph = _graph_brackets(
        op, least, compute, ref, weights, (inputs, grads, variants, found), outputs[0].shape
    )
    listed = tuple(kernels[name] for name in found.weighted) if graph else ()
    return GradBrackets(graph, bool(graph) and _overflows(found.largest, least), listed)


def _overflows(largest: float, dtype: torch.dtype) -> bool:
    """`roundings.leaves_range` for the dtype a sample computes in; never float64 (the
    reference's own)."""
    if dtype == torch.float64:
        return False
    return leaves_range(largest, dtype, 4 * CONDITION_EPS * torch.finfo(dtype).eps)


def _graph_brackets(
    op: Any,
    dtype: torch.dtype,
    compute: torch.dtype,
    ref: Any,
    weights: list[torch.Tensor],
    found: tuple[list[torch.Tensor], tuple[Any, ...], list[tuple[Any, ...]], Roundings],
    shape: torch.Size,
) -> tuple[tuple[Any, Any] | None, ...]:
    """An elementwise op's gradients (`grad_brackets`) from `found`: the inputs, their
    reference gradients, those over the moved inputs and the graph's
    `roundings.measure_graph`. Each gradient's range over the moved inputs, widened by
    CONDITION_EPS * eps(d) * S, S the sum of |dg / d ln v| over the graph's rounding
    intermediates v. An input that broadcasts sums terms: the same for each term
    (`_broadcast_terms`), then their sum's rounding (`_summed_bracket`). () where the graph
    cannot be measured."""
    inputs, grads, variants, roundings = found
    sensitivity = roundings.terms
    if sensitivity is None:
        return ()
    eps = torch.finfo(dtype).eps
    brackets: list[tuple[Any, Any] | None] = []
    summed = functools.cache(lambda: _broadcast_terms(op, compute, dtype, ref, weights, shape))
    for i, (x, g, s) in enumerate(zip(inputs, grads, sensitivity, strict=True)):
        if g is None or s is None:
            brackets.append(None)
            continue
        if x.shape != shape:
            brackets.append(_broadcast_bracket(op, dtype, ref, weights, i, x, g, summed))
            continue
        low, high = reference_bracket(g, [v[i] for v in variants if v[i] is not None])
        if g.is_complex():
            low, high = _square_box(g, low, high)
        slack = _half_side(CONDITION_EPS * eps * s, g)
        brackets.append(((low - slack).detach(), (high + slack).detach()))
    return tuple(brackets)


def _broadcast_terms(
    op: Any,
    compute: torch.dtype,
    rounding: torch.dtype,
    ref: Any,
    weights: list[torch.Tensor],
    shape: torch.Size,
) -> list[tuple[Any, Any, Any] | None]:
    """Per differentiable input, the (low, high, |g|) of its gradient's terms before the
    broadcast sums them: the gradient with every such input expanded to the output's
    `shape`, over the same moved inputs as `grad_brackets`, each term's range widened by
    its graph's roundings in `rounding` (the dtype) as `_graph_brackets` does; [] where the
    op cannot take the expanded inputs or its graph cannot be measured."""

    def expand(x: Any) -> Any:
        if isinstance(x, torch.Tensor) and x.requires_grad:
            return x.detach().expand(shape).clone().requires_grad_()
        return x

    try:
        parts = pytree.tree_map(expand, (ref.input, ref.args, ref.kwargs))
        full = with_parts(ref, *parts)
        grads = reference_grads(op, full, weights)
        variants = [
            reference_grads(op, p, weights)
            for p in perturbed(full, compute, "relative", numbers=True, factor=CONDITION_EPS)
        ]
    except RuntimeError:
        return []
    tiny = torch.finfo(rounding).tiny
    sensitivity = rounding_sensitivity(lambda: reference_grads(op, full, weights), tiny)
    if sensitivity is None:
        return []
    terms: list[tuple[Any, Any, Any] | None] = []
    for i, (g, s) in enumerate(zip(grads, sensitivity, strict=True)):
        if g is None or g.shape != shape:
            terms.append(None)
            continue
        low, high = reference_bracket(g, [v[i] for v in variants if v[i] is not None])
        if g.is_complex():  # each term's error may lie in any direction
            low, high = _square_box(g, low, high)
        if s is not None:
            slack = _half_side(CONDITION_EPS * torch.finfo(rounding).eps * s, g)
            low, high = low - slack, high + slack
        terms.append((low, high, g.abs()))
    return terms


def _broadcast_bracket(
    op: Any,
    dtype: torch.dtype,
    ref: Any,
    weights: list[torch.Tensor],
    index: int,
    x: torch.Tensor,
    g: Any,
    summed: Callable[[], list[tuple[Any, Any, Any] | None]],
) -> tuple[Any, Any] | None:
    """Gradient `index` `g` of a broadcast input `x`: its terms' sum (`_summed_bracket`) from
    `summed()` (`_broadcast_terms`, run once for every input), or where the op cannot take
    the input expanded, its graph's bound (`_propagated_bracket`)."""
    terms = summed()
    if terms:
        return _summed_bracket(dtype, x, terms[index])
    return _propagated_bracket(op, dtype, ref, weights, g, index)


def _propagated_bracket(
    op: Any, dtype: torch.dtype, ref: Any, weights: list[torch.Tensor], g: Any, index: int
) -> tuple[Any, Any] | None:
    """A broadcast input's gradient `g` (gradient `index`) where the op cannot take its
    inputs expanded to give the terms (`_broadcast_terms`: prelu takes one weight or one per
    channel, never one per element): `g` +- GRAPH_FACTOR times what the roundings of the
    op's forward and backward leave in it (`magnitudes.propagate`: prelu's backward forms
    each element's term of the weight's gradient in the dtype, then sums them). None where
    the graph cannot be measured."""
    leaves = pytree.tree_leaves((ref.input, ref.args, ref.kwargs))
    tensors = [x for x in leaves if isinstance(x, torch.Tensor)]
    graph = propagate(_graph_run(op, ref, weights), dtype, tensors, backward=True)
    if graph is None:
        return None
    slack = graph.slack[index]
    if not isinstance(slack, torch.Tensor) or slack.shape != g.shape:
        return None
    width = _half_side(GRAPH_FACTOR * slack.to(g.real.dtype), g)
    return (g - width).detach(), (g + width).detach()


def _summed_bracket(
    dtype: torch.dtype, x: torch.Tensor, terms: tuple[Any, Any, Any] | None
) -> tuple[Any, Any] | None:
    """A broadcast input's gradient: the sums of its terms' lows and highs, widened by the
    terms' rounding to the dtype (eps * sum |g|) and the rounding of their sum of K terms
    (`reference.accumulation_atol`: sqrt(K) * eps(accumulation dtype) * sum |g|)."""
    if terms is None:
        return None
    low, high, magnitude = terms
    count = magnitude.numel() // max(x.numel(), 1)
    try:
        total = magnitude.sum_to_size(x.shape)
        # each term rounded to the dtype before the sum, then the sum's own rounding
        acc = _half_side(
            torch.finfo(dtype).eps * total + accumulation_atol(dtype, total, count), low
        )
        return (low.sum_to_size(x.shape) - acc).detach(), (high.sum_to_size(x.shape) + acc).detach()
    except RuntimeError:
        return None


def reference_grads(op: Any, ref: Any, weights: list[torch.Tensor]) -> tuple[Any, ...]:
    """The reference's gradients of the weighted sum of its outputs (as `running.run_grad`)
    for a reference sample."""
    inputs = differentiable((ref.input, ref.args, ref.kwargs))
    return weighted_grads(reference_outputs(op, ref), inputs, weights)


def reference_outputs(op: Any, ref: Any) -> list[torch.Tensor]:
    """The differentiable outputs of the op on a reference sample, made well defined for
    gradients (OpInfo's gradcheck_wrapper and output_process_fn_grad)."""
    return differentiable(
        ref.output_process_fn_grad(op.gradcheck_wrapper(op.op, ref.input, *ref.args, **ref.kwargs))
    )


def weighted_grads(
    outputs: list[torch.Tensor], inputs: list[torch.Tensor], weights: list[torch.Tensor]
) -> tuple[Any, ...]:
    """The gradients of sum(weights * outputs) in the reference's dtype (None for an input
    the outputs do not use)."""
    return torch.autograd.grad(
        outputs,
        inputs,
        [w.to(REFERENCE_DTYPE.get(w.dtype, w.dtype)) for w in weights],
        allow_unused=True,
    )


def _half_side(radius: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A real `radius` as what widens a bracket of `like`'s values: itself, or where they are
    complex the half-side of the square box around the disc of that radius."""
    return torch.complex(radius, radius) if like.is_complex() else radius


def _square_box(
    centre: torch.Tensor, low: torch.Tensor, high: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """A complex box made square around the reference: a relative perturbation moves a
    complex input along one direction only, and the kernel's error may lie in any."""
    parts = [(high - centre).real, (high - centre).imag, (centre - low).real, (centre - low).imag]
    radius = torch.stack(parts).nan_to_num(nan=0.0).amax(0)
    corner = torch.complex(radius, radius)
    return centre - corner, centre + corner


#: The graph's roundings bound the answer at this many times their first-order sum
#: (`magnitudes`): kernels of 1-2 units of rounding, and another order of the same sums.
GRAPH_FACTOR = 2.0

#: How a failure's message names each re-check (`Rules.recheck`).
GRAPH_RECHECK = "re-checked with the roundings of its graph"
STABLE_RECHECK = "re-checked as a backward-stable kernel's answer"
OVERFLOW_RECHECK = "re-checked where its graph leaves the dtype's range"
COMPOSITE_RECHECK = "re-checked with the roundings of its composition"


def _graph_run(op: Any, ref: Any, weights: list[torch.Tensor] | None) -> Callable[[], Any]:
    """The sample's graph in float64: its forward, or with `weights` its forward and
    backward (`reference_grads`)."""
    if weights is not None:
        return functools.partial(reference_grads, op, ref, weights)
    process = ref.output_process_fn_grad

    def forward() -> Any:
        with torch.no_grad():
            return process(op(ref.input, *ref.args, **ref.kwargs))

    return forward


def _graph_overflows(run: Callable[[], Any], dtype: torch.dtype) -> bool:
    """Whether a value the graph `run` forms reaches `dtype`'s range (`_overflows`): its
    ops form their values in the dtype, so inf or NaN are then right where the exact answer
    is finite (`Rules.may_overflow`), whether or not its roundings can be measured."""
    return _overflows(measure_graph(run, sensitivity=False).largest, dtype)


def overflow_rules(
    op: Any,
    dtype: torch.dtype,
    ref: Any,
    rules: Rules,
    weights: list[torch.Tensor] | None = None,
) -> Rules | None:
    """The re-check of an answer that no other re-check judges (an op its own terms or its
    elementwise brackets judge): `rules` allowing inf and NaN where a value of the op's
    graph leaves the dtype's range though the answer does not (masked.normalize's
    backward sums -w x / n / n, which overflows float16 for a small norm); None where no
    value does, or `rules` allow it already."""
    least = least_precise(dtype, *([rules.inputs_dtype] if rules.inputs_dtype else []))
    if rules.may_overflow or not _graph_overflows(_graph_run(op, ref, weights), least):
        return None
    return dataclasses.replace(rules, may_overflow=True, recheck=OVERFLOW_RECHECK)


def graph_rules(
    op: Any,
    dtype: torch.dtype,
    ref: Any,
    rules: Rules,
    expected: Any,
    weights: list[torch.Tensor] | None = None,
    index: int | None = None,
) -> Rules | None:
    """`rules` that judge each element by its bracket alone: `expected` plus or minus
    GRAPH_FACTOR times what the roundings of the op's graph can leave there
    (`magnitudes.propagate`: the forward, or with `weights` the forward and backward, whose
    gradient `index` `expected` is), no normwise atol. The re-check of an answer the plain
    bound failed, which it replaces: a sample the plain bound passes needs no graph, and one
    it fails is held to its own graph, not to the graph widened by the normwise atol (under
    which a cancelling loss's gradient passed 5% errors); but where the graph ran a backend
    kernel's decomposition in its place (`Graph.kernels`), whose own algorithm may round
    otherwise, the normwise atol stays beside the bracket. An output the decomposition does
    not give keeps the plain bound (its bracket None). None where the graph cannot be
    measured. An elementwise op's forward is re-checked by `composite_rules` instead."""
    if is_elementwise(op):
        return composite_rules(op, dtype, ref, rules) if weights is None else None
    if rules.terms or rules.input_terms or rules.own_units:  # the op's own terms judge it
        return None
    least = least_precise(dtype, *([rules.inputs_dtype] if rules.inputs_dtype else []))
    inputs = [
        x
        for x in pytree.tree_leaves((ref.input, ref.args, ref.kwargs))
        if isinstance(x, torch.Tensor)
    ]
    run = _graph_run(op, ref, weights)
    graph = propagate(run, least, inputs, backward=weights is not None)
    if weights is None:
        found = graph.slack if graph is not None else None
    else:
        found = graph.slack[index] if graph is not None and index is not None else None
    if graph is None:  # a kernel the graph cannot see into: judged as backward stable
        found = stable_slack(op, ref, least, weights, index)
        if found is None:
            return None
        rules = dataclasses.replace(rules, recheck=STABLE_RECHECK)
        # Its roundings unmeasured, its values still count (index_reduce's prod backward
        # forms w * result before dividing by each element).
        if _graph_overflows(run, least):
            rules = dataclasses.replace(rules, may_overflow=True)
        return _bracketed(rules, expected, _as_leaves(found), normwise_too=False)
    if found is None:
        return None
    if _overflows(graph.largest, least):  # the dtype's graph may overflow on its way
        rules = dataclasses.replace(rules, may_overflow=True)
    # A graph of primitives and composites judges alone; through a backend kernel's
    # decomposition (an algorithm it stands in for: the CPU flash attention's online softmax
    # rounds otherwise) the normwise atol still adds to it.
    rules = dataclasses.replace(rules, recheck=GRAPH_RECHECK)
    return _bracketed(rules, expected, pytree.tree_leaves(found), normwise_too=bool(graph.kernels))


def composite_rules(op: Any, dtype: torch.dtype, ref: Any, rules: Rules) -> Rules | None:
    """The re-check of an elementwise op's answer that its condition bracket failed, where
    the op is a Python function that runs several of torch's operators, each rounding its
    result to the dtype: tanhshrink's x - tanh(x) cancels for small x, where tanh(x)
    rounded. Its bracket widens by unit * S, S the sum over those
    roundings of |dy / d ln v| (`roundings.measure_graph` of the forward), and the unit is
    what one such op may leave: CONDITION_EPS units of the precision it computes in, plus,
    for a 16-bit dtype, the rounding of its result to the dtype (u = eps / 2, exact for
    round to nearest). None for one of torch's operators, which owes the function's
    condition however ATen builds it (special.ndtr is 0.5 * (1 + erf(x / sqrt(2))) inside,
    whose cancellation for x < -5 is a known failure), and where the roundings cannot be
    measured."""
    if rules.bracket is None or not isinstance(getattr(op, "op", None), types.FunctionType):
        return None
    least = least_precise(dtype, *([rules.inputs_dtype] if rules.inputs_dtype else []))
    compute = ACCUMULATION_DTYPE.get(least, least)
    run = _graph_run(op, ref, None)
    found = measure_graph(lambda: tuple(pytree.tree_leaves(run())), floor=torch.finfo(least).tiny)
    lows, spec = pytree.tree_flatten(rules.bracket[0])
    highs = pytree.tree_leaves(rules.bracket[1])
    if found.ops < 2 or found.terms is None or len(found.terms) != len(lows):
        return None
    unit = CONDITION_EPS * torch.finfo(compute).eps
    if compute != least:
        unit += torch.finfo(least).eps / 2
    for i, s in enumerate(found.terms):
        if s is None or not isinstance(lows[i], torch.Tensor) or s.shape != lows[i].shape:
            continue
        slack = _half_side(unit * s, lows[i])
        lows[i], highs[i] = lows[i] - slack, highs[i] + slack
    bracket = (pytree.tree_unflatten(lows, spec), pytree.tree_unflatten(highs, spec))
    return dataclasses.replace(rules, bracket=bracket, recheck=COMPOSITE_RECHECK)


def stable_slack(
    op: Any,
    ref: Any,
    dtype: torch.dtype,
    weights: list[torch.Tensor] | None = None,
    index: int | None = None,
) -> Any:
    """What a backward-stable kernel may leave in the sample's outputs (`stability.slack`),
    or with `weights` in its gradient `index`: the map from the sample's floating tensors
    (and the weights) to them, differentiated by autograd in float64 (the outputs of an op
    without a derivative, as ldl_factor_ex, by central differences)."""
    leaves, spec = pytree.tree_flatten((ref.input, ref.args, ref.kwargs))
    where = [i for i, x in enumerate(leaves) if _floating(x)]
    wanted = [i for i in where if leaves[i].requires_grad]
    sample = copy.copy(ref)

    def rebuilt(values: Sequence[torch.Tensor]) -> Any:
        moved = list(leaves)
        for i, v in zip(where, values, strict=True):
            moved[i] = v
        sample.input, sample.args, sample.kwargs = pytree.tree_unflatten(moved, spec)
        return sample, [moved[i] for i in wanted]

    def forward(*values: torch.Tensor) -> list[Any]:
        sample, _ = rebuilt(values)
        out = sample.output_process_fn_grad(op(sample.input, *sample.args, **sample.kwargs))
        return [y if _floating(y) else None for y in pytree.tree_leaves(out)]

    def backward(*values: torch.Tensor) -> list[Any]:
        sample, inputs = rebuilt(values[: len(where)])
        outputs = reference_outputs(op, sample)
        grads = torch.autograd.grad(
            outputs, inputs, list(values[len(where) :]), create_graph=True, allow_unused=True
        )
        return [grads[index]]

    tensors = [leaves[i].detach() for i in where]
    if weights is None:
        return stability.slack(forward, tensors, dtype, differences=True)
    if index is None:
        return None
    found = stability.slack(backward, [*tensors, *(w.detach() for w in weights)], dtype)
    return None if found is None else found[0]


def _as_leaves(found: Any) -> list[Any]:
    return list(found) if isinstance(found, (list, tuple)) else [found]


def _floating(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex())


def _bracketed(
    rules: Rules, expected: Any, slacks: list[Any], *, normwise_too: bool
) -> Rules | None:
    """`rules` with the bracket `expected` +- GRAPH_FACTOR times the slack of each of its
    leaves (None keeps the plain bound there), judged alone unless `normwise_too`."""
    values, spec = pytree.tree_flatten(expected)
    if len(slacks) != len(values):
        return None
    lows: list[torch.Tensor | None] = []
    highs: list[torch.Tensor | None] = []
    for value, slack in zip(values, slacks, strict=True):
        # An output the decomposition does not give (the CPU flash attention's logsumexp,
        # where its decomposition returns the weights) keeps the plain bound (no bracket).
        if (
            not isinstance(value, torch.Tensor)
            or not isinstance(slack, torch.Tensor)
            or slack.shape != value.shape
        ):
            lows.append(None)
            highs.append(None)
            continue
        width = _half_side(GRAPH_FACTOR * slack.to(value.real.dtype), value)
        lows.append((value - width).detach())
        highs.append((value + width).detach())
    if all(x is None for x in lows):
        return None
    low, high = pytree.tree_unflatten(lows, spec), pytree.tree_unflatten(highs, spec)
    if rules.bracket is not None and isinstance(low, torch.Tensor):
        if not isinstance(rules.bracket[0], torch.Tensor) or rules.bracket[0].shape != low.shape:
            return None
        low = torch.fmin(low, rules.bracket[0].to(low.dtype))
        high = torch.fmax(high, rules.bracket[1].to(high.dtype))
    return dataclasses.replace(rules, bracket=(low, high), elementwise=not normwise_too)


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
