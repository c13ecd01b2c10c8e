"""What the OpInfo bounds read by op name, beyond the rule tables: the set that chooses a rule.

- `RECURRENCE_OPS`: elementwise ops that keep the normwise atol.

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
