"""The OpInfo package's sample-level rules (`accelkit.suite.opinfo.sample_tables`, measured
by `sample_measures`): SAMPLE_TERMS, SAMPLE_CONDITION, BACKWARD_OVERFLOW, SQUARED and the
DISCONTINUOUS additions (`discontinuity`: histogram's data-dependent range, logit's clamp
bounds, a power's rounded exponent, the triplet hinge).

The bounds are checked in-process on constructed inputs (without importing op_db, which
tests/unit/probe/test_probe.py must see unimported), and, in a subprocess, that every case these
rules were written for passes on the seed that needed them and still fails when the answer is
0.1% off (float32, complex64) or a few units of rounding off (float16, bfloat16).
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch.testing._internal.opinfo.core import SampleInput

from accelkit.suite.opinfo import discontinuity, sample_tables, tolerances
from accelkit.suite.opinfo import sample_measures as measures
from tests.helpers import run_python

EPS32 = torch.finfo(torch.float32).eps
OP = SimpleNamespace(name="op")  # the rules that look at the op only read its name


def sample(inp: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> Any:
    """An OpInfo SampleInput (its constructor is untyped)."""
    return SampleInput(inp, args=args, kwargs=kwargs or {})  # type: ignore[no-untyped-call]


def test_variance_condition_grows_as_the_elements_of_a_group_approach_each_other() -> None:
    x = torch.tensor([[3.0, 3.0 + 1e-3], [-1.0, 1.0]], dtype=torch.float64)
    # Row 0: mean(x^2) / var = 9.003 / 2.5e-7; row 1: 1 / 1.
    assert measures.variance_condition(x, (-1,)) == pytest.approx(9.003e0 / 2.5e-7, rel=1e-3)
    assert measures.variance_condition(x[1:], (-1,)) == pytest.approx(1.0)
    assert measures.variance_condition(torch.ones(2, 3), (-1,)) == math.inf  # constant rows
    assert measures.variance_condition(torch.ones(2, 3), (-1,), eps=0.5) == pytest.approx(3.0)


def test_householder_condition_is_one_for_lapack_reflectors_and_grows_otherwise() -> None:
    torch.manual_seed(0)
    a = torch.randn(5, 4, dtype=torch.complex128)
    reflectors, tau = torch.geqrf(a)  # LAPACK's taus: each H_i is unitary
    assert measures.householder_condition(OP, sample(reflectors, args=(tau,))) == (
        pytest.approx(1.0)
    )
    kappa = measures.householder_condition(OP, sample(reflectors, args=(tau * 5,)))
    assert kappa > 10


def test_normalize_terms_over_one_element_grow_as_it_approaches_zero() -> None:
    x = torch.tensor([[0.004, -2.0]], dtype=torch.float64)  # dim 0: each column alone
    w = torch.tensor([[1.0, 1.0]], dtype=torch.float64)
    terms = measures.masked_normalize_terms(OP, sample(x, args=(0.5, 0)), [w])
    assert terms == pytest.approx(1 / 0.004)  # |w| / |x|: the terms that cancel to 0


def test_euclid_mm_terms_only_on_the_matrix_multiplication_path() -> None:
    x, y = torch.ones(3, 2), 2 * torch.ones(4, 2)
    terms = 2.0 + 8.0  # max||x||^2 + max||y||^2
    assert measures.euclid_mm_terms(sample(x, args=(y, 2.0, "use_mm_for_euclid_dist"))) == (
        pytest.approx(terms)
    )
    assert measures.euclid_mm_terms(sample(x, args=(y, 2.0))) is None  # under 25 rows
    assert measures.euclid_mm_terms(sample(torch.ones(26, 2), args=(y,))) is not None
    assert measures.euclid_mm_terms(sample(x, args=(y, 1.0, "use_mm_for_euclid_dist"))) is None
    assert (
        measures.euclid_mm_terms(sample(x, args=(y, 2.0, "donot_use_mm_for_euclid_dist"))) is None
    )


def test_a_divisor_of_the_backward_and_other_intermediates() -> None:
    x = torch.full((125,), 9.0, dtype=torch.float16)
    factors, divisors = measures.dist_intermediates(OP, sample(x, args=(torch.tensor(-9.0), 4)), [])
    # norm ** 3 of 125 differences of 18: the backward divides by inf, the gradient is 0.
    assert float(divisors[0].max()) > tolerances.overflow_threshold(torch.float16)
    assert float(factors[0].max()) == pytest.approx(18.0**2)
    segment = SimpleNamespace(name="_segment_reduce")
    assert measures.segment_prod_intermediates(segment, sample(x, args=("sum",)), []) == ([], [])


def test_a_norms_gradient_is_undetermined_where_its_extreme_candidates_tie() -> None:
    norm = SimpleNamespace(name="linalg.norm")
    a = torch.tensor([[1.0, 2.0], [3.0, 2.001]], dtype=torch.float64)  # column sums 4, 4.001
    assert measures.norm_tie(norm, sample(a, args=(1,))) == pytest.approx(4.001 / 1e-3)
    assert measures.norm_tie(norm, sample(a, args=(math.inf,))) == pytest.approx(5.001 / 2.001)
    assert measures.norm_tie(norm, sample(a, args=(2,))) == 1.0  # not a max of sums
    assert measures.norm_tie(norm, sample(a[0], args=(1,))) == 1.0  # a vector 1-norm sums
    # a vector's inf-norm selects its largest |x|: along dim, or over every element
    vector_norm = SimpleNamespace(name="linalg.vector_norm")
    v = torch.tensor([[1.0, -3.0], [2.0, 3.003]], dtype=torch.float64)
    along = sample(v, args=(math.inf, 1))  # rows: 3 / 2 and 3.003 / 1.003
    assert measures.norm_tie(vector_norm, along) == pytest.approx(3.003 / 1.003)
    assert measures.norm_tie(vector_norm, sample(v, args=(math.inf,))) == pytest.approx(
        3.003 / 0.003
    )
    expanded = torch.tensor([0.3 + 0.4j], dtype=torch.complex128).expand(3)  # equal elements
    assert measures.norm_tie(vector_norm, sample(expanded, args=(math.inf,))) == math.inf
    assert measures.norm_tie(vector_norm, sample(v, args=(2,))) == 1.0
    matrix_norm = SimpleNamespace(name="linalg.matrix_norm")
    assert measures.norm_tie(matrix_norm, sample(a, args=(1,))) > 1e3


def test_the_rounded_exponent_is_the_one_the_backward_uses() -> None:
    exponent = torch.tensor([-1.9990234375, 2.5], dtype=torch.float64, requires_grad=True)
    base = torch.tensor([-7.0, 3.0], dtype=torch.float64, requires_grad=True)
    (rpow,) = discontinuity.rounded_exponent(
        sample(exponent, args=(base,)), torch.float16, "__rpow__/grad"
    )
    # -1.9990234375 - 1 rounds to -3 in float16 (a tie, to even): the exponent -2.
    assert rpow.input.tolist() == [-2.0, 2.5]
    assert rpow.input.requires_grad and rpow.args[0] is base
    (power,) = discontinuity.rounded_exponent(
        sample(base, args=(exponent,)), torch.float16, "pow/grad"
    )
    assert power.args[0].tolist() == [-2.0, 2.5] and power.input is base
    assert discontinuity.rounded_exponent(sample(base, args=(2,)), torch.float16, "pow") == []


def test_the_bases_gradient_at_a_rounded_exponent_keeps_the_exponents_factor() -> None:
    # __rpow__ in bfloat16 at seed 13: e = 6.77e-5, e - 1 rounds to -1. The kernel's base
    # gradient is w * e * b ** -1 (finite, where the exact one at a negative base is NaN);
    # the sample at the rounded exponent (e' = 0) would give 0.
    e = torch.tensor([6.771087646484375e-05, 2.5], dtype=torch.float64, requires_grad=True)
    b = torch.tensor([-0.03369140625, 3.0], dtype=torch.float64, requires_grad=True)
    w = [torch.tensor([1.0, 2.0])]
    grads = discontinuity.rounded_exponent_grads(
        sample(e, args=(b,)), torch.bfloat16, "__rpow__/grad", w
    )
    assert grads is not None and grads[0] is None
    expected = [6.771087646484375e-05 / -0.03369140625, 2 * 2.5 * 3.0**1.5]
    assert grads[1].tolist() == pytest.approx(expected)
    (at_rounded,) = discontinuity.rounded_exponent(
        sample(e, args=(b,)), torch.bfloat16, "__rpow__/grad"
    )
    assert float(at_rounded.input.detach()[0]) == 0.0  # the old variant's: gradient 0
    # pow(b, e): the same gradient, the base first; a Python exponent has no such variant
    power = discontinuity.rounded_exponent_grads(
        sample(b, args=(e,)), torch.bfloat16, "pow/grad", w
    )
    assert power is not None and power[0].tolist() == pytest.approx(expected)
    assert (
        discontinuity.rounded_exponent_grads(sample(b, args=(2.0,)), torch.bfloat16, "pow", w)
        is None
    )


def test_logit_is_evaluated_at_its_bounds_as_the_kernel_rounds_them() -> None:
    x = torch.tensor([0.80078125, 0.5], dtype=torch.float64)
    low, high = discontinuity.rounded_clamp(sample(x, args=(0.2,)), torch.bfloat16)
    assert low.args == (0.2001953125,)  # fl(0.2) in bfloat16
    assert high.args == (1 - 0.80078125,)  # 1 - fl(0.8): x = fl(0.8) lies on the bound
    assert discontinuity.rounded_clamp(sample(x), torch.bfloat16) == []  # no eps: no clamp


def test_a_grid_gradient_is_bracketed_over_each_coordinates_rounding() -> None:
    """Trilinear sampling of a 2x2x2 volume whose x-differences are (1 - 2y)(1 - 2z) at the
    point (y, z): the x gradient moves with y and z in opposite directions at y = 0.25,
    z = 0.75, so the kernel's coordinates rounded apart (y up, z down) give a gradient that
    only the corners of the box reach, not the uniform moves of "normwise"."""
    pattern = torch.tensor([[1.0, -1.0], [-1.0, 1.0]], dtype=torch.float64)  # [z][y]
    volume = torch.stack([torch.zeros(2, 2, dtype=torch.float64), pattern], -1)[None, None]
    # pixel = (g + 1) / 2 with align_corners over 2 pixels: x = 0.5, y = 0.25, z = 0.75
    point = torch.tensor([0.0, -0.5, 0.5], dtype=torch.float64).view(1, 1, 1, 1, 3)

    def grid_grads(moved: Any) -> torch.Tensor:
        grid = moved.args[0].detach().requires_grad_(True)
        out = torch.grid_sampler_3d(moved.input, grid, 0, 0, True)
        (grad,) = torch.autograd.grad(out.sum(), grid)
        return grad

    ref = sample(volume, args=(point.requires_grad_(True), 0, 0, True))
    moved = discontinuity.moved_coordinates(ref, torch.float32)
    assert len(moved) == 8 and all(m.args[1:] == (0, 0, True) for m in moved)
    assert all(m.args[0].requires_grad and m.input is volume for m in moved)
    step = discontinuity.PERTURB_EPS * EPS32 * 1.0  # the sample's largest magnitude is 1
    kernel = sample(volume, args=(point + torch.tensor([0.0, 1.0, -1.0]) * step / 2, 0, 0, True))
    got = float(grid_grads(kernel)[..., 0])
    low, high = discontinuity.reference_bracket(grid_grads(ref), [grid_grads(m) for m in moved])
    assert float(low[..., 0]) <= got <= float(high[..., 0])
    uniform = discontinuity.perturbed(ref, torch.float32, "normwise")
    low, high = discontinuity.reference_bracket(grid_grads(ref), [grid_grads(m) for m in uniform])
    assert not float(low[..., 0]) <= got <= float(high[..., 0])
    assert discontinuity.moved_coordinates(sample(volume, args=(0,)), torch.float32) == []


def test_histograms_data_dependent_range_is_pinned() -> None:
    value = torch.tensor(-7.86, dtype=torch.float64)
    pinned = discontinuity.pinned_range(
        sample(value, args=(4,), kwargs={"density": True}), "histogram"
    )
    assert pinned is not None
    kwargs, low, high = pinned
    assert low == pytest.approx(-8.36) and high == pytest.approx(-7.36)
    assert kwargs == {"density": True, "range": (low, high)}
    edges = torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64)
    assert discontinuity.pinned_range(sample(value, args=(edges,)), "histogram") is None
    given = sample(value, args=(4,), kwargs={"range": (0.0, 1.0)})
    assert discontinuity.pinned_range(given, "histogram") is None
    histc = discontinuity.pinned_range(sample(value, kwargs={"min": 0, "max": 0}), "histc")
    assert histc is not None
    assert histc[1] == pytest.approx(-8.86) and histc[2] == pytest.approx(-6.86)


def test_cumulative_sums_leave_histograms_edges_alone() -> None:
    counts, edges = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0.0, 1.0, 2.0, 3.0])
    summed = discontinuity.cumsum((counts, edges))
    assert summed[0].tolist() == [1.0, 3.0, 6.0] and summed[1] is edges


def test_sample_tables_give_reasons_and_known_kinds() -> None:
    for terms in (*sample_tables.SAMPLE_TERMS.values(), *sample_tables.SQUARED.values()):
        assert terms.factor > 0 and callable(terms.terms) and len(terms.reason) > 40, terms.key
    for condition in sample_tables.SAMPLE_CONDITION.values():
        assert condition.kind in ("normwise", "tie"), condition.key
        assert condition.factor > 0 and callable(condition.kappa), condition.key
        assert len(condition.reason) > 40, condition.key
    for overflow in sample_tables.BACKWARD_OVERFLOW.values():
        assert overflow.key.endswith("/grad") and callable(overflow.intermediates), overflow.key
        assert len(overflow.reason) > 40, overflow.key
    for step in sample_tables.DISCONTINUOUS.values():
        assert step.mode in ("relative", "normwise", "coordinates", "exponent", "clamp"), step.key
        assert len(step.reason) > 40, step.key


# --------------------------------------------------------------------------------------
# The cases the rules were written for: they pass on the seed that needed the rule, and a
# wrong answer still fails (in a subprocess: importing op_db here would make
# tests/unit/probe/test_probe.py skip its check that the capability probe does not import it)

# (param, seed of the run that failed before the rule, relative error planted): 0.1% in
# float32 and complex64, else the smallest error that the suite caught before these rules on
# seed 0 (the case's other tolerances, unchanged here, decide it).
CASES = (
    ("cdist/float32", 1, 1e-3),
    ("histogram/float32", 1, None),  # counts: a planted error moves a count (below)
    ("logit/bfloat16/grad", 1, 0.1),
    ("__rpow__/float16/grad", 1, 0.1),  # TOLERANCE_SCALE: rtol 0.032
    ("div.no_rounding_mode/float16/grad", 1, 0.02),
    ("norm/float16/grad", 1, 0.15),  # op_db's toleranceOverride: atol 0.2 on gradients <~ 1
    ("linalg.householder_product/complex64/grad", 1, 3e-3),  # op_db's rtol is 1e-3
    ("nn.functional.conv2d/complex64", 1, 1e-3),
    ("nn.functional.conv2d/complex64", 0, 1e-3),  # Gauss's trick: the graph's complex products
    ("nn.functional.conv3d/complex64/grad", 3, 1e-3),  # its graph (was its own terms)
    # the graph's roundings judge it (was softmax's condition)
    ("nn.functional.multi_head_attention_forward/float32", 1, 1e-3),
    ("nn.functional.normalize/float32/grad", 1, 1e-3),
    ("nn.functional.scaled_dot_product_attention/float32/grad", 1, 1e-3),
    # the bound in the gradient's own units (corrcoef_grad_terms): 10% is caught
    ("corrcoef/float16/grad", 2, 0.1),
    ("cov/float32", 2, 1e-3),
    # the graph's roundings judge it (was the variance's condition, before it NORMWISE_SCALE
    # 24); 50% goes unseen on seeds 1, 2 and 5 of the per-sample draws
    ("_native_batch_norm_legit/bfloat16/grad", 3, 0.5),
    ("addcdiv/float16/grad", 2, 0.02),
    ("linalg.pinv.hermitian/float32/grad", 2, 1e-3),
    ("nn.functional.nll_loss/float16", 2, 0.02),
    ("special.log_ndtr/float32/grad", 2, 1e-3),
    ("nn.functional.triplet_margin_with_distance_loss/float16/grad", 2, 0.1),
    ("dist/float16/grad", 3, 0.02),
    ("_segment_reduce.offsets/float16/grad", 3, 0.02),
    ("masked.normalize/float16/grad", 3, 0.02),
    ("linalg.norm/bfloat16/grad", 3, 2.0),  # once rtol 1.6 in bfloat16 (LINALG_SCALE)
    ("nn.functional.instance_norm/bfloat16", 3, 0.1),  # the graph's (was its variance's)
    ("tan/float16/grad", 3, 0.02),
    ("torch.ops.aten._scaled_dot_product_flash_attention_for_cpu/float32/grad", 3, 1e-3),
    ("nn.functional.gaussian_nll_loss/float32/grad", 3, 1e-3),
    ("logit/bfloat16/grad", 4, 0.1),
    ("fmod/float32/grad", 4, 1e-3),
    ("_native_batch_norm_legit/float32/grad", 4, 1e-3),  # the graph's (was its variance's)
    ("native_batch_norm/float16", 4, 0.02),  # the 16-bit forward's mean rounded: its variance's
    ("trapz/float32", 4, 1e-3),
    # 2% goes unseen on some draws before these rules too (seed 4: atol 0.03 on gradients <~ 1)
    ("nn.functional.pairwise_distance/float16/grad", 5, 0.1),
    # The full breadth's failures at seed 0 that were bounds derived wrongly (every sample
    # runs: the failing ones are beyond the quick breadth's first few)
    ("linalg.svd/float32/grad", 0, 1e-3),  # sigma_max / gap 18 where kappa ** 2 is 5
    ("linalg.svd/complex64/grad", 0, 1e-3),  # and a gradient through |Vh| of 0.037
    ("svd/float32/grad", 0, 1e-3),
    ("svd/complex64/grad", 0, 1e-3),
    ("linalg.pinv.hermitian/float32", 0, 1e-3),  # the lower triangle's kappa 470, A's 2.25
    ("nn.functional.conv3d/float32", 0, 1e-3),  # 81 terms of 1657 for an output of 16
    ("nn.functional.conv3d/float32/grad", 0, 1e-3),
    ("linalg.householder_product/float32/grad", 0, 1e-3),  # prod cond(H_i) 287
    # the graph's roundings judge layer_norm (was its variance's condition)
    ("native_layer_norm/float32/grad", 0, 1e-3),  # rstd 316 over one element
    ("native_layer_norm/float32/grad", 2, 1e-3),  # var 0.018 of elements near 8
    ("matrix_exp/complex64/grad", 0, 1e-3),  # ||A||_2 30
    # The eager full breadth's failures at seeds 1 and 3 (derived bounds, seeds 0-11 measured)
    ("addcdiv/float16/grad", 1, 0.02),  # value * t1 / t2 ** 2 overflows float16
    ("linalg.eigh/float32/grad", 1, 1e-3),  # n max|lambda| / gap 44 of A + A^H
    ("linalg.vecdot/bfloat16", 1, 0.05),  # products rounded before the sum: 2% goes unseen
    ("mvlgamma.mvlgamma_p_5/bfloat16", 1, 0.03),  # lgamma terms rounded before the sum
    ("nn.functional.binary_cross_entropy_with_logits/float16", 1, 0.02),  # signed weights
    ("nn.functional.interpolate.bicubic/float32", 1, 1e-4),  # the coordinate: the graph judges it
    ("special.airy_ai/float32", 1, 1e-3),  # the Maclaurin series cancels towards 2.09
    ("svd_lowrank/complex64", 1, 1e-3),  # the reference drew another R (opinfo.draws)
    ("pca_lowrank/float32", 3, 1e-3),  # sigma_1 / sigma_2 696 of the centred product
    ("addcdiv/float32/grad", 4, 1e-3),  # a broadcast divisor of -0.117: terms of 8e3
    ("linalg.tensorsolve/float32", 4, 1e-3),  # kappa 663 of the 6 x 6 system solved
    ("nn.functional.poisson_nll_loss/float16", 4, 0.02),  # a sum that cancels
    # bfloat16: the terms of a one-element norm leave ~4 units of rounding; 3% goes unseen
    ("masked.normalize/bfloat16/grad", 5, 0.1),
    ("nn.functional.hinge_embedding_loss/float16/grad", 5, 0.02),  # margin - x rounds to 0
    ("cov/complex64/grad", 6, 1e-3),  # aweights 0.0017 and 0.85: the graph's, complex too
    ("cov/float32/grad", 6, 1e-3),
    ("masked.prod/float16/grad", 6, 0.02),  # result / x overflows float16
    ("nn.functional.binary_cross_entropy/float16/grad", 7, 0.02),  # w (x - y) / (x (1 - x))
    # a group of 5.875 and 5.844: the graph's roundings judge it (was the per-group
    # condition, before it a 24-fold normwise scale under which 10% went unseen)
    ("native_group_norm/bfloat16/grad", 8, 0.05),
    ("native_group_norm/float16/grad", 0, 0.02),
    ("addcmul/bfloat16/grad", 9, 0.05),  # a broadcast 0-d factor sums 25 terms
    ("combinations/bfloat16/grad", 9, 0.05),  # four copies' weights cancel
    ("linalg.lstsq.grad_oriented/complex64/grad", 10, 1e-3),  # 3x n kappa^2 eps M
    ("linalg.multi_dot/float16", 11, 0.02),  # a chain of rounded products cancels
    ("native_layer_norm/float32", 11, 1e-3),  # rstd of two elements 0.03 apart: the graph's
    # in units of 1 / x (own_units): under the inputs' magnitudes 10% went unseen
    ("nn.functional.cosine_similarity/float16/grad", 12, 0.02),
    # the graph's roundings judge it (was softmax's condition, before it a 1000-fold rtol;
    # 16-bit gradients: no digits, skipped)
    ("nn.functional.multi_head_attention_forward/float32/grad", 16, 1e-3),
    ("nn.functional.multi_head_attention_forward/float32/grad", 19, 1e-3),
    ("nn.functional.kl_div/float16", 3, 0.01),  # without its 4-fold rtol
    # y and z rounded apart move the x gradient: outside the uniform moves' range (was 24x)
    ("grid_sampler_3d/float32/grad", 14, 1e-4),
    ("nn.functional.grid_sample/float32/grad", 21, 1e-4),  # 4.09x normwise (was allowed 4)
    ("nn.functional.cross_entropy/float16", 17, 0.02),  # signed weights cancel in a sum
    # the graph's roundings judge them (was the per-channel condition, before it a 24-fold
    # scale under which these passed)
    ("_batch_norm_with_update/bfloat16/grad", 3, 0.05),
    ("nn.functional.instance_norm/bfloat16/grad", 11, 0.05),
    ("native_batch_norm/float16/grad", 15, 0.02),
    # a mean divides by class weights that cancel (seed 18); the normwise scales are gone
    ("nn.functional.nll_loss/float32", 18, 1e-3),
    ("nn.functional.nll_loss/bfloat16", 18, 0.05),
    ("nn.functional.normalize/float32/grad", 0, 1e-3),  # its terms alone (was 48x)
    ("native_layer_norm/float32/grad", 2, 1e-3),  # the graph's (was a condition, a 4x rtol)
    ("_unsafe_masked_index_put_accumulate/bfloat16", 18, 0.05),  # 80 values into one
    # the mm path's squared distances cancel: the graph's roundings judge it (was the path's
    # own terms, before them a 32-fold normwise scale)
    ("cdist/float32/grad", 29, 1e-4),
    ("cdist/float32/grad", 27, 1e-4),
    ("histc/float16", 29, None),  # elements moved 4 eps max|x|: bin 92 for 91.88
    ("nn.functional.hinge_embedding_loss/bfloat16", 30, 0.05),  # signed terms cancel
    # digamma's kernel near its root: its condition exception, weighed in the graph (was
    # Cephes' terms, before them an 8-fold rtol)
    ("mvlgamma.mvlgamma_p_1/float32/grad", 30, 1e-4),
    ("mvlgamma.mvlgamma_p_3/float32/grad", 1, 1e-4),
    # the backward's exponents of ~20 carry 4% in bfloat16: the graph alone catches 5%
    ("logcumsumexp/bfloat16/grad", 30, 0.05),
    ("logcumsumexp/float16/grad", 30, 0.02),  # the graph's roundings (was the same terms)
    ("linalg.svdvals/float32/grad", 31, 1e-4),  # U diag(w) V^H moves with sigma_max / gap
    ("nn.functional.multilabel_soft_margin_loss/float16", 31, 0.02),  # signed weights
    ("sparse.mm.reduce/bfloat16/grad", 33, 0.05),  # w * B over 11 columns: terms 61 by -3
    ("polar/float16/grad", 34, 0.02),  # abs = 1.07e-6: subnormal parts, the graph's floor
    ("nn.functional.triplet_margin_loss/float16", 11, 0.02),  # terms, not a 6-fold scale
    ("nn.functional.triplet_margin_with_distance_loss/float16", 25, 0.02),
    ("nn.functional.gaussian_nll_loss/float16/grad", 23, 0.02),  # the graph's, not a 12x scale
    ("nn.functional.gaussian_nll_loss/bfloat16/grad", 11, 0.05),
    ("logaddexp/complex64/grad", 36, 1e-3),  # the terms' square boxes near the pole
    ("sinc/float32/grad", 16, 1e-3),  # the graph's roundings (was the normwise atol)
    ("sinc/float16/grad", 0, 0.02),  # (was a 5-fold normwise scale, 2% passed)
    ("pow/float16/grad", 0, 0.02),  # the graph's roundings alone (a 32x rtol passed 2%)
    ("__rpow__/float16/grad", 1, 0.02),
    ("pow/complex64", 0, 1e-4),  # the condition bracket alone (was a 10-fold rtol)
    ("_upsample_bilinear2d_aa/float32", 21, 1e-4),  # the centre's rounding (was a 5x rtol)
    # the graph's roundings judge them (was softmax's condition, before it a 10-fold rtol on
    # every attention forward)
    ("torch.ops.aten._scaled_dot_product_flash_attention_for_cpu/float32", 31, 1e-4),
    ("nn.functional.scaled_dot_product_attention/float16", 0, 0.005),
    ("nn.functional.scaled_dot_product_attention/float32", 120, 1e-4),
    ("matrix_exp/float32", 15, 1e-4),  # n ||A|| eps (a 100-fold tolerance passed 1e-4)
    ("matrix_exp/complex64", 12, 1e-4),
    ("linalg.cond/float32", 5, 1e-4),  # rtol n kappa eps (a 100-fold tolerance passed 1e-4)
    ("linalg.cond/complex64", 33, 1e-4),
    ("nn.functional.group_norm/bfloat16/grad", 38, 0.05),  # rstd 10: the graph's
    ("cov/complex64/grad", 38, 1e-3),  # the weights' terms in the graph, not a signed sum
    ("masked.prod/float16/grad", 38, 0.02),  # a partial product's gradient overflows
    ("linalg.householder_product/float32", 39, 1e-4),  # backward stable, by its Jacobian
    ("linalg.householder_product/float32/grad", 42, 1e-3),  # prod cond(H_i) at factor 1
    ("special.i0e/float32/grad", 42, 1e-4),  # i1e's 8 eps in a cancelling backward
    ("repeat/bfloat16/grad", 43, 0.05),  # six signed weights summed a dimension at a time
    ("nn.functional.binary_cross_entropy/float16", 45, 0.02),  # signed weights cancel
    ("matrix_exp/complex64/grad", 50, 1e-4),  # [[A^H, W], [0, A^H]]: kappa 10 ||A||
    ("_unsafe_masked_index/bfloat16/grad", 54, 0.02),  # gathered copies accumulate
    ("native_layer_norm/float32/grad", 57, 1e-3),  # b x + c uncentred: the graph's
    ("linalg.eigvalsh/complex64/grad", 27, 1e-3),  # eigenvectors of a close pair turn
    ("linalg.eigvalsh/float32/grad", 133, 1e-3),
    # the online softmax rounds otherwise than the kernel's decomposition: the normwise atol
    # stays beside the graph's bound (an exploration's seed)
    ("torch.ops.aten._scaled_dot_product_flash_attention_for_cpu/float32", 1928553301, 1e-4),
    ("logsumexp/complex64/grad", 13, 1e-3),  # the graph's complex terms (was kappa's rule)
)

CASE_RUN = """
import json, random, sys, zlib
import numpy, torch
from accelkit.suite.opinfo import op_db, running

