"""linalg.eig and linalg.eigvals in the OpInfo module: compared as eigen-decompositions.

Eigenvalues come in no defined order and eigenvectors with any phase, so the suite pairs
eigenvalues with the reference's within condition-aware bounds and checks A v = lambda v
(`accelkit.suite.opinfo.eigen`). These tests check the pieces in-process, and that every
eig case passes in a clean run; tests/integration/test_test_opinfo_eigen.py checks that
the real suite still fails a backend whose eigenvalues are 0.1% off and passes one that
returns the eigenpairs permuted and phase-rotated (a right answer).
"""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
import torch

from accelkit.suite.opinfo import comparison, eigen, skips
from tests.helpers import REPO

EPS32 = torch.finfo(torch.float32).eps


def test_bottleneck_assignment_minimises_the_largest_cost() -> None:
    # The greedy choice (row 0 takes column 0 at cost 1) forces row 1 onto cost 10;
    # the best pairing crosses over with largest cost 2.
    row_of, worst = eigen.bottleneck_assignment([[1.0, 2.0], [2.0, 10.0]])
    assert (row_of, worst) == ([1, 0], 2.0)
    assert eigen.bottleneck_assignment([]) == ([], 0.0)
    row_of, worst = eigen.bottleneck_assignment([[math.nan, 0.5], [0.25, math.nan]])
    assert (row_of, worst) == ([1, 0], 0.5)
    assert eigen.bottleneck_assignment([[math.nan]])[1] == math.inf


def _matrix(seed: int, n: int, dtype: torch.dtype) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    real = torch.randn(n, n, generator=generator, dtype=torch.float64)
    if dtype.is_complex:
        real = torch.complex(real, torch.randn(n, n, generator=generator, dtype=torch.float64))
    return real.to(dtype)


Eig = tuple[torch.Tensor, torch.Tensor]


def _answers(a: torch.Tensor) -> tuple[Eig, Eig]:
    """eig in the case dtype, and the float64/complex128 reference of the same values."""
    ref_a = a.to(torch.complex128 if a.is_complex() else torch.float64)
    return torch.linalg.eig(a), torch.linalg.eig(ref_a)


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64])
def test_a_permuted_phase_rotated_answer_passes(dtype: torch.dtype) -> None:
    a = _matrix(0, 6, dtype)
    (values, vectors), ref = _answers(a)
    order = torch.tensor([4, 2, 0, 5, 1, 3])
    phases = torch.exp(1j * torch.linspace(0.3, 2.9, 6)).to(vectors.dtype)
    answer = (values[order], vectors[:, order] * phases)
    eigen.check_eigen(answer, ref, a.to(ref[1].dtype), dtype, "eig")
    eigen.check_eigen(values.flip(-1), ref[0], a.to(ref[1].dtype), dtype, "eigvals")


@pytest.mark.parametrize(
    ("fault", "needle"),
    [
        ("one eigenvalue 0.1% off", "match the reference's in no order"),
        ("eigenvectors 0.1% long", "| ||v|| - 1 |"),
        ("eigenpairs mismatched", "||A v - lambda v||"),
    ],
)
def test_a_wrong_answer_fails(fault: str, needle: str) -> None:
    a = _matrix(1, 5, torch.complex64)
    (values, vectors), ref = _answers(a)
    if fault.startswith("one eigenvalue"):
        values = values.clone()
        values[2] *= 1.001
    elif fault.startswith("eigenvectors"):
        vectors = vectors * 1.001
    else:  # the right eigenvalues, each with another one's eigenvector
        values = values.roll(1)
    with pytest.raises(comparison.Mismatch) as caught:
        eigen.check_eigen((values, vectors), ref, a.to(torch.complex128), torch.complex64, "eig")
    assert needle in str(caught.value)


def test_a_batch_and_empty_matrices() -> None:
    a = torch.stack([_matrix(2, 4, torch.complex64), _matrix(3, 4, torch.complex64)])
    (values, vectors), ref = _answers(a)
    eigen.check_eigen(
        (values.flip(-1), vectors.flip(-1)), ref, a.to(torch.complex128), torch.complex64, "eig"
    )
    bad = values.clone()
    bad[1, 0] += 1e-3 * bad[1, 0].abs()
    with pytest.raises(comparison.Mismatch, match="matrix 1"):
        eigen.check_eigen(bad, ref[0], a.to(torch.complex128), torch.complex64, "eigvals")
    empty = torch.zeros(0, 5, 5, dtype=torch.complex64)
    (values, vectors), ref = _answers(empty)
    eigen.check_eigen((values, vectors), ref, empty.to(torch.complex128), torch.complex64, "e")


def test_close_eigenvalues_get_a_cluster_bound() -> None:
    """Two eigenvalues 1e-5 apart with a large coupling (kappa ~ 1e4): the first-order
    disks overlap, so both get the cluster's bound, and complex64's answer passes."""
    q, _ = torch.linalg.qr(_matrix(4, 3, torch.complex128))
    t = torch.tensor([[1, 10, 0], [0, 1 + 1e-5, 0], [0, 0, -3]], dtype=torch.complex128)
    a = (q @ t @ q.mH).to(torch.complex64)
    (values, vectors), ref = _answers(a)
    bounds = eigen.eigen_bounds(a.to(torch.complex128), ref[0], EPS32)
    near_one = (ref[0] - 1).abs() < 0.1
    assert bounds.cluster[0][near_one].tolist() == [2, 2]
    assert bounds.cluster[0][~near_one].tolist() == [1]
    assert bool((bounds.kappa[0][near_one] > 1e3).all())
    eigen.check_eigen((values, vectors), ref, a.to(torch.complex128), torch.complex64, "eig")
    # The well-conditioned eigenvalue keeps a tight bound: 0.1% off still fails.
    bad = torch.where((values - 1).abs() < 0.1, values, values * 1.001)
    with pytest.raises(comparison.Mismatch):
        eigen.check_eigen(bad, ref[0], a.to(torch.complex128), torch.complex64, "eigvals")


def test_the_skip_list_stays_truthful() -> None:
    for op in eigen.EIGEN_OPS:
        assert not [skip for skip in skips.KNOWN_SKIPS.values() if skip.op == op], op


CLEAN_RUN = """
import random, sys
import torch
from accelkit.suite import opinfo

op_name = sys.argv[1]
op = opinfo.op_db_by_name()[op_name]
cases = [case for case in opinfo.plan("cpu", "full") if case.op == op_name]
assert len(cases) == 12, cases  # float32, float64, complex64; forward, grad; each noncontiguous too
for case in cases:
    for breadth in ("quick", "full"):
        assert opinfo.skip_reason(op, case, "cpu", breadth) is None, (case, breadth)
    for seed in (0, 1):
        torch.manual_seed(seed)
        random.seed(seed)
        assert opinfo.run_case(op, case, "cpu", None) > 0, case
"""


@pytest.mark.slow
@pytest.mark.parametrize("op_name", sorted(eigen.EIGEN_OPS))
def test_every_eig_case_runs_and_passes_on_the_cpu(op_name: str) -> None:
    # In a subprocess: importing op_db here would make tests/unit/probe/test_probe.py skip its check
    # that the capability probe does not import it.
    proc = subprocess.run(
        [sys.executable, "-c", CLEAN_RUN, op_name],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
