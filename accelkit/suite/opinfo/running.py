"""Running a case: the op's samples on the device against the float64 reference.

`run_case` runs a planned case (`planning.OpinfoCase`): `run_forward` evaluates each sample
on the device and the same sample, converted exactly by `reference.to_reference`, in
float64 (complex128) on the CPU, and compares the outputs (and the in-place variant's, where
the op has one); `run_grad` compares the gradients of a random weighted sum of the outputs.
Each sample gets its bounds from `sample_rules` first (samples with no digits are left out),
a mismatch of a step function is re-checked against its bracket (`discontinuity`), and
`EIGEN_OPS` are matched as eigen-decompositions (`eigen`). A failure raises `Mismatch` (an
AssertionError) naming the op, the sample and the worst element.

Each sample is made right after torch is seeded with `sample_seed(case seed, index)`, so a
sample depends on the case's seed and its index only, not on what earlier samples computed:
`accelkit repro` rebuilds sample k of a case from the two numbers recorded with its failure
(`accelkit.suite.session.failures` carries them on the error), and runs `check_forward_sample` or
`check_grad_sample` on it, the same code as the case.
"""

from __future__ import annotations

import cmath
import dataclasses
import functools
import itertools
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils import _pytree as pytree

from accelkit.suite.numerics.reference import TOLERANCES, to_reference
from accelkit.suite.opinfo import peer
from accelkit.suite.opinfo.comparison import Mismatch, compare
from accelkit.suite.opinfo.discontinuity import (
    cumsum,
    perturbed,
    reference_bracket,
    rounded_exponent_grads,
)
from accelkit.suite.opinfo.draws import same_draws
from accelkit.suite.opinfo.eigen import EIGEN_OPS, align_eigen, check_eigen
from accelkit.suite.opinfo.inplace import check_inplace, fits_in_place
from accelkit.suite.opinfo.layouts import (
    assert_selection_exact,
    elements,
    is_selection,
    unchanged,
    variants,
)
from accelkit.suite.opinfo.op_db import DTYPES
from accelkit.suite.opinfo.planning import OpinfoCase
from accelkit.suite.opinfo.sample_measures import differentiable
from accelkit.suite.opinfo.sample_rules import (
    NoDigits,
    graph_rules,
    overflow_rules,
    reaches,
    reference_grads,
    reference_outputs,
    sample_rules,
    squared_rules,
    squares,
    weighted_grads,
)
from accelkit.suite.opinfo.sample_tables import DISCONTINUOUS
from accelkit.suite.opinfo.ties import indices_as_values
from accelkit.suite.opinfo.tolerances import (
    Rules,
    least_precise,
    max_magnitude,
    overflow_threshold,
)
from accelkit.suite.session.failures import add_failure_info
from accelkit.suite.session.outputs import inputs_seen


def sample_seed(case_seed: int, index: int) -> int:
    """The seed torch gets right before sample `index` of a case is made."""
    return (case_seed + index) % (2**31)


def layout_seed(case_seed: int, index: int, layout: str) -> int:
    """The seed torch gets right before sample `index` is checked in `layout`: what that
    check draws (a gradient's random output weights, an op's own draws) depends on the case,
    the sample and the layout alone, not on the layouts checked before it, so that a
    reproducer rebuilds it from those three."""
    return zlib.crc32(f"{case_seed}/{index}/{layout}".encode()) % (2**31)


def run_case(
    op: Any,
    case: OpinfoCase,
    device: str,
    limit: int | None,
    seed: int | None = None,
    max_elements: int | None = None,
    device_peer: peer.DevicePeer | None = None,
) -> int:
    """The case's first `limit` samples (all for None), forward or gradient, on `device`;
    returns how many ran (0: the op has none for the case here). `seed`: the case's seed
    (default: the one torch was last seeded with, as the suite seeds every case).
    `max_elements`: a noncontiguous case leaves out samples with more elements.
    `device_peer`: the CPU as the device's peer (`peer.device_peer`), which records the
    samples it passed."""
    with peer.judging(device_peer):
        return _run_case(op, case, device, limit, seed, max_elements)


