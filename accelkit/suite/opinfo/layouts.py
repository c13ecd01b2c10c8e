"""The layouts a sample also runs in: its values in other strides, other kernel paths.

OpInfo samples are contiguous. A GPU (and often the CPU) takes other kernels for strided
inputs: a reduction over a transposed matrix walks memory across the reduced dimension, an
elementwise kernel with a stride-0 operand takes the broadcast path, a convolution in
channels_last reads NHWC. PyTorch's `test_noncontiguous_samples` runs every sample through
`noncontiguous_like`; a `noncontiguous` case here (`conformance/opinfo/<op>/<dtype>/
noncontiguous`, and `.../grad/noncontiguous`) runs each of the case's samples in every
layout that changes one of its tensors:

- `strided`: every tensor with a dimension is a view taking every second element of a
  buffer twice its size, the elements between them NaN (as PyTorch's `noncontiguous_like`):
  a kernel that reads the buffer as if it were dense reads NaN;
- `transposed`: every tensor with two or more dimensions of size > 1 is column-major (its
  last two dimensions' strides swapped), the same values;
- `channels_last`: 4-D and 5-D tensors in `channels_last` / `channels_last_3d`, the same
  values;
- `expanded`: for elementwise ops and reductions only, every floating tensor with a first
  dimension of size > 1 is its first row expanded along that dimension (stride 0). The
  values change (every row is the first row), so it is judged against the reference of its
  own values, as every variant is. Other ops' samples carry structure (a positive definite
  matrix, sorted keys, a permutation) that repeated rows would break.

Each variant is judged like the contiguous sample, against the float64 reference of the
same values (`running.check_forward_sample`, `check_grad_sample`). An op that does no
arithmetic on a sample (every value of its answer is one of its inputs' values: views,
copies, indexing, selection) must give the contiguous answer bit for bit
(`assert_selection_exact`). A variant is rebuilt from the case's seed, the sample's index
and the layout's name (`variant`), which `accelkit repro` does from the failure's record.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils import _pytree as pytree

from accelkit.suite.opinfo.comparison import Mismatch

LAYOUTS = ("strided", "transposed", "channels_last", "expanded")


def _strided(t: torch.Tensor) -> torch.Tensor | None:
    if t.dim() == 0 or t.numel() == 0:
        return None
    if t.is_floating_point() or t.is_complex():
        gap: Any = math.nan
    elif t.dtype == torch.bool:
        gap = True
    else:
        gap = 12
    buffer = t.new_empty((*t.shape, 2))
    buffer[..., 0] = gap
    buffer[..., 1] = t
    return buffer[..., 1]


def _transposed(t: torch.Tensor) -> torch.Tensor | None:
    if t.dim() < 2 or t.shape[-1] < 2 or t.shape[-2] < 2:
        return None
    return t.transpose(-1, -2).contiguous().transpose(-1, -2)


def _channels_last(t: torch.Tensor) -> torch.Tensor | None:
    formats = {4: torch.channels_last, 5: torch.channels_last_3d}
    memory_format = formats.get(t.dim())
    if memory_format is None or t.shape[1] < 2 or math.prod(t.shape[2:]) < 2:
        return None
    return t.contiguous(memory_format=memory_format)


def _expanded(t: torch.Tensor) -> torch.Tensor | None:
    if not (t.is_floating_point() or t.is_complex()) or t.dim() == 0 or t.shape[0] < 2:
        return None
    return t[:1].clone().expand(t.shape)


_TRANSFORMS: dict[str, Callable[[torch.Tensor], torch.Tensor | None]] = {
    "strided": _strided,
    "transposed": _transposed,
    "channels_last": _channels_last,
    "expanded": _expanded,
}


def _broadcasting(op: Any) -> bool:
    """Elementwise ops and reductions: the ops whose samples a stride-0 operand keeps valid."""
    from torch.testing._internal.opinfo.core import (
        BinaryUfuncInfo,
        ReductionOpInfo,
        UnaryUfuncInfo,
    )

    return isinstance(op, (UnaryUfuncInfo, BinaryUfuncInfo, ReductionOpInfo))


#: Ops without a derivative where the elements they reduce are all equal: std = sqrt(var) at
#: var = 0 (d sqrt(v) / dv is infinite there; float64 gives 0 / 0, or 0 where torch masks an
#: exactly zero std, while a float32 mean's rounding leaves std ~1e-7 and a finite gradient
#: of any size: std.unbiased at seed 0, 0.0126 against 0). The expanded layout makes every
#: reduced element equal, so their gradients are not tried in it; their forwards are.
NOT_DIFFERENTIABLE_AT_EQUAL_ELEMENTS = frozenset(
    {"std", "std.unbiased", "std_mean", "std_mean.unbiased", "masked.std"}
)


def _name(op: Any) -> str:
    variant = getattr(op, "variant_test_name", "")
    return f"{op.name}.{variant}" if variant else str(op.name)


def applies(op: Any, layout: str, grad: bool = False) -> bool:
    """Whether `layout` is tried on `op`'s samples (gradients with `grad`) at all."""
    if layout != "expanded":
        return True
    if grad and _name(op) in NOT_DIFFERENTIABLE_AT_EQUAL_ELEMENTS:
        return False
    return _broadcasting(op)


