"""A relative error planted in every gradient the OpInfo gradient cases compute, in a
subprocess (op_db is imported there only: tests/test_probe.py must see it unimported).

`grad_cases_pass(runs, below=...)` runs each (op, dtype, seed, relative error) gradient case
as the suite seeds it and says whether it passed; `below` plants the error only in the
elements under that fraction of the gradient's largest (a fault a normwise bound misses).
The reference's float64 and complex128 gradients are never touched.
"""

from __future__ import annotations

import json

from tests.helpers import run_python

_SCRIPT = """
import json, random, sys, zlib
import numpy, torch
from accelkit.suite.opinfo import op_db, running

runs, below = json.loads(sys.argv[1]), json.loads(sys.argv[2])
planted = {"rel": 0.0}
REFERENCE = (torch.float64, torch.complex128)
grad = torch.autograd.grad

def off(x, rel):
    if below is None:
        return x * (1 + rel)
    return torch.where(x.abs() < below * x.abs().max(), x * (1 + rel), x)

def perturb(value):
    return tuple(
        off(x, planted["rel"])
        if isinstance(x, torch.Tensor) and x.dtype not in REFERENCE and x.numel()
        else x
        for x in value
    )

torch.autograd.grad = lambda *a, **k: perturb(grad(*a, **k))
ops = op_db.op_db_by_name()

def run(name, dtype, seed, rel):
    planted["rel"] = rel
    nodeid = f"conformance/test_opinfo.py::test_opinfo[{name}/{dtype}/grad]"
    case_seed = (seed * 1_000_003 + zlib.crc32(nodeid.encode())) % (2**31)
    random.seed(case_seed); numpy.random.seed(case_seed); torch.manual_seed(case_seed)
    try:
        return running.run_grad(ops[name], name, "cpu", op_db.DTYPES[dtype], None) > 0
    except AssertionError:
        return False

print(json.dumps([run(*case) for case in runs]))
"""


def grad_cases_pass(
    runs: list[tuple[str, str, int, float]], *, below: float | None = None
) -> list[bool]:
    """Whether each (op, dtype, seed, relative error) gradient case passes."""
    passed: list[bool] = run_python(_SCRIPT, json.dumps(runs), json.dumps(below))
    return passed