LOW = (torch.float32, torch.complex64, torch.float16, torch.bfloat16)
planted = {"rel": None}

def perturb(value):
    rel = planted["rel"]
    if rel is None:
        return value
    def one(x):
        if not isinstance(x, torch.Tensor) or x.dtype not in LOW:
            return x
        if rel == "count":  # histogram: one unit of weight moved into the last bin
            x = x.clone()
            x.view(-1)[-1] += 1
            return x
        return x * (1 + rel)
    if isinstance(value, torch.Tensor):
        return one(value)
    return tuple(one(x) for x in value) if isinstance(value, (tuple, list)) else value

call, grad = running._call, torch.autograd.grad
running._call = lambda fn, sample: perturb(call(fn, sample))
torch.autograd.grad = lambda *a, **k: perturb(grad(*a, **k))

def run(param, seed):
    parts = param.split("/")
    nodeid = f"conformance/test_opinfo.py::test_opinfo[{param}]"
    case_seed = (seed * 1_000_003 + zlib.crc32(nodeid.encode())) % (2**31)
    random.seed(case_seed); numpy.random.seed(case_seed); torch.manual_seed(case_seed)
    op = op_db.op_db_by_name()[parts[0]]
    fn = running.run_grad if len(parts) > 2 else running.run_forward
    try:
        return fn(op, parts[0], "cpu", op_db.DTYPES[parts[1]], None) > 0
    except AssertionError:
        return False

