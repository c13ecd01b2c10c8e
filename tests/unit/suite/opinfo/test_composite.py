"""`sample_rules.composite_rules`: an elementwise op defined in Python as a composition of
torch's operators is re-checked with the roundings of that composition; one of torch's own
operators owes the function's condition, however its kernel is built."""

from __future__ import annotations

import pytest
import torch
from torch.testing._internal.opinfo.core import SampleInput

from accelkit.suite.opinfo import op_db, sample_rules
from accelkit.suite.opinfo.comparison import compare
from accelkit.suite.opinfo.sample_rules import COMPOSITE_RECHECK
from accelkit.suite.opinfo.tolerances import Rules


def _rules(name: str, x: torch.Tensor, dtype: torch.dtype) -> tuple[object, object, Rules]:
    op = op_db.op_db_by_name()[name]
    ref = SampleInput(x.to(torch.float64))  # type: ignore[no-untyped-call]
    bracket = sample_rules.condition_bracket(op, dtype, ref, Rules())
    return op, ref, Rules(elementwise=True, bracket=bracket)


def _passes(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype, rules: Rules) -> bool:
    try:
        compare(actual, expected, dtype, "nn.functional.tanhshrink", "sample 0", 1.0, rules)
    except AssertionError:
        return False
    return True


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_composition_owes_its_roundings_and_a_planted_error_still_fails(
    dtype: torch.dtype,
) -> None:
    # tanhshrink is x - tanh(x) in Python: tanh(x) rounds to the dtype before the difference,
    # which cancels for small x (float16 at x = 0.3: 0.0087 where tanh rounded by 1.2e-4).
    # Each op may leave a rounding to the dtype, u = eps / 2, beside float32's few units: a
    # unit of 2 eps(d) per op let a 3% error pass in bfloat16.
    x = torch.tensor([0.3, 0.05, -0.21, 2.0, 4.0], dtype=dtype)
    op, ref, rules = _rules("nn.functional.tanhshrink", x, dtype)
    expected = torch.nn.functional.tanhshrink(x.double())
    actual = torch.nn.functional.tanhshrink(x)
    if dtype == torch.float16:  # bfloat16 has op_db's toleranceOverride, atol 1e-2
        assert not _passes(actual, expected, dtype, rules)  # the function's condition
    found = sample_rules.composite_rules(op, dtype, ref, rules)
    assert found is not None and found.recheck == COMPOSITE_RECHECK
    assert _passes(actual, expected, dtype, found)
    assert not _passes((expected * 1.03).to(dtype), expected, dtype, found)


def test_one_of_torchs_operators_owes_the_functions_condition() -> None:
    # special.ndtr's CPU kernel is 0.5 * (1 + erf(x / sqrt(2))), which cancels for x < -5 (a
    # known CPU failure): no composition re-check rescues it.
    x = torch.tensor([-5.6, 0.5], dtype=torch.float32)
    op, ref, rules = _rules("special.ndtr", x, torch.float32)
    assert sample_rules.composite_rules(op, torch.float32, ref, rules) is None
    # a Python function that runs one operator (nn.functional.relu) is not a composition
    op, ref, rules = _rules("nn.functional.relu", x, torch.float32)
    assert sample_rules.composite_rules(op, torch.float32, ref, rules) is None