def _run_case(
    op: Any,
    case: OpinfoCase,
    device: str,
    limit: int | None,
    seed: int | None,
    max_elements: int | None,
) -> int:
    dtype = DTYPES[case.dtype]
    if case.noncontiguous:
        return run_layouts(
            op, case.op, device, dtype, limit, seed, grad=case.grad, max_elements=max_elements
        )
    if case.grad:
        return run_grad(op, case.op, device, dtype, limit, seed)
    return run_forward(op, case.op, device, dtype, limit, seed)


def run_layouts(
    op: Any,
    op_name: str,
    device: str,
    dtype: torch.dtype,
    limit: int | None,
    seed: int | None = None,
    *,
    grad: bool = False,
    max_elements: int | None = None,
) -> int:
    """Every sample in every layout that changes it (`layouts.variants`), forward or
    gradient, each against the reference of its own values; returns the variants compared.
    `limit`: the first `limit` samples that some layout changes (an op's first samples are
    often scalars, which no layout changes: sum's first three). Samples of more than
    `max_elements` elements (None: no limit) are left out. Each check starts from its own
    seed (`layout_seed`)."""
    case_seed = torch.initial_seed() if seed is None else seed
    count = 0
    changed = 0
    for index, sample in seeded_samples(op, device, dtype, None, case_seed, requires_grad=grad):
        if limit is not None and changed >= limit:
            break
        if max_elements is not None and elements(sample) > max_elements:
            continue
        made_any = False
        for layout, made in variants(op, sample, grad):
            made_any = True
            torch.manual_seed(layout_seed(case_seed, index, layout))
            try:
                count += check_layout_sample(op, op_name, device, dtype, index, made, layout, grad)
            except AssertionError as error:
                add_failure_info(error, sample=index, layout=layout)
                raise
        changed += made_any
    return count


def check_layout_sample(
    op: Any,
    op_name: str,
    device: str,
    dtype: torch.dtype,
    index: int,
    made: Any,
    layout: str,
    grad: bool = False,
) -> bool:
    """One sample in `layout` (`made`: `layouts.variant` of it): its gradients, or its
    outputs, against the reference; an op that only selects values on it (every value of
    its answer on the same values laid out contiguously is one of its inputs') must also
    give that answer bit for bit."""
    if grad:
        return check_grad_sample(op, op_name, device, dtype, index, made, layout)
    if not check_forward_sample(op, op_name, device, dtype, index, made, layout):
        return False
    if op_name in EIGEN_OPS:
        return True
    dense = pytree.tree_map(_contiguous_leaf, (made.input, made.args, made.kwargs))
    process = made.output_process_fn_grad
    # An op that writes its inputs (embedding's max_norm renormalises rows in place)
    # computed what it wrote: no selection, however its answer reads.
    inputs = pytree.tree_map(_copy, dense)
    with same_draws(op_name, dtype, device), torch.no_grad():
        contiguous = process(op(dense[0], *dense[1], **dense[2]))
        if is_selection(inputs, contiguous) and unchanged(inputs, dense):
            laid_out = pytree.tree_map(_copy, (made.input, made.args, made.kwargs))
            actual = process(_call(op, made))
            label = _sample_label(index, made, layout)
            if unchanged(laid_out, (made.input, made.args, made.kwargs)):
                assert_selection_exact(actual, contiguous, f"{op_name} {label}")
    return True


def _copy(x: Any) -> Any:
    return x.clone() if isinstance(x, torch.Tensor) else x


def reference_sample(
    sample: Any, device: str, *, grad: bool = False, contiguous: bool = False
) -> Any:
    """`sample` in the reference's dtypes on the CPU; with `contiguous`, its tensors laid out
    contiguously (a layout variant's reference: the same values, the reference's fastest
    kernels)."""
    from torch.testing._internal.opinfo.core import SampleInput

    def convert(value: Any) -> Any:
        converted = to_reference(value, device, grad=grad)
        if not contiguous:
            return converted
        return pytree.tree_map(_contiguous_leaf, converted)

    return SampleInput(  # type: ignore[no-untyped-call]
        convert(sample.input),
        args=convert(sample.args),
        kwargs=convert(sample.kwargs),
        output_process_fn_grad=sample.output_process_fn_grad,
        broadcasts_input=sample.broadcasts_input,
        name=sample.name,
    )


