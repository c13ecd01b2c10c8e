"""Eigen-decompositions of general matrices (`EIGEN_OPS`): matched, not compared elementwise.

The eigenvalues are a multiset: LAPACK's geev (and the GPU solvers) return them in no defined
order, and complex64 and complex128 runs of the same matrix return them permuted (measured),
as can float32 and float64. An eigenvector is unique only up to a complex phase (and, for a
multiple eigenvalue, not at all). So these ops are compared by what defines the answer, not
element by element (`check_eigen`):

- eigenvalues: the device's and the reference's are paired by the assignment that minimises
  the largest error relative to each reference eigenvalue's bound (a bottleneck matching,
  `bottleneck_assignment`), and every pair must lie within the bound (`pair_eigenvalues`);
- eigenvectors (linalg.eig): each device pair (lambda_i, v_i) satisfies the definition,
  ||A v_i - lambda_i v_i|| <= EIG_BACKWARD_EPS * eps * ||A||_F, and ||v_i|| = 1 within
  EIG_NORM_EPS * n * eps;
- gradients: the device's eigenvalues (and the columns of |V|, eig's phase-free output) are
  put in the reference's order by the same pairing (`align_eigen`) before the usual
  weighted-sum gradient, so each random weight multiplies the same eigenpair on both sides:
  the gradient of sum_j Re(conj(w_j) lambda_j) (+ sum w'_kj |V_kj|), a function of the
  decomposition that depends on neither order nor phase, judged as any other gradient (the
  backward-stable re-check holds its division by eigenvalue gaps).

The bound on eigenvalue i is condition-aware (`eigen_bounds`): geev is backward stable (its
eigenpairs are exact for A + E, ||E||_2 <= EIG_BACKWARD_EPS * eps * ||A||_F), and by
Gershgorin's theorem applied to V^-1 (A + E) V the eigenvalues of A + E lie in disks around
the reference's lambda_i of radius r_i = n * kappa_i * ||E||_2, where
kappa_i = ||x_i|| ||y_i|| / |y_i^H x_i| (right and left eigenvectors) is lambda_i's condition
number. No first-order assumption: where disks overlap (close eigenvalues: an
ill-conditioned eigenproblem), the union of a cluster of k overlapping disks holds exactly k
eigenvalues, so every eigenvalue of the cluster is allowed up to 2 * sum(r) of the cluster
from each of its centres. A defective reference (no basis of eigenvectors, kappa infinite)
bounds nothing: its eigenvalues are then checked only through eig's residual (and not at all
by eigvals); random samples are never defective. eps is that of the least precise dtype of
the case and the output.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from accelkit.suite.opinfo.comparison import Mismatch
from accelkit.suite.opinfo.tolerances import least_precise

EIGEN_OPS: frozenset[str] = frozenset({"linalg.eig", "linalg.eigvals"})
# Backward error of geev in units of eps * ||A||_F, including the rounding of the stored
# answer and of the residual's own float64 evaluation: residuals ||A v - lambda v|| up to
# 6.5 eps ||A||_F measured in float32/complex64 and 7.1 in float64 (the samples: n = 5,
# 200 seeds), so ~3x headroom; eigenvalue errors reach 0.06 of their bound with it (1.2 of
# the Gershgorin radius with a factor of 1).
EIG_BACKWARD_EPS = 20.0
# | ||v|| - 1 | <= EIG_NORM_EPS * n * eps: normalising sums n squares (2.0 eps measured,
# 0.2 of the bound).
EIG_NORM_EPS = 2.0


def bottleneck_assignment(cost: list[list[float]]) -> tuple[list[int], float]:
    """The pairing of the rows of a square cost matrix with its columns that minimises the
    largest cost of a pair (NaN counts as inf): (`row_of[j]`, the row paired with column j;
    that largest cost). Kuhn's augmenting paths under a bisected cost limit: O(n^3 log n),
    for the small matrices of the samples."""
    n = len(cost)
    if n == 0:
        return [], 0.0
    cost = [[math.inf if math.isnan(c) else c for c in row] for row in cost]

    def pairing(limit: float) -> list[int] | None:
        row_of = [-1] * n

        def augment(i: int, seen: list[bool]) -> bool:
            for j in range(n):
                if not seen[j] and cost[i][j] <= limit:
                    seen[j] = True
                    if row_of[j] < 0 or augment(row_of[j], seen):
                        row_of[j] = i
                        return True
            return False

        return row_of if all(augment(i, [False] * n) for i in range(n)) else None

    levels = sorted({c for row in cost for c in row})
    low, high = 0, len(levels) - 1  # the largest level admits every pair: always a pairing
    while low < high:
        mid = (low + high) // 2
        if pairing(levels[mid]) is None:
            low = mid + 1
        else:
            high = mid
    row_of = pairing(levels[low])
    assert row_of is not None
    return row_of, levels[low]


@dataclass(frozen=True)
class EigenBounds:
    """Per reference eigenvalue (batch flattened: shape (matrices, n)), how far the device's
    paired eigenvalue may be (`allowed`), and what that follows from (see EIGEN_OPS)."""

    allowed: torch.Tensor
    kappa: torch.Tensor
    cluster: torch.Tensor  # how many reference eigenvalues share the disk cluster
    norm: torch.Tensor  # ||A||_F per matrix
    eps: float


def eigen_bounds(a_ref: torch.Tensor, ref_values: torch.Tensor, eps: float) -> EigenBounds:
    """The Gershgorin bounds of the reference eigenvalues `ref_values` (the op's float64
    answer for the float64 matrices `a_ref`): radius EIG_BACKWARD_EPS * n * eps * ||A||_F *
    kappa_i, widened to 2 * sum(radius) over a cluster of overlapping disks."""
    n = a_ref.shape[-1]
    a = a_ref.detach().to("cpu", torch.complex128).reshape(-1, n, n)
    ref = ref_values.detach().to("cpu", torch.complex128).reshape(-1, n)
    values, vectors = torch.linalg.eig(a)
    inverse, info = torch.linalg.inv_ex(vectors)
    # kappa_i = ||x_i|| ||y_i|| / |y_i^H x_i| with y_i^H the rows of V^-1 (y_i^H x_i = 1).
    kappa = inverse.abs().pow(2).sum(-1).sqrt() * vectors.abs().pow(2).sum(-2).sqrt()
    kappa = torch.where((info == 0).unsqueeze(-1) & torch.isfinite(kappa), kappa, math.inf)
    norm = torch.linalg.matrix_norm(a)
    radius = EIG_BACKWARD_EPS * n * eps * norm.unsqueeze(-1) * kappa
    allowed = torch.empty_like(radius)
    cluster = torch.ones(radius.shape, dtype=torch.int64)
    for b in range(a.shape[0]):
        # Put kappa in the order of `ref` (eigvals may order its answer differently from
        # eig's): both are float64 answers for the same matrix, paired by distance.
        distance = (values[b].unsqueeze(1) - ref[b].unsqueeze(0)).abs().tolist()
        row_of, _ = bottleneck_assignment(distance)
        r = radius[b][row_of]
        kappa[b] = kappa[b][row_of].clone()
        for members in _disk_clusters(ref[b], r):
            cluster[b, members] = len(members)
            allowed[b, members] = r[members] if len(members) == 1 else 2 * r[members].sum()
    return EigenBounds(allowed=allowed, kappa=kappa, cluster=cluster, norm=norm, eps=eps)


def _disk_clusters(centres: torch.Tensor, radius: torch.Tensor) -> list[list[int]]:
    """The connected components of the disks (centre, radius) that overlap (or touch, or have
    an infinite radius), each as a sorted list of indices."""
    n = centres.shape[0]
    gaps = (centres.unsqueeze(1) - centres.unsqueeze(0)).abs()
    apart = (gaps > radius.unsqueeze(1) + radius.unsqueeze(0)).tolist()
    unseen, clusters = set(range(n)), []
    while unseen:
        todo = [min(unseen)]
        unseen.discard(todo[0])
        members = []
        while todo:
            i = todo.pop()
            members.append(i)
            near = [j for j in unseen if not apart[i][j]]
            unseen.difference_update(near)
            todo.extend(near)
        clusters.append(sorted(members))
    return clusters


def pair_eigenvalues(
    values: torch.Tensor,
    ref_values: torch.Tensor,
    a_ref: torch.Tensor,
    case_dtype: torch.dtype,
    what: str,
) -> torch.Tensor:
    """An index that puts the device's eigenvalues in the reference's order
    (`values.gather(-1, index)[..., j]` is paired with `ref_values[..., j]`), by the pairing
    that minimises the largest error relative to each reference eigenvalue's bound; Mismatch
    if in that pairing (so in every one) an eigenvalue lies beyond its bound."""
    if values.shape != ref_values.shape:
        raise Mismatch(
            f"{what}: eigenvalues of shape {tuple(values.shape)}, reference "
            f"{tuple(ref_values.shape)}"
        )
    if not values.is_complex():
        raise Mismatch(f"{what}: eigenvalues of dtype {values.dtype}, reference {ref_values.dtype}")
    n = values.shape[-1] if values.dim() else 0
    index = torch.arange(n).expand(values.shape).clone()
    if values.numel() == 0:
        return index
    eps = torch.finfo(least_precise(case_dtype, values.dtype)).eps
    bounds = eigen_bounds(a_ref, ref_values, eps)
    got = values.detach().to("cpu", torch.complex128).reshape(-1, n)
    ref = ref_values.detach().to("cpu", torch.complex128).reshape(-1, n)
    flat = index.reshape(-1, n)
    for b in range(got.shape[0]):
        distance = (got[b].unsqueeze(1) - ref[b].unsqueeze(0)).abs()
        # Relative to the bound; an exact match is 0 even where the bound is 0 (A = 0).
        cost = torch.where(distance == 0, 0.0, distance / bounds.allowed[b].unsqueeze(0))
        row_of, worst = bottleneck_assignment(cost.tolist())
        flat[b] = torch.tensor(row_of)
        if worst <= 1.0:
            continue
        j = max(range(n), key=lambda j: _nan_last(float(cost[row_of[j], j])))
        i = row_of[j]
        where = f"matrix {b} (batch flattened), " if got.shape[0] > 1 else ""
        close = (
            f", in a cluster of {int(bounds.cluster[b, j])} overlapping disks"
            if int(bounds.cluster[b, j]) > 1
            else ""
        )
        raise Mismatch(
            f"{what}: the eigenvalues match the reference's in no order: in the best "
            f"pairing, {where}eigenvalue {complex(got[b, i])} is {float(distance[i, j]):.3g} "
            f"from the reference's {complex(ref[b, j])}, beyond its bound "
            f"{float(bounds.allowed[b, j]):.3g} (EIG_BACKWARD_EPS * n * eps * ||A||_F * kappa "
            f"= {EIG_BACKWARD_EPS:g} * {n} * {eps:.3g} * {float(bounds.norm[b]):.4g} * "
            f"{float(bounds.kappa[b, j]):.4g}{close})"
        )
    return index


def _nan_last(x: float) -> float:
    return math.inf if math.isnan(x) else x


def check_eigen(
    actual: Any, expected: Any, a_ref: torch.Tensor, case_dtype: torch.dtype, what: str
) -> None:
    """A linalg.eig (eigenvalues, eigenvectors) or linalg.eigvals answer against the float64
    answer `expected` for the matrices `a_ref`, by the rules of EIGEN_OPS."""
    values, vectors = actual if isinstance(actual, (tuple, list)) else (actual, None)
    ref_values = expected[0] if isinstance(expected, (tuple, list)) else expected
    pair_eigenvalues(values, ref_values, a_ref, case_dtype, f"{what}: eigenvalues")
    if vectors is None:
        return
    what = f"{what}: eigenvectors"
    if vectors.shape != a_ref.shape or not vectors.is_complex():
        raise Mismatch(
            f"{what}: {vectors.dtype} of shape {tuple(vectors.shape)} for "
            f"matrices of shape {tuple(a_ref.shape)}"
        )
    if vectors.numel() == 0:
        return
    n = a_ref.shape[-1]
    eps = torch.finfo(least_precise(case_dtype, values.dtype)).eps
    a = a_ref.detach().to("cpu", torch.complex128).reshape(-1, n, n)
    v = vectors.detach().to("cpu", torch.complex128).reshape(-1, n, n)
    lam = values.detach().to("cpu", torch.complex128).reshape(-1, 1, n)
    norm = torch.linalg.matrix_norm(a).unsqueeze(-1)
    residual = (a @ v - v * lam).norm(dim=-2)  # per eigenpair (column)
    length = v.norm(dim=-2)
    checks = (
        (
            "||A v - lambda v||",
            residual,
            EIG_BACKWARD_EPS * eps * norm.expand_as(residual),
            f"EIG_BACKWARD_EPS * eps * ||A||_F = {EIG_BACKWARD_EPS:g} * {eps:.3g} * ||A||_F",
        ),
        (
            "| ||v|| - 1 |",
            (length - 1).abs(),
            torch.full_like(length, EIG_NORM_EPS * n * eps),
            f"EIG_NORM_EPS * n * eps = {EIG_NORM_EPS:g} * {n} * {eps:.3g}",
        ),
    )
    for name, error, bound, formula in checks:
        bad = ~(error <= bound)  # NaN is bad
        if not bool(bad.any()):
            continue
        ratio = torch.where(bad, (error / bound).nan_to_num(math.inf, math.inf), 0)
        b, i = divmod(int(ratio.argmax()), n)
        where = f"matrix {b} (batch flattened), " if a.shape[0] > 1 else ""
        raise Mismatch(
            f"{what}: {where}eigenpair {i} (eigenvalue {complex(lam[b, 0, i])}): {name} = "
            f"{float(error[b, i]):.3g}, beyond {float(bound[b, i]):.3g} ({formula}); "
            f"{int(bad.sum())} of {bad.numel()} eigenpairs"
        )


def align_eigen(
    outputs: list[torch.Tensor],
    ref_outputs: list[torch.Tensor],
    a_ref: torch.Tensor,
    case_dtype: torch.dtype,
    what: str,
) -> list[torch.Tensor]:
    """The device's differentiable outputs of eig (eigenvalues, |eigenvectors|) or eigvals
    (eigenvalues), differentiably reordered (gather) into the reference's eigenpair order."""
    index = pair_eigenvalues(
        outputs[0], ref_outputs[0], a_ref, case_dtype, f"{what}: eigenvalues"
    ).to(outputs[0].device)
    aligned = [outputs[0].gather(-1, index)]
    for extra in outputs[1:]:  # eig's |V|: one column per eigenvalue
        aligned.append(extra.gather(-1, index.unsqueeze(-2).expand(extra.shape)))
    return aligned
