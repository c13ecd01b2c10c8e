"""What the OpInfo bounds read by op name, beyond the rule tables: the sets that choose a rule.

- `RECURRENCE_OPS`: elementwise ops that keep the normwise atol;
- `CANCELLING_GRAD_OPS`: elementwise ops whose gradients take the graph's roundings.

The constant widenings that remain are listed exceptions (`exceptions.EXCEPTIONS`).
"""

from __future__ import annotations

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