def seeded_samples(
    op: Any,
    device: str,
    dtype: torch.dtype,
    limit: int | None,
    seed: int | None = None,
    requires_grad: bool = False,
) -> Iterator[tuple[int, Any]]:
    """(index, sample) of the op's first `limit` samples (all for None), torch seeded with
    `sample_seed(seed, index)` before each is made (`seed` None: torch's current seed)."""
    # The op's own sample generator, without OpInfo.sample_inputs' wrapper: that wrapper
    # reseeds with a fixed seed before each sample (the suite's per-case `--seed` must decide
    # the inputs, so that runs differ and replay) and calls inspect.stack() to find the test
    # function (~0.1 s per call under pytest's deep stacks: 95% of the suite's time).
    case_seed = torch.initial_seed() if seed is None else seed
    samples: Iterator[Any] = iter(op.sample_inputs_func(op, device, dtype, requires_grad))
    for index in itertools.count() if limit is None else range(limit):
        torch.manual_seed(sample_seed(case_seed, index))
        try:
            sample = next(samples)
        except StopIteration:
            return
        yield index, sample


def _contiguous_leaf(x: Any) -> Any:
    """A strided tensor laid out contiguously, still a leaf that needs a gradient if it did."""
    if not isinstance(x, torch.Tensor) or x.layout != torch.strided or x.is_contiguous():
        return x
    return x.detach().contiguous().requires_grad_(x.requires_grad)


def _call(fn: Callable[..., Any], sample: Any) -> Any:
    return fn(sample.input, *sample.args, **sample.kwargs)


def _sample_label(index: int, sample: Any, layout: str | None = None) -> str:
    summary = sample.summary() if hasattr(sample, "summary") else repr(sample)
    summary = " ".join(str(summary).split())
    where = f" in layout {layout}" if layout else ""
    return f"sample {index}{where} ({summary[:300]})"


def run_forward(
    op: Any,
    op_name: str,
    device: str,
    dtype: torch.dtype,
    limit: int | None,
    seed: int | None = None,
) -> int:
    """Every sample on the device against the float64 CPU reference; returns samples run."""
    count = 0
    for index, sample in seeded_samples(op, device, dtype, limit, seed):
        try:
            count += check_forward_sample(op, op_name, device, dtype, index, sample)
        except AssertionError as error:
            add_failure_info(error, sample=index)
            raise
    return count


def check_forward_sample(
    op: Any,
    op_name: str,
    device: str,
    dtype: torch.dtype,
    index: int,
    sample: Any,
    layout: str | None = None,
) -> bool:
    """One sample's outputs (and in-place variant) against the reference; False if the
    sample has no digits to compare (`NoDigits`); a failure raises AssertionError.
    `layout`: the layout the sample was put in (`layouts`), for the messages."""
    with same_draws(op_name, dtype, device):
        return _check_forward_sample(op, op_name, device, dtype, index, sample, layout)


