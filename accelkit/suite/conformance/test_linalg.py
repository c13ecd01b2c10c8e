"""Linear algebra (the new Jacobi-based MPS paths and every other backend): svd, eigh, qr,
cholesky, solve, lstsq, inv, det at several sizes and conditionings.

Each result is checked by its defining properties (reconstruction, orthogonality, symmetric
results, A x = b) and, where the answer is unique, against float64 on the CPU. Matrices are
built with a chosen spectrum (Q diag(s) Q^T with random orthogonal Q) so the condition
number is known and the tolerance can scale with it.
"""

from __future__ import annotations

import pytest
import torch

from accelkit.suite.numerics.reference import assert_matches_reference

DTYPES = {"float32": torch.float32, "float64": torch.float64}
SIZES = (4, 33, 64)
CONDITIONS = {"well": 1e1, "ill": 1e4}
CASES = [(dt, n, c) for dt in DTYPES for n in SIZES for c in CONDITIONS]
IDS = [f"{dt}/{n}x{n}/{c}" for dt, n, c in CASES]


def _orthogonal(n: int) -> torch.Tensor:
    q, r = torch.linalg.qr(torch.randn(n, n, dtype=torch.float64))
    return q * torch.sign(torch.diagonal(r))


def _spectrum(n: int, condition: float) -> torch.Tensor:
    # Log-spaced from 1 down to 1/condition: the 2-norm condition number is exact.
    return torch.logspace(0, -torch.log10(torch.tensor(condition)).item(), n, dtype=torch.float64)


def _spd(n: int, condition: float) -> torch.Tensor:
    q = _orthogonal(n)
    return (q * _spectrum(n, condition)) @ q.T


def _general(n: int, condition: float) -> torch.Tensor:
    return (_orthogonal(n) * _spectrum(n, condition)) @ _orthogonal(n).T


def _on(a: torch.Tensor, dtype: torch.dtype, device: str) -> torch.Tensor:
    return a.to(dtype).to(device)


def _close(
    actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype, bound: float, what: str
) -> None:
    assert_matches_reference(actual, expected.double().cpu(), dtype, atol=bound, what=what)


# Backward-stable algorithms (Householder QR and its relatives, Cholesky, LU with partial
# pivoting, symmetric eigensolvers, SVD): residuals (A - Q R, V^T V - I) are of order
# n * eps * ||A||, and forward errors (x, A^-1, L, |R|, eigen/singular values) of order
# n * kappa * eps times the answer's size (Higham, Accuracy and Stability of Numerical
# Algorithms, chapters 8-19). FACTOR is the constant; the matrices have ||A||_2 = 1.
FACTOR = 4.0


def _bound(dtype: torch.dtype, n: int, condition: float = 1.0, magnitude: float = 1.0) -> float:
    """FACTOR * n * condition * eps * magnitude: an absolute bound for the case's answer."""
    return FACTOR * n * condition * torch.finfo(dtype).eps * magnitude


def _largest(x: torch.Tensor) -> float:
    return float(x.detach().abs().max())


def _identity(n: int) -> torch.Tensor:
    return torch.eye(n, dtype=torch.float64)


@pytest.mark.parametrize(("dtype_name", "n", "cond"), CASES, ids=IDS)
def test_svd(dtype_name: str, n: int, cond: str, device: str) -> None:
    dtype = DTYPES[dtype_name]
    a = _general(n, CONDITIONS[cond])
    u, s, vh = torch.linalg.svd(_on(a, dtype, device))
    u64, s64, vh64 = (t.double().cpu() for t in (u, s, vh))
    bound = _bound(dtype, n)
    _close((u64 * s64) @ vh64, a, dtype, bound, "U diag(S) Vh reconstructs A")
    _close(u64.T @ u64, _identity(n), dtype, bound, "U orthogonal")
    _close(vh64 @ vh64.T, _identity(n), dtype, bound, "Vh orthogonal")
    assert bool((s64[:-1] >= s64[1:]).all()), "singular values not in descending order"
    _close(s, torch.linalg.svdvals(a), dtype, bound, "singular values vs float64")


@pytest.mark.parametrize(("dtype_name", "n", "cond"), CASES, ids=IDS)
def test_eigh(dtype_name: str, n: int, cond: str, device: str) -> None:
    dtype = DTYPES[dtype_name]
    a = _spd(n, CONDITIONS[cond]) - 0.25 * _identity(n)  # symmetric, indefinite
    w, v = torch.linalg.eigh(_on(a, dtype, device))
    w64, v64 = w.double().cpu(), v.double().cpu()
    bound = _bound(dtype, n)
    _close((v64 * w64) @ v64.T, a, dtype, bound, "V diag(w) V^T reconstructs A")
    _close(v64.T @ v64, _identity(n), dtype, bound, "V orthonormal")
    assert bool((w64[:-1] <= w64[1:]).all()), "eigenvalues not in ascending order"
    _close(w, torch.linalg.eigvalsh(a), dtype, bound, "eigenvalues vs float64")


