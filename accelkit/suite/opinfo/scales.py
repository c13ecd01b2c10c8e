"""Constant widenings of the tolerance, per op: the rule tables `tolerances.case_tolerance` reads.

- `TOLERANCE_SCALE`: a factor on the dtype's (rtol, atol) for an op whose answer carries more
  rounding error than one correctly rounded result;
- `NORMWISE_SCALE`: a factor on the normwise atol, for errors relative to magnitudes larger
  than any input or output;
- `LINALG_OPS_PREFIXES`, `LINALG_CONDITION_FACTOR`, `WELL_CONDITIONED_LINALG`: linear algebra
  gets no constant: its bound grows with each sample's condition number
  (`sample_measures.linalg_condition`, applied by `sample_rules`).

A constant is right where the error grows with something the samples fix (their range, their
shapes); where each draw decides it, the bound comes from the sample (`sample_tables`).
Entries were measured on the CPU (float32 vs float64, several seeds) and leave about 3x
headroom over the worst error seen.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from accelkit.suite.opinfo.records import NormwiseScale, ToleranceScale, by_key

_ATTENTION_OPS = (
    "nn.functional.scaled_dot_product_attention",
    "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu",
)

# Long recurrences, iterative or series algorithms, condition-number amplification.
TOLERANCE_SCALE = by_key(
    *(
        ToleranceScale(
            op=op,
            grad=True,
            factor=100.0,
            reason=(
                "the gradient of an eigendecomposition divides by eigenvalue gaps, not by "
                "the matrix's condition number: the largest error measured on 200 seeds is "
                "0.14 of this bound (complex64 eig; 0.13 float32)"
            ),
        )
        for op in ("linalg.eig", "linalg.eigvals")
    ),
    ToleranceScale(
        op="nn.functional.ctc_loss",
        grad=True,
        factor=300.0,
        reason=(
            "the gradient w (exp(lp) - exp(lcab + nll - lp)) adds log-space values of order "
            "nll, each rounded with an absolute error of eps * |nll| along the 50-step alpha "
            "and beta recursions: a relative error of up to 7.5 eps (|nll| + max|lp|) of the "
            "element's terms measured (seeds 0-1, every sample). The samples fix nll (233 to "
            "285: 50 steps of log-softmax over 20 classes of values in [-9, 9]), so the bound "
            "is this constant: 2.6e-4 relative, 200 times float32's rtol (1.0e-4 measured)"
        ),
    ),
    *(
        ToleranceScale(
            op=op,
            dtype="complex64",
            grad=True,
            factor=30.0,
            reason=(
                "the gradient y * x ** (y - 1) or x ** y * log(x) carries the relative error "
                "of x ** y, which grows with |y * log(x)| (2.0e-5 relative measured in "
                "complex64); complex gradients get no elementwise bracket, and real ones "
                "pass seeds 0-40 on the graph's roundings without a scale (float_power "
                "computes in float64)"
            ),
        )
        for op in ("pow", "__rpow__")
    ),
    ToleranceScale(
        op="sinc",
        dtype="complex64",  # real dtypes: CANCELLING_GRAD_OPS (seeds 0-40 pass)
        grad=True,
        factor=4.0,
        reason=(
            "the derivative (cos(pi z) pi z - sin(pi z)) / (pi z ** 2) for large complex z: "
            "pi * z rounds in complex64 (1.6e-6 relative measured)"
        ),
    ),
)

# Sums of products of inputs, terms like |x| ** (p - 1) for p < 1.
NORMWISE_SCALE = by_key(
    *(
        NormwiseScale(
            op=op,
            grad=True,
            factor=8.0,
            reason=(
                "what the coordinates' rounding leaves out (DISCONTINUOUS brackets the grid "
                "gradient over each coordinate's rounding, apart): the grid gradient's sum of "
                "channels x taps terms scaled by (size - 1) / 2, bicubic's 16 taps with "
                "weights computed in float32, and the input gradient's weights moved by their "
                "points' coordinate rounding; measured after that bracket in float32 over "
                "seeds 0-40 as the factor each seed needs, up to "
                f"{worst} ({where}); the terms' own "
                "bound is not derived (this was 24 before the coordinates were bracketed apart)"
            ),
        )
        for op, worst, where in (
            ("grid_sampler_2d", 3.30, "bicubic grid gradients, seed 24"),
            ("grid_sampler_3d", 3.12, "input gradients, seed 10"),
            ("nn.functional.grid_sample", 4.09, "a bicubic border grid gradient, seed 21"),
        )
    ),
    NormwiseScale(
        op="logcumsumexp",
        dtype="complex64",
        grad=True,
        factor=4.0,
        reason=(
            "complex log-sum-exp cancels where exp(a) + exp(b) ~ 0 (opposite phases): the "
            "running sums lose digits relative to their terms (1.06x the normwise bound "
            "measured)"
        ),
    ),
    *(
        NormwiseScale(
            op=op,
            dtype=dtype,
            grad=True,
            factor=4.0,
            reason=(
                f"attention backward in {dtype}: softmax over logits of order 100 and its "
                "product with dO (1.4x the normwise bound measured in bfloat16, 1.13x in "
                "float16)"
            ),
        )
        for op in _ATTENTION_OPS
        for dtype in ("float16", "bfloat16")
    ),
)

# Linear algebra: the forward error of a factorisation or solve is bounded by the condition
# number times eps (Higham, Accuracy and Stability of Numerical Algorithms, chapters 7-19):
# ||error|| <= c * n * kappa(A) * eps * ||answer|| for a backward-stable algorithm. Each
# sample's kappa (the 2-norm condition of its matrices, `sample_measures.linalg_condition`)
# decides its bound: atol >= LINALG_CONDITION_FACTOR * n * kappa * eps * magnitude (kappa
# squared for gradients, which apply A^-1 twice), and a sample whose bound reaches the answer's
# own size carries no digits and is not compared. Ops of every name starting with one of
# LINALG_OPS_PREFIXES get it, except WELL_CONDITIONED_LINALG, whose error does not grow with
# kappa (norms, singular values, eigenvalues of Hermitian matrices, products).
LINALG_CONDITION_FACTOR = 1.0
LINALG_OPS_PREFIXES = (
    "linalg.",
    "cholesky",
    "lu",
    "qr",
    "svd",
    "triangular_solve",
    "ormqr",
    "geqrf",
    "pinverse",
    "inverse",
    "det",
    "logdet",
    "slogdet",
    "lstsq",
    "matrix_exp",
    "pca_lowrank",
    "cholesky_solve",
    "cholesky_inverse",
)
WELL_CONDITIONED_LINALG = frozenset(
    {
        "linalg.cross",
        "linalg.diagonal",
        "linalg.vecdot",
        "linalg.vector_norm",
        "linalg.norm",
        "linalg.norm.subgradients_at_zero",
        "linalg.matrix_norm",
        "linalg.multi_dot",
        "linalg.vander",
        "linalg.svdvals",
        "linalg.eigvalsh",
        "linalg.householder_product",
        "linalg.cond",
        "matrix_exp",
    }
)

# Elementwise ops whose kernels evaluate a recurrence in x (orthogonal polynomials of degree
# n by their three-term recurrence): the rounding error grows with the degree and with the
# largest intermediate |T_k(x)|, not with x's condition, so an element near a root carries
# an absolute error of the intermediates' size (3.6e-5 relative measured for a float32
# chebyshev_polynomial_t element of 0.019). They keep the normwise atol instead of the
# elementwise bracket (`sample_rules`).
RECURRENCE_OPS = frozenset(
    {
        f"special.{name}"
        for name in (
            "chebyshev_polynomial_t",
            "chebyshev_polynomial_u",
            "chebyshev_polynomial_v",
            "chebyshev_polynomial_w",
            "shifted_chebyshev_polynomial_t",
            "shifted_chebyshev_polynomial_u",
            "shifted_chebyshev_polynomial_v",
            "shifted_chebyshev_polynomial_w",
            "hermite_polynomial_h",
            "hermite_polynomial_he",
            "laguerre_polynomial_l",
            "legendre_polynomial_p",
        )
    }
)

# Elementwise ops whose backward formula cancels: an element's error is relative to terms
# far larger than its gradient, which no perturbation of the inputs stands for, so every
# dtype's gradient takes the graph's roundings (`sample_rules._graph_brackets`: each
# intermediate's rounding at its own size), as 16-bit backwards do, not the one-node bracket.
CANCELLING_GRAD_OPS = frozenset(
    {
        # (cos(pi x) pi x - sin(pi x)) / (pi x ** 2): both terms ~ pi x, their difference
        # ~ (pi x) ** 3 / 3 for small x (1.1e-5 and 1.3e-4 relative measured in float32,
        # seeds 5 and 16 of 20, under the one-node bracket; float16 at seed 0: 0 where
        # 0.023 is exact)
        "sinc",
        # i1e(x) - sgn(x) i0e(x): both ~ 1 / sqrt(2 pi |x|), their difference ~ i0e(x) /
        # (2 |x|) (float32 at seed 42, x = -7.7: 1.35e-6 relative under the one-node bracket)
        "special.i0e",
    }
)

# float32 kernels further from the exact value than one rounding: their largest relative
# error over OpInfo's [-9, 9] on the CPU, in units of float32's eps (2e6 points against
# float64: i1e and i1 9.5 and 9.9 near |x| = 8, i0e and i0 3.1 and 3.3 near 0). A float32
# gradient's graph (`roundings.measure_graph`) weighs each such intermediate's term by it
# (a cancelling backward carries the kernel's whole error: special.i0e's i1e(x) - sgn(x)
# i0e(x) at x = -7.7, seed 42: 105 eps of the gradient, i1e 8.1 eps off). float64 cases
# compare with the same kernel; 16-bit ones round its float32 result.
KERNEL_ULPS: Mapping[str, float] = MappingProxyType(
    {
        "aten::special_i1e": 10.0,
        "aten::special_i1": 10.0,
        "aten::special_i0e": 3.5,
        "aten::i0": 3.5,
    }
)
