"""The backward-stable kernel's bound (`stability`): a backward error of K u(d) per input
element, at each input's largest magnitude, through the op's Jacobian in float64."""

from __future__ import annotations

from typing import Any

import torch
from torch.testing._internal.opinfo.core import SampleInput

from accelkit.suite.opinfo import sample_rules, stability

U32 = torch.finfo(torch.float32).eps / 2


def test_a_solve_moves_by_its_derivative_times_the_inputs_backward_error() -> None:
    # x = b / a for a diagonal A: dx_i / dA_ii = -b_i / a_i**2, dx_i / db_i = 1 / a_i, and
    # each input may move by K u times its largest element (K = 2, the matrices' size).
    a = torch.tensor([4.0, 0.5], dtype=torch.float64)
    b = torch.tensor([[1.0], [-3.0]], dtype=torch.float64)
    (slack,) = stability.slack(
        lambda m, v: (torch.linalg.solve(m, v),), [torch.diag(a), b], torch.float32
    )
    x = b[:, 0] / a  # every entry of A moves x_i by (A^-1)_ii x_j
    expected = 2 * U32 * ((x.abs().sum() / a.abs()) * 4.0 + (1 / a.abs()) * 3.0)
    assert torch.allclose(slack[:, 0], expected, rtol=1e-12)


def test_reflectors_far_from_unitary_leave_more_than_the_normwise_bound() -> None:
    # OpInfo's taus are not LAPACK's: the reflectors I - tau v v^T are far from orthogonal,
    # and the product's derivative grows past its entries (seed 39's float32 sample came out
    # 3.1e-5 off an entry of 5.9, where the normwise bound at its largest entry allowed
    # 1.8e-5). LAPACK's taus leave less than twice the normwise bound, these over four times.
    v = torch.tensor([[1.0, 0.0], [0.5, 1.0], [0.25, -0.5]], dtype=torch.float64)
    lapack = 2 / v.tril(-1).fill_diagonal_(1).pow(2).sum(0)
    far = torch.tensor([4.75, -3.5], dtype=torch.float64)

    def over_normwise(tau: torch.Tensor) -> float:
        (found,) = stability.slack(
            lambda m, t: (torch.linalg.householder_product(m, t),), [v, tau], torch.float32
        )
        q = torch.linalg.householder_product(v, tau)
        largest = max(float(q.abs().max()), float(v.abs().max()), float(tau.abs().max()))
        return float(found.max()) / (4 * U32 * largest)

    assert over_normwise(lapack) < 2 < 4 < over_normwise(far)


def test_a_complex_output_is_bounded_part_by_part_and_none_is_kept() -> None:
    z = torch.tensor([[2.0 + 1.0j, 0.5j], [1.0, 3.0 - 1.0j]], dtype=torch.complex128)
    inverse, left_out = stability.slack(lambda m: (torch.linalg.inv(m), None), [z], torch.complex64)
    assert inverse.dtype == torch.float64 and inverse.shape == z.shape
    assert bool((inverse > 0).all()) and left_out is None


def test_a_map_too_large_or_not_differentiable_is_not_measured() -> None:
    big = torch.randn(stability.MAX_OUTPUTS + 1, dtype=torch.float64)
    assert stability.slack(lambda x: (x * 2,), [big], torch.float32) is None

    def broken(x: torch.Tensor) -> tuple[Any, ...]:
        raise NotImplementedError("no derivative")

    assert stability.slack(broken, [big[:3]], torch.float32) is None


def test_an_op_without_a_derivative_is_differenced_where_the_caller_allows() -> None:
    # ldl_factor_ex has no derivative (seed 868686's finding: a pivot of 0.0064 moved the
    # float32 factor past the generic bound, and no re-check could run). Central differences
    # give autograd's Jacobian where both exist (a solve), and a bound for the factor.
    a = torch.tensor([[4.0, 1.0], [0.0, 0.5]], dtype=torch.float64)
    b = torch.tensor([[1.0], [-3.0]], dtype=torch.float64)

    def solve(m: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor]:
        return (torch.linalg.solve(m, v),)

    exact = torch.autograd.functional.jacobian(solve, (a, b))
    differenced = stability._differenced(solve, (a, b), [4.0, 3.0])
    for j, x in enumerate((a, b)):
        autograd = exact[0][j].reshape(2, x.numel())
        assert torch.allclose(differenced[0][j], autograd, rtol=1e-8, atol=1e-10)
    m = torch.tensor([[5.6, -4.8, 0.1], [-4.8, 5.45, 0.7], [0.1, 0.7, 3.4]], dtype=torch.float64)

    def factor(x: torch.Tensor) -> tuple[torch.Tensor]:
        return (torch.linalg.ldl_factor_ex(x)[0],)

    assert stability.slack(factor, [m], torch.float32) is None  # autograd alone: no bound
    (ld,) = stability.slack(factor, [m], torch.float32, differences=True)
    assert ld.shape == m.shape and bool(torch.isfinite(ld).all()) and float(ld.max()) > 0
    big = torch.eye(stability.MAX_DIFFERENCED_INPUTS + 1, dtype=torch.float64)[0]
    outer = stability.slack(
        lambda x: (torch.linalg.ldl_factor_ex(x[:3].reshape(3, 1) @ x[:3].reshape(1, 3))[0],),
        [big],
        torch.float32,
        differences=True,
    )
    assert outer is None  # more input elements than it differences


def test_a_gradients_bound_takes_the_ops_second_derivative() -> None:
    # eigh's gradient moves with 1 / gap**2 at second order: a close pair of eigenvalues
    # widens it, which no formula per op has to say.
    from accelkit.suite.opinfo import op_db

    op = op_db.op_db_by_name()["linalg.eigvalsh"]

    def bound(gap: float) -> float:
        a = torch.diag(torch.tensor([1.0, 1.0 + gap, 3.0], dtype=torch.float64))
        a = (a + 1e-6 * torch.ones(3, 3, dtype=torch.float64)).requires_grad_(True)
        ref = SampleInput(a)  # type: ignore[no-untyped-call]
        w = [torch.tensor([0.3, -0.7, 0.2], dtype=torch.float64)]
        found = sample_rules.stable_slack(op, ref, torch.float32, w, 0)
        assert found is not None and found.shape == a.shape
        return float(found.max())

    assert bound(1e-3) > 100 * bound(1.0)
