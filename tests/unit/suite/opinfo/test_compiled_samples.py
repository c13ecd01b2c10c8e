"""A compiled OpInfo case compares each sample with a reference of that sample as it was
drawn, even where the op updates tensors that its samples share.

batch_norm's samples 7-10 share one running_mean and running_var; sample 7 reads them
(eval mode) and sample 8 updates them (training). The compiled batch runs the samples in
order, so sample 7's answer is right; a reference computed after the batch from the shared
tensors saw sample 8's update, and the case failed "the compiled code is wrong" (float16,
16% off) where the code was right. The compile itself is not what is tested: the batch runs
eagerly here (the same order and the same in-place updates), so no C++ compile is needed.

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
op = op_db_by_name()["nn.functional.batch_norm"]
case = OpinfoCase("nn.functional.batch_norm", sys.argv[1])
samples = compiled.draw_samples(op, case, "cpu", None, 0)
shared = [i for i, s in enumerate(samples) if s.args and s.args[0] is samples[7].args[0]]
before = [a.clone() for a in samples[7].args]
compared = compiled.run_compiled_case(op, case, "cpu", "full", 0)
unchanged = all(torch.equal(a, b) for a, b in zip(before, samples[7].args))
print(json.dumps({"shared": shared, "compared": compared, "unchanged": unchanged}))
"""


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_samples_that_share_updated_tensors_are_compared_as_drawn(dtype: str) -> None:
    found = run_python(SHARED_STATE, dtype)
    assert found["shared"] == [7, 8, 9, 10]  # the premise: one running_mean, sample 8 trains
    assert found["compared"] >= 10
    assert found["unchanged"]  # the batch updated its own copies
