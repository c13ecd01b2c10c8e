"""`accelkit.suite.opinfo.comparison`: where an answer must overflow, with and without the
reference's range over the roundings (`Rules.bracket`)."""

from __future__ import annotations

import pytest
import torch

from accelkit.suite.opinfo import Mismatch
from accelkit.suite.opinfo.comparison import compare
from accelkit.suite.opinfo.tolerances import Rules


def _check(got: float, want: float, bracket: tuple[float, float] | None = None) -> None:
    rules = Rules()
    if bracket is not None:
        low, high = (torch.tensor([v], dtype=torch.float64) for v in bracket)
        rules = Rules(bracket=(low, high))
    actual = torch.tensor([got], dtype=torch.float16)
    expected = torch.tensor([want], dtype=torch.float64)
    compare(actual, expected, torch.float16, "pow/grad", "grad", 1.0, rules)


def test_a_reference_beyond_float16s_range_must_overflow() -> None:
    with pytest.raises(Mismatch, match="finite values where the reference overflows"):
        _check(65504.0, 66500.0)
    _check(float("inf"), 66500.0)


def test_a_range_that_reaches_the_threshold_allows_either_answer() -> None:
    """float16 pow's gradient x ** y log(x) at seed 52: the reference just past the
    threshold, its range over the graph's roundings on both sides of it."""
    _check(65504.0, 65600.0, (65300.0, 65700.0))
    _check(float("inf"), 65400.0, (65300.0, 65700.0))


def test_a_range_wholly_beyond_the_threshold_must_overflow() -> None:
    with pytest.raises(Mismatch, match="finite values where the reference overflows"):
        _check(65504.0, 67000.0, (66500.0, 67500.0))
    with pytest.raises(Mismatch, match="finite values where the reference overflows"):
        _check(-65504.0, -67000.0, (-67500.0, -66500.0))
