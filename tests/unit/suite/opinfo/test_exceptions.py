"""`accelkit.suite.opinfo.exceptions`: which case a listed exception widens (its op, dtype,
forward or gradient), by how much, and that a failing case names the one that widened its
bound, as it names a sample-table entry that did and the re-check that judged it."""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing._internal.opinfo.core import SampleInput

from accelkit.suite.numerics.reference import tolerance
from accelkit.suite.opinfo import sample_rules as sample_rules_module
from accelkit.suite.opinfo.comparison import compare
from accelkit.suite.opinfo.exceptions import (
    CONDITION_SCALE,
    EXCEPTIONS,
    KERNEL_ULPS,
    NORMWISE_SCALE,
    TOLERANCE_SCALE,
    exception_for,
    kernel_exceptions,
)
from accelkit.suite.opinfo.op_db import op_db_by_name
from accelkit.suite.opinfo.records import ListedException
from accelkit.suite.opinfo.sample_rules import (
    GRAPH_RECHECK,
    OVERFLOW_RECHECK,
    STABLE_RECHECK,
    condition_bracket,
    grad_brackets,
    graph_rules,
    overflow_rules,
    sample_rules,
)
from accelkit.suite.opinfo.sample_tables import SAMPLE_CONDITION, SAMPLE_TERMS
from accelkit.suite.opinfo.tolerances import NORMWISE_EPS, Rules, case_tolerance

F32, C64 = torch.float32, torch.complex64


def test_each_kind_reads_its_own_entries_and_every_entry_is_read() -> None:
    views = (TOLERANCE_SCALE, NORMWISE_SCALE, KERNEL_ULPS, CONDITION_SCALE)
    assert sum(len(v) for v in views) == len(EXCEPTIONS)
    kinds = ("tolerance", "normwise", "kernel_ulps", "condition")
    for kind, view in zip(kinds, views, strict=True):
        assert {e.kind for e in view.values()} == {kind}


@pytest.mark.parametrize(
    ("kind", "op_name", "dtype", "key"),
    [
        # forward or gradient
        ("tolerance", "nn.functional.ctc_loss/grad", F32, "nn.functional.ctc_loss/grad"),
        ("tolerance", "nn.functional.ctc_loss", F32, None),
        ("tolerance", "linalg.eig/grad", C64, None),
        # one dtype only
        ("condition", "digamma", F32, "digamma/float32"),
        ("condition", "digamma", torch.float16, None),
        ("condition", "digamma/grad", F32, None),
        ("condition", "special.airy_ai", F32, "special.airy_ai/float32"),
        # every dtype's gradient
        ("normwise", "grid_sampler_2d/grad", torch.float64, "grid_sampler_2d/grad"),
        ("normwise", "grid_sampler_2d", torch.float64, None),
        # one kind only
        ("normwise", "nn.functional.ctc_loss/grad", F32, None),
        ("tolerance", "grid_sampler_2d/grad", F32, None),
    ],
)
def test_a_case_finds_the_entry_for_its_op_dtype_and_kind(
    kind: str, op_name: str, dtype: torch.dtype, key: str | None
) -> None:
    found = exception_for(kind, op_name, dtype)  # type: ignore[arg-type]
    assert (found.key if found else None) == key


def test_kernel_ulps_and_conditions_are_float32s_only() -> None:
    kernels = kernel_exceptions(F32)
    assert {name: e.factor for name, e in kernels.items() if e.kind == "kernel_ulps"} == {
        "aten::special_i1e": 10.0,
    }
    # a "condition" exception under its op's kernel, and that kernel's in-place form
    conditions = {name: e.key for name, e in kernels.items() if e.kind == "condition"}
    assert conditions == {
        "aten::digamma": "digamma/float32",
        "aten::digamma_": "digamma/float32",
        "aten::special_airy_ai": "special.airy_ai/float32",
        "aten::special_airy_ai_": "special.airy_ai/float32",
    }
    assert not kernel_exceptions(torch.float64) and not kernel_exceptions(torch.float16)


