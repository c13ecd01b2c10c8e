"""The significance tests behind `accelkit.results.stats`, in numpy and the standard library
(no scipy): the Mann-Whitney U rank test (normal approximation with tie and continuity
correction, and the exact distribution of U counted for small samples without ties), and
Student's t (its two-sided p-value and quantile, from the regularised incomplete beta
function). tests/unit/results/test_stats.py checks them against scipy.stats."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

import numpy as np
import numpy.typing as npt

EXACT_MAX_PAIRS = 400
"""The rank test's p-value is exact (no ties, `method` "auto") while n_base * n_new is at
most this (e.g. 20 vs 20); from there on the normal approximation is within ~0.005."""

FloatArray: TypeAlias = npt.NDArray[np.float64]
IntArray: TypeAlias = npt.NDArray[np.int64]
Samples: TypeAlias = Sequence[float] | npt.NDArray[np.floating[Any]]
RankMethod = Literal["normal", "exact", "auto"]


def finite(samples: Samples) -> FloatArray:
    """The finite samples, as float64."""
    array = np.asarray(samples, dtype=np.float64)
    return array[np.isfinite(array)]


@dataclass(frozen=True)
class RankTest:
    """Mann-Whitney U for `new` against `base`."""

    u: float
    """U statistic of the new samples: how many (base, new) pairs have new > base (ties 0.5)."""
    z: float
    """Normal score; positive when new samples tend to be larger."""
    p_value: float
    """Two-sided p-value."""
    exact: bool = False
    """True when `p_value` is exact (the U distribution counted), False: normal approximation."""


def mann_whitney_u_counts(n_base: int, n_new: int) -> IntArray:
    """counts[u]: how many of the C(n_base + n_new, n_base) equally likely orderings of two
    samples without ties have U = u (u = 0 .. n_base * n_new).

    These are the coefficients of the Gaussian binomial [m + n choose m]_q, built by the
    dynamic programme [n + i choose i]_q = [n + i - 1 choose i - 1]_q (1 - q^(n+i)) / (1 - q^i),
    i = 1 .. m, on series truncated after q^(m n) (both steps only look at lower powers).
    Exact in int64: sizes with C(m + n, m) >= 2^62 (beyond ~30 vs 30) are refused.
    """
    if n_base < 0 or n_new < 0:
        raise ValueError("sample sizes must be non-negative")
    m, n = sorted((n_base, n_new))
    if math.comb(m + n, m) >= 2**62:
        raise ValueError(f"{n_base} vs {n_new} is too large to count exactly")
    size = m * n + 1
    counts = np.zeros(size, dtype=np.int64)
    counts[0] = 1
    for i in range(1, m + 1):
        shift = n + i
        if shift < size:
            counts[shift:] -= counts[:-shift].copy()
        # Dividing by (1 - q^i): c[k] += c[k - i] in increasing k, a cumulative sum over
        # each residue class modulo i.
        padded = np.zeros(-(-size // i) * i, dtype=np.int64)
        padded[:size] = counts
        counts = padded.reshape(-1, i).cumsum(axis=0).reshape(-1)[:size]
    return counts


def exact_mann_whitney_p(u: float, n_base: int, n_new: int) -> float:
    """Two-sided exact p-value of an integer U without ties: 2 min(P(U <= u), P(U >= u)),
    at most 1 (the definition of scipy.stats.mannwhitneyu(method="exact"))."""
    if u != int(u) or not 0 <= u <= n_base * n_new:
        raise ValueError(f"U must be an integer in [0, {n_base * n_new}], got {u}")
    counts = mann_whitney_u_counts(n_base, n_new)
    total = math.comb(n_base + n_new, n_base)
    k = int(u)
    below = int(counts[: k + 1].sum())
    above = int(counts[k:].sum())
    return min(1.0, 2.0 * min(below, above) / total)


def mann_whitney_u(base: Samples, new: Samples, *, method: RankMethod = "normal") -> RankTest:
    """Two-sided Mann-Whitney U test.

    `method`: "normal" (default): normal approximation with tie and continuity correction;
    "exact": the exact p-value (ValueError with ties or more than `EXACT_MAX_PAIRS` pairs);
    "auto": exact when it can be, normal otherwise. `z` is always the normal score.
    """
    base_array, new_array = finite(base), finite(new)
    n_base, n_new = base_array.size, new_array.size
    if n_base == 0 or n_new == 0:
        raise ValueError("the rank test needs samples on both sides")
    combined = np.concatenate([base_array, new_array])
    n = combined.size
    # Average ranks (1-based) for ties: rank of a value = mean of the positions it occupies.
    order = np.argsort(combined, kind="mergesort")
    sorted_values = combined[order]
    _, first_index, counts = np.unique(sorted_values, return_index=True, return_counts=True)
    average_rank = first_index + (counts + 1) / 2.0
    ranks = np.empty(n, dtype=np.float64)
    ranks[order] = np.repeat(average_rank, counts)
    rank_sum_new = float(ranks[n_base:].sum())
    u_new = rank_sum_new - n_new * (n_new + 1) / 2.0
    mean_u = n_base * n_new / 2.0
    tie_term = float((counts.astype(np.float64) ** 3 - counts).sum())
    variance = n_base * n_new / 12.0 * ((n + 1) - tie_term / (n * (n - 1)))
    exact_possible = counts.size == n and n_base * n_new <= EXACT_MAX_PAIRS
    if method == "exact" and not exact_possible:
        raise ValueError(
            f"no exact p-value with ties or more than {EXACT_MAX_PAIRS} pairs ({n_base} vs {n_new})"
        )
    if variance <= 0.0:  # every sample equal: no evidence of any shift
        return RankTest(u=u_new, z=0.0, p_value=1.0)
    deviation = u_new - mean_u
    corrected = max(abs(deviation) - 0.5, 0.0)
    z = math.copysign(corrected / math.sqrt(variance), deviation)
    if method != "normal" and exact_possible:
        return RankTest(
            u=u_new, z=z, p_value=exact_mann_whitney_p(u_new, n_base, n_new), exact=True
        )
    p_value = min(1.0, math.erfc(abs(z) / math.sqrt(2.0)))
    return RankTest(u=u_new, z=z, p_value=p_value)


def _betainc(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b) (Lentz's continued fraction)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    if x > (a + 1.0) / (a + b + 2.0):  # the fraction converges fast below this point
        return 1.0 - _betainc(b, a, 1.0 - x)
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    front = math.exp(log_front + a * math.log(x) + b * math.log1p(-x)) / a
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    f = d
    for m in range(1, 300):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            f *= c * d
        if abs(c * d - 1.0) < 1e-14:
            break
    return front * f


def t_two_sided_p(t: float, df: int) -> float:
    """Two-sided p-value of Student's t with `df` degrees of freedom."""
    if not math.isfinite(t):
        return 0.0
    return min(1.0, _betainc(df / 2.0, 0.5, df / (df + t * t)))


