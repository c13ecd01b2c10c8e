"""What each sample decides about its own error bound: the functions the sample tables call.

A constant factor in `scales` is right where the error grows with something the samples fix
(their range, their shapes). Where it grows with something each draw decides (how close a
reflector is to singular, how far logits spread, how nearly equal the elements of a group
are), a constant that covers the worst draw would blind the check on the others. The
functions here measure that from the float64 reference sample `ref` (an OpInfo SampleInput
on the CPU), so the tables in `sample_tables` widen a bound only where a sample needs it:

- terms (`SampleTerms`): the largest magnitude among the terms a kernel rounds;
- conditions (`SampleCondition`): a condition number kappa of the sample's answer;
- intermediates (`BackwardOverflow`): values a backward forms in the case dtype, as
  (factors, divisors);
- `euclid_mm_terms` (`Squared`): cdist's squared-distance terms where it multiplies matrices.

All are pure functions of the sample (and the op, and the outputs' random weights for a
gradient); none builds a case or compares anything.

Longer than 600 lines because each function carries the derivation of its bound, and the
sample tables name them from one module: they are many small, independent functions.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import torch
from torch.utils import _pytree as pytree

from accelkit.suite.opinfo.records import Intermediates
from accelkit.suite.opinfo.tolerances import max_magnitude


def differentiable(value: Any) -> list[torch.Tensor]:
    """The tensors in `value` (any nesting) that require a gradient, in pytree order."""
    leaves = pytree.tree_leaves(value)
    return [x for x in leaves if isinstance(x, torch.Tensor) and x.requires_grad]


def argument(ref: Any, position: int, name: str, default: Any) -> Any:
    """An argument given positionally (after the input) or by keyword."""
    if len(ref.args) > position:
        return ref.args[position]
    return ref.kwargs.get(name, default)


def _real64(x: torch.Tensor) -> torch.Tensor:
    return x.detach().to("cpu", torch.complex128 if x.is_complex() else torch.float64)


def _floating(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex())


def _magnitude(x: torch.Tensor) -> torch.Tensor:
    """|x|, a complex x taken as |Re x| + |Im x| (a real tensor)."""
    return x.real.abs() + x.imag.abs() if x.is_complex() else x.abs()


def mvlgamma_terms(op: Any, ref: Any, weights: list[torch.Tensor] | None) -> float:
    """mvlgamma(x, p) = sum_j lgamma(x - j / 2) + p (p - 1) / 4 log(pi), as torch's composite
    forms it: each lgamma term rounds to the dtype before the sum, so an answer keeps eps / 2
    of each term's magnitude: the largest sum of |lgamma(x - j / 2)| and the constant."""
    shifted = _mvlgamma_arguments(ref)
    if not shifted.numel():
        return 0.0
    p = shifted.shape[-1]
    constant = p * (p - 1) / 4 * math.log(math.pi)
    return float(torch.lgamma(shifted).abs().sum(-1).max()) + constant


def _mvlgamma_arguments(ref: Any) -> torch.Tensor:
    """x - j / 2 for j < p, along a new last dimension: the arguments of mvlgamma's lgamma
    terms."""
    p = int(argument(ref, 0, "p", 1))
    return _real64(ref.input).unsqueeze(-1) - torch.arange(p, dtype=torch.float64) / 2


def _reduced(parts: torch.Tensor, reduction: str) -> float:
    """The magnitudes of a loss's per-element parts, reduced as the loss reduces them."""
    if not parts.numel():
        return 0.0
    if reduction == "sum":
        return float(parts.sum())
    if reduction == "mean":
        return float(parts.mean())
    return float(parts.max())