def test_a_kernels_condition_units_weigh_it_in_a_gradients_graph(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """mvlgamma's backward sums digamma_(x - j / 2) (p = 1: digamma(x)), read from the
    inputs alone; near digamma's root the float32 kernel is 5.8 eps off, past the bracket of
    the inputs' rounding (2.8 eps). The graph weighs digamma_'s intermediate by its
    exception's 3 units of |x psi'(x)| (1.42), and names it."""
    op = op_db_by_name()["mvlgamma.mvlgamma_p_1"]
    point = 1.4470016956329346
    x = torch.tensor([point, 3.0], dtype=torch.float64, requires_grad=True)
    ref, weights = SampleInput(x, kwargs={"p": 1}), [torch.ones(2, dtype=torch.float64)]
    leaf = x.detach().float().requires_grad_(True)
    (actual,) = torch.autograd.grad(torch.mvlgamma(leaf, 1), leaf, torch.ones(2))
    error = float(actual[0].double() - torch.special.digamma(x.detach()[0]))

    def bracket() -> tuple[float, float, tuple[ListedException, ...]]:
        found = grad_brackets(op, F32, ref, Rules(), weights)
        ((low, high),) = found.brackets
        exact = float(torch.special.digamma(x.detach()[0]))
        return float(low[0]) - exact, float(high[0]) - exact, found.exceptions

    eps = torch.finfo(F32).eps
    low, high, listed = bracket()
    assert [e.key for e in listed] == ["digamma/float32"]
    assert low < error < high and high - low > 2 * 3 * 2 * eps * 1.41
    monkeypatch.setattr(sample_rules_module, "kernel_exceptions", lambda dtype: {})
    low, high, listed = bracket()
    assert listed == () and not low < error < high  # the inputs' rounding alone


def test_a_tolerance_exception_scales_rtol_and_atol() -> None:
    reference = torch.zeros(3, dtype=torch.float64)
    rtol, atol = tolerance(F32)
    plain = case_tolerance("nn.functional.ctc_loss", F32, F32, reference)
    scaled = case_tolerance("nn.functional.ctc_loss/grad", F32, F32, reference)
    assert plain == (rtol, atol)
    assert scaled == (300 * rtol, 300 * atol)


def test_a_normwise_exception_scales_the_normwise_atol() -> None:
    reference = torch.full((3,), 100.0, dtype=torch.float64)
    eps = torch.finfo(F32).eps
    _, atol = case_tolerance("grid_sampler_2d/grad", F32, F32, reference)
    assert atol == 8 * NORMWISE_EPS * eps * 100.0


def test_a_listed_exception_needs_a_measurement_a_backend_and_a_reason() -> None:
    entry = dict(op="x", grad=True, kind="tolerance", factor=2.0, reason="r", backend="cpu")
    ListedException(**entry, measured="1e-5 relative")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="measured"):
        ListedException(**entry, measured="")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="above 1"):
        ListedException(**{**entry, "factor": 1.0}, measured="m")  # type: ignore[arg-type]


def _fails(op_name: str, got: float, want: float, rules: Rules | None = None) -> str:
    actual = torch.tensor([got, 1.0], dtype=F32)
    expected = torch.tensor([want, 1.0], dtype=torch.float64)
    with pytest.raises(AssertionError) as failure:
        compare(actual, expected, F32, op_name, "grad", 1.0, rules or Rules())
    return str(failure.value)


def test_a_failing_case_names_the_exception_that_widened_its_bound() -> None:
    message = _fails("nn.functional.ctc_loss/grad", 1.01, 1.0)
    assert "listed exception: nn.functional.ctc_loss/grad tolerance x300" in message
    assert "measured 1.0e-4 relative, float32 on cpu" in message
    assert "listed exception" not in _fails("nn.functional.ctc_loss", 1.01, 1.0)
    # grid_sampler_2d's normwise atol at magnitude 100 decides: its factor is named
    message = _fails("grid_sampler_2d/grad", 100.1, 100.0)
    assert "listed exception: grid_sampler_2d/grad normwise x8" in message


def test_an_exception_that_did_not_widen_the_bound_is_not_named() -> None:
    # an elementwise comparison has no normwise atol: the normwise factor changed nothing
    bracket = (torch.tensor([1.0, 1.0], dtype=torch.float64),) * 2
    rules = Rules(elementwise=True, bracket=bracket)
    assert "listed exception" not in _fails("grid_sampler_2d/grad", 1.01, 1.0, rules)


