"""What a kernel's roundings can leave in each output element, from the op's own graph.

One rule per primitive, not per op (issue 45: bounds computed, not written per op). The
reference runs in float64 under `_Propagate`, a dispatch mode that carries beside every
floating tensor e, a first-order bound on the error the dtype d's roundings leave in each of
its elements, from the inputs (e = 0: the reference reads the same rounded values):

- an aten op rounds its result to d: its own rounding adds u(d) * |y| (u = eps / 2);
- add, sub: e_a + |alpha| e_b; mul: |b| e_a + |a| e_b; div: e_a / |b| + |a / b**2| e_b;
- every other pointwise op (torch's `pointwise` tag: exp, log, tanh, sqrt, pow, addcdiv,
  ...): sum_i |df/dx_i| e_i, the slope by a central difference in float64;
- what only moves or selects values (views, copies, cat, where, indexing, padding, flip,
  repeat; max and sort take the largest e of their input, clamp and maximum each element's
  own): the same op on e, a fill value (a Scalar, integer or not) exact; random draws are
  exact too (the answer's are the same, `draws`), and so are factories (ones_like) and
  what an op makes of integers or a mask alone (a masked reduction's count, converted);
- sums of terms with positive weights (sum, mean, cumsum, pooling by average, their
  backwards): the same op on e, plus the sum's own rounding sqrt(K) * u(acc) * the same op
  on |x| (K terms an element, acc the precision kernels accumulate in,
  `reference.ACCUMULATION_DTYPE`); a scatter (index_put, index_add, scatter_add) keeps its
  partial sums in the destination, in d: u(d) * the op on |x|; var (and var_mean, which
  layer_norm and the batch norms decompose into) rounds its mean and deviations in d;
- products of K factors (prod, cumprod): sum_i |prod_{j != i} x_j| e_i, plus (K - 1) u(d)
  |y|: each multiply rounds the running product, kept in d (the CPU's 16-bit prod does);
- products summed (mm, bmm, addmm, baddbmm, mv, dot, convolution and its backward):
  op(e_a, |b|) + op(|a|, e_b) + sqrt(K) * u(acc) * op(|a|, |b|), with complex operands
  |Re| + |Im| for |.| and twice the roundings (a complex product is three or four real
  ones: Gauss's trick cancels (Re a + Im a)(Re b + Im b));
- a loss that reduces (mean or sum, one output): its losses (reduction none) rounded to d,
  then their mean or sum under the sums' rule: kernels reduce the losses they formed in d
  (the CPU's 16-bit binary_cross_entropy does);
- any other op runs its decomposition (`torch._decomp`, else its CompositeImplicitAutograd
  kernel) under the mode: a backend kernel (one with a CPU kernel: softmax, layer_norm,
  nll_loss) keeps its intermediates in acc and rounds its results to d; a composite of aten
  ops (binary_cross_entropy_with_logits, repeat) rounds each intermediate to d. The backend
  kernels a graph ran that way are named (`Graph.kernels`): their own algorithm may round
  otherwise (the CPU flash attention's online softmax), so the verdict keeps the normwise
  atol beside such a graph's bound.

A complex tensor's e bounds the modulus of its error, and so each part's: a real view of it
(view_as_real, which autograd takes Re through) reads that e for both parts. An op with
none of these leaves the sample unmeasured (None: the sample keeps the normwise bound).
The output's bound is `slack`: the propagated e of each element, without its own last
rounding, which rtol(d) already covers. Terms that cancel count at their own size, so the
bound needs no formula per op: a loss whose signed weights cancel, a norm's backward, a
repeat's partial sums, addcdiv's broadcast divisor.

Longer than 600 lines because it is the one table of the primitives' rules, a small
function each, which read best side by side.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch._ops import OpOverloadPacket
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from accelkit.suite.numerics.reference import ACCUMULATION_DTYPE

aten = torch.ops.aten

_STEP = 1e-6
"""The central difference's relative step (float64: ~1e-6 relative accuracy of a slope)."""

MAX_ELEMENTS = 1 << 20
"""Samples with more input elements than this are not measured (cost)."""