def _check_forward_sample(
    op: Any,
    op_name: str,
    device: str,
    dtype: torch.dtype,
    index: int,
    sample: Any,
    layout: str | None,
) -> bool:
    inputs_seen(sample.input, sample.args, sample.kwargs)
    label = _sample_label(index, sample, layout)
    ref = reference_sample(sample, device, contiguous=layout is not None)
    process = sample.output_process_fn_grad
    with torch.no_grad():
        raw = _call(op, sample)
        expected_raw = _call(op, ref)
    if op_name in EIGEN_OPS:  # no in-place variant
        check_eigen(raw, expected_raw, ref.input, dtype, f"{op_name} {label}")
        return True
    with torch.no_grad():
        actual = process(raw)
        expected = process(expected_raw)
    magnitude = max_magnitude((ref.input, ref.args, ref.kwargs))
    what = f"{op_name} {label}"
    actual = indices_as_values(op_name, ref, actual, what)
    expected = indices_as_values(op_name, ref, expected, what)
    try:
        base = Rules(inputs_dtype=inputs_dtype(sample), device_type=_device_type(device))
        rules = sample_rules(op, op_name, dtype, ref, base)
    except NoDigits:
        return False
    squared = squared_rules(op_name, ref, rules)
    if squared is not None:
        actual, expected, rules = squares(actual), squares(expected), squared
        what += " (compared as squares)"
    try:
        compare_with_steps(op, op_name, dtype, ref, actual, expected, what, magnitude, rules)
    except AssertionError as error:  # the CPU at the same dtype may be as far (`peer`)

        def mine() -> Any:
            with torch.no_grad():
                raw = _call(op, peer.peer_sample(sample, device))
            out = indices_as_values(op_name, ref, process(raw), what)
            return squares(out) if squared is not None else out

        peer.rescue(
            error,
            peer.label(index, layout),
            actual,
            expected,
            dtype,
            rules.elementwise,
            mine,
            lambda answer: compare_with_steps(
                op, op_name, dtype, ref, answer, expected, what, magnitude, rules
            ),
        )
    inplace = op.inplace_variant
    if inplace is not None and fits_in_place(raw, sample.input):
        where = (device, peer.label(index, layout))
        check_inplace(inplace, op_name, sample, ref, dtype, label, magnitude, rules, where)
    return True


def compare_with_steps(
    op: Any,
    op_name: str,
    dtype: torch.dtype,
    ref: Any,
    actual: Any,
    expected: Any,
    what: str,
    magnitude: float,
    rules: Rules,
) -> None:
    """`compare`, and for a step function (DISCONTINUOUS) the re-check against the
    reference's range over the inputs' rounding (cumulatively, for a cumulative step), else
    the re-check with the roundings of the op's graph (`sample_rules.graph_rules`)."""
    try:
        compare(actual, expected, dtype, op_name, what, magnitude, rules)
    except AssertionError:
        step = DISCONTINUOUS.get(op_name)
        if step is None:
            graph = graph_rules(op, dtype, ref, rules, expected)
            graph = graph or overflow_rules(op, dtype, ref, rules)
            if graph is None:
                raise
            compare(actual, expected, dtype, op_name, f"{what} ({graph.recheck})", magnitude, graph)
            return
        process = ref.output_process_fn_grad
        with torch.no_grad():
            nearby = perturbed(
                ref,
                dtype,
                step.mode,
                pin_range=step.cumulative,
                op_name=op_name,
                factor=step.factor,
            )
            variants = [process(_call(op, p)) for p in nearby]
        if step.cumulative:
            actual, expected = cumsum(actual), cumsum(expected)
            variants = [cumsum(v) for v in variants]
            what += " (cumulative)"
        bracket = reference_bracket(expected, variants)
        compare(
            actual,
            expected,
            dtype,
            op_name,
            what,
            magnitude,
            dataclasses.replace(rules, bracket=bracket),
        )


def _device_type(device: str) -> str:
    """The torch device type of a device ("cuda:1" -> "cuda")."""
    return torch.device(device).type


def inputs_dtype(sample: Any) -> torch.dtype | None:
    """The least precise floating dtype among the sample's tensors (None if none)."""
    leaves = pytree.tree_leaves((sample.input, sample.args, sample.kwargs))
    dtypes = {
        x.dtype
        for x in leaves
        if isinstance(x, torch.Tensor)
        and (x.is_floating_point() or x.is_complex())
        and x.dtype in TOLERANCES
    }
    return least_precise(*dtypes) if dtypes else None