def test_a_kernels_listed_error_is_named_by_the_gradients_it_widened() -> None:
    # i0e's gradient i1e(x) - sgn(x) i0e(x) at -7.7: its graph weighs the float32 kernels'
    # intermediates by their listed errors; float64's graph has none
    op = op_db_by_name()["special.i0e"]
    x = torch.tensor([-7.7, 0.5], dtype=torch.float64, requires_grad=True)
    found = {}
    for dtype in (F32, torch.float64):
        weights = [torch.ones(2, dtype=dtype)]
        rules = sample_rules(op, "special.i0e/grad", dtype, SampleInput(x), Rules(), weights)
        found[dtype] = sorted(e.key for e in rules.exceptions)
    assert found == {
        F32: ["aten::special_i1e/float32/grad"],
        torch.float64: [],
    }
    (i1e,) = (e for e in EXCEPTIONS if e.op == "aten::special_i1e")
    bracket = (torch.tensor([1.0, 1.0], dtype=torch.float64),) * 2
    rules = Rules(elementwise=True, bracket=bracket, exceptions=(i1e,))
    message = _fails("special.i0e/grad", 1.01, 1.0, rules)
    assert "listed exception: aten::special_i1e/float32/grad kernel_ulps x10" in message
    # compared normwise (no bracket), the graph's weights widened nothing
    unbracketed = Rules(exceptions=(i1e,))
    assert "listed exception" not in _fails("special.i0e/grad", 1.01, 1.0, unbracketed)


@pytest.mark.parametrize(
    ("name", "point", "factor"),
    [
        # Cephes' psi near its root 1.4616: 4 eps |x psi'(x)| off, twice the condition's
        ("digamma", 1.4470016956329346, 3),
        # Cephes' airy sums a Maclaurin series that cancels towards 2.09: 30.8 units off
        ("special.airy_ai", 2.088184356689453, 20),
    ],
)
def test_a_kernels_condition_units_widen_its_bracket_and_are_named(
    name: str, point: float, factor: int
) -> None:
    op = op_db_by_name()[name]
    x = torch.tensor([point, 3.0], dtype=torch.float32)
    ref = SampleInput(x.double())
    expected = op(x.double())
    rules = {d: sample_rules(op, name, d, ref, Rules()) for d in (F32, torch.float64)}
    assert [e.key for e in rules[F32].exceptions] == [f"{name}/float32"]
    assert rules[torch.float64].exceptions == ()
    bare = Rules(elementwise=True, bracket=condition_bracket(op, F32, ref, Rules()))
    actual = op(x)
    with pytest.raises(AssertionError):
        compare(actual, expected, F32, name, "sample 0", 1.0, bare)
    compare(actual, expected, F32, name, "sample 0", 1.0, rules[F32])
    planted = (expected * (1 + 1e-4)).float()
    with pytest.raises(
        AssertionError, match=rf"listed exception: {name}/float32 condition x{factor}"
    ):
        compare(planted, expected, F32, name, "s", 1.0, rules[F32])


def test_a_failing_case_names_the_sample_entry_that_widened_its_bound() -> None:
    (terms,) = (e for e in SAMPLE_TERMS.values() if e.op == "sparse.mm.reduce")
    condition = SAMPLE_CONDITION["linalg.householder_product/grad"]
    wide = Rules(terms=1e4, entries=(terms,))
    message = _fails("sparse.mm.reduce/grad", 1.1, 1.0, wide)
    assert "sample terms: sparse.mm.reduce/grad (atol >= 2 eps x 1e+04)" in message
    # terms below the plain normwise atol's magnitude widened nothing: not named
    narrow = Rules(terms=0.1, entries=(terms,))
    assert "sample terms" not in _fails("sparse.mm.reduce/grad", 1.1, 1.0, narrow)
    normwise = Rules(normwise_condition=5e4, entries=(condition,))
    message = _fails("linalg.householder_product/grad", 1.1, 1.0, normwise)
    assert "normwise condition: linalg.householder_product/grad (atol >= 5e+04 eps M)" in message