# Ops that only move, copy or select values of their floating inputs: the op on e.
_MOVES = frozenset(
    {
        "clone", "copy", "_to_copy", "detach", "lift_fresh", "alias", "cat", "stack",
        "where", "masked_fill", "index", "_unsafe_index", "index_select", "gather", "take",
        "select_scatter", "slice_scatter", "diagonal_scatter", "as_strided_scatter",
        "constant_pad_nd", "flip", "roll", "repeat", "abs", "neg", "conj_physical",
        "reflection_pad1d", "reflection_pad2d", "reflection_pad3d", "replication_pad1d",
        "replication_pad2d", "replication_pad3d", "tril", "triu", "_unsafe_view",
        "fill", "zero", "masked_select", "masked_scatter", "scatter", "index_copy",
        "narrow_copy", "view_copy", "expand_copy", "permute_copy", "slice_copy",
        "select_copy", "diag_embed", "diagonal_backward", "select_backward",
        "slice_backward", "expand_backward", "unfold_copy", "rot90", "contiguous",
        "_reshape_copy", "relu", "max_unpool2d", "max_unpool3d", "polar",
    }
)  # fmt: skip
# Selections: each result is one of the input's values, which the largest e bounds.
_SELECTS = frozenset(
    {
        "max", "min", "amax", "amin", "median", "nanmedian", "kthvalue", "mode", "sort",
        "topk", "cummax", "cummin", "msort", "max_pool2d_with_indices",
        "max_pool3d_with_indices", "adaptive_max_pool2d", "adaptive_max_pool3d",
        "fractional_max_pool2d", "fractional_max_pool3d",
    }
)  # fmt: skip
# Elementwise selections: each element is its operands' element there (or a bound), which
# their largest e there bounds.
_ELEMENT_SELECTS = frozenset(
    {"maximum", "minimum", "fmax", "fmin", "clamp", "clamp_min", "clamp_max", "hardtanh"}
)
# Sums of terms with positive weights (the same op on e; the sum's rounding on |x|).
_SUMS = frozenset(
    {
        "sum", "mean", "nansum", "cumsum", "index_add", "scatter_add", "index_put",
        "_unsafe_index_put", "_unsafe_masked_index_put_accumulate", "index_put_",
        "embedding_dense_backward", "avg_pool1d", "avg_pool2d", "avg_pool3d",
        "avg_pool2d_backward", "avg_pool3d_backward", "_adaptive_avg_pool2d",
        "_adaptive_avg_pool3d", "_adaptive_avg_pool2d_backward",
        "_adaptive_avg_pool3d_backward", "col2im", "im2col", "unfold_backward", "trace",
        "sum_to_size", "upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d",
        "_upsample_nearest_exact1d", "_upsample_nearest_exact2d",
        "_upsample_nearest_exact3d", "upsample_nearest1d_backward",
        "upsample_nearest2d_backward", "upsample_nearest3d_backward",
        "_upsample_nearest_exact1d_backward", "_upsample_nearest_exact2d_backward",
        "_upsample_nearest_exact3d_backward", "upsample_linear1d", "upsample_bilinear2d",
        "upsample_trilinear3d", "upsample_linear1d_backward",
        "upsample_bilinear2d_backward", "upsample_trilinear3d_backward",
        "max_pool2d_with_indices_backward", "max_pool3d_with_indices_backward",
        "adaptive_max_pool2d_backward", "adaptive_max_pool3d_backward",
        "fractional_max_pool2d_backward", "fractional_max_pool3d_backward",
        "reflection_pad1d_backward", "reflection_pad2d_backward", "reflection_pad3d_backward",
        "replication_pad1d_backward", "replication_pad2d_backward",
        "replication_pad3d_backward",
    }
)  # fmt: skip
# Sums whose partial sums are the destination's elements, in its dtype.
_SCATTERS = frozenset(
    {
        "index_add", "scatter_add", "index_put", "_unsafe_index_put",
        "_unsafe_masked_index_put_accumulate", "embedding_dense_backward",
    }
)  # fmt: skip
# Products summed: (the positions of the factors, of an additive term, of its coefficient).
_PRODUCTS: dict[str, tuple[tuple[int, ...], int | None]] = {
    "mm": ((0, 1), None),
    "bmm": ((0, 1), None),
    "mv": ((0, 1), None),
    "dot": ((0, 1), None),
    "vdot": ((0, 1), None),
    "outer": ((0, 1), None),
    "addmm": ((1, 2), 0),
    "addmv": ((1, 2), 0),
    "addbmm": ((1, 2), 0),
    "baddbmm": ((1, 2), 0),
    "addr": ((1, 2), 0),
    "convolution": ((0, 1), 2),
    "_convolution": ((0, 1), 2),
}
# Step functions and comparisons: exact where they do not jump (the jumps are
# `discontinuity`'s); their own results round nothing.
_STEPS = frozenset({"floor", "ceil", "round", "trunc", "sign", "sgn", "signbit", "frac"})
# Random draws (dropout's mask): the same draws as the answer's (`draws`), exact values;
# and factories that read a tensor for its shape alone (ones_like: a constant, exact).
_DRAWS = frozenset(
    {
        "bernoulli", "uniform", "normal", "exponential", "geometric", "cauchy",
        "log_normal", "random", "rand_like", "randn_like", "randint_like", "zeros_like",
        "ones_like", "full_like", "empty_like", "new_zeros", "new_empty", "new_full",
        "new_ones", "empty_strided",
    }
)  # fmt: skip


# Ops that return views of their operands (lists of them, which the schema's first return
# does not mark).
_VIEWS = frozenset(
    {
        "broadcast_tensors", "atleast_1d", "atleast_2d", "atleast_3d", "split",
        "split_with_sizes", "unbind", "chunk", "tensor_split", "meshgrid", "unsafe_split",
        "unsafe_split_with_sizes", "unsafe_chunk", "squeeze", "unsqueeze", "transpose",
        "t", "swapdims", "swapaxes", "as_strided", "detach",
    }
)  # fmt: skip
# Elementwise ops without torch's pointwise tag.
_ELEMENTWISE = frozenset(
    {
        "log_sigmoid_forward",
        "log_sigmoid_backward",
        "softplus",
        "softplus_backward",
        "softshrink_backward",
        "hardshrink_backward",
    }
)


class Unmeasured(Exception):
    """The graph has an op without a rule (its name)."""


def _pack(func: Any) -> str:
    return str(func._schema.name).removeprefix("aten::").removeprefix("prims::")


def _floating(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex())


