"""The per-sample measures the full breadth's failures needed (`sample_measures`): each
grows with what the failing sample had and stays small where the old bound was right.

Checked in-process on constructed inputs (without importing op_db; see
test_sample_tables.py, whose subprocess test runs the cases themselves with a planted
error)."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from torch.testing._internal.opinfo.core import SampleInput

from accelkit.suite.opinfo import sample_measures as measures


def sample(inp: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> Any:
    return SampleInput(inp, args=args, kwargs=kwargs or {})  # type: ignore[no-untyped-call]


def test_conv_terms_sum_the_product_magnitudes() -> None:
    x = torch.tensor([[[1.0, -2.0, 3.0, -4.0]]], dtype=torch.float64)
    w = torch.tensor([[[1.0, 1.0]]], dtype=torch.float64, requires_grad=True)
    dy = torch.tensor([[[1.0, -1.0, 1.0]]], dtype=torch.float64)
    conv = torch.nn.functional.conv1d
    # The weight's gradient sums x * dy over the 3 positions: |1| + |-2| + |3| = 6 for w[0].
    assert measures.absolute_grad_terms(conv, sample(x, (w,)), [dy]) == [9.0]  # w[1]: 2+3+4


def test_masked_index_grad_terms_sum_the_weights_of_gathered_copies() -> None:
    """_unsafe_masked_index's backward accumulates the weights of an element's copies; a
    complex fill value is taken in magnitude with the rest (it once met a real tensor)."""
    x = torch.tensor([1 + 1j, 2 - 1j, -3j], dtype=torch.complex128, requires_grad=True)
    mask = torch.tensor([True, True, False, True])
    indices = [torch.tensor([0, 0, 1, 2])]
    w = [torch.tensor([1.0, -1.0, 5.0, 2j], dtype=torch.complex128)]
    op = torch.ops.aten._unsafe_masked_index
    terms = measures.absolute_grad_terms(op, sample(x, (mask, indices, 0.5 + 2j)), w)
    assert terms == [2.0]  # x[0]: |1| + |-1| (x[1]'s copy is masked out, x[2]'s is 2)


def test_the_variance_condition_of_complex_values_is_over_their_magnitudes() -> None:
    x = torch.tensor([[1 + 1j, 1 + 1.1j, 1 + 0.9j]], dtype=torch.complex128)
    mean = x.mean(-1, keepdim=True)
    expected = float((x.abs() ** 2).mean() / ((x - mean).abs() ** 2).mean())
    assert measures.variance_condition(x, (-1,)) == pytest.approx(expected)
    # The same numbers as real pairs: a real variance of the real parts alone is 0.
    assert measures.variance_condition(x.real, (-1,)) == math.inf


def test_complex_corrcoef_gradient_terms_judge_each_clamped_part() -> None:
    """Two complex variables, nearly perfectly correlated (1 - |r_01| ~ 1e-9, inside the
    clamp's margin). torch.corrcoef clamps the real and imaginary parts each: with the
    second variable turned by a phase of pi / 4, neither part of r_01 is near +-1 and
    nothing is added for the clamp; unturned, the real part is, and its dropped
    contribution is added."""
    near = torch.tensor([[0.0, 1.0, 2.0], [0.0, 1.0, 2.0001]], dtype=torch.float64)
    w = [torch.ones(2, 2, dtype=torch.complex64)]
    aligned = near.to(torch.complex128)
    turned = aligned * torch.tensor([[1], [complex(math.cos(math.pi / 4), math.sin(math.pi / 4))]])
    free = measures.corrcoef_grad_terms(None, sample(turned), w)
    clamped = measures.corrcoef_grad_terms(None, sample(aligned), w)
    assert math.isfinite(free) and math.isfinite(clamped)
    assert clamped > free


class _Named:
    def __init__(self, name: str) -> None:
        self.name = name


def test_lowrank_condition_is_of_the_factorised_product() -> None:
    """a b^T minus M (svd_lowrank) or centred (pca_lowrank): its sigma_1 / (sigma_q -
    sigma_q+1), n times; a and b themselves may be perfectly conditioned."""
    a = torch.eye(4, 2, dtype=torch.float64)
    b = torch.eye(4, 2, dtype=torch.float64) * torch.tensor([10.0, 0.01], dtype=torch.float64)
    svd = _Named("svd_lowrank")
    # a b^T = diag(10, 0.01, 0, 0): q = 2 is its rank, sigma_1 / sigma_2 = 1000.
    assert measures.lowrank_condition(svd, sample(a, args=(b,), kwargs={"q": 2})) == (
        pytest.approx(4 * 1000)
    )
    # q = 1: the gap to sigma_2 is 9.99.
    assert measures.lowrank_condition(svd, sample(a, args=(b,), kwargs={"q": 1})) == (
        pytest.approx(4 * 10 / 9.99)
    )
    m = torch.diag(torch.tensor([0.0, 0.0, 9.0, 0.0], dtype=torch.float64))
    # minus M: singular values 10, 9, 0.01: q = 2 now has a gap of 8.99 to sigma_3.
    assert measures.lowrank_condition(svd, sample(a, args=(b,), kwargs={"q": 2, "M": m})) == (
        pytest.approx(4 * 10 / 8.99)
    )
    # centring (pca_lowrank) subtracts the row mean: a b^T's first column becomes
    # (7.5, -2.5, -2.5, -2.5), the second's (-0.0025, 0.0075, ...).
    pca = _Named("pca_lowrank")
    centred = a @ b.mT - (a @ b.mT).mean(-2, keepdim=True)
    values = torch.linalg.svdvals(centred)
    assert measures.lowrank_condition(pca, sample(a, args=(b,), kwargs={"q": 2})) == (
        pytest.approx(4 * float(values[0] / values[1]))
    )
    grad = measures.lowrank_gradient_condition(svd, sample(a, args=(b,), kwargs={"q": 2}))
    assert grad == pytest.approx(4 * 1000**2)  # kappa ** 2 of the top q


def test_mvlgamma_terms_sum_each_lgamma_in_magnitude() -> None:
    """The largest sum over an element of |lgamma(x - j / 2)|, plus the constant: at 1.2,
    lgamma(0.7) and lgamma(0.2) are of opposite sign to lgamma(1.2) and cancel in the answer."""
    p = 3

    def terms(x: float) -> float:
        return sum(abs(math.lgamma(x - j / 2)) for j in range(p)) + p * (p - 1) / 4 * math.log(
            math.pi
        )

    x = torch.tensor([[3.0, 1.2]], dtype=torch.float64)
    found = measures.mvlgamma_terms(None, sample(x, args=(p,)), None)
    assert found == pytest.approx(max(terms(3.0), terms(1.2)))
    answer = float(torch.special.multigammaln(torch.tensor(1.2, dtype=torch.float64), p))
    assert abs(answer) < terms(1.2)


def test_interpolation_condition_counts_dimensions_and_the_largest_size() -> None:
    x = torch.zeros(2, 3, 4, 6, dtype=torch.float64)
    assert measures.interpolation_condition(None, sample(x), slope=3.0) == 2 * 3.0 * 6
    assert measures.interpolation_condition(None, sample(torch.zeros(2, 3)), slope=2.0) == 1.0


class _Op:
    """An OpInfo stand-in for the measures that call the op (`op.op`)."""

    def __init__(self, fn: Any, name: str = "op") -> None:
        self.op = fn
        self.name = name


def test_masked_normalize_terms_leave_masked_out_elements_out_of_the_norm() -> None:
    w = torch.tensor([1.0, 1.0], dtype=torch.float64)
    x = torch.tensor([0.01, 5.0], dtype=torch.float64)
    plain = measures.masked_normalize_terms(None, sample(x, args=(2.0, 0)), [w])
    # (w . x) / n ** 2 * |x| / n at x = 5, the larger term: 5.01 / 5 ** 2 (n = 5.00001)
    assert plain == pytest.approx(5.01 / 25.0, rel=1e-4)
    keep = torch.tensor([True, False])
    masked = measures.masked_normalize_terms(
        None, sample(x, args=(2.0, 0), kwargs={"mask": keep}), [w]
    )
    # Over the element 0.01 alone: w / |x| = 100, far above the unmasked norm's 1 / 5.
    assert masked == pytest.approx(100.0)
    assert plain < 1.0
    # A 0-d input (seed 5's bfloat16 sample): one element, both terms w / |x|.
    one = measures.masked_normalize_terms(
        None, sample(torch.tensor(0.25, dtype=torch.float64), args=(1.0, 0)), [torch.tensor(0.5)]
    )
    assert one == pytest.approx(2.0)


def test_cosine_terms_are_large_where_the_gradient_cancels() -> None:
    """Parallel vectors: the exact gradient is 0, its two terms are |w| / |x| each."""
    x1 = torch.tensor([[3.0, 4.0]], dtype=torch.float64, requires_grad=True)  # |x1| = 5
    x2 = torch.tensor([[0.6, 0.8]], dtype=torch.float64, requires_grad=True)  # |x2| = 1
    w = [torch.tensor([2.0], dtype=torch.float64)]
    smp = sample(x1, args=(x2,), kwargs={"dim": 1})
    first, second = measures.cosine_terms(None, smp, w)
    # x1's: 2 * (max |x2| / 5 + 1 * max |x1| / 25) = 2 * (0.8 / 5 + 4 / 25)
    assert first == pytest.approx(2 * (0.8 / 5 + 4 / 25))
    assert second == pytest.approx(2 * (4.0 / 5 + 0.8 / 1))
    out = torch.nn.functional.cosine_similarity(x1, x2, dim=1)
    grads = torch.autograd.grad(out, (x1, x2), w[0])
    assert all(float(g.abs().max()) < 1e-12 for g in grads)


def test_triplet_terms_sum_the_distances_that_the_loss_subtracts() -> None:
    """Per row d(a, p) + d(a, n) + |margin| (d(p, n) too with swap), reduced as the loss."""
    torch.manual_seed(11)
    a, p, n = (torch.rand(5, 10, dtype=torch.float64) * 18 - 9 for _ in range(3))
    loss = torch.nn.functional.triplet_margin_loss
    d = torch.nn.functional.pairwise_distance
    rows = d(a, p) + d(a, n) + 10.0
    kwargs: dict[str, Any] = {"margin": -10.0, "reduction": "sum"}
    found = measures.triplet_terms(_Op(loss), sample(a, args=(p, n), kwargs=kwargs), None)
    assert found == pytest.approx(float(rows.sum()))
    swapped = sample(a, args=(p, n), kwargs={"swap": True, "reduction": "none"})
    assert measures.triplet_terms(_Op(loss), swapped, None) == pytest.approx(
        float((d(a, p) + d(a, n) + d(p, n) + 1.0).max())
    )
    custom = {"distance_function": lambda x, y: (x - y).abs().sum(-1)}
    with_distance = sample(a, args=(p, n), kwargs=custom)
    assert measures.triplet_terms(_Op(loss), with_distance, None) == pytest.approx(
        float(((a - p).abs().sum(-1) + (a - n).abs().sum(-1) + 1.0).mean())
    )
    exact = float(loss(a, p, n, margin=1.0))
    error = abs(float(loss(a.half(), p.half(), n.half(), margin=1.0)) - exact)
    bound = measures.triplet_terms(_Op(loss), sample(a, args=(p, n)), None)
    assert error <= 2 * torch.finfo(torch.float16).eps * bound