def all_finite(value: Any) -> bool:
    """Whether every floating value in `value` (tensors, Python numbers) is finite."""
    for x in pytree.tree_leaves(value):
        if isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex()):
            dense = x.detach().to_dense() if x.layout != torch.strided else x.detach()
            if not bool(torch.isfinite(dense).all()):
                return False
        elif isinstance(x, (float, complex)) and not cmath.isfinite(x):
            return False
    return True


def undefined_as_reference(grad: torch.Tensor, ref_grad: torch.Tensor) -> torch.Tensor:
    """`grad` with the reference's value wherever the float64 reference gradient is NaN: the
    caller has checked that every input and every forward output is finite, so such a NaN
    is the chain rule meeting 0 * inf or 0 / 0 at a point where the op is not differentiable
    (std = sqrt(var) where all the reduced elements are equal: var = 0, and d std / d x =
    (x - mean) / ((n - 1) std) = 0 / 0). The gradient is undefined there, and what an
    answer in the case's dtype gives depends on rounding (a float32 mean of equal values
    that is not one of them makes var 1e-13 and the gradient finite): any value is right.
    Only those elements are left out; the others are compared as before, and a NaN that an
    input or an output carries into the gradient must still be matched (`all_finite`)."""
    if grad.layout != torch.strided or ref_grad.layout != torch.strided:
        return grad
    undefined = ref_grad.isnan()
    if grad.shape != ref_grad.shape or not bool(undefined.any()):
        return grad
    reference = ref_grad.detach().to(device=grad.device, dtype=grad.dtype)
    return torch.where(undefined.to(grad.device), reference, grad.detach())


def run_grad(
    op: Any,
    op_name: str,
    device: str,
    dtype: torch.dtype,
    limit: int | None,
    seed: int | None = None,
) -> int:
    """Backward on the device against backward in float64 on the CPU: the gradient of a
    random weighted sum of the outputs (a plain sum would miss errors that cancel, such as
    softmax's gradient, which sums to zero), with respect to every input that needs one.
    EIGEN_OPS' outputs are first put in the reference's eigenpair order (`align_eigen`)."""
    count = 0
    for index, sample in seeded_samples(op, device, dtype, limit, seed, requires_grad=True):
        try:
            count += check_grad_sample(op, op_name, device, dtype, index, sample)
        except AssertionError as error:
            add_failure_info(error, sample=index)
            raise
    return count


def check_grad_sample(
    op: Any,
    op_name: str,
    device: str,
    dtype: torch.dtype,
    index: int,
    sample: Any,
    layout: str | None = None,
) -> bool:
    """One sample's gradients against the reference's (as `run_grad`); False if the sample
    has nothing to compare; a failure raises AssertionError."""
    with same_draws(op_name, dtype, device):
        return _check_grad_sample(op, op_name, device, dtype, index, sample, layout)


