"""Which OpInfos, dtypes and samples become cases, at which breadth, and which cases skip.

Every OpInfo in `op_db` becomes a case per tested dtype (`conformance/opinfo/<op>/<dtype>`),
plus gradient cases (`.../<dtype>/grad`). `plan` lists them without building a sample;
`skip_reason` says why one cannot run here (the tables of `skips`, OpInfo's own metadata, or
no float64 reference); `sample_limit` says how many of its samples it runs.

Quick breadth (the default) runs the first samples of each op only, the low-precision and
complex dtypes on every op but with fewer samples (`QUICK_MAX_SAMPLES`), float32
gradients on a fixed, deterministic subset of ops (every QUICK_GRAD_EVERY-th autograd-capable
op, QUICK_GRAD_MAX_SAMPLES samples), and bfloat16 and float16 gradients on every op that has
them (the first sample); `--breadth full` runs every sample, dtype and gradient.
For example, `add` gets, at quick breadth, `add/float32` (3 samples), `add/float16`,
`add/bfloat16`, `add/float64`, `add/complex64` (1 sample each), and `add/float32/grad` if
its index among the autograd-capable ops is a multiple of 4.

Strided kernels: a `noncontiguous` twin (`add/float32/noncontiguous`,
`add/float32/grad/noncontiguous`) runs the same samples in other layouts (`layouts`): at quick
breadth the float32 forward case's and the quick gradient cases' twins, at full breadth every
case's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from accelkit.suite.numerics.reference import REFERENCE_DTYPE
from accelkit.suite.opinfo.op_db import DTYPES, op_db_by_name
from accelkit.suite.opinfo.records import CaseKind
from accelkit.suite.opinfo.skips import (
    DEVICE_ONLY,
    KNOWN_SKIPS,
    LAYOUT_SKIPS,
    NONDETERMINISTIC_OUTPUT_OPS,
    RANDOM_OPS,
)

BREADTHS = ("quick", "full")

QUICK_MAX_SAMPLES: dict[str, int] = {
    "float32": 3,
    "float64": 1,
    "float16": 1,
    "bfloat16": 1,
    "complex64": 1,
}
QUICK_GRAD_EVERY = 4  # every 4th autograd-capable op (sorted by name) gets a float32 grad case
QUICK_GRAD_MAX_SAMPLES = 2
# Mixed-precision training runs the 16-bit backward kernels, separate kernels on every GPU:
# at quick breadth every autograd-capable op gets its bfloat16 and float16 gradient cases,
# QUICK_LOW_PRECISION_GRAD_SAMPLES samples each.
QUICK_LOW_PRECISION_GRAD = ("bfloat16", "float16")
QUICK_LOW_PRECISION_GRAD_SAMPLES = 1
# A quick noncontiguous case leaves out the samples with more elements than this (their
# contiguous case runs them; full breadth runs every sample in every layout): a sample of
# millions of elements costs seconds per layout.
QUICK_LAYOUT_MAX_ELEMENTS = 2**20


@dataclass(frozen=True)
class OpinfoCase:
    op: str  # the op's name with its variant: "add", "nn.functional.relu", "max.reduction"
    dtype: str  # a key of DTYPES
    grad: bool = False
    noncontiguous: bool = False  # the samples in other layouts (`layouts.LAYOUTS`)

    @property
    def param_id(self) -> str:
        return (
            f"{self.op}/{self.dtype}"
            + ("/grad" if self.grad else "")
            + ("/noncontiguous" if self.noncontiguous else "")
        )


def plan(device_type: str, breadth: str) -> list[OpinfoCase]:
    """The cases of a run: cheap (no sample is built), deterministic, sorted by op name.

    An op gets a case for each tested dtype that it supports on the CPU or on the device;
    a dtype it supports only on the CPU becomes a case that skips on the device with that
    reason, so that backends report the same ids.
    """
    if breadth not in BREADTHS:
        raise ValueError(f"breadth must be one of {BREADTHS}, got {breadth!r}")
    cases: list[OpinfoCase] = []
    autograd_index = 0
    for name, op in sorted(op_db_by_name().items()):
        on_device = op.supported_dtypes(device_type)
        candidates = on_device | op.supported_dtypes("cpu")
        for dtype_name, dtype in DTYPES.items():
            if dtype in candidates:
                cases.append(OpinfoCase(name, dtype_name))
                if breadth == "full" or dtype == torch.float32:
                    cases.append(OpinfoCase(name, dtype_name, noncontiguous=True))
        if not op.supports_autograd:
            continue
        backward = op.supported_backward_dtypes(device_type) | op.supported_backward_dtypes("cpu")
        if breadth == "quick":
            if torch.float32 in backward and autograd_index % QUICK_GRAD_EVERY == 0:
                cases.append(OpinfoCase(name, "float32", grad=True))
                cases.append(OpinfoCase(name, "float32", grad=True, noncontiguous=True))
            autograd_index += 1
            for dtype_name in QUICK_LOW_PRECISION_GRAD:
                if DTYPES[dtype_name] in backward:
                    cases.append(OpinfoCase(name, dtype_name, grad=True))
            continue
        for dtype_name, dtype in DTYPES.items():
            if dtype in backward:
                cases.append(OpinfoCase(name, dtype_name, grad=True))
                cases.append(OpinfoCase(name, dtype_name, grad=True, noncontiguous=True))
    return cases


def sample_limit(case: OpinfoCase, breadth: str) -> int | None:
    """How many of the case's samples run (the first ones): all (None) at full breadth."""
    if breadth != "quick":
        return None
    if case.grad and case.dtype in QUICK_LOW_PRECISION_GRAD:
        return QUICK_LOW_PRECISION_GRAD_SAMPLES
    return QUICK_GRAD_MAX_SAMPLES if case.grad else QUICK_MAX_SAMPLES[case.dtype]


