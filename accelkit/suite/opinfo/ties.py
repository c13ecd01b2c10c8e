"""Index outputs that a tie decides: compared by the values they point at.

`sort`, `argsort`, `topk`, `kthvalue`, `mode`, `median` and `nanmedian` return indices of
elements of their input. Where several elements are equal (common in float16 and bfloat16
samples: `sort`'s 8000-element sample has a few hundred distinct bfloat16 values) any of
their indices is right: torch documents no order for equal elements (`sort` with
stable=False, `topk`, `mode`), and devices differ (the CPU's sorts are stable in practice;
CUDA's bitonic and radix selections, MPS's and XPU's are not). Compared exactly with the
CPU reference's indices, a correct GPU would fail. So each index output is replaced, on
both sides, by the reference input's values at those indices (`torch.gather` along the
op's dim): an index into an equal element gives the same value, a wrong index a different
one, and an index out of range is a Mismatch. `max`/`min`/`argmax`/`argmin` are not here:
torch documents the first maximal index on every device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from accelkit.suite.opinfo.comparison import Mismatch


@dataclass(frozen=True)
class TieIndices:
    """Where an op's dim and keepdim arguments sit after its input (positional index), and
    the dim it uses when none is given (None: without a dim it returns no indices)."""

    dim_at: int
    keepdim_at: int | None
    default_dim: int | None = -1
    reason: str = "equal elements: torch documents no order among them"


TIE_INDEX_OPS: dict[str, TieIndices] = {
    "sort": TieIndices(0, None, reason="stable=False: equal elements in any order"),
    "argsort": TieIndices(0, None, reason="stable=False: equal elements in any order"),
    "topk": TieIndices(1, None, reason="which of equal elements at the k-th place is taken"),
    "kthvalue": TieIndices(1, 2),
    "mode": TieIndices(0, 1, reason="any index of the most frequent value"),
    "median": TieIndices(0, 1, default_dim=None),
    "nanmedian": TieIndices(0, 1, default_dim=None),
}


def _argument(sample: Any, name: str, position: int | None, default: Any) -> Any:
    if name in sample.kwargs:
        return sample.kwargs[name]
    if position is not None and len(sample.args) > position:
        return sample.args[position]
    return default


def _values_at(x: torch.Tensor, indices: torch.Tensor, dim: int, keepdim: bool, what: str) -> Any:
    idx = indices.detach().to("cpu", torch.int64)
    reduced = idx.ndim == x.ndim - 1 and not keepdim
    if reduced:
        idx = idx.unsqueeze(dim)
    if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= x.shape[dim]):
        raise Mismatch(f"{what}: index out of range for size {x.shape[dim]} along dim {dim}")
    try:
        values = x.gather(dim, idx)
    except RuntimeError as error:
        raise Mismatch(f"{what}: indices of shape {tuple(indices.shape)}: {error}") from None
    return values.squeeze(dim) if reduced else values


def indices_as_values(op_name: str, ref: Any, outputs: Any, what: str) -> Any:
    """`outputs` with each integer tensor replaced by the reference input's values at those
    indices, for the ops of TIE_INDEX_OPS that return indices; others unchanged."""
    rule = TIE_INDEX_OPS.get(op_name)
    x = ref.input
    if rule is None or not isinstance(x, torch.Tensor) or x.ndim == 0:
        return outputs  # a 0-d input has the one index 0: compared exactly
    dim = _argument(ref, "dim", rule.dim_at, rule.default_dim)
    if dim is None:
        return outputs
    dim = int(dim) % x.ndim
    keepdim = bool(_argument(ref, "keepdim", rule.keepdim_at, False))

    def convert(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.dtype in (torch.int64, torch.int32):
            return _values_at(x, value, dim, keepdim, f"{what} (indices)")
        return value

    if isinstance(outputs, tuple):  # torch.return_types' (values, indices), or a tuple
        converted = [convert(v) for v in outputs]
        if hasattr(outputs, "_fields"):  # a namedtuple
            return type(outputs)(*converted)
        if type(outputs) is tuple:
            return tuple(converted)
        return type(outputs)(converted)  # a structseq (torch.return_types.sort)
    return convert(outputs)
