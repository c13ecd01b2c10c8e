"""The listed exceptions: the widenings of an OpInfo bound that the model does not derive.

Rules that describe one kernel's algorithm, constants fitted to seeds and constant widenings
are not part of the model (docs/design.md, "Listed exceptions"). Where one is still needed it
is an entry of `EXCEPTIONS` (a `records.ListedException`), keyed by its op, and by dtype and
forward or gradient where it applies to those only (`records.entry_for`), with the error
measured, the backend it was measured on and the reason. Its kind says what it widens:

- "tolerance": a factor on the dtype's rtol and atol (`TOLERANCE_SCALE`, read by
  `tolerances.case_tolerance`);
- "normwise": a factor on the normwise atol (`NORMWISE_SCALE`, the same);
- "kernel_ulps": a float32 kernel's error in units of float32's rounding, by which a
  gradient's graph weighs that kernel's intermediates (`KERNEL_ULPS`; `kernel_exceptions`,
  read by `sample_rules.grad_brackets` for `roundings.measure_graph`);
- "condition": an elementwise kernel's error in units of its function's condition: a factor
  on the CONDITION_EPS by which its bracket moves the inputs (`CONDITION_SCALE`, read by
  `sample_rules.condition_bracket`), and by which a gradient's graph moves that kernel's
  intermediates (`kernel_exceptions`).

At most 20: tests/unit/test_architecture.py enforces the cap. An exception comes from a reviewed
finding, never from a failing seed alone; a case whose bound one widened names it in its
failure message (`comparison`).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import torch

from accelkit.suite.opinfo.op_db import DTYPES
from accelkit.suite.opinfo.records import ExceptionKind, ListedException, by_key, entry_for

EXCEPTIONS: tuple[ListedException, ...] = (
    ListedException(
        op="nn.functional.ctc_loss",
        grad=True,
        kind="tolerance",
        factor=300.0,
        measured="1.0e-4 relative, float32",
        backend="cpu",
        reason=(
            "the gradient exp(lp) - exp(lcab + nll - lp) adds log-space values of order nll "
            "(233 to 285 on OpInfo's samples), each rounded with an absolute error of "
            "eps * |nll| along the 50-step alpha and beta recursions"
        ),
    ),
    *(
        ListedException(
            op=op,
            grad=True,
            kind="normwise",
            factor=8.0,
            measured=f"{worst} the normwise bound, float32",
            backend="cpu",
            reason=(
                "the grid gradient sums channels x taps terms scaled by (size - 1) / 2 "
                "(bicubic: 16 taps, weights computed in float32), and the input gradient's "
                "weights move with their points' coordinate rounding; DISCONTINUOUS brackets "
                "each coordinate's rounding apart, the terms' own bound is not derived"
            ),
        )
        for op, worst in (
            ("grid_sampler_2d", "3.30x"),
            ("grid_sampler_3d", "3.12x"),
            ("nn.functional.grid_sample", "4.09x"),
        )
    ),
    ListedException(
        op="aten::special_i1e",
        dtype="float32",
        grad=True,
        kind="kernel_ulps",
        factor=10.0,
        measured="9.5 eps relative near |x| = 8, float32",
        backend="cpu",
        reason=(
            "the float32 kernel lies further from the exact value than one rounding over "
            "OpInfo's [-9, 9] (2e6 points against float64), and special.i0e's backward "
            "i1e(x) - sgn(x) i0e(x) cancels and carries its whole error (float32 at seed 42)"
        ),
    ),
    ListedException(
        op="digamma",
        dtype="float32",
        kind="condition",
        factor=3.0,
        measured="4.0 eps |x psi'(x)| beyond rtol near the root 1.4616 (every float32 input "
        "in [-9, 9] on a grid of 4e6), 2.0 elsewhere",
        backend="cpu",
        reason=(
            "Cephes' psi, the CPU's and CUDA's kernel, sums the recurrence's 1 / (x + k) up to "
            "x + K >= 10 and the series led by log(x + K): near the root they cancel (4.6 "
            "against a condition |x psi'(x)| of 1.42), and the answer keeps eps times them"
        ),
    ),
    ListedException(
        op="special.airy_ai",
        dtype="float32",
        kind="condition",
        factor=20.0,
        measured="30.8 eps |x Ai'(x)| beyond rtol at x = 2.088 (every float32 input in "
        "[-9, 9] on a grid of 4e6), under 1 outside (0, 2.09)",
        backend="cpu",
        reason=(
            "for |x| < 2.09 Cephes' airy sums the Maclaurin series c1 f(x) - c2 g(x), whose "
            "positive terms cancel towards 2.09 (c1 f + c2 g reaches 70 |Ai|), and the "
            "answer keeps eps times them"
        ),
    ),
)


def _of_kind(kind: ExceptionKind) -> Mapping[str, ListedException]:
    return by_key(*(e for e in EXCEPTIONS if e.kind == kind))


TOLERANCE_SCALE = _of_kind("tolerance")
"""The "tolerance" exceptions by their keys ("op[/dtype][/grad]")."""
NORMWISE_SCALE = _of_kind("normwise")
"""The "normwise" exceptions by their keys."""
KERNEL_ULPS = _of_kind("kernel_ulps")
"""The "kernel_ulps" exceptions by their keys ("aten::kernel/dtype/grad")."""
CONDITION_SCALE = _of_kind("condition")
"""The "condition" exceptions by their keys ("op/dtype")."""

_TABLES: Mapping[ExceptionKind, Mapping[str, ListedException]] = MappingProxyType(
    {
        "tolerance": TOLERANCE_SCALE,
        "normwise": NORMWISE_SCALE,
        "kernel_ulps": KERNEL_ULPS,
        "condition": CONDITION_SCALE,
    }
)


def exception_for(
    kind: ExceptionKind, op_name: str, case_dtype: torch.dtype
) -> ListedException | None:
    """The listed exception of `kind` for a case ("op" or "op/grad" in `case_dtype`, its most
    specific entry: `records.entry_for`), or None. For "kernel_ulps": `kernel_exceptions`."""
    return entry_for(_TABLES[kind], op_name, case_dtype)


def kernel_exceptions(dtype: torch.dtype) -> Mapping[str, ListedException]:
    """The "kernel_ulps" and "condition" exceptions of `dtype`'s kernels, by aten name
    ("aten::special_i1e"; a "condition" one under its op's kernel and that kernel's in-place
    form: "aten::digamma", "aten::digamma_"): a gradient's graph in `dtype` weighs each one's
    intermediates by its factor (empty for a dtype without any)."""
    name = next((n for n, d in DTYPES.items() if d == dtype), None)
    found = {e.op: e for e in _TABLES["kernel_ulps"].values() if e.dtype == name}
    for entry in _TABLES["condition"].values():
        if entry.dtype == name and not entry.grad:
            kernel = "aten::" + entry.op.replace(".", "_")
            found.update({kernel: entry, kernel + "_": entry})
    return MappingProxyType(found)