def test_a_recheck_is_named_by_what_judged_the_answer() -> None:
    # a solve has no decomposition: what the plain bound fails is judged as backward stable
    op = op_db_by_name()["linalg.solve"]
    a = torch.tensor([[2.0, 1.0], [1.0, 3.0]], dtype=torch.float64)
    b = torch.tensor([1.0, 2.0], dtype=torch.float64)
    ref = SampleInput(a, args=(b,))
    expected = torch.linalg.solve(a, b)
    rules = graph_rules(op, F32, ref, Rules(), expected)
    assert rules is not None and rules.recheck == STABLE_RECHECK
    # a sum's graph is measured: its roundings judge
    op = op_db_by_name()["sum"]
    ref = SampleInput(torch.tensor([1.0, 2.0], dtype=torch.float64))
    rules = graph_rules(op, F32, ref, Rules(), torch.tensor(3.0, dtype=torch.float64))
    assert rules is not None and rules.recheck == GRAPH_RECHECK


def test_a_backward_stable_recheck_allows_inf_where_the_backward_overflows() -> None:
    """index_reduce's prod backward forms w * result before dividing by each element (seed
    777777's finding): in float16 that product leaves the range though the gradient does
    not, and the kernel's -inf is right there; its roundings unmeasured (a product's
    reduction), the graph's values still decide it."""
    op = op_db_by_name()["index_reduce.prod"]
    x = torch.tensor([4.0, 1.0], dtype=torch.float64, requires_grad=True)
    index = torch.tensor([0, 0])
    source = torch.tensor([-100.0, 82.0], dtype=torch.float64, requires_grad=True)
    ref = SampleInput(x, args=(0, index, source, "prod"), kwargs={"include_self": True})

    def grad(dtype: torch.dtype, w: torch.Tensor) -> torch.Tensor:
        leaf = x.detach().to(dtype).requires_grad_(True)
        out = leaf.index_reduce(0, index, source.detach().to(dtype), "prod")
        return torch.autograd.grad(out, leaf, w.to(dtype))[0].double()

    wide = torch.tensor([2.0, 1.0], dtype=torch.float64)  # w * result = -65600
    expected = grad(torch.float64, wide)
    assert float(expected[0]) == -16400.0
    assert float(grad(torch.float16, wide)[0]) == -float("inf")
    rules = graph_rules(op, torch.float16, ref, Rules(), expected, [wide], 0)
    assert rules is not None and rules.recheck == STABLE_RECHECK and rules.may_overflow
    narrow = torch.tensor([1.0, 1.0], dtype=torch.float64)
    rules = graph_rules(op, torch.float16, ref, Rules(), grad(torch.float64, narrow), [narrow], 0)
    assert rules is not None and not rules.may_overflow


def test_an_answer_its_own_terms_judge_may_overflow_where_its_graph_does() -> None:
    """masked.normalize's backward sums -w x / n / n over the normalised dimension: for
    ord = -inf the norm is the smallest |x|, and in float16 the sum overflows (inf, then NaN
    through the norm's backward) though the gradient is in range. Its own terms judge it,
    so no graph re-check runs; the graph's values still decide that inf and NaN are right."""
    op = op_db_by_name()["masked.normalize"]
    x = torch.tensor([[0.0112, 3.47, 6.24, 8.18]], dtype=torch.float64, requires_grad=True)
    w = torch.ones(1, 4, dtype=torch.float64)

    def grad(dtype: torch.dtype, order: float) -> torch.Tensor:
        leaf = x.detach().to(dtype).requires_grad_(True)
        out = torch.masked.normalize(leaf, order, 1)
        return torch.autograd.grad(out, leaf, w.to(dtype))[0].double()

    assert bool(grad(torch.float64, -math.inf).isfinite().all())
    assert not bool(grad(torch.float16, -math.inf).isfinite().all())
    own = Rules(terms=1.0)
    smallest = SampleInput(x, args=(-math.inf, 1))
    rules = overflow_rules(op, torch.float16, smallest, own, [w])
    assert rules is not None and rules.may_overflow and rules.recheck == OVERFLOW_RECHECK
    assert rules.terms == 1.0  # the op's own terms still judge the finite elements
    assert overflow_rules(op, torch.float16, SampleInput(x, args=(2.0, 1)), own, [w]) is None
    assert overflow_rules(op, torch.float32, smallest, own, [w]) is None
