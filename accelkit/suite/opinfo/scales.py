"""What the OpInfo bounds read by op name, beyond the rule tables: the sets that choose a rule.

- `LINALG_OPS_PREFIXES`, `LINALG_CONDITION_FACTOR`, `WELL_CONDITIONED_LINALG`: linear algebra
  gets no constant: its bound grows with each sample's condition number
  (`sample_measures.linalg_condition`, applied by `sample_rules`);
- `RECURRENCE_OPS`: elementwise ops that keep the normwise atol;
- `CANCELLING_GRAD_OPS`: elementwise ops whose gradients take the graph's roundings.

The constant widenings that remain are listed exceptions (`exceptions.EXCEPTIONS`).
"""

from __future__ import annotations

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