def t_quantile(confidence: float, df: int) -> float:
    """The t value whose two-sided p is 1 - confidence (bisection on `t_two_sided_p`)."""
    low, high = 0.0, 1e4
    for _ in range(200):
        middle = (low + high) / 2.0
        if t_two_sided_p(middle, df) > 1.0 - confidence:
            low = middle
        else:
            high = middle
    return (low + high) / 2.0


EXACT_SIGN_FLIP_MAX = 16
"""Up to this many pairs the sign-flip test counts all 2^n sign patterns; beyond, it draws
`SIGN_FLIP_DRAWS` of them (seeded, so the same pairs always give the same p-value)."""
SIGN_FLIP_DRAWS = 1 << 16


def sign_flip_p(differences: Sequence[float] | FloatArray, *, seed: int = 0) -> float:
    """Two-sided p-value of the paired randomisation (sign-flip) test of mean = 0.

    Under "no change" the two members of a pair are exchangeable, so each difference is as
    likely with either sign: p is the share of the 2^n sign patterns whose |sum| is at least
    the observed one. Exact, without assuming any distribution; its smallest value is
    2 / 2^n (every pair agrees in sign), so it cannot confirm anything with fewer than 6 pairs
    at the 5% level.
    """
    d = np.asarray(differences, dtype=np.float64).reshape(-1)
    n = d.size
    if n == 0:
        raise ValueError("the sign-flip test needs at least one difference")
    observed = abs(float(d.sum()))
    slack = 1e-9 * float(np.abs(d).sum())  # equal sums must not differ by rounding
    if n <= EXACT_SIGN_FLIP_MAX:
        patterns = np.arange(1 << n, dtype=np.int64)[:, None] >> np.arange(n, dtype=np.int64)
        signs = 1.0 - 2.0 * (patterns & 1)
        count = int(np.count_nonzero(np.abs(signs @ d) >= observed - slack))
        return count / float(1 << n)
    rng = np.random.default_rng(seed)
    signs = rng.choice(np.array([-1.0, 1.0]), size=(SIGN_FLIP_DRAWS, n))
    count = int(np.count_nonzero(np.abs(signs @ d) >= observed - slack))
    return (count + 1) / (SIGN_FLIP_DRAWS + 1)


def paired_ratio_test(
    base_split: Sequence[FloatArray], new_split: Sequence[FloatArray], confidence: float
) -> tuple[float, tuple[float, float], RankTest]:
    """The paired mode of `accelkit.results.stats`: per pass pair k, the log of
    median(new_k) / median(base_k); their mean, exponentiated (the ratio: the geometric mean
    of the pairs' ratios), a t interval (exponentiated) of it, and the exact sign-flip test
    of it (`sign_flip_p`), returned as a `RankTest` whose `z` is the t statistic (its sign is
    the direction)."""
    if len(base_split) != len(new_split) or len(base_split) < 2:
        raise ValueError("the paired mode needs the same number (>= 2) of groups on each side")
    logs = np.log(
        np.array([np.median(n) for n in new_split]) / np.array([np.median(b) for b in base_split])
    )
    count = logs.size
    mean = float(logs.mean())
    spread = float(logs.std(ddof=1))
    p = sign_flip_p(logs)
    if spread == 0.0:
        t = math.copysign(math.inf, mean) if mean else 0.0
        point = (math.exp(mean), math.exp(mean))
        return math.exp(mean), point, RankTest(u=math.nan, z=t, p_value=p)
    error = spread / math.sqrt(count)
    t = mean / error
    half = t_quantile(confidence, count - 1) * error
    ci = (math.exp(mean - half), math.exp(mean + half))
    return math.exp(mean), ci, RankTest(u=math.nan, z=t, p_value=p)