def _check_grad_sample(
    op: Any,
    op_name: str,
    device: str,
    dtype: torch.dtype,
    index: int,
    sample: Any,
    layout: str | None,
) -> bool:
    inputs_seen(sample.input, sample.args, sample.kwargs)
    label = _sample_label(index, sample, layout)
    ref = reference_sample(sample, device, grad=True, contiguous=layout is not None)
    inputs = differentiable((sample.input, sample.args, sample.kwargs))
    ref_inputs = differentiable((ref.input, ref.args, ref.kwargs))
    if not inputs:
        return False
    process = sample.output_process_fn_grad
    # OpInfo's gradcheck_wrapper makes the function well defined for gradients
    # (e.g. symmetrises the input of eigh); output_process_fn_grad does the same for
    # outputs that are unique only up to sign or phase (svd, eig).
    wrap = op.gradcheck_wrapper
    outputs = differentiable(process(wrap(op.op, sample.input, *sample.args, **sample.kwargs)))
    ref_outputs = reference_outputs(op, ref)  # the same wrap and process, on the reference
    if len(outputs) != len(ref_outputs):
        raise Mismatch(
            f"{op_name} {label}: {len(outputs)} differentiable outputs, "
            f"reference has {len(ref_outputs)}"
        )
    if not outputs:
        return False
    if op_name in EIGEN_OPS:  # each weight must multiply the same eigenpair on both sides
        outputs = align_eigen(outputs, ref_outputs, ref.input, dtype, f"{op_name} {label}")
    magnitude = max_magnitude((ref_inputs, ref_outputs))
    weights = [torch.randn(o.shape, dtype=o.dtype, device="cpu") for o in outputs]
    grads = torch.autograd.grad(
        outputs,
        inputs,
        [w.to(o.device) for w, o in zip(weights, outputs, strict=True)],
        allow_unused=True,
    )
    ref_grads = weighted_grads(ref_outputs, ref_inputs, weights)
    threshold = overflow_threshold(dtype)
    rules = Rules(
        inputs_dtype=inputs_dtype(sample),
        may_overflow=any(reaches(o, threshold) for o in ref_outputs),
        device_type=_device_type(device),
    )
    variants: list[tuple[Any, ...]] | None = None
    defined = all_finite((ref.input, ref.args, ref.kwargs)) and all_finite(ref_outputs)
    # The CPU's gradients at the same dtype (`peer`), computed where one is needed.
    mine = peer.lazy_grads(op, op_name, sample, device, dtype, ref, ref_outputs, weights)
    grad_name = f"{op_name}/grad"
    try:
        rules = sample_rules(op, grad_name, dtype, ref, rules, weights)
    except NoDigits:
        return False
    for i, (g, rg) in enumerate(zip(grads, ref_grads, strict=True)):
        if (g is None) != (rg is None):
            # An unused input has no gradient; the reference must agree.
            g = torch.zeros_like(inputs[i]) if g is None else g
            rg = torch.zeros_like(ref_inputs[i]) if rg is None else rg
        if g is None:
            continue
        if defined:
            g = undefined_as_reference(g, rg)
        what = f"{op_name} grad of input {i}, {label}"
        if rules.input_terms:
            rules = dataclasses.replace(rules, terms=rules.input_terms[i])
        own = rules
        if rules.input_brackets and rules.input_brackets[i] is not None:
            own = dataclasses.replace(rules, elementwise=True, bracket=rules.input_brackets[i])
        try:
            try:
                compare(g, rg, dtype, grad_name, what, magnitude, own)
            except AssertionError:
                step = DISCONTINUOUS.get(grad_name)
                if step is None:
                    graph = graph_rules(op, dtype, ref, own, rg, weights, i)
                    graph = graph or overflow_rules(op, dtype, ref, own, weights)
                    if graph is None:
                        raise
                    compare(g, rg, dtype, grad_name, f"{what} ({graph.recheck})", magnitude, graph)
                    continue
                if variants is None:
                    variants = [
                        reference_grads(op, p, weights)
                        for p in perturbed(
                            ref, dtype, step.mode, op_name=op_name, factor=step.factor
                        )
                    ]
                    if step.mode == "exponent":  # also e * b ** fl(e - 1), e unrounded
                        kernel = rounded_exponent_grads(ref, dtype, op_name, weights)
                        variants += [kernel] if kernel is not None else []
                bracket = reference_bracket(rg, [v[i] for v in variants if v[i] is not None])
                if own.bracket is not None:  # the step's range joins the element's own
                    bracket = (
                        torch.fmin(bracket[0], own.bracket[0]),
                        torch.fmax(bracket[1], own.bracket[1]),
                    )
                compare(
                    g,
                    rg,
                    dtype,
                    grad_name,
                    what,
                    magnitude,
                    dataclasses.replace(own, bracket=bracket),
                )
        except AssertionError as error:  # the CPU at the same dtype may be as far (`peer`)
            peer.rescue(
                error,
                f"{peer.label(index, layout)} (grad of input {i})",
                g,
                rg,
                dtype,
                own.elementwise,
                functools.partial(mine, i),
                functools.partial(
                    compare,
                    expected=rg,
                    case_dtype=dtype,
                    op_name=grad_name,
                    what=what,
                    magnitude=magnitude,
                    rules=own,
                ),
            )
    return True