def max_elements(case: OpinfoCase, breadth: str) -> int | None:
    """The most elements a sample of the case may have to run (None: any)."""
    return QUICK_LAYOUT_MAX_ELEMENTS if breadth == "quick" and case.noncontiguous else None


def skip_reason(op: Any, case: OpinfoCase, device_type: str, breadth: str = "full") -> str | None:
    """Why this case cannot run here, or None. The reason goes into the results file."""
    dtype = DTYPES[case.dtype]
    kind: CaseKind = "grad" if case.grad else "forward"
    for key in (
        (case.op, case.dtype, kind),
        (case.op, None, kind),
        (case.op, case.dtype, None),
        (case.op, None, None),
    ):
        skip = KNOWN_SKIPS.get(key)
        if skip is not None and not (breadth == "quick" and skip.quick_still_checked):
            return skip.reason
        layout_skip = LAYOUT_SKIPS.get(key) if case.noncontiguous else None
        if layout_skip is not None:
            return layout_skip.reason
    for device_only in DEVICE_ONLY:
        if case.op.startswith(device_only.prefix) and device_type not in device_only.device_types:
            return f"{case.op}: {device_only.reason}; not applicable to {device_type}"
    if case.op in RANDOM_OPS:
        return f"{case.op} draws random numbers: its values cannot be compared with a reference"
    fallback = case.op in NONDETERMINISTIC_OUTPUT_OPS  # an OpInfo without the attribute
    if getattr(op, "has_nondeterministic_output", fallback):
        return f"{case.op} has nondeterministic output (OpInfo has_nondeterministic_output)"
    supported = (
        op.supported_backward_dtypes(device_type) if case.grad else op.supported_dtypes(device_type)
    )
    if dtype not in supported:
        what = "backward" if case.grad else "forward"
        return f"OpInfo: {case.op} does not support {what} in {case.dtype} on {device_type}"
    ref_dtype = REFERENCE_DTYPE[dtype]
    ref_supported = op.supported_backward_dtypes("cpu") if case.grad else op.supported_dtypes("cpu")
    if ref_dtype not in ref_supported:
        return f"no reference: OpInfo: {case.op} does not support {ref_dtype} on the cpu"
    return None
