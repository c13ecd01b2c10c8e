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


def test_a_bracket_judges_its_elements_alone_and_an_output_without_one_normwise() -> None:
    """The graph's re-check (`sample_rules.graph_rules`): each element within its range, no
    normwise atol; an output its decomposition does not give (bracket None) keeps the plain
    normwise bound, at the largest magnitude."""
    want = torch.tensor([100.0, 1.0], dtype=torch.float64)
    got = torch.tensor([100.0, 1.0 + 1e-5], dtype=torch.float32)  # 1e-5 off the small one
    graph = Rules(elementwise=True, bracket=(want - 1e-6, want + 1e-6))
    compare(got, want, torch.float32, "sum", "out", 100.0, Rules())  # normwise: 2 eps 100 allowed
    with pytest.raises(AssertionError, match="up to"):
        compare(got, want, torch.float32, "sum", "out", 100.0, graph)
    compare(
        got,
        want,
        torch.float32,
        "sum",
        "out",
        100.0,
        Rules(elementwise=True, bracket=(want - 2e-5, want + 2e-5)),
    )
    both = Rules(elementwise=True, bracket=((want - 1e-6, None), (want + 1e-6, None)))
    with pytest.raises(AssertionError, match=r"out\[0\]"):
        compare((got, got), (want, want), torch.float32, "sum", "out", 100.0, both)
    compare((want.float(), got), (want, want), torch.float32, "sum", "out", 100.0, both)
