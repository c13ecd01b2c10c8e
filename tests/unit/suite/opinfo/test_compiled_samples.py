"""A compiled OpInfo case compares each sample with a reference of that sample as it was
drawn, even where the op updates tensors that its samples share.

batch_norm's samples 7-10 share one running_mean and running_var; sample 7 reads them
(eval mode) and sample 8 updates them (training). The compiled batch runs the samples in
order, so sample 7's answer is right; a reference computed after the batch from the shared
tensors saw sample 8's update, and the case failed "the compiled code is wrong" (float16,
16% off) where the code was right. In float64 the reference sample is the sample itself (no
conversion copies it), so computing sample 8's reference updated sample 9's statistics.
The compile itself is not what is tested: the batch runs eagerly here (the same order and
the same in-place updates), so no C++ compile is needed.

op_db is imported in a subprocess only (tests/test_probe.py must see it unimported).
"""

from __future__ import annotations

import pytest

from tests.helpers import run_python

SHARED_STATE = """
import json, sys
import torch
from accelkit.suite.opinfo import compiled
from accelkit.suite.opinfo.op_db import op_db_by_name
from accelkit.suite.opinfo.planning import OpinfoCase


def eager_batch(entries, *, dynamic=True):
    return [[fn_call(op, s) for s in samples] for op, samples in entries]


def fn_call(op, s):
    with torch.no_grad():
        return op.op(s.input, *s.args, **s.kwargs)


compiled.compile_batch = eager_batch
op = op_db_by_name()[sys.argv[1]]
case = OpinfoCase(sys.argv[1], sys.argv[2])
samples = compiled.draw_samples(op, case, "cpu", None, 0)
tensors = [{id(a) for a in s.args if isinstance(a, torch.Tensor)} for s in samples]
shared = [i for i, ids in enumerate(tensors) if ids & tensors[7]]
before = [a.clone() for a in samples[7].args if isinstance(a, torch.Tensor)]
compared = compiled.run_compiled_case(op, case, "cpu", "full", 0)
after = [a for a in samples[7].args if isinstance(a, torch.Tensor)]
unchanged = all(torch.equal(a, b) for a, b in zip(before, after, strict=True))
print(json.dumps({"shared": shared, "compared": compared, "unchanged": unchanged}))
"""


@pytest.mark.parametrize(
    ("op", "dtype", "sharing"),
    [
        ("nn.functional.batch_norm", "float16", [7, 8, 9, 10]),
        ("nn.functional.batch_norm", "float64", [7, 8, 9, 10]),  # its own reference
        ("native_batch_norm", "float64", [5, 6, 7, 8]),
    ],
)
def test_samples_that_share_updated_tensors_are_compared_as_drawn(
    op: str, dtype: str, sharing: list[int]
) -> None:
    found = run_python(SHARED_STATE, op, dtype)
    assert found["shared"] == sharing  # the premise: samples that share running statistics
    assert found["compared"] >= 10
    assert found["unchanged"]  # the batch updated its own copies