def triplet_terms(op: Any, ref: Any, weights: list[torch.Tensor] | None) -> float:
    """triplet_margin_loss's terms: per row d(a, p) + d(a, n) + |margin| (and d(p, n) with
    swap), the distances (the sample's distance_function, else pairwise_distance with its p
    and eps) each off by about eps of itself in the dtype, then their difference rounded;
    reduced as the loss is. The distances (up to ~33 for OpInfo's 10 features in [-9, 9])
    exceed every input, and the loss is their difference."""
    anchor, positive, negative = (_real64(x) for x in (ref.input, *ref.args[:2]))
    if not anchor.numel():
        return 0.0
    distance = ref.kwargs.get("distance_function") or functools.partial(
        torch.nn.functional.pairwise_distance,
        p=float(ref.kwargs.get("p", 2.0)),
        eps=float(ref.kwargs.get("eps", 1e-6)),
    )
    pairs = [(anchor, positive), (anchor, negative)]
    if ref.kwargs.get("swap", False):
        pairs.append((positive, negative))
    with torch.no_grad():
        parts = sum((distance(x, y).abs() for x, y in pairs), torch.zeros(()))
    parts = parts + abs(float(ref.kwargs.get("margin", 1.0)))
    return _reduced(parts, ref.kwargs.get("reduction", "mean"))


def nll_loss_terms(op: Any, ref: Any, weights: list[torch.Tensor] | None) -> float:
    """nll_loss's terms: `class_loss_terms` of |x|, the log-probabilities it is given (a mean
    over class weights that nearly cancel: float32 at seed 18, 264.4 off by 1.7e-3 where the
    answer's own bound allowed 6.3e-5; bfloat16, -848 where -422 is exact)."""
    x = _real64(ref.input)
    if x.ndim == 0 or not x.numel():
        return 0.0
    return class_loss_terms(op, ref, x.abs(), 0.0)


def class_loss_terms(op: Any, ref: Any, logs: torch.Tensor, smoothing: float) -> float:
    """A classification loss's terms over the class dimension (0 for a 1-d input, else 1) of
    `logs` (the magnitudes of the log-probabilities): per element |w_c| |y| logs_c
    (probability targets; a class index picks one class, plus label smoothing's spread over
    all), each rounded to the dtype, then reduced as the loss reduces them. A mean over class
    indices divides by sum(w_target), whose cancellation carries the loss: that adds
    |loss| sum|w_target| / |sum(w_target)| (infinite where the sum is 0)."""
    target = ref.args[0]
    dim = 0 if logs.ndim == 1 else 1
    classes = logs.shape[dim]
    shape = [1] * logs.ndim
    shape[dim] = classes
    weight = ref.kwargs.get("weight")
    signed = _real64(weight) if isinstance(weight, torch.Tensor) else torch.ones(classes)
    signed = signed.to(torch.float64)
    magnitudes = signed.abs().reshape(shape)
    reduction = ref.kwargs.get("reduction", "mean")
    spread = smoothing / classes * (magnitudes * logs).sum(dim)
    if target.is_floating_point():
        parts = (magnitudes * _real64(target).abs() * logs).sum(dim) * (1 - smoothing)
        return _reduced(parts + spread, reduction)
    valid = target != ref.kwargs.get("ignore_index", -100)
    index = torch.where(valid, target, 0)
    picked = logs.gather(dim, index.unsqueeze(dim)).squeeze(dim)
    chosen = torch.where(valid, signed[index], 0.0)
    parts = torch.where(valid, chosen.abs() * picked * (1 - smoothing) + spread, 0.0)
    if reduction != "mean":
        return _reduced(parts, reduction)
    divisor = float(chosen.sum())
    if divisor == 0:
        return math.inf
    with torch.no_grad():
        loss = float(op.op(ref.input, *ref.args, **ref.kwargs).abs())
    return (float(parts.sum()) + loss * float(chosen.abs().sum())) / abs(divisor)


