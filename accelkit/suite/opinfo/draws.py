"""Random numbers an op draws inside itself, drawn alike on the device and in the reference.

OpInfo wraps torch's randomized low-rank factorisations (`DRAWS_INSIDE`) in
`wrapper_set_seed`: each call reseeds torch with 42, and torch._lowrank draws its test
matrix R with `torch.randn(..., dtype=A.dtype)`. The float64 reference would draw R in
float64 (float32's R unrounded: another start) or complex128, whose stream from one seed has
nothing in common with complex64's (O(1) apart, measured). Where q is below the rank of the
matrix (OpInfo's samples subtract a full-rank M from a rank-q product), two subspace
iterations from different starts do not converge to the same answer: the reference computed
another approximation, and the comparison measured the randomized algorithm's own error
(1.7e-4 absolute on U V^H for svd_lowrank in complex64, where eps * ||A|| / gap is 3e-7).

`same_draws` makes every `torch.randn` / `torch.rand` that asks for a reference dtype
(float64, complex128) draw on the case's device in the case's dtype and convert exactly, so
the reference factorises from the device's R: a CUDA or XPU generator's stream is not the
CPU's either (`wrapper_set_seed` reseeds every device's generator, so the reference's first
draw on the device is the device run's first draw). The device's own draws already ask for
the case's dtype and device and are left alone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

#: Ops (op_db names) whose computation draws random numbers it does not return.
DRAWS_INSIDE: frozenset[str] = frozenset({"svd_lowrank", "pca_lowrank"})

_REFERENCE_DTYPES = (torch.float64, torch.complex128)


def draw_dtype(case_dtype: torch.dtype, wanted: torch.dtype) -> torch.dtype:
    """The dtype the device draws in where the reference asks for `wanted`: the case's,
    complex or real as `wanted` is."""
    if wanted.is_complex == case_dtype.is_complex:
        return case_dtype
    return case_dtype.to_complex() if wanted.is_complex else case_dtype.to_real()


class _CaseDraws(TorchFunctionMode):
    def __init__(self, case_dtype: torch.dtype, device: torch.device) -> None:
        super().__init__()
        self.case_dtype = case_dtype
        self.device = device

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        wanted = kwargs.get("dtype")
        if func not in (torch.randn, torch.rand) or wanted not in _REFERENCE_DTYPES:
            return func(*args, **kwargs)
        where = torch.device(kwargs.get("device") or "cpu")
        drawn_as = draw_dtype(self.case_dtype, wanted)
        on_device = where.type == self.device.type and self.device.index in (None, where.index)
        if drawn_as == wanted and on_device:  # the device's own draw
            return func(*args, **kwargs)
        drawn = func(*args, **{**kwargs, "dtype": drawn_as, "device": self.device})
        return drawn.to(where, wanted)


@contextlib.contextmanager
def same_draws(op_name: str, case_dtype: torch.dtype, device: str) -> Iterator[None]:
    """Within: a DRAWS_INSIDE op's reference draws what the device draws (nothing changes for
    other ops, or where the reference computes on the case's device in its dtype)."""
    if op_name.partition("/")[0] not in DRAWS_INSIDE:
        yield
        return
    with _CaseDraws(case_dtype, torch.device(device)):
        yield
