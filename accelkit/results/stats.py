"""Statistics for comparing two sets of samples of one metric (`base` and `new`).

What is estimated
-----------------
- `ratio`: median(new) / median(base).
- `ci`: a percentile bootstrap confidence interval (default 90%, 2000 resamples) of that
  ratio: both sample sets are resampled with replacement, independently, and the ratio of
  the resampled medians is taken each time. The generator is seeded, so the same samples
  always give the same interval.
- `p_value`: the two-sided Mann-Whitney U (Wilcoxon rank-sum) test, normal approximation
  with tie correction and continuity correction. It asks "do new samples tend to be larger
  or smaller than base samples?" without assuming any distribution.

The decision rule (`decide`)
----------------------------
With a minimum effect size `t` (default 3%), the band of "too small to matter" is the
ratio interval [1/(1+t), 1+t]. The band is symmetric in log space, so a latency metric and
the throughput metric derived from the same samples (throughput = work / latency) always
get the same verdict. For a metric where lower is better (latency) the bad side is above
the band; where higher is better (FLOP/s, B/s, speedup) the bad side is below it.

1. `regressed`: the WHOLE confidence interval lies beyond the band on the bad side (so the
   change is larger than `t` with one-sided 95% confidence for the default two-sided 90%
   interval), AND the rank test agrees: p below
   `alpha` (default 0.05) with new samples shifted in the same direction.
2. `improved`: the same on the good side.
3. `noisy`: the interval is so wide that it reaches beyond the band on BOTH sides (the
   samples cannot tell a regression from an improvement), or the interval is beyond the
   band but the rank test does not confirm it, or there are too few samples to decide
   (fewer than `MIN_SAMPLES` on a side).
4. `unchanged`: anything else: every change the data supports is smaller than `t`, or
   not distinguishable from none.

Why both a bootstrap interval and a rank test: the percentile bootstrap of a median is
known to be too narrow for small samples (its distribution is lumpy); the rank test is
exact in its assumptions (exchangeable samples) and guards that case, while the interval
gives the size of the change, which the rank test cannot. The minimum effect size guards
the other side: with many samples, a tiny real change (0.5% from a different memory
layout between runs) is significant but not worth a red build.

Calibration (see tests/test_stats.py, lognormal noise with IQR/median 2-5%): two sample
sets from the same distribution are flagged in well under 1% of metrics; a planted 10%
slowdown with 10 or more samples per side is flagged as `regressed` in at least 95% of
metrics.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

import numpy as np
import numpy.typing as npt

Verdict = Literal["regressed", "improved", "unchanged", "noisy"]
VERDICTS: tuple[Verdict, ...] = ("regressed", "improved", "unchanged", "noisy")

DEFAULT_THRESHOLD = 0.03
"""Minimum relative effect size that counts as a change (3%)."""
DEFAULT_CONFIDENCE = 0.90
"""Two-sided level of the bootstrap interval of the ratio of medians. A verdict uses one
side of it, so "the whole interval is beyond the band" is a one-sided 95% claim."""
DEFAULT_ALPHA = 0.05
"""Significance level the rank test must reach to confirm a change."""
DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 0
MIN_SAMPLES = 3
"""Fewer samples than this on either side cannot support a verdict: it is `noisy`."""

# Bound the memory of one vectorised bootstrap block (resamples x samples elements).
_MAX_BLOCK_ELEMENTS = 2_000_000

FloatArray: TypeAlias = npt.NDArray[np.float64]
Samples: TypeAlias = Sequence[float] | npt.NDArray[np.floating[Any]]


def _as_array(samples: Samples) -> FloatArray:
    array = np.asarray(samples, dtype=np.float64)
    return array[np.isfinite(array)]


def median_ratio(base: Samples, new: Samples) -> float:
    """median(new) / median(base); both must be non-empty with a non-zero base median."""
    base_median = float(np.median(_as_array(base)))
    new_median = float(np.median(_as_array(new)))
    return new_median / base_median


def _resampled_medians(samples: FloatArray, resamples: int, rng: np.random.Generator) -> FloatArray:
    n = samples.size
    rows_per_block = max(1, _MAX_BLOCK_ELEMENTS // n)
    medians = np.empty(resamples, dtype=np.float64)
    for start in range(0, resamples, rows_per_block):
        rows = min(rows_per_block, resamples - start)
        index = rng.integers(0, n, size=(rows, n))
        medians[start : start + rows] = np.median(samples[index], axis=1)
    return medians


def bootstrap_ratio_ci(
    base: Samples,
    new: Samples,
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> tuple[float, float]:
    """Percentile bootstrap interval of median(new) / median(base); deterministic per seed."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if resamples < 1:
        raise ValueError(f"resamples must be positive, got {resamples}")
    base_array, new_array = _as_array(base), _as_array(new)
    if base_array.size == 0 or new_array.size == 0:
        raise ValueError("bootstrap needs samples on both sides")
    rng = np.random.default_rng(seed)
    base_medians = _resampled_medians(base_array, resamples, rng)
    new_medians = _resampled_medians(new_array, resamples, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = new_medians / base_medians
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(ratios, [tail, 1.0 - tail])
    return float(low), float(high)


@dataclass(frozen=True)
class RankTest:
    """Mann-Whitney U for `new` against `base`."""

    u: float
    """U statistic of the new samples: how many (base, new) pairs have new > base (ties 0.5)."""
    z: float
    """Normal score; positive when new samples tend to be larger."""
    p_value: float
    """Two-sided p-value."""


def mann_whitney_u(base: Samples, new: Samples) -> RankTest:
    """Two-sided Mann-Whitney U test, normal approximation with tie and continuity correction."""
    base_array, new_array = _as_array(base), _as_array(new)
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
    if variance <= 0.0:  # every sample equal: no evidence of any shift
        return RankTest(u=u_new, z=0.0, p_value=1.0)
    deviation = u_new - mean_u
    corrected = max(abs(deviation) - 0.5, 0.0)
    z = math.copysign(corrected / math.sqrt(variance), deviation)
    p_value = min(1.0, math.erfc(abs(z) / math.sqrt(2.0)))
    return RankTest(u=u_new, z=z, p_value=p_value)


def decide(
    ci: tuple[float, float],
    rank_test: RankTest,
    *,
    higher_is_better: bool,
    threshold: float = DEFAULT_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
) -> tuple[Verdict, str]:
    """The verdict of the module docstring's rule, and a short reason for it."""
    if threshold <= 0.0:
        raise ValueError(f"threshold must be positive, got {threshold}")
    upper_band = 1.0 + threshold
    lower_band = 1.0 / upper_band
    low, high = ci
    if low < lower_band and high > upper_band:
        return "noisy", f"interval [{low:.3f}, {high:.3f}] spans both +-{threshold:.0%}"
    if low > upper_band:
        direction = 1.0  # new is larger by more than the threshold
    elif high < lower_band:
        direction = -1.0
    else:
        return "unchanged", f"any change is within +-{threshold:.0%}"
    p = rank_test.p_value
    if not (p < alpha and rank_test.z * direction > 0.0):
        return "noisy", f"interval is beyond {threshold:.0%} but the rank test p={p:.3g}"
    worse = direction < 0.0 if higher_is_better else direction > 0.0
    verdict: Verdict = "regressed" if worse else "improved"
    return verdict, f"interval beyond {threshold:.0%}, rank test p={p:.3g}"


@dataclass(frozen=True)
class SampleComparison:
    """The comparison of one metric's two sample sets."""

    verdict: Verdict
    reason: str
    base_median: float | None
    new_median: float | None
    ratio: float | None
    """median(new) / median(base); None when it is undefined (no samples, base median 0)."""
    ci: tuple[float, float] | None
    p_value: float | None
    n_base: int
    n_new: int


def compare_samples(
    base: Samples,
    new: Samples,
    *,
    higher_is_better: bool,
    threshold: float = DEFAULT_THRESHOLD,
    confidence: float = DEFAULT_CONFIDENCE,
    alpha: float = DEFAULT_ALPHA,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> SampleComparison:
    """Compare two sample sets of one metric with the rule of the module docstring.

    Non-finite samples are ignored. Samples are expected to be positive (times, rates).
    """
    base_array, new_array = _as_array(base), _as_array(new)
    n_base, n_new = int(base_array.size), int(new_array.size)
    base_median = float(np.median(base_array)) if n_base else None
    new_median = float(np.median(new_array)) if n_new else None
    ratio: float | None = None
    if base_median is not None and new_median is not None:
        if base_median != 0.0:
            ratio = new_median / base_median
        elif new_median == 0.0:
            ratio = 1.0

    def undecided(reason: str) -> SampleComparison:
        return SampleComparison(
            verdict="noisy",
            reason=reason,
            base_median=base_median,
            new_median=new_median,
            ratio=ratio,
            ci=None,
            p_value=None,
            n_base=n_base,
            n_new=n_new,
        )

    if n_base < MIN_SAMPLES or n_new < MIN_SAMPLES:
        return undecided(f"too few samples to decide (base {n_base}, new {n_new})")
    if np.any(base_array <= 0.0) or np.any(new_array <= 0.0):
        return undecided("samples must be positive to compare ratios")
    ci = bootstrap_ratio_ci(
        base_array,
        new_array,
        confidence=confidence,
        resamples=resamples,
        seed=seed,
    )
    rank_test = mann_whitney_u(base_array, new_array)
    verdict, reason = decide(
        ci, rank_test, higher_is_better=higher_is_better, threshold=threshold, alpha=alpha
    )
    return SampleComparison(
        verdict=verdict,
        reason=reason,
        base_median=base_median,
        new_median=new_median,
        ratio=ratio,
        ci=ci,
        p_value=rank_test.p_value,
        n_base=n_base,
        n_new=n_new,
    )