# Cephes' airy (PyTorch's kernels) sums the Maclaurin series Ai(x) = c1 f(x) - c2 g(x) for
# |x| < 2.09 (asymptotic expansions beyond): c1 = Ai(0), c2 = -Ai'(0).
def cosine_terms(op: Any, ref: Any, weights: list[torch.Tensor] | None) -> list[float]:
    """cosine_similarity(x1, x2, dim)'s gradients, per input that needs one: the gradient
    w.r.t. x1 is w * (x2 / (|x1| |x2|) - cos * x1 / |x1| ** 2), two terms that cancel where
    x1 and x2 are parallel (float16 at seed 12: 0.031 where 0 is exact); their magnitudes
    |w| (|x2| / (|x1| |x2|) + |cos| |x1| / |x1| ** 2), summed over a broadcast input's
    elements (the largest such sum), and the same for x2."""
    if weights is None:
        return []
    x1, x2 = _real64(ref.input), _real64(ref.args[0])
    dim = int(argument(ref, 1, "dim", 1))
    eps = float(argument(ref, 2, "eps", 1e-8))
    a, b = torch.broadcast_tensors(x1, x2)  # type: ignore[no-untyped-call]
    n1 = torch.linalg.vector_norm(a, dim=dim, keepdim=True).clamp_min(eps)
    n2 = torch.linalg.vector_norm(b, dim=dim, keepdim=True).clamp_min(eps)
    cos = ((a * b).sum(dim, keepdim=True) / (n1 * n2)).abs()
    w = weights[0].detach().to(torch.float64).abs().unsqueeze(dim)
    found = {}
    for x, mine, norm, other in ((ref.input, a, n1, b), (ref.args[0], b, n2, a)):
        terms = w * (other.abs() / (n1 * n2) + cos * mine.abs() / norm**2)
        found[id(x)] = float(terms.sum_to_size(x.shape).max()) if terms.numel() else 0.0
    return [found.get(id(t), 0.0) for t in differentiable((ref.input, ref.args, ref.kwargs))]


def masked_normalize_terms(op: Any, ref: Any, weights: list[torch.Tensor] | None) -> float:
    """masked.normalize(x, ord, dim, eps=, mask=)'s gradient w / n - (w . x) / n ** 2 *
    sgn(x) (|x| / n) ** (p - 1) (n the p-norm over the elements the mask keeps, all without
    one, clamped at eps): the larger of its two terms' magnitudes, which exceed every input
    and output for p < 1 and elements near 0 (and cancel to 0 over one element)."""
    if weights is None or not isinstance(ref.input, torch.Tensor) or ref.input.numel() == 0:
        return 0.0
    mask = ref.kwargs.get("mask")
    keep = mask.to("cpu") if isinstance(mask, torch.Tensor) else None
    return _normalize_terms(
        _real64(ref.input),
        weights[0].detach().to(torch.float64),
        float(argument(ref, 0, "ord", 2.0)),
        argument(ref, 1, "dim", None),
        float(ref.kwargs.get("eps", 1e-12)),
        keep,
    )


def _normalize_terms(
    x: torch.Tensor,
    w: torch.Tensor,
    p: float,
    dim: Any,
    eps: float,
    keep: torch.Tensor | None = None,
) -> float:
    if x.dim() == 0:
        x, w, dim = x.reshape(1), w.reshape(1), 0
        keep = None if keep is None else keep.reshape(1)
    if keep is not None:  # masked-out elements: left out of the norm and of the terms
        keep = keep.expand(x.shape)
        w = torch.where(keep, w.expand(x.shape), 0.0)
        n = torch.linalg.vector_norm(
            torch.where(keep, x, math.inf if p < 0 else 0.0), p, dim=dim, keepdim=True
        )
        x = torch.where(keep, x, 0.0)
    else:
        n = torch.linalg.vector_norm(x, p, dim=dim, keepdim=True)
    n = n.clamp_min(eps)
    first = w.abs() / n
    ratio = torch.where(x == 0, 0.0, (x.abs() / n).pow(p - 1))
    second = (w * x).abs().sum(dim, keepdim=True) / n**2 * ratio
    return max_magnitude((first, second))


