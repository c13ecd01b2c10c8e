"""Which samples a compiled OpInfo case compiles (`compiled.chosen_samples`), and that it
compares each with a reference of that sample as it was drawn, even where the op updates
tensors that its samples share.

batch_norm's samples 7-10 share one running_mean and running_var; sample 7 reads them
(eval mode) and sample 8 updates them (training). The compiled batch runs the samples in
order, so sample 7's answer is right; a reference computed after the batch from the shared
tensors saw sample 8's update, and the case failed "the compiled code is wrong" (float16,
16% off) where the code was right. In float64 the reference sample is the sample itself (no
conversion copies it), so computing sample 8's reference updated sample 9's statistics.
The compile itself is not what is tested: the batch runs eagerly here (the same order and
the same in-place updates), so no C++ compile is needed.

An op that op_db wraps in wrapper_set_seed, which dynamo cannot trace, compiles the op
itself on its samples that draw no random numbers (`compiled.SEEDED_OPS`).

op_db is imported in a subprocess only (tests/test_probe.py must see it unimported).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from accelkit.suite.opinfo import compiled
from accelkit.suite.opinfo.planning import OpinfoCase
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
compared = compiled.run_compiled_case(op, case, "cpu", "full", 0).compared
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


def _op_with(count: int) -> SimpleNamespace:
    return SimpleNamespace(
        sample_inputs_func=lambda op, device, dtype, requires_grad: iter(range(count))
    )


def test_full_breadth_compiles_every_sample_of_a_small_op() -> None:
    case = OpinfoCase("add", "float32")
    indices, samples = compiled.chosen_samples(_op_with(9), case, "cpu", "full", 0)
    assert indices == samples == list(range(9))
    indices, samples = compiled.chosen_samples(_op_with(9), case, "cpu", "quick", 0)
    assert indices == samples == list(range(compiled.QUICK_COMPILED_SAMPLES))


def test_a_large_op_compiles_sample_0_and_others_drawn_by_the_case_seed() -> None:
    """576 max_pool3d samples in one graph were still compiling after 300 s."""
    cap = compiled.FULL_COMPILED_SAMPLES
    case = OpinfoCase("nn.functional.max_pool3d", "float16")
    indices, samples = compiled.chosen_samples(_op_with(576), case, "cpu", "full", 0)
    assert samples == indices  # each sample keeps its index in the op's list (messages)
    assert len(indices) == cap and indices[0] == 0
    assert indices == sorted(set(indices)) and indices[-1] < 576
    again, _ = compiled.chosen_samples(_op_with(576), case, "cpu", "full", 0)
    assert again == indices  # a case replays with the same samples
    other, _ = compiled.chosen_samples(_op_with(576), case, "cpu", "full", 1)
    assert other[0] == 0 and other != indices  # another --seed covers others
    other_dtype, _ = compiled.chosen_samples(
        _op_with(576), OpinfoCase("nn.functional.max_pool3d", "float32"), "cpu", "full", 0
    )
    assert other_dtype != indices


SEEDED = """
import json, sys
import torch
from accelkit.suite.opinfo import compiled
from accelkit.suite.opinfo.op_db import op_db_by_name
from accelkit.suite.opinfo.planning import OpinfoCase

op = op_db_by_name()[sys.argv[1]]
case = OpinfoCase(sys.argv[1], "float32")
every = compiled.draw_samples(op, case, "cpu", None, 0)
indices, samples = compiled.chosen_samples(op, case, "cpu", "full", 0)
sample = samples[0]


def traced(fn):
    torch._dynamo.reset()
    try:
        compiled_fn = torch.compile(fn, backend="eager", fullgraph=True)
        compiled_fn(sample.input, *sample.args, **sample.kwargs)
    except Exception as error:  # dynamo's refusal, by type name
        return type(error).__name__
    return "traced"


print(json.dumps({
    "every": len(every),
    "indices": indices,
    "random": [i for i, s in enumerate(every) if not compiled.SEEDED_OPS[case.op].deterministic(s)],
    "callable_is_op_db_s": compiled.compiled_callable(op) is op.op,
    "op_db_wrapper": traced(op.op),
    "compiled_callable": traced(compiled.compiled_callable(op)),
}))
"""


@pytest.mark.parametrize(
    ("op", "count", "random_count"),
    [
        ("nn.functional.scaled_dot_product_attention", 25, 12),  # dropout_p 0.5
        ("nn.functional.multi_head_attention_forward", 192, 96),  # training=True
        ("nn.functional.feature_alpha_dropout.without_train", None, 0),
    ],
)
def test_an_op_wrapped_in_wrapper_set_seed_compiles_itself_on_its_deterministic_samples(
    op: str, count: int | None, random_count: int
) -> None:
    found = run_python(SEEDED, op)
    # The premise: dynamo cannot trace op_db's wrapper (freeze_rng_state).
    assert found["op_db_wrapper"] == "Unsupported"
    assert found["compiled_callable"] == "traced"
    assert not found["callable_is_op_db_s"]
    if count is not None:
        assert found["every"] == count
    assert len(found["random"]) == random_count
    assert found["indices"] and not set(found["indices"]) & set(found["random"])
    expected = min(found["every"] - random_count, compiled.FULL_COMPILED_SAMPLES)
    assert len(found["indices"]) == expected


def test_an_op_with_a_costly_graph_compiles_fewer_samples() -> None:
    """interpolate.bicubic's 24 samples took 395 s to compile in float64 (cold cache)."""
    case = OpinfoCase("nn.functional.interpolate.bicubic", "float64")
    cap = compiled.COMPILED_SAMPLE_CAPS[case.op]
    assert cap < compiled.FULL_COMPILED_SAMPLES
    indices, _ = compiled.chosen_samples(_op_with(24), case, "cpu", "full", 0)
    assert len(indices) == cap and indices[0] == 0 and indices == sorted(set(indices))