def _complex(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.is_complex()


class _Propagate(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Runs the graph in float64 and carries (e, own rounding) for each floating result.

    e lives beside each storage, in a float64 buffer of the storage's size, viewed as the
    tensor is (`error`): a view, and what autograd saves and unpacks, reads its base's e
    with no rule of its own, and an in-place op writes it where it writes the values."""

    def __init__(self, dtype: torch.dtype) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.u = torch.finfo(dtype).eps / 2
        self.u_acc = torch.finfo(ACCUMULATION_DTYPE.get(dtype, dtype)).eps / 2
        self.units = [self.u]
        """The unit of rounding of the results being computed: u(d) for an aten op's, u(acc)
        inside a backend kernel's decomposition."""
        self.largest = 0.0
        """The largest finite magnitude among the rounded results (`reaches`)."""
        self.kernels: set[str] = set()
        """The backend kernels whose decomposition the graph ran in their place."""
        # storage -> (a tensor keeping it alive, e, own rounding), the last two flat
        self.known: dict[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}

    def _bases(self, x: torch.Tensor, create: bool) -> tuple[torch.Tensor, torch.Tensor] | None:
        storage = x.untyped_storage()
        size = storage.nbytes() // x.element_size()
        found = self.known.get(storage.data_ptr())
        if found is not None and found[1].numel() != size:
            # read through a view of another element size: a copy in its units (a write
            # through it keeps them; a read leaves the storage's own, which a round trip
            # through the other units would widen)
            found = _reunit(found, size)
            if found is not None and create:
                self.known[storage.data_ptr()] = found
        if found is None or found[1].numel() != size:
            if not create:
                return None
            zeros = torch.zeros(size, dtype=torch.float64)
            found = (x, zeros, zeros.clone())
            self.known[storage.data_ptr()] = found
        return found[1], found[2]

    def _view(self, x: torch.Tensor, which: int) -> torch.Tensor:
        bases = self._bases(x, create=False)
        if bases is None:
            return torch.zeros(x.shape, dtype=torch.float64)
        return bases[which].as_strided(x.shape, x.stride(), x.storage_offset())

    def error(self, x: Any) -> Any:
        """e of a floating tensor (0 for one the graph did not compute: an exact input)."""
        return self._view(x, 0) if _floating(x) else x

    def own(self, x: Any) -> Any:
        return self._view(x, 1) if _floating(x) else x

    def _seen(self, y: torch.Tensor) -> None:
        size = y.detach().abs()
        finite = size[torch.isfinite(size)]
        if finite.numel():
            self.largest = max(self.largest, float(finite.max()))

    def set(self, x: torch.Tensor, e: torch.Tensor, own: torch.Tensor) -> None:
        bases = self._bases(x, create=True)
        assert bases is not None
        for base, value in zip(bases, (e, own), strict=True):
            view = base.as_strided(x.shape, x.stride(), x.storage_offset())
            value = value.abs() if value.is_complex() else value  # a modulus
            try:
                view.copy_(value.detach().to(torch.float64).expand(x.shape))
            except RuntimeError:  # a result whose elements overlap: the largest e there
                view.fill_(float(value.max()) if value.numel() else 0.0)

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        name = _pack(func)
        rule = _rule(func, name)
        if rule is _VIEW:  # shares its base's e
            return self._view_or_copy(func, args, kwargs)
        if rule is None:
            return self._decompose(func, name, args, kwargs)
        leaves = pytree.tree_leaves((args, kwargs))
        if not any(_floating(x) for x in leaves):
            # integers or a mask made floating (a masked reduction's count): exact
            out = func(*args, **kwargs)
            for y in _results(out):
                if y is not None:
                    self.set(y, torch.zeros_like(y), torch.zeros_like(y))
            return out
        # the rule reads the operands as they were (an in-place op overwrites them), and
        # copies of e (the rule may run the op on them in place)
        operands = (args, kwargs)
        before = pytree.tree_map(lambda x: x.clone() if _floating(x) else x, operands)
        errors = pytree.tree_map(lambda x: self.error(x).clone() if _floating(x) else x, operands)
        owns = pytree.tree_map(lambda x: self.own(x).clone() if _floating(x) else x, operands)
        out = func(*args, **kwargs)
        results = _results(out)
        if all(y is None for y in results):
            return out
        with torch.no_grad():
            found = rule(self, func, before, errors, owns, out)
        u = self.units[-1]
        for y, (e, own) in zip(results, found, strict=True):
            if y is None or e is None:
                continue
            if own is None:  # a rounded result: e from its operands, and its own rounding
                own = u * y.detach().abs()
                e = e.abs() + own
                self._seen(y)
            # (else moved values: their e and own rounding, both carried along)
            self.set(y, e.abs().nan_to_num(0.0, posinf=math.inf), own)
        return out

    def _view_or_copy(self, func: Any, args: Any, kwargs: Any) -> Any:
        """A view shares its base's e; an op that may alias its operand but copied it
        (contiguous of a permuted tensor, reshape of one that cannot be viewed, to) moves
        it: the op on e."""
        out = func(*args, **kwargs)
        leaves = pytree.tree_leaves((args, kwargs))
        bases = {x.untyped_storage().data_ptr() for x in leaves if _floating(x)}
        results = _results(out)
        if all(y is None or y.untyped_storage().data_ptr() in bases for y in results):
            return out
        operands = (args, kwargs)
        errors = pytree.tree_map(lambda x: self.error(x) if _floating(x) else x, operands)
        owns = pytree.tree_map(lambda x: self.own(x) if _floating(x) else x, operands)
        found = _moves(self, func, operands, errors, owns, out)
        for y, (e, own) in zip(results, found, strict=True):
            if y is not None and y.untyped_storage().data_ptr() not in bases:
                self.set(y, e, own)
        return out

    def _reduced_loss(self, func: Any, args: Any, kwargs: Any) -> Any:
        """A loss of one output that reduces (mean or sum): its unreduced losses (the same op
        with reduction none: a kernel's results, rounded to d), then their mean or sum under
        the sum's rule. Kernels reduce the losses they formed in d (the CPU's 16-bit
        binary_cross_entropy does). None for any other op, for a loss's backward (its
        reduction scales, it does not sum), and where the plain mean or sum of the losses is
        not the op's answer (a mean over weights)."""
        schema = func._schema
        names = [a.name for a in schema.arguments]
        if "reduction" not in names or len(schema.returns) != 1 or "backward" in schema.name:
            return None
        position = names.index("reduction")
        reduction = kwargs.get("reduction", args[position] if position < len(args) else 1)
        if reduction not in (1, 2):  # at::Reduction: 0 none, 1 mean, 2 sum
            return None
        answer = func(*args, **kwargs)
        if position < len(args):
            args = (*args[:position], 0, *args[position + 1 :])
        else:
            kwargs = {**kwargs, "reduction": 0}
        with self:
            losses = func(*args, **kwargs)
            out = losses.mean() if reduction == 1 else losses.sum()
        same = out.shape == answer.shape and torch.allclose(out, answer, rtol=1e-9, equal_nan=True)
        return out if same else None

    def _decompose(self, func: Any, name: str, args: Any, kwargs: Any) -> Any:
        """An op without a rule of its own: its decomposition (torch._decomp's, else its
        CompositeImplicitAutograd kernel) run under the mode, whose intermediates round in
        the accumulation precision; then its results in d. An op that reads no floating
        tensor (a factory, a random draw) makes exact constants, and one without floating
        results is run as it is."""
        if not any(_floating(x) for x in pytree.tree_leaves((args, kwargs))):
            return func(*args, **kwargs)
        reduced = self._reduced_loss(func, args, kwargs)
        if reduced is not None:
            return reduced
        decomposition = torch._decomp.decomposition_table.get(func)
        # A backend kernel (one the CPU dispatch key implements: softmax, layer_norm, a
        # loss) keeps its intermediates in the accumulation precision; a composite of aten
        # ops (CompositeExplicitAutograd alone: binary_cross_entropy_with_logits, repeat)
        # rounds each of them to d, as its decomposition's ops do.
        fused = torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), "CPU")
        if fused:
            self.kernels.add(name)
        self.units.append(self.u_acc if fused else self.units[-1])
        try:
            with self:
                if decomposition is not None:
                    out = decomposition(*args, **kwargs)
                else:
                    out = func.decompose(*args, **kwargs)
        finally:
            self.units.pop()
        if out is NotImplemented:
            out = func(*args, **kwargs)
            if any(y is not None for y in _results(out)):
                raise Unmeasured(name)
            return out
        for y in _results(out):
            if y is not None and fused:  # the kernel rounds its results to d
                own = self.units[-1] * y.detach().abs()
                self.set(y, self.error(y) + own, own)
                self._seen(y)
        return out