def variant(sample: Any, layout: str) -> Any | None:
    """`sample` with its tensors in `layout` (None: no tensor of it changes). A tensor that
    needs a gradient gives a leaf in the new layout that needs one."""
    transform = _TRANSFORMS[layout]
    changed = False

    def convert(x: Any) -> Any:
        nonlocal changed
        if not isinstance(x, torch.Tensor) or x.layout != torch.strided:
            return x  # sparse and other layouts have no strides to change
        with torch.no_grad():
            moved = transform(x.detach())
        if moved is None:
            return x
        changed = True
        return moved.detach().requires_grad_(x.requires_grad)

    from torch.testing._internal.opinfo.core import SampleInput

    made = SampleInput(  # type: ignore[no-untyped-call]
        pytree.tree_map(convert, sample.input),
        args=pytree.tree_map(convert, sample.args),
        kwargs=pytree.tree_map(convert, sample.kwargs),
        output_process_fn_grad=sample.output_process_fn_grad,
        broadcasts_input=sample.broadcasts_input,
        name=sample.name,
    )
    return made if changed else None


def variants(op: Any, sample: Any, grad: bool = False) -> Iterator[tuple[str, Any]]:
    """(layout, variant) for every layout that changes one of `sample`'s tensors (`grad`: for
    its gradients)."""
    for layout in LAYOUTS:
        if not applies(op, layout, grad):
            continue
        made = variant(sample, layout)
        if made is not None:
            yield layout, made


def elements(sample: Any) -> int:
    """How many elements the sample's tensors hold together."""
    leaves = pytree.tree_leaves((sample.input, sample.args, sample.kwargs))
    return sum(x.numel() for x in leaves if isinstance(x, torch.Tensor))


def _bits(values: torch.Tensor) -> torch.Tensor:
    """The float64 (complex128: both parts) values' bit patterns, NaNs as one pattern."""
    if values.is_complex():
        values = torch.view_as_real(values.resolve_conj().resolve_neg())
    values = values.detach().reshape(-1).to(device="cpu", dtype=torch.float64)
    values = torch.where(values.isnan(), torch.full_like(values, math.nan), values)
    return values.view(torch.int64)


_ZERO = int(torch.tensor(0.0, dtype=torch.float64).view(torch.int64))
_NEGATIVE_ZERO = int(torch.tensor(-0.0, dtype=torch.float64).view(torch.int64))


def _floating(value: Any) -> list[torch.Tensor]:
    """The strided floating tensors of `value` (a sparse tensor's values are not compared)."""
    return [
        x
        for x in pytree.tree_leaves(value)
        if isinstance(x, torch.Tensor)
        and x.layout == torch.strided
        and (x.is_floating_point() or x.is_complex())
    ]


def is_selection(inputs: Any, answer: Any) -> bool:
    """Whether every nonzero floating value of `answer` is bit for bit one of the floating
    values of `inputs` (NaNs as one value), and it has one: the op only moved, copied or
    selected values. Zeros are no evidence: a computed answer is often one (a product with a
    zero factor, in whichever sign its order of multiplications gives)."""
    outputs = _floating(answer)
    inputs = _floating(inputs)
    if not outputs or not inputs:
        return False
    present = torch.cat([_bits(x) for x in inputs])
    answers = [_bits(y) for y in outputs if y.numel()]
    answers = [y[(y != _ZERO) & (y != _NEGATIVE_ZERO)] for y in answers]
    answers = [y for y in answers if y.numel()]
    if not answers:
        return False
    # A few values first: most ops compute new values, and a handful against every input
    # is a linear scan, where the whole answer sorts the inputs.
    probes = [y[:: max(1, y.numel() // 8)][:8] for y in answers]
    if not all(bool(torch.isin(probe, present).all()) for probe in probes):
        return False
    return all(bool(torch.isin(y, present).all()) for y in answers)


def unchanged(before: Any, after: Any) -> bool:
    """Whether the floating tensors of `after` hold `before`'s values bit for bit: the op
    did not write its inputs (embedding's max_norm renormalises the weight's rows it reads,
    in place: what it computed there is no selection)."""
    old, new = _floating(before), _floating(after)
    return len(old) == len(new) and all(
        a.shape == b.shape and torch.equal(_bits(a), _bits(b))
        for a, b in zip(old, new, strict=True)
    )


def assert_selection_exact(actual: Any, contiguous: Any, what: str) -> None:
    """A variant's answer is the contiguous sample's, bit for bit (NaNs equal)."""
    got, want = _floating(actual), _floating(contiguous)
    if len(got) != len(want):
        raise Mismatch(f"{what}: {len(got)} floating outputs, the contiguous sample {len(want)}")
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if g.shape != w.shape:
            raise Mismatch(f"{what}: output {i} has shape {tuple(g.shape)}, contiguous {w.shape}")
        # an element differs where any of its parts does (a complex one has two)
        if not g.numel():
            continue
        parts = (_bits(g.cpu()) != _bits(w.cpu())).reshape(g.numel(), -1)
        differ = parts.any(dim=1).nonzero().reshape(-1)
        if differ.numel():
            at = int(differ[0])
            flat_g, flat_w = g.detach().reshape(-1), w.detach().reshape(-1)
            raise Mismatch(
                f"{what}: the op only selects values here, so every layout must give the "
                f"contiguous answer exactly; output {i} differs in {differ.numel()} of "
                f"{g.numel()} elements, first at flat index {at}: {flat_g[at].item()!r} "
                f"where the contiguous sample gave {flat_w[at].item()!r}"
            )