def _reflectors(ref: Any) -> list[torch.Tensor]:
    """The reflectors H_i = I - tau_i v_i v_i^H (complex128, batched) that
    householder_product(A, tau) multiplies, v_i the i-th column of A's strict lower triangle
    with a unit diagonal; [] for an empty sample."""
    a, tau = _real64(ref.input), _real64(ref.args[0])
    if a.numel() == 0 or tau.numel() == 0:
        return []
    a, tau = a.to(torch.complex128), tau.to(torch.complex128)
    v = a.tril(-1)
    v.diagonal(0, -2, -1).fill_(1)
    eye = torch.eye(a.shape[-2], dtype=torch.complex128)
    columns = (v[..., :, i : i + 1] for i in range(tau.shape[-1]))
    return [eye - tau[..., i, None, None] * (c @ c.mH) for i, c in enumerate(columns)]


def householder_condition(op: Any, ref: Any) -> float:
    """prod_i cond_2(H_i) of the reflectors H_i = I - tau_i v_i v_i^H (the largest over the
    batch): householder_product's backward applies each H_i and its inverse to the running
    product in turn, and each step amplifies the error by the condition of the two."""
    reflectors = _reflectors(ref)
    if not reflectors:
        return 1.0
    kappa = functools.reduce(torch.mul, (torch.linalg.cond(h) for h in reflectors))
    return float(kappa.max())


