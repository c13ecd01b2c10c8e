"""The tolerance model of the OpInfo cases: how far one output may lie from the reference.

`case_tolerance` is the one function that decides the (rtol, atol) of an output of a case
(`scalar_tolerance` that of a Python number an op returns). It starts from
`accelkit.suite.reference`'s per-dtype tolerance for the least precise dtype involved and
takes the largest of:

- that tolerance times the op's `scales.TOLERANCE_SCALE` factor (`LINALG_SCALE` by default
  for linear algebra);
- the op's own `toleranceOverride` metadata that PyTorch's maintainers recorded in `op_db`
  (`opinfo_tolerance`);
- a normwise atol, NORMWISE_EPS * eps * the largest magnitude of the reference and the
  sample (times the op's `scales.NORMWISE_SCALE` factor);
- the sample's own bounds (`Rules`, from `sample_rules`: term magnitudes and condition
  numbers that each sample decides).

For example, the float32 forward of `exp` (no entries) whose reference's largest magnitude is
8103 gets rtol 1.3e-6 and atol max(1e-5, 2 * 1.19e-7 * 8103) = 1.9e-3.

`Rules` carries a sample's bounds and what else it allows (an overflowed intermediate, a
bracket for a step function) from `sample_rules` to `comparison`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils import _pytree as pytree

from accelkit.suite.opinfo.op_db import op_db_by_name
from accelkit.suite.opinfo.records import entry_for
from accelkit.suite.opinfo.scales import (
    LINALG_OPS_PREFIXES,
    LINALG_SCALE,
    NORMWISE_SCALE,
    TOLERANCE_SCALE,
)
from accelkit.suite.reference import TOLERANCES, tolerance

# Rounding error of a sum (matmul, conv, reductions, intermediate products) is relative
# to the magnitude of the summands, not of the result: an element where terms cancel
# carries an absolute error of order eps times the magnitudes that cancelled, however small
# the element. The largest magnitude in the reference stands for those:
# atol >= NORMWISE_EPS * eps(dtype) * max(|reference|, |inputs|): two roundings at the
# largest magnitude involved. A 0.1% error stays visible in float32 for every element above
# 0.1% of that magnitude.
NORMWISE_EPS = 2.0


@dataclass(frozen=True)
class Rules:
    """How one sample's outputs are compared, beyond the per-dtype tolerance.

    inputs_dtype: the least precise floating dtype among the sample's inputs (a float64 case
    whose sample passes float32 weights is accurate to float32 only).
    may_overflow: the reference's forward outputs exceed the case dtype's range, so the
    device's forward legitimately overflowed; gradients computed from those inf values may
    be inf/NaN (finite elements are still compared).
    bracket: (low, high) elementwise bounds of the reference over inputs perturbed by their
    rounding (DISCONTINUOUS ops): an answer anywhere in [low, high] is right.
    terms: the magnitude of the terms the kernel rounds (SAMPLE_TERMS, times the entry's
    factor): atol >= NORMWISE_EPS * eps * terms; input_terms: the same per input that needs a
    gradient (run_grad uses the entry of each input's gradient as its terms).
    relative_condition, normwise_condition: factor * kappa of a SAMPLE_CONDITION entry:
    rtol >= relative_condition * eps, atol >= normwise_condition * eps * magnitude.
    """

    inputs_dtype: torch.dtype | None = None
    may_overflow: bool = False
    bracket: tuple[Any, Any] | None = None
    terms: float = 0.0
    input_terms: tuple[float, ...] = ()
    relative_condition: float = 0.0
    normwise_condition: float = 0.0


NO_RULES = Rules()


def case_tolerance(
    op_name: str,
    case_dtype: torch.dtype,
    out_dtype: torch.dtype,
    reference: torch.Tensor,
    magnitude: float = 0.0,
    inputs_dtype: torch.dtype | None = None,
    rules: Rules | None = None,
) -> tuple[float, float]:
    """(rtol, atol) for one output: the reference module's per-dtype tolerance for the least
    precise dtype involved (the case's, the output's or an input's), scaled by
    TOLERANCE_SCALE, at least the op's own toleranceOverride in op_db, normwise
    (NORMWISE_EPS), and at least the sample's own bounds (`rules`: SAMPLE_TERMS,
    SAMPLE_CONDITION).

    `op_name` is the case's ("op" or "op/grad"), `reference` the reference's value of the
    output, `magnitude` the largest magnitude among the sample's inputs (and, for a gradient,
    the outputs)."""
    bound = least_precise(case_dtype, out_dtype, *([inputs_dtype] if inputs_dtype else []))
    base = op_name.partition("/")[0]
    default = LINALG_SCALE if base.startswith(LINALG_OPS_PREFIXES) else 1.0
    scale_entry = entry_for(TOLERANCE_SCALE, op_name, case_dtype)
    scale = scale_entry.factor if scale_entry is not None else default
    normwise_entry = entry_for(NORMWISE_SCALE, op_name, case_dtype)
    normwise = normwise_entry.factor if normwise_entry is not None else 1.0
    rtol, atol = tolerance(bound, scale)
    op_atol, op_rtol = opinfo_tolerance(op_name.removesuffix("/grad"), case_dtype)
    rtol, atol = max(rtol, op_rtol), max(atol, op_atol)
    magnitude = max(magnitude, max_magnitude(reference))
    eps = torch.finfo(bound).eps
    atol = max(atol, normwise * NORMWISE_EPS * eps * magnitude)
    if rules is not None:
        rtol = max(rtol, rules.relative_condition * eps)
        atol = max(
            atol,
            NORMWISE_EPS * eps * rules.terms,
            rules.normwise_condition * eps * magnitude,
        )
    return rtol, atol


def scalar_tolerance(case_dtype: torch.dtype) -> tuple[float, float]:
    """(rtol, atol) for a Python float or complex an op returns: the per-dtype tolerance of
    the case dtype (or float64's, if less precise)."""
    return tolerance(least_precise(case_dtype, torch.float64))


def least_precise(*dtypes: torch.dtype) -> torch.dtype:
    """The dtype whose tolerance bounds the answer: the one with the largest epsilon."""
    known = [d for d in dtypes if d in TOLERANCES]
    return max(known, key=lambda d: torch.finfo(d).eps)


@functools.cache
def opinfo_tolerance(op_name: str, dtype: torch.dtype) -> tuple[float, float]:
    """The largest (atol, rtol) that the op's own `toleranceOverride` metadata allows."""
    from torch.testing._internal.common_device_type import toleranceOverride

    atol = rtol = 0.0
    op = op_db_by_name()[op_name]
    for info in op.decorators:
        for decorator in getattr(info, "decorators", [info]):
            if isinstance(decorator, toleranceOverride) and dtype in decorator.d:
                atol = max(atol, decorator.d[dtype].atol)
                rtol = max(rtol, decorator.d[dtype].rtol)
    return atol, rtol


def overflow_threshold(dtype: torch.dtype) -> float:
    """The smallest magnitude that rounds to inf in `dtype` (round to nearest, ties to even):
    max + ulp(max) / 2, where ulp(max) = eps * 2 ** floor(log2(max)) (inf for float64)."""
    info = torch.finfo(dtype)
    exponent = math.frexp(info.max)[1] - 1  # max = 1.xxx * 2 ** exponent
    return info.max + math.ldexp(info.eps / 2, exponent)


def max_magnitude(value: Any) -> float:
    """The largest finite magnitude among the floating tensors in `value` (0 if none)."""
    largest = 0.0
    for x in pytree.tree_leaves(value):
        if isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex()):
            x = x.detach()
            if x.layout != torch.strided:
                x = x.to_dense()
            finite = x[torch.isfinite(x)]
            if finite.numel():
                largest = max(largest, float(finite.abs().max()))
    return largest