outcome = {}
for param, seed, rel in json.loads(sys.argv[1]):
    planted["rel"] = None
    clean = run(param, seed)
    planted["rel"] = "count" if rel is None else rel
    outcome[f"{param}@{seed}"] = (clean, run(param, seed))
print(json.dumps(outcome))
"""


@pytest.mark.slow
def test_the_cases_pass_and_a_planted_error_still_fails() -> None:
    import json

    outcome = run_python(CASE_RUN, json.dumps(CASES), timeout=480)
    wrong = [
        f"{param} (seed {seed}): fails without a planted error"
        for param, seed, _ in CASES
        if not outcome[f"{param}@{seed}"][0]
    ]
    wrong += [
        f"{param} (seed {seed}): passes with answers {rel or 'a count'} off"
        for param, seed, rel in CASES
        if outcome[f"{param}@{seed}"][1]
    ]
    assert not wrong, wrong


def test_compiled_cases_seed_as_the_plugin_seeds_every_case() -> None:
    from accelkit.suite.opinfo import compiled
    from accelkit.suite.session.caseid import case_seed_of

    for seed in (0, 1, 12345, 2**31 - 1):
        for param in ("add/float32", "nn.functional.gelu/float16", "linalg.eig/complex64"):
            nodeid = f"{compiled.MODULE_NODEID}[{param}]"
            assert compiled.case_seed(param, seed) == case_seed_of(seed, nodeid)
