"""The numerics mode conformance cases run in, and the dtypes a backend cannot run.

Conformance checks each kernel against a float64 reference with a bound derived from the
dtype (accelkit.suite.numerics.reference), so the faster, less precise modes that backends may pick
on their own are switched off around every conformance case (`strict_numerics`):

- TF32: on backends that declare it (`Backend.tf32`), cuDNN convolutions and RNNs run float32
  in TF32 by default (and matmuls when a user asks), 10 mantissa bits instead of 23. The
  suite sets torch's `fp32_precision` knobs (the API that 2.9 introduced; mixing it with the
  legacy `allow_tf32` flags raises) to "ieee", and restores them. A case that tests TF32 on
  purpose turns it on with `allow_tf32` and adds TF32's rounding to its bound.
- Reduced-precision reductions: cuBLAS/hipBLASLt may split a float16/bfloat16 GEMM's K
  dimension and add the partial sums in the 16-bit dtype
  (`torch.backends.cuda.matmul.allow_{fp16,bf16}_reduced_precision_reduction`, on by
  default). The partial sums then carry sqrt(splits) roundings of the 16-bit dtype, no bound
  that still sees a 1% error covers that, so the suite switches them off, and float16
  accumulation with them (plain torch flags: where no such library runs they change
  nothing).

`unsupported_dtype` decides the skip of a case whose id names a dtype that the backend cannot
run (`Backend.unsupported_dtypes`: float64 on MPS), so cases never decide it themselves.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

# torch.backends.<library>.<operation>.fp32_precision knobs ("ieee", "tf32", "none").
FP32_PRECISION_KNOBS = (
    ("cuda", "matmul"),
    ("cudnn", "conv"),
    ("cudnn", "rnn"),
    ("mkldnn", "matmul"),
    ("mkldnn", "conv"),
    ("mkldnn", "rnn"),
)
REDUCED_PRECISION_FLAGS = (
    "allow_fp16_reduced_precision_reduction",
    "allow_bf16_reduced_precision_reduction",
    "allow_fp16_accumulation",  # off by default: float16 GEMMs accumulated in float16
)


def _knobs() -> list[Any]:
    import torch

    found = []
    for library, operation in FP32_PRECISION_KNOBS:
        owner = getattr(getattr(torch.backends, library, None), operation, None)
        if owner is not None and hasattr(owner, "fp32_precision"):
            found.append(owner)
    return found


@contextlib.contextmanager
def _fp32_precision(value: str, owners: list[Any]) -> Iterator[None]:
    previous = [owner.fp32_precision for owner in owners]
    try:
        for owner in owners:
            owner.fp32_precision = value
        yield
    finally:
        for owner, old in zip(owners, previous, strict=True):
            owner.fp32_precision = old


def _reduction_setting(matmul: Any, flag: str) -> Any:
    """A reduced-precision flag's whole setting: torch >= 2.8 keeps a second half, whether
    cuBLAS may split K (`<flag>_split_k`), which reading the flag alone does not show and
    writing a bool resets to True; (allow, split_k) restores both halves. Switching reduced
    precision off keeps split_k as it was ((False, False) and (False, True) are both valid)."""
    split_k = getattr(matmul, f"{flag}_split_k", None)
    allowed = getattr(matmul, flag)
    return allowed if split_k is None else (allowed, split_k)


@contextlib.contextmanager
def strict_numerics(tf32: bool) -> Iterator[None]:
    """float32 in IEEE float32 (where `tf32`: the backend may use TF32) and 16-bit GEMMs
    accumulated in float32, restored afterwards."""
    import torch

    matmul = torch.backends.cuda.matmul
    previous = {
        f: _reduction_setting(matmul, f) for f in REDUCED_PRECISION_FLAGS if hasattr(matmul, f)
    }
    with contextlib.ExitStack() as stack:
        if tf32:
            stack.enter_context(_fp32_precision("ieee", _knobs()))
        try:
            for flag, value in previous.items():
                setattr(matmul, flag, (False, value[1]) if isinstance(value, tuple) else False)
            yield
        finally:
            for flag, value in previous.items():
                setattr(matmul, flag, value)


@contextlib.contextmanager
def allow_tf32() -> Iterator[None]:
    """float32 matmuls and convolutions in TF32 (for a case that tests TF32 on purpose)."""
    import torch

    owners = [torch.backends.cuda.matmul, getattr(torch.backends.cudnn, "conv", None)]
    with _fp32_precision("tf32", [o for o in owners if hasattr(o, "fp32_precision")]):
        yield


def unsupported_dtype(case_id: str, unsupported: Mapping[str, str]) -> str | None:
    """The skip reason of a case whose id has a path segment naming a dtype the backend
    cannot run (`conformance/linalg/svd/float64/4x4/well` on MPS), else None."""
    for segment in case_id.split("/"):
        reason = unsupported.get(segment)
        if reason is not None:
            return f"{segment}: {reason}"
    return None