def _reunit(
    found: tuple[torch.Tensor, torch.Tensor, torch.Tensor], size: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """A storage's (keep-alive, e, own) in the units of a view of another element size: a real
    view of complex values (view_as_real, which `real` and `imag` are; 2 elements each),
    whose parts each err by at most the modulus' e, or a complex view of real pairs, whose
    modulus errs by at most the parts' e combined. None for any other size."""
    keep, e, own = found
    if e.numel() * 2 == size:
        return keep, e.repeat_interleave(2), own.repeat_interleave(2)
    if size * 2 == e.numel():

        def combined(v: torch.Tensor) -> torch.Tensor:
            return v.view(size, 2).square().sum(1).sqrt()

        return keep, combined(e), combined(own)
    return None


def _results(out: Any) -> list[torch.Tensor | None]:
    leaves = out if isinstance(out, (tuple, list)) else [out]
    return [y if _floating(y) else None for y in leaves]


# Per result: (e from the operands, its own rounding or None for u * |y|), or (None, None).
Found = list[tuple[Any, Any]]
Operands = tuple[tuple[Any, ...], dict[str, Any]]
Rule = Callable[[_Propagate, Any, Operands, Operands, Operands, Any], Found]


def _VIEW(*_: Any) -> Found:  # a marker: views share their base's e
    return []


def _rule(func: Any, name: str) -> Rule | None:
    """The rule of an aten op (None: decompose it)."""
    base = name.removesuffix("_") if not name.startswith("_") else name
    returns = func._schema.returns
    if returns and returns[0].alias_info is not None and not returns[0].alias_info.is_write:
        return _VIEW
    if base in _VIEWS:
        return _VIEW
    if base in ("add", "sub", "rsub"):
        return _add
    if base == "mul":
        return _mul
    if base == "div" and not any(a.name == "rounding_mode" for a in func._schema.arguments):
        return _div
    if base in _STEPS or base in _DRAWS:
        return _exact
    if base in _MOVES or base == "copy":
        return _moves
    if base in _SELECTS:
        return _selects
    if base in _ELEMENT_SELECTS:
        return _element_selects
    if base in _SUMS:
        return _sums
    if base in _PRODUCTS:
        return _products
    if base == "convolution_backward":
        return _convolution_backward
    if base in ("scatter_reduce", "index_reduce"):
        return _reduces
    if base in ("prod", "cumprod"):
        return _prods
    if base == "var":
        return _var
    if base == "logcumsumexp":
        return _logcumsumexp
    if torch.Tag.pointwise in func.tags or base in _ELEMENTWISE:
        return _pointwise
    return None


def _exact(
    p: _Propagate, func: Any, before: Operands, errors: Operands, owns: Operands, out: Any
) -> Found:
    """Steps (floor, sign, ...): exact where they do not jump."""
    return [
        (torch.zeros_like(y), torch.zeros_like(y)) if y is not None else (None, None)
        for y in _results(out)
    ]


def _as_list(x: Any) -> list[Any]:
    return list(x) if isinstance(x, (tuple, list)) else [x]


def _zero_scalars(func: Any, values: Operands) -> Operands:
    """The operands with their Python numbers that are values (fill values, paddings: the
    schema's Scalars, and every float) as 0: they carry no error. An integer fill value
    (binary_cross_entropy's decomposition clamps its logs at new_full(x, (), -100)) is a
    value too, where an integer size or dimension is not."""
    args, kwargs = values
    numbers = {a.name for a in func._schema.arguments if str(a.type) in ("number", "float")}
    names = [a.name for a in func._schema.arguments]

    def zero(v: Any, name: str | None) -> Any:
        if isinstance(v, float) or (name in numbers and isinstance(v, (int, float))):
            return 0.0 if not isinstance(v, bool) else v
        return v

    zeroed = [zero(v, names[i] if i < len(names) else None) for i, v in enumerate(args)]
    return tuple(zeroed), {k: zero(v, k) for k, v in kwargs.items()}


def _moves(
    p: _Propagate, func: Any, before: Operands, errors: Operands, owns: Operands, out: Any
) -> Found:
    """The op on e (and on the own roundings, which the moved values carry along)."""
    e_args, e_kwargs = _zero_scalars(func, errors)
    o_args, o_kwargs = _zero_scalars(func, owns)
    e, own = func(*e_args, **e_kwargs), func(*o_args, **o_kwargs)
    found: Found = []
    for y, a, b in zip(_results(out), _as_list(e), _as_list(own), strict=True):
        found.append((a.abs(), b.abs()) if y is not None else (None, None))
    return found


def _largest(errors: Any) -> float:
    sizes = [float(e.max()) for e in pytree.tree_leaves(errors) if _floating(e) and e.numel()]
    return max(sizes, default=0.0)


def _selects(
    p: _Propagate, func: Any, before: Operands, errors: Operands, owns: Operands, out: Any
) -> Found:
    """Each result is one of the operands' values: the largest e among them."""
    largest, own = _largest(errors), _largest(owns)
    return [
        (torch.full_like(y, largest), torch.full_like(y, own)) if y is not None else (None, None)
        for y in _results(out)
    ]


def _element_selects(
    p: _Propagate, func: Any, before: Operands, errors: Operands, owns: Operands, out: Any
) -> Found:
    """Each element is one of its operands' elements there: their largest e there."""

    def largest(values: Any) -> torch.Tensor:
        found = torch.zeros(out.shape, dtype=torch.float64)
        for e in pytree.tree_leaves(values):
            if _floating(e):
                found = torch.maximum(found, e.abs().to(torch.float64).expand(out.shape))
        return found

    return [(largest(errors), largest(owns))]


def _operand(values: Operands, i: int, name: str) -> Any:
    args, kwargs = values
    return args[i] if len(args) > i else kwargs.get(name, 0.0)


def _tensor_or_zero(x: Any) -> Any:
    """An operand's e: 0 for a Python number or an integer tensor (exact)."""
    return x if _floating(x) else 0.0


def _add(
    p: _Propagate, func: Any, before: Operands, errors: Operands, owns: Operands, out: Any
) -> Found:
    alpha = abs(_operand(before, 2, "alpha") or 1)
    e = _tensor_or_zero(_operand(errors, 0, "self")) + alpha * _tensor_or_zero(
        _operand(errors, 1, "other")
    )
    return [(torch.as_tensor(e).expand(out.shape), None)]


def _abs(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x if x.dtype == torch.bool else x.abs()  # a mask: 0 and 1 already
    return abs(x)


def _mul(
    p: _Propagate, func: Any, before: Operands, errors: Operands, owns: Operands, out: Any
) -> Found:
    a, b = _operand(before, 0, "self"), _operand(before, 1, "other")
    e_a = _tensor_or_zero(_operand(errors, 0, "self"))
    e_b = _tensor_or_zero(_operand(errors, 1, "other"))
    return [(torch.as_tensor(_abs(b) * e_a + _abs(a) * e_b).expand(out.shape), None)]


def _div(
    p: _Propagate, func: Any, before: Operands, errors: Operands, owns: Operands, out: Any
) -> Found:
    b = _abs(_operand(before, 1, "other"))
    e_a = _tensor_or_zero(_operand(errors, 0, "self"))
    e_b = _tensor_or_zero(_operand(errors, 1, "other"))
    e = torch.as_tensor(e_a / b + out.abs() / b * e_b)
    return [(e.nan_to_num(0.0, posinf=math.inf).expand(out.shape), None)]


def _pointwise(
    p: _Propagate, func: Any, before: Operands, errors: Operands, owns: Operands, out: Any
) -> Found:
    """sum_i |df/dx_i| e_i, each slope by a central difference of x_i in float64."""
    results = _results(out)
    first = results[0]
    if first is None:
        return [(None, None)] * len(results)
    leaves, spec = pytree.tree_flatten(before)
    e_leaves = pytree.tree_leaves(errors)
    total = torch.zeros_like(first)
    for i, (x, e) in enumerate(zip(leaves, e_leaves, strict=True)):
        if not _floating(x) or not bool((e != 0).any()):
            continue
        step = _STEP * torch.maximum(x.abs(), e).clamp_min(1e-300)
        ends = []
        for sign in (1.0, -1.0):
            moved = list(leaves)
            moved[i] = x + sign * step
            m_args, m_kwargs = pytree.tree_unflatten(moved, spec)
            ends.append(_as_list(func(*m_args, **m_kwargs))[0])
        slope = ((ends[0] - ends[1]) / (2 * step)).abs().nan_to_num(0.0, 0.0, 0.0)
        total = total + slope * e
    return [(total, None)] + [(None, None)] * (len(results) - 1)


def _count(inputs: list[torch.Tensor], out: torch.Tensor) -> int:
    """Terms an output element sums, at most: the largest input over the output, or its
    last dimension (a scan)."""
    ratios = [x.numel() // max(out.numel(), 1) for x in inputs]
    return max([*ratios, *(x.shape[-1] for x in inputs if x.dim()), 1])


def _sums(
    p: _Propagate, func: Any, before: Operands, errors: Operands, owns: Operands, out: Any
) -> Found:
    """The op on e, plus the sum's rounding: sqrt(K) * u * the op on |x|, u that of acc, or
    of d for a scatter (its partial sums are the destination's elements, in d)."""
    e_args, e_kwargs = errors
    a_args, a_kwargs = pytree.tree_map(lambda x: x.abs() if _floating(x) else x, before)
    o_args, o_kwargs = pytree.tree_map(
        lambda x: torch.ones_like(x.real) if _floating(x) else x, before
    )  # real ones: a complex sum's count of terms is its parts'
    e, terms = func(*e_args, **e_kwargs), func(*a_args, **a_kwargs)
    ones = func(*o_args, **o_kwargs)
    inputs = [x for x in pytree.tree_leaves(before) if _floating(x)]
    scatter = _pack(func).removesuffix("_") in _SCATTERS
    found: Found = []
    for y, a, t, k in zip(_results(out), _as_list(e), _as_list(terms), _as_list(ones), strict=True):
        if y is None:
            found.append((None, None))
            continue
        if scatter:  # each element's partial sums round to the destination's dtype
            found.append((a.abs() + p.units[-1] * t.abs(), None))
            continue
        count = max(_count(inputs, y), float(k.max()) if k.numel() else 1.0)
        found.append((a.abs() + math.sqrt(count) * p.u_acc * t.abs(), None))
    return found


def _products(
    p: _Propagate, func: Any, before: Operands, errors: Operands, owns: Operands, out: Any
) -> Found:
    """op(e_a, |b|) + op(|a|, e_b) (+ the additive term's e) + sqrt(K) u(acc) op(|a|, |b|),
    K each element's count of products (the op on ones)."""
    factors, additive = _PRODUCTS[_pack(func).removesuffix("_")]
    args, kwargs = list(before[0]), before[1]
    e_args = errors[0]

    def run(replace: dict[int, Any]) -> torch.Tensor:
        values = list(args)
        for i, v in replace.items():
            values[i] = v
        return torch.as_tensor(func(*values, **kwargs)).abs()

    add = additive if additive is not None and len(args) > additive else -1
    has_add = add >= 0 and _floating(args[add])
    plain: dict[int, Any] = {add: _real_zeros(args[add])} if has_add else {}
    absolute = {**plain, **{i: _parts(args[i]) for i in factors}}
    terms = run(absolute)
    count = run({**plain, **{i: torch.ones_like(_parts(args[i])) for i in factors}})
    e = _complex_factor(args) * math.sqrt(max(float(count.max()), 1.0)) * p.u_acc * terms
    for i in factors:
        if _floating(e_args[i]) and bool((e_args[i] != 0).any()):
            e = e + run({**absolute, i: e_args[i]})
    if has_add and bool((e_args[add] != 0).any()):
        zeros: dict[int, Any] = {i: _real_zeros(args[i]) for i in factors}
        e = e + run({**zeros, add: e_args[add]})
    return [(e, None)]


def _parts(x: torch.Tensor) -> torch.Tensor:
    """|x|, or for a complex x |Re x| + |Im x|: the size of the real products a complex product
    is computed from (four, or three by Gauss's trick, whose (Re a + Im a)(Re b + Im b) is
    the largest)."""
    return x.real.abs() + x.imag.abs() if x.is_complex() else x.abs()


def _real_zeros(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros(x.shape, dtype=x.real.dtype if x.is_complex() else x.dtype)


def _complex_factor(operands: Any) -> float:
    """2 for a product of complex operands (a complex part sums up to three real products'
    roundings, Gauss's trick's imaginary part (Re a + Im a)(Re b + Im b) - Re a Re b -
    Im a Im b), else 1."""
    return 2.0 if any(_complex(x) for x in pytree.tree_leaves(operands)) else 1.0


def _prods(
    p: _Propagate, func: Any, before: Operands, errors: Operands, owns: Operands, out: Any
) -> Found:
    """Products of K factors (prod, cumprod): a factor's error reaches the product times the
    other factors, sum_i |prod_{j != i} x_j| e_i (|y| sum_i e_i / |x_i| without a zero
    factor; with one, the others' product times its e; with two, 0); and each of the K - 1
    multiplies rounds the running product by u of itself, in the precision the product runs
    in: d (a product names no accumulation type, and the CPU's 16-bit prod and cumprod keep
    it in the dtype), so (K - 1) u |y|."""
    (args, kwargs), e_x = before, errors[0][0]
    x, rest = args[0], args[1:]
    y = out if isinstance(out, torch.Tensor) else _as_list(out)[0]
    scan = _pack(func).startswith("cumprod")
    chosen = rest[0] if rest else kwargs.get("dim", kwargs.get("dims"))
    dims = range(x.dim()) if chosen is None else [chosen] if isinstance(chosen, int) else chosen
    dims = [d % x.dim() for d in dims] if x.dim() else []

    def total(v: torch.Tensor) -> torch.Tensor:  # over each output's factors
        if scan:
            return torch.cumsum(v, dims[0]) if dims else v
        return (v.sum(dim=dims) if dims else v).reshape(y.shape)

    size = x.abs()
    zero = size == 0
    e = _complex_factor(x) * (total(torch.ones_like(size)) - 1).clamp_min(0) * p.units[-1]
    e = e * y.abs()
    if _floating(e_x) and bool((e_x != 0).any()):
        e_x = e_x.abs().to(size.dtype)
        options = {k: v for k, v in kwargs.items() if k not in ("dtype", "output_dtype")}
        others = func(torch.where(zero, 1.0, size), *rest, **options).reshape(y.shape)
        zeros = total(zero.to(size.dtype))
        by_factor = total(torch.where(zero, 0.0, e_x / torch.where(zero, 1.0, size)))
        by_zero = total(torch.where(zero, e_x, 0.0))
        spread = torch.where(zeros == 0, by_factor, torch.where(zeros == 1, by_zero, 0.0))
        e = e + others * spread
    return [(e, None)]


def _reduces(
    p: _Propagate, func: Any, before: Operands, errors: Operands, owns: Operands, out: Any
) -> Found:
    """scatter_reduce and index_reduce: sums and means as sums, amax and amin as
    selections; a product is not measured."""
    reduce = next((x for x in pytree.tree_leaves(before) if isinstance(x, str)), "sum")
    if reduce in ("sum", "mean"):
        return _sums(p, func, before, errors, owns, out)
    if reduce in ("amax", "amin"):
        return _selects(p, func, before, errors, owns, out)
    raise Unmeasured(f"{_pack(func)} ({reduce})")


def _var(
    p: _Propagate, func: Any, before: Operands, errors: Operands, owns: Operands, out: Any
) -> Found:
    """sum((x - mean)**2) / (N - c): 2 / (N - c) sum |x - mean| e_x, plus the sum's
    rounding, sqrt(N) u(acc) sum (x - mean)**2 / (N - c), and the mean's and the
    deviations' roundings, u(d) each: a kernel may round the mean to d before it centres
    (the CPU's 16-bit batch norms do: the variance of a channel of two elements a few
    roundings apart then keeps no digits)."""
    (args, kwargs), e_x = before, errors[0][0]
    x = args[0]
    dims = args[1] if len(args) > 1 else kwargs.get("dims")
    dims = list(range(x.dim())) if dims is None else dims
    y = out if isinstance(out, torch.Tensor) else _as_list(out)[0]
    mean = x.mean(dim=dims, keepdim=True)
    count = max(x.numel() // max(y.numel(), 1), 1)
    scale = (y.abs() / ((x - mean) ** 2).sum(dim=dims).clamp_min(1e-300)).reshape(y.shape)
    deviation = (x - mean).abs()
    e = 2 * (deviation * (e_x + p.u * (x.abs() + mean.abs()))).sum(dim=dims).reshape(y.shape)
    e = scale * e + math.sqrt(count) * p.u_acc * y.abs()
    return [(e, None)]


def _logcumsumexp(
    p: _Propagate, func: Any, before: Operands, errors: Operands, owns: Operands, out: Any
) -> Found:
    """y_i = log sum_{j <= i} exp(x_j): sum_j p_ij e_j with p_ij = exp(x_j - y_i) (the
    weights of a softmax: at most 1, summing to 1), by the scan itself on x + log e; plus
    its steps' roundings in acc, sqrt(K) u(acc) (sum_j p_ij |x_j| + |y_i| + 1) (each step
    rounds x_j - y, exp, log1p and the sum, and carries the earlier steps' at most 1)."""
    (args, kwargs), e_x = before, errors[0][0]
    x = args[0]
    dim = args[1] if len(args) > 1 else kwargs["dim"]
    if not _floating(e_x):
        e_x = torch.zeros_like(x)

    def weighted(v: torch.Tensor) -> torch.Tensor:  # sum_j p_ij v_j, v >= 0
        found = torch.exp(torch.logcumsumexp(x + torch.log(v), dim) - out)
        return found.nan_to_num(0.0, posinf=math.inf)

    count = x.shape[dim] if x.dim() else 1
    size = weighted(torch.where(torch.isfinite(x), x.abs(), 0.0))
    finite = torch.where(torch.isfinite(out), out.abs(), 0.0)
    rounding = math.sqrt(count) * p.u_acc * (size + finite + 1)
    return [(weighted(e_x.abs()) + rounding, None)]


def _convolution_backward(
    p: _Propagate, func: Any, before: Operands, errors: Operands, owns: Operands, out: Any
) -> Found:
    """(grad_input, grad_weight, grad_bias): bilinear in (dy, w) and (dy, x); dy summed."""
    args, kwargs = before
    dy, x, w = args[0], args[1], args[2]
    e_dy, e_x, e_w = (
        e if _floating(e) else _real_zeros(v)
        for e, v in zip(errors[0][:3], (dy, x, w), strict=True)
    )
    rest = list(args[3:])

    def run(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> tuple[Any, ...]:
        return tuple(func(a, b, c, *rest, **kwargs))

    terms = run(_parts(dy), _parts(x), _parts(w))
    count = run(*(torch.ones_like(_parts(v)) for v in (dy, x, w)))
    by_dy = run(e_dy, _parts(x), _parts(w))
    others = (run(_parts(dy), _parts(x), e_w)[0], run(_parts(dy), e_x, _parts(w))[1])
    found: Found = []
    for k, y in enumerate(_results(out)):
        if y is None:
            found.append((None, None))
            continue
        e = by_dy[k].abs() + (others[k].abs() if k < 2 else 0.0)
        rounding = math.sqrt(max(float(count[k].max()), 1.0)) * p.u_acc * terms[k].abs()
        rounding = _complex_factor(args[:3]) * rounding
        found.append((e + rounding, None))
    return found


class Graph(NamedTuple):
    """What `propagate` found."""

    slack: Any
    """The result with each floating tensor replaced by its slack (0 for another leaf)."""
    largest: float
    """The largest finite magnitude among the graph's rounded results: where it reaches the
    dtype's range, the dtype's graph may overflow where the answer does not."""
    kernels: frozenset[str]
    """The backend kernels (softmax, layer_norm, a loss, the CPU flash attention) whose
    decomposition stood in for an algorithm the graph does not know."""


class _Decomposed(TorchFunctionMode):
    """Above autograd, so that a backward is the primitives': an aten op the sample calls
    itself (OpInfo's torch.ops.aten entries) runs its decomposition (`torch._decomp`; an
    output the op does not differentiate, the flash attention's logsumexp, is detached), and
    scaled_dot_product_attention its math backend, PyTorch's own decomposition of it. The
    CPU flash attention's backward kernel has none. Each stands in for a backend kernel
    (`kernels`), whose own algorithm may round otherwise."""

    def __init__(self) -> None:
        super().__init__()
        self.kernels: set[str] = set()

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        if func is torch.nn.functional.scaled_dot_product_attention:
            self.kernels.add("scaled_dot_product_attention")
            with sdpa_kernel([SDPBackend.MATH]):
                return func(*args, **kwargs)
        overload = getattr(func, "default", None) if isinstance(func, OpOverloadPacket) else func
        table: dict[Any, Any] = torch._decomp.decomposition_table
        decomposition = table.get(overload)
        if decomposition is None:
            return func(*args, **kwargs)
        original = func(*args, **kwargs)
        own = pytree.tree_leaves(original)
        leaves, spec = pytree.tree_flatten(decomposition(*args, **kwargs))
        if len(leaves) != len(own):
            return original
        self.kernels.add(_pack(overload))
        kept = [
            y.detach()
            if isinstance(y, torch.Tensor) and not getattr(o, "requires_grad", False)
            else y
            for y, o in zip(leaves, own, strict=True)
        ]
        return pytree.tree_unflatten(kept, spec)


def propagate(
    run: Callable[[], Any],
    dtype: torch.dtype,
    inputs: list[torch.Tensor],
    *,
    backward: bool = False,
) -> Graph | None:
    """`run()`'s result with each floating tensor replaced by its slack: the first-order
    bound on what dtype's roundings leave in it, less its own last rounding (which rtol
    covers), and the graph's largest intermediate; None where the graph cannot be measured
    (an op without a rule) or its inputs are too large. `backward`: `run` differentiates;
    where a kernel of its backward has no rule and no decomposition (the CPU flash
    attention's), it runs again with its ops decomposed above autograd (`_Decomposed`)."""
    if sum(x.numel() for x in inputs) > MAX_ELEMENTS:
        return None
    graph = _propagate(run, dtype, None)
    if graph is None and backward:
        graph = _propagate(run, dtype, _Decomposed())
    return graph


def _propagate(
    run: Callable[[], Any], dtype: torch.dtype, decomposed: _Decomposed | None
) -> Graph | None:
    mode = _Propagate(dtype)
    try:
        with decomposed or contextlib.nullcontext(), mode:
            result = run()
    except Unmeasured:
        return None
    except (RuntimeError, NotImplementedError, TypeError, ValueError, IndexError):
        return None  # a rule the operands do not fit: not measured

    def slack(y: Any) -> Any:
        if not _floating(y):
            return 0  # (a leaf, where None would be none)
        e = mode.error(y) - mode.own(y)
        return e.detach().clamp_min(0.0).nan_to_num(0.0, posinf=math.inf)

    kernels = frozenset(mode.kernels | (decomposed.kernels if decomposed else set()))
    return Graph(pytree.tree_map(slack, result), mode.largest, kernels)