def _group_statistics(
    x: torch.Tensor, dims: tuple[int, ...], eps: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(mean, var + eps, kappa) of each group over `dims` (kept), x in float64: kappa =
    (mean(|x| ** 2) + eps) / (var + eps), the biased variance of |x - mean|, inf where
    var + eps is not positive."""
    x = _real64(x)
    mean = x.mean(dims, keepdim=True)
    variance = (x - mean).abs().pow(2).mean(dims, keepdim=True) + eps
    square = x.abs().pow(2).mean(dims, keepdim=True) + eps
    return mean, variance, torch.where(variance > 0, square / variance, math.inf)


def variance_condition(x: torch.Tensor, dims: tuple[int, ...], eps: float = 0.0) -> float:
    """max over the groups of mean(x ** 2) / (var(x) + eps) (biased variance over `dims`):
    the relative condition of a variance formed as a difference of the case dtype's numbers,
    and of 1 / sigma, which normalised outputs and their gradients scale with. Complex x:
    |x| ** 2 and |x - mean| ** 2, as torch's var is real."""
    if x.numel() == 0 or not dims:
        return 1.0
    _, _, kappa = _group_statistics(x, dims, eps)
    return max(1.0, float(kappa.max()))


def corrcoef_condition(op: Any, ref: Any) -> float:
    """variance_condition of each variable (row) over its observations."""
    return variance_condition(ref.input, (-1,))


def corrcoef_grad_terms(op: Any, ref: Any, weights: list[torch.Tensor] | None) -> float:
    """The magnitude, in the gradient's own units (1 / x: corrcoef is invariant under scaling
    a row), of the terms corrcoef's backward rounds, times the variances' condition.

    With s_i row i's standard deviation over n observations, d/dx_ik of r_ij = c_ij /
    sqrt(c_ii c_jj) is (x_jk - mean_j) / ((n - 1) s_i s_j) - r_ij (x_ik - mean_i) /
    ((n - 1) s_i^2): two terms, each at most 1 / (sqrt(n - 1) s_i) (|x_k - mean| <=
    sqrt(n - 1) s), weighted by W_ij and W_ji. So G = max_i 2 sum_j (|W_ij| + |W_ji|) /
    (sqrt(n - 1) s_i), and each term carries the variance's relative error eps * kappa
    (`corrcoef_condition`): kappa * G.

    corrcoef clamps r to [-1, 1]: where |r_ij| is within 4 * eps * kappa of 1 (eps of the
    weights' dtype, the case's) the answer may be clamped, and the clamp's backward drops
    r_ij's whole contribution, |W_ij| * |dr_ij/dx| (measured from the float64 Jacobian):
    that allowance A is added as A / (2 * eps) (the terms' bound is 2 * eps * terms)."""
    if weights is None or not isinstance(ref.input, torch.Tensor) or ref.input.numel() == 0:
        return 0.0
    x = _real64(ref.input)
    rows = x.reshape(1, -1) if x.dim() < 2 else x
    n = rows.shape[-1]
    if n < 2:
        return 0.0
    w = weights[0].detach().to("cpu", torch.float64).abs().reshape(rows.shape[0], rows.shape[0])
    s = rows.std(-1, correction=1)
    g = 2 * (w.sum(0) + w.sum(1)) / (math.sqrt(n - 1) * s)
    kappa = corrcoef_condition(op, ref)
    terms = kappa * float(g.max())
    eps = torch.finfo(weights[0].dtype).eps
    terms += _clamped_corrcoef_terms(rows, w, 4 * eps * kappa) / (2 * eps)
    return terms


def _clamped_corrcoef_terms(rows: torch.Tensor, w: torch.Tensor, margin: float) -> float:
    """The largest gradient contribution, sum_ij |W_ij| * |dr_ij/dx|, of the correlations
    corrcoef may clamp: those within `margin` of +-1 off the diagonal. A complex r has its
    real and imaginary parts clamped each (torch.corrcoef), so each part is judged on its
    own, through a real view of the rows."""
    off_diagonal = ~torch.eye(rows.shape[0], dtype=torch.bool)
    with torch.no_grad():
        r = torch.corrcoef(rows)
    if not rows.is_complex():
        near = (1 - r.abs() <= margin) & off_diagonal
        if not bool(near.any()):
            return 0.0
        jacobian = torch.autograd.functional.jacobian(  # type: ignore[no-untyped-call]
            torch.corrcoef, rows
        )
        dropped = (w * near).reshape(*w.shape, 1, 1) * jacobian.abs()
        return float(dropped.sum((0, 1)).max())
    parts = torch.view_as_real(r)  # (m, m, 2): each part clamped on its own
    near = (1 - parts.abs() <= margin) & off_diagonal.unsqueeze(-1)
    if not bool(near.any()):
        return 0.0

    def real_corrcoef(v: torch.Tensor) -> torch.Tensor:
        return torch.view_as_real(torch.corrcoef(torch.view_as_complex(v)))

    jacobian = torch.autograd.functional.jacobian(  # type: ignore[no-untyped-call]
        real_corrcoef, torch.view_as_real(rows).contiguous()
    )  # (m, m, 2, m, n, 2)
    dropped = (w.unsqueeze(-1) * near).reshape(*near.shape, 1, 1, 1) * jacobian.abs()
    return float(dropped.sum((0, 1, 2)).sum(-1).max())


def _rows_norm(x: torch.Tensor) -> float:
    return float(_real64(x).norm(dim=-1).max()) if x.numel() else 0.0


def sdpa_condition(op: Any, ref: Any) -> float:
    """The largest attention logit possible, scale * max||q_i|| * max||k_j|| (plus a float
    mask's largest magnitude): softmax turns the logits' absolute rounding errors, eps times
    their magnitude, into relative errors of the weights."""
    q, k = ref.input, ref.args[0]
    scale = ref.kwargs.get("scale") or 1 / math.sqrt(q.shape[-1])
    mask = ref.kwargs.get("attn_mask")
    extra = max_magnitude(mask) if isinstance(mask, torch.Tensor) else 0.0
    return max(1.0, scale * _rows_norm(q) * _rows_norm(k) + extra)


def euclid_mm_terms(ref: Any) -> float | None:
    """max||x_i|| ** 2 + max||y_j|| ** 2 where cdist takes its matrix-multiplication path
    (p = 2 with compute_mode use_mm_for_euclid_dist, or by default beyond 25 rows), else
    None."""
    if not _euclid_mm(ref):
        return None
    return _rows_norm(ref.input) ** 2 + _rows_norm(ref.args[0]) ** 2


def _euclid_mm(ref: Any) -> bool:
    """Whether cdist takes its matrix-multiplication path for the sample."""
    x, y = ref.input, ref.args[0]
    p = float(argument(ref, 1, "p", 2.0))
    mode = argument(ref, 2, "compute_mode", None)
    necessary = mode in (None, "use_mm_for_euclid_dist_if_necessary") and (
        x.shape[-2] > 25 or y.shape[-2] > 25
    )
    return p == 2.0 and (mode == "use_mm_for_euclid_dist" or necessary)


def _matrix_conditions(ref: Any) -> list[tuple[int, float]]:
    """(n, kappa_2) of each floating tensor of two or more dimensions in the sample: its
    largest matrix dimension and the largest sigma_max / sigma_min over its batch."""
    found = []
    for x in pytree.tree_leaves((ref.input, ref.args, ref.kwargs)):
        if not isinstance(x, torch.Tensor) or x.dim() < 2 or x.numel() == 0:
            continue
        if not (x.is_floating_point() or x.is_complex()):
            continue
        values = torch.linalg.svdvals(_real64(x))
        low, high = values.amin(-1), values.amax(-1)
        kappa = torch.where(low > 0, high / low, torch.where(high > 0, math.inf, 1.0))
        found.append((max(x.shape[-2:]), float(kappa.max())))
    return found


def linalg_condition_squared(op: Any, ref: Any) -> float:
    """n * kappa_2 ** 2 of the sample's matrices: a gradient of a solve or a factorisation
    applies the inverse twice."""
    return max((n * kappa**2 for n, kappa in _matrix_conditions(ref)), default=1.0)


def _pnorm_powers(x: torch.Tensor, p: Any, dim: Any) -> Intermediates:
    """The powers norm_backward forms in the case dtype for a p-norm (p not 0, 1, 2, inf):
    factors |x| ** (p - 1) and norm ** (1 - p) for p < 1; above, the factor |x| ** (p - 1)
    (p < 2) or |x| ** (p - 2) and the divisor norm ** (p - 1)."""
    if isinstance(p, bool) or not isinstance(p, (int, float)) or p in (0, 1, 2) or math.isinf(p):
        return [], []
    x = _real64(x)
    norm = torch.linalg.vector_norm(x, p, dim=dim, keepdim=True)
    if p < 1:
        return [torch.where(x == 0, 0.0, x.abs().pow(p - 1)), norm.pow(1 - p)], []
    return [x.abs().pow(p - 1 if p < 2 else p - 2)], [norm.pow(p - 1)]


def dist_intermediates(op: Any, ref: Any, weights: list[torch.Tensor]) -> Intermediates:
    """_pnorm_powers of dist(input, other, p): the p-norm of input - other."""
    difference = _real64(ref.input) - _real64(ref.args[0])
    return _pnorm_powers(difference, argument(ref, 1, "p", 2), None)


def pairwise_intermediates(op: Any, ref: Any, weights: list[torch.Tensor]) -> Intermediates:
    """_pnorm_powers of pairwise_distance(x1, x2, p, eps): the p-norm of x1 - x2 + eps over
    the last dimension."""
    difference = _real64(ref.input) - _real64(ref.args[0]) + float(argument(ref, 2, "eps", 1e-6))
    return _pnorm_powers(difference, argument(ref, 1, "p", 2.0), -1)


def segment_prod_intermediates(op: Any, ref: Any, weights: list[torch.Tensor]) -> Intermediates:
    """w * output, which _segment_reduce's backward for 'prod' forms in the case dtype before
    dividing by each element."""
    if argument(ref, 0, "reduce", None) != "prod":
        return [], []
    with torch.no_grad():
        output = op(ref.input, *ref.args, **ref.kwargs)
    return [weights[0].detach().to(torch.float64) * _real64(output)], []


def hermitian_condition(op: Any, ref: Any) -> float:
    """cond_2 of the Hermitian matrix A + A^H that OpInfo's gradcheck wrapper passes."""
    a = _real64(ref.input)
    if a.numel() == 0:
        return 1.0
    values = torch.linalg.eigvalsh(a + a.mH).abs()
    return float((values.amax(-1) / values.amin(-1)).max())


def norm_tie(op: Any, ref: Any) -> float:
    """max / gap between the largest two (smallest two for negative ord) candidates of a
    norm that selects one, the largest over the batch: |x| for a vector norm of ord +-inf,
    the column sums (ord +-1) or row sums (ord +-inf) of |A| for a matrix norm. The gradient
    is sign on the selected element, column or row, so candidates within rounding of each
    other leave it undetermined (1 for other norms)."""
    order = argument(ref, 0, "ord", None)
    dim = argument(ref, 1, "dim", None)
    x = _real64(ref.input)
    if op.name == "linalg.matrix_norm" and dim is None:
        dim = (-2, -1)
    matrix = isinstance(dim, (tuple, list)) and len(dim) == 2 and op.name != "linalg.vector_norm"
    if dim is None and x.dim() == 2 and op.name == "linalg.norm" and order is not None:
        matrix, dim = True, (-2, -1)
    if x.numel() == 0 or order not in ((1, -1) if matrix else ()) + (math.inf, -math.inf):
        return 1.0
    if matrix:
        x = x.abs().movedim(tuple(dim), (-2, -1))
        candidates = x.sum(-2) if order in (1, -1) else x.sum(-1)
    else:  # a vector norm: the elements along dim (all of them for None)
        if dim is None:
            dims = tuple(range(x.dim()))
        elif isinstance(dim, (tuple, list)):
            dims = tuple(dim)
        else:
            dims = (dim,)
        moved = x.abs().movedim(dims, tuple(range(-len(dims), 0)))
        candidates = moved.reshape(*moved.shape[: moved.dim() - len(dims)], -1)
    if candidates.shape[-1] < 2:
        return 1.0
    ordered = candidates.sort(-1, descending=order > 0).values
    extreme = ordered[..., 0].abs()
    gap = (ordered[..., 0] - ordered[..., 1]).abs()
    return float(torch.where(gap > 0, extreme / gap, math.inf).max())


def absolute_grad_terms(op: Any, ref: Any, weights: list[torch.Tensor] | None) -> list[float]:
    """Per input that needs a gradient, the largest sum of term magnitudes in its gradient
    for a multilinear op (a convolution): the reference gradient with every floating input
    and the outputs' weights taken in magnitude (|Re| + |Im| for complex), so each gradient
    element is the sum of |x| |w| over the products it accumulates (a weight's gradient
    sums x * dy over every output position). A float or complex scalar argument (a fill
    value) is taken in magnitude too, so a complex one meets real tensors."""
    if weights is None:
        return []

    def absolute(x: Any) -> Any:
        if isinstance(x, (float, complex)):
            return abs(x.real) + abs(x.imag)
        return _magnitude(_real64(x)).requires_grad_(x.requires_grad) if _floating(x) else x

    inp, args, kwargs = pytree.tree_map(absolute, (ref.input, ref.args, ref.kwargs))
    inputs = differentiable((inp, args, kwargs))
    outputs = differentiable(op(inp, *args, **kwargs))
    if not inputs or len(outputs) != len(weights):
        return []
    grads = torch.autograd.grad(
        outputs,
        inputs,
        [absolute(w).to(o.dtype) for w, o in zip(weights, outputs, strict=True)],
        allow_unused=True,
    )
    return [0.0 if g is None else max_magnitude(g) for g in grads]


def _smallest_gaps(values: torch.Tensor) -> torch.Tensor:
    """The smallest distance between two of the values along the last dimension (per batch
    element; inf where there are fewer than two)."""
    distances = (values.unsqueeze(-1) - values.unsqueeze(-2)).abs()
    return (distances + torch.diag_embed(torch.full_like(values, math.inf))).amin((-1, -2))


def _lowrank_spectrum(op: Any, ref: Any) -> tuple[int, int, torch.Tensor]:
    """(n, q, singular values) of the matrix that OpInfo's svd_lowrank and pca_lowrank
    samples factorise: a b^T, minus M (svd_lowrank) or centred over its rows (pca_lowrank's
    default center=True), of which the op approximates the top q singular triplets."""
    a = _real64(ref.input) @ _real64(ref.args[0]).mT
    pca = getattr(op, "name", "") == "pca_lowrank"
    m = ref.kwargs.get("M")
    if isinstance(m, torch.Tensor):
        a = a - _real64(m)
    if pca and ref.kwargs.get("center", True):
        a = a - a.mean(-2, keepdim=True)
    values = torch.linalg.svdvals(a)
    q = ref.kwargs.get("q")
    k = values.shape[-1]
    q = min(6, k) if q is None else min(int(q), k)
    return max(a.shape[-2:]), q, values


def lowrank_condition(op: Any, ref: Any) -> float:
    """n * sigma_1 / (sigma_q - sigma_q+1) of the matrix a randomized low-rank SVD factorises
    (`_lowrank_spectrum`; sigma_q+1 = 0 where q is its full rank): the rank-q factors move by
    eps * ||A|| / gap, and U V^H (OpInfo's outputs) by eps * sigma_1 / sigma_q where a b^T's
    rank is q. The kappa of the linear algebra rule, taken of a and b apart, sees neither
    (pca_lowrank at seed 3: a and b have kappa 2.7, their centred product sigma_1 / sigma_2 =
    696)."""
    n, q, values = _lowrank_spectrum(op, ref)
    if values.numel() == 0 or q == 0:
        return 1.0
    top = values[..., 0]
    rest = values[..., q] if q < values.shape[-1] else torch.zeros_like(top)
    gap = values[..., q - 1] - rest
    spread = torch.where(gap > 0, top / gap, math.inf)
    return n * max(1.0, float(spread.max()))


def lowrank_gradient_condition(op: Any, ref: Any) -> float:
    """n * max(kappa ** 2, sigma_1 / gap) over the top q singular values of the factorised
    matrix (`_lowrank_spectrum`), gap the smallest distance among them and to sigma_q+1: the
    SVD's backward of the rank-q factors: its singular vectors move by eps * ||A|| / gap
    under a backward-stable SVD's perturbation, and it divides by sigma_j ** 2 - sigma_i ** 2."""
    n, q, values = _lowrank_spectrum(op, ref)
    if values.numel() == 0 or q == 0:
        return 1.0
    top = values[..., :q]
    high, low = top[..., 0], top[..., -1]
    kappa = torch.where(low > 0, high / low, math.inf)
    gap = _smallest_gaps(top)
    if q < values.shape[-1]:
        gap = torch.minimum(gap, values[..., q - 1] - values[..., q])
    spread = torch.where(gap > 0, high / gap, math.inf)
    return n * float(torch.maximum(kappa**2, spread).max())


def interpolation_condition(op: Any, ref: Any, slope: float) -> float:
    """d * slope * the largest input size over the d interpolated dimensions: the kernel
    computes each source coordinate (dst + 0.5) * scale - 0.5 in the dtype (float32 for
    float32), an error of a few eps times the coordinate (below the input's size), and an
    output moves with its coordinate by at most slope * max|x| per dimension (slope: the
    largest sum of |w_j'(t)| of the interpolation weights: 2 for linear, 3 at t = 0.5 for
    bicubic's A = -0.75)."""
    sizes = [int(size) for size in ref.input.shape[2:]]
    if not sizes:
        return 1.0
    return len(sizes) * slope * max(sizes)