@pytest.mark.parametrize(("dtype_name", "n", "cond"), CASES, ids=IDS)
def test_qr(dtype_name: str, n: int, cond: str, device: str) -> None:
    dtype = DTYPES[dtype_name]
    a = _general(n, CONDITIONS[cond])
    q, r = torch.linalg.qr(_on(a, dtype, device))
    q64, r64 = q.double().cpu(), r.double().cpu()
    bound = _bound(dtype, n)
    _close(q64 @ r64, a, dtype, bound, "QR reconstructs A")
    _close(q64.T @ q64, _identity(n), dtype, bound, "Q orthogonal")
    assert torch.equal(r64, torch.triu(r64)), "R is not upper triangular"
    # Unique up to the signs of R's diagonal: |R| must match the reference.
    # R's rows are determined up to sign with a forward error of order n * kappa * eps
    # (kappa of the matrix, its largest entry ||A|| = 1).
    condition = CONDITIONS[cond]
    want = torch.linalg.qr(a).R.abs()
    _close(r64.abs(), want, dtype, _bound(dtype, n, condition), "|R| vs float64")


@pytest.mark.parametrize(("dtype_name", "n", "cond"), CASES, ids=IDS)
def test_cholesky(dtype_name: str, n: int, cond: str, device: str) -> None:
    dtype = DTYPES[dtype_name]
    a = _spd(n, CONDITIONS[cond])
    factor = torch.linalg.cholesky(_on(a, dtype, device))
    l64 = factor.double().cpu()
    assert torch.equal(l64, torch.tril(l64)), "L is not lower triangular"
    assert bool((torch.diagonal(l64) > 0).all()), "L has a non-positive diagonal"
    _close(l64 @ l64.T, a, dtype, _bound(dtype, n), "L L^T reconstructs A")
    # L's forward error is of order n * sqrt(kappa) * eps (Cholesky's perturbation bound).
    _close(
        factor,
        torch.linalg.cholesky(a),
        dtype,
        _bound(dtype, n, CONDITIONS[cond] ** 0.5),
        "L vs float64",
    )


@pytest.mark.parametrize(("dtype_name", "n", "cond"), CASES, ids=IDS)
def test_solve(dtype_name: str, n: int, cond: str, device: str) -> None:
    dtype, condition = DTYPES[dtype_name], CONDITIONS[cond]
    a = _general(n, condition)
    b = torch.randn(n, 3, dtype=torch.float64)
    x = torch.linalg.solve(_on(a, dtype, device), _on(b, dtype, device))
    # The residual is small for a backward-stable solver whatever the conditioning.
    # (relative to |A| |x|, with |A| = 1 by construction).
    x64 = x.double().cpu()
    size = max(_largest(b), _largest(x64))
    _close(a @ x64 - b, torch.zeros_like(b), dtype, _bound(dtype, n, magnitude=size), "A x - b")
    want = torch.linalg.solve(a, b)
    _close(x, want, dtype, _bound(dtype, n, condition, _largest(want)), "x vs float64")


@pytest.mark.parametrize(("dtype_name", "n", "cond"), CASES, ids=IDS)
def test_lstsq(dtype_name: str, n: int, cond: str, device: str) -> None:
    dtype, condition = DTYPES[dtype_name], CONDITIONS[cond]
    a = torch.cat([_general(n, condition), _general(n, condition)[: n // 2 + 1]])  # tall
    b = torch.randn(a.shape[0], 2, dtype=torch.float64)
    x = torch.linalg.lstsq(_on(a, dtype, device), _on(b, dtype, device)).solution
    x64 = x.double().cpu()
    # Normal equations: the residual is orthogonal to A's columns.
    normal = a.T @ (a @ x64 - b)
    size = max(_largest(b), _largest(x64))
    residual = _bound(dtype, n, condition, size)
    _close(normal, torch.zeros_like(normal), dtype, residual, "A^T (A x - b)")
    want = torch.linalg.lstsq(a, b, driver="gelsd").solution
    _close(x, want, dtype, _bound(dtype, n, condition, _largest(want)), "x vs float64")


@pytest.mark.parametrize(("dtype_name", "n", "cond"), CASES, ids=IDS)
def test_inv(dtype_name: str, n: int, cond: str, device: str) -> None:
    dtype, condition = DTYPES[dtype_name], CONDITIONS[cond]
    a = _general(n, condition)
    inverse = torch.linalg.inv(_on(a, dtype, device)).double().cpu()
    want = torch.linalg.inv(a)
    # ||A^-1|| = kappa here: A A^-1 - I is of order n * eps * ||A|| ||A^-1||.
    _close(a @ inverse, _identity(n), dtype, _bound(dtype, n, condition), "A A^-1 = I")
    _close(inverse, want, dtype, _bound(dtype, n, condition, _largest(want)), "A^-1 vs float64")


@pytest.mark.parametrize(("dtype_name", "n", "cond"), CASES, ids=IDS)
def test_det(dtype_name: str, n: int, cond: str, device: str) -> None:
    dtype, condition = DTYPES[dtype_name], CONDITIONS[cond]
    # Known determinant: |det| = prod(spectrum); scale so it stays in float32's range.
    spectrum = _spectrum(n, condition)
    spectrum = spectrum / spectrum.prod() ** (1.0 / n)  # |det| = 1 exactly
    q1, q2 = _orthogonal(n), _orthogonal(n)
    a = (q1 * spectrum) @ q2.T
    expected = torch.linalg.det(a)
    assert abs(abs(expected.item()) - 1.0) < 1e-8, f"reference |det| = {expected.item()}"
    got = torch.linalg.det(_on(a, dtype, device))
    err = abs(got.double().cpu().item() - expected.item())
    # det's relative condition number is at most n * kappa (a relative perturbation E of A
    # moves det by tr(A^-1 E) det), and |det| = 1.
    bound = _bound(dtype, n, condition)
    assert err <= bound, f"det {got.item()} vs float64 {expected.item()}: error {err} > {bound}"
