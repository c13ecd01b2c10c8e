"""Operator breadth from PyTorch's own OpInfo database (`op_db`), checked against float64.

Every OpInfo becomes cases per dtype (`conformance/opinfo/<op>/<dtype>`, plus
`.../<dtype>/grad` for gradients). A case runs the op's sample inputs on the device and
compares each output with the same sample evaluated in float64 (complex128) on the CPU, from
the same rounded inputs (`accelkit.suite.numerics.reference.to_reference`). Tolerances come from
`accelkit.suite.numerics.reference` (a few units of the dtype's rounding), widened only by the op's
own
`toleranceOverride` metadata in `op_db` where its test class, device type and dtype apply, by
a documented rule, or by a bound that the sample itself decides (docs/design.md,
"Tolerances").

The modules, in the order a case meets them:

- `op_db`: the database by name (imported once per process: seconds) and the tested dtypes;
- `planning`: which ops, dtypes and samples become cases (quick and full breadth), and why a
  case skips (`skips`: `KNOWN_SKIPS`, `RANDOM_OPS`, `DEVICE_ONLY`);
- `running`: a case's samples on the device against the reference;
- `sample_rules`: the bounds each sample decides, from the tables in `sample_tables`
  (`SAMPLE_TERMS`, `SAMPLE_CONDITION`, `BACKWARD_OVERFLOW`, `SQUARED`) and the measures in
  `sample_measures`;
- `tolerances`: the tolerance model (`case_tolerance`, with linear algebra's per-sample
  condition and the listed exceptions of `exceptions`, `EXCEPTIONS`: at most 20 widenings
  the model does not derive, each with its measured error, backend and reason);
- `comparison`: an answer against the reference under those tolerances (`Mismatch`);
- `ties`: index outputs that a tie decides (`TIE_INDEX_OPS`), compared by the values they
  point at;
- `discontinuity`: step functions (`DISCONTINUOUS`), accepted within the reference's range
  over the inputs' rounding;
- `eigen`: eig and eigvals (`EIGEN_OPS`), matched as eigen-decompositions;
- `compiled`: the same samples through `torch.compile(backend="inductor")`
  (`conformance/opinfo_compiled/...`);
- `records`: the typed, frozen records that every rule table is made of, each with its
  reason, and how a case finds its entry.

What cannot be compared is skipped with the reason, never left out silently.

The case module (`accelkit/suite/conformance/test_opinfo.py`) uses the names exported here;
tests import the submodules.
"""

from __future__ import annotations

from accelkit.suite.opinfo.comparison import Mismatch
from accelkit.suite.opinfo.op_db import op_db_by_name
from accelkit.suite.opinfo.planning import (
    OpinfoCase,
    max_elements,
    plan,
    sample_limit,
    skip_reason,
)
from accelkit.suite.opinfo.running import run_case

__all__ = [
    "Mismatch",
    "OpinfoCase",
    "max_elements",
    "op_db_by_name",
    "plan",
    "run_case",
    "sample_limit",
    "skip_reason",
]
