"""Statistics for comparing two sets of samples of one metric (`base` and `new`).

The rank test, the t quantiles and the sign-flip test themselves are in
`accelkit.results.significance`. This docstring is where the method and its calibration are
documented.

What is estimated
-----------------
- `ratio`: median(new) / median(base), the medians of all samples of a side pooled (the
  value a results file records), in both modes below.
- `ci`: a percentile bootstrap confidence interval (default 90%, 2000 resamples) of that
  ratio. The generator is seeded, so the same samples always give the same interval.
- `p_value`: a two-sided Mann-Whitney U (Wilcoxon rank-sum) test. It asks "do new values
  tend to be larger or smaller than base values?" without assuming any distribution.

Groups: why, and the two modes
------------------------------
Samples of one metric are not independent draws. All the samples of a kernel in one
process are taken within tens of milliseconds, so whatever holds for that process (a burst
of load from another job on a shared machine, its memory layout, the inner repetition
count its timer chose) shifts every one of them together. Measured on a 2-core shared
machine: one GEMM's per-process medians were 31.1, 31.8, 34.2, 33.7, 34.3 and 33.8 us,
while the spread within each process was only ~2% (IQR/median). Resampling samples as if
they were independent then gives a tight interval around a ratio that is pure
between-process noise, and 8-17% of the metrics of real A/A runs were flagged.

`accelkit test --passes N` measures each perf case in N separate processes and records,
for every sample, the pass (group) it came from (`Metric.sample_groups`). The comparison
has two modes:

- grouped (both sides have at least `MIN_GROUPS` groups): the unit of replication is the
  group. The interval comes from a two-stage (cluster) bootstrap: each resample draws as
  many groups as the side has, with replacement, then resamples each drawn group's own
  samples with replacement, pools them, and takes the median. The rank test compares the
  per-group medians, with an exact p-value (the U distribution counted by dynamic
  programming) for small sizes without ties, the normal approximation otherwise.
- by sample (fewer groups on either side: single-pass files, or cases whose samples are
  already separate processes, like compile latency): both sample sets are resampled with
  replacement, independently, and the rank test runs on the samples (normal approximation
  with tie and continuity correction).

`MIN_GROUPS` is 4: the smallest size at which an exact two-sided rank test on k vs k groups
can reach p < 0.05 at all (4 vs 4 fully separated: p = 2/70 = 0.029; 3 vs 3: 0.1). The
default 5 passes give 5 vs 5, whose smallest p is 2/252 = 0.008. Two biases of the
two-stage bootstrap pull against each other: it counts the spread within groups twice
(once in the drawn groups' medians, once more by resampling inside them), and with k groups
it sees (k - 1) / k of the variance between them. On the clustered scenarios below the
nominal 90% interval covered the true ratio in 86-91% of A/A pairs. (An "expanded"
percentile interval, with t quantiles and the k / (k - 1) factor, covered 93-95%, but made
1.6-5x as many A/A metrics `noisy` and found fewer real changes; not used.)

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
   `alpha` (default 0.05) with new values shifted in the same direction.
2. `improved`: the same on the good side.
3. `noisy`: the interval is so wide that it reaches beyond the band on BOTH sides (the
   samples cannot tell a regression from an improvement), or the interval is beyond the
   band but the rank test does not confirm it, or there are too few samples to decide
   (fewer than `MIN_SAMPLES` on a side).
4. `unchanged`: anything else: every change the data supports is smaller than `t`, or
   not distinguishable from none.

The reason of every verdict says which mode gave it ("by group: 5 vs 5 groups" or
"by sample: ...").

Why both a bootstrap interval and a rank test: the percentile bootstrap of a median is
known to be too narrow for small samples (its distribution is lumpy), and a cluster
bootstrap over few groups slightly so (above); the rank test is exact in its assumptions
(exchangeable samples, or exchangeable groups) and guards that case, while the interval
gives the size of the change, which the rank test cannot. The minimum effect size guards
the other side:
with many samples, a tiny real change (0.5% from a different memory layout between runs)
is significant but not worth a red build.

Calibration (tests/unit/results/test_stats.py, benchmarks/bench_compare.py --clustered)
-------------------------------------------------------------------------
Independent samples, lognormal noise with IQR/median 2-5%, by sample: two sample sets from
the same distribution are flagged in well under 1% of metrics; a planted 10% slowdown with
10 or more samples per side is flagged as `regressed` in at least 95% of metrics.

Clustered samples, 5 groups of 20-40 samples per side, within-group IQR/median 2%, each
group scaled by its own lognormal factor (sigma "between"), 1000 trials each:

    between-group sigma            2%      3%      4%      5%
    A/A flagged, by sample       0.6%    5.6%   16.1%   23.3%
    A/A flagged, by group        0.0%    0.4%    0.7%    0.9%
    A/A noisy, by group            2%     22%     43%     59%

A 10% slowdown is found (`regressed`) by group in 100% / 99.7% / 71.5% of metrics at 1% /
2% / 4% between groups. The `noisy` share is the honest answer where passes differ by more
than the band: 5 passes cannot place such a metric within +-3%; more passes narrow it.

A load burst that shifts one group of a side by +30% (between-group sigma 2%): A/A is
flagged in 0.2% (burst in base) and 0.1% (burst in new). A 10% slowdown with the burst in
the new run is still found in 100%; with the burst in the base run in 0%: 98% `noisy`, the
rest `unchanged`. One base pass as slow as the new ones leaves the rank test of 5 vs 5
group medians at p = 38/252 = 0.15 at best (U = 20 of 25); with 7 passes it would be 0.026.

Paired mode: interleaved passes (`accelkit test --ab A B`)
---------------------------------------------------------
When the two sides are one interleaved run (`compare_samples(paired=True)`, set by
`accelkit.results.compare` for the two files of one `--ab` run), pass g of base and pass g
of new ran at the same time, taking their samples in turns (`accelkit.suite.session.lockstep`), so
whatever the machine did during that pair is shared by both. The unit is then the pair:
d_g = log(median(new_g) / median(base_g)); the interval is exp(mean(d) +- t(n-1) * sd(d) /
sqrt(n)) at the same confidence, and the confirming test is the exact sign-flip
(randomisation) test of mean(d) = 0 (`significance.sign_flip_p`): under "no change" the two
passes of a pair are exchangeable, so every sign of every d_g is equally likely, and p is
the share of the 2^n sign patterns whose |sum| reaches the observed one. It assumes no
distribution, so its level `PAIRED_ALPHA` (1%, or `alpha` when lower) is the share of
metrics it can confirm in an A/A run, however noisy the machine. Its smallest p-value is
2 / 2^n: the paired mode needs `MIN_PAIRS` = 8 pairs with the same labels on both sides (the
fewest that can reach 1%), and `--ab` runs 10 by default; with fewer, compare uses the
grouped mode. The decision rule is the same. The reported `ratio` is exp(mean(d)), the
pairs' geometric mean that the interval is about: pooled medians can tell another story
when the passes' levels differ (a planted 10% slowdown, every pair slower, read 0.986x).

It replaced a t-test from 4 pairs, which read a quiet A/A (one interpreter on both sides)
as a stream copy `improved` 1.22x, p = 0.034: too weak a base on pairs that spread by 15-30%.

Calibration (`python benchmarks/bench_compare.py --paired 10`, 300 trials a row;
tests/unit/results/test_stats.py checks the third row with 8 pairs): 10 pass pairs of 20
samples, within-pass noise 2% (lognormal sigma), a drift per pair shared by both sides
("shared") and each pass's own offset ("own"):

    shared  own   A/A flagged  CI half-width median (<= 5%)  10% found  grouped mode
    0%      1%    0.0%         0.9% (100%)                   100%       100%
    10%     1%    0.0%         0.9% (100%)                   100%        23%
    10%     2%    0.0%         1.6% (100%)                   100%        23%
    30%     2%    0.0%         1.6% (100%)                   100%         0%
    10%     3%    0.0%         2.4% (100%)                    99%        23%
    10%     5%    0.0%         4.0% (85%)                     74%        15%
    10%     8%    0.7%         6.5% (20%)                     34%        13%

The last column is the unpaired grouped mode on the same data: a drift shared by a pair
is noise to it. What pairing cannot take out is each pass's own offset (per-process
effects, and whatever changed between a pair's two turns): with 5% of it a 10% change is
found in three metrics of four, with 8% in one of three (the verdict is then `noisy`, not
wrong); more pairs narrow it by the square root of their number.

Pairing pays only where the machine's state outlasts the distance between the two sides'
samples. Measured on the shared 2-core machine, one process's speed moves within seconds (a
128^3 GEMM: 56-118 us from one second to the next), so passes of a few seconds run one after
the other shared little: with 4 pairs taken that way, the per-pair log ratios of a quiet A/A
spread by 15-30%, and the paired interval's half-width was 14% (median of 12 metrics). Taken
in turns, with 10 pairs (benchmarks/bench_ab_noise.py, quiet, at 21bfb9c): a median
half-width of 3.6% (67% of the metrics at most 5%), no metric flagged, A/A and planted,
quiet and under stress-ng. What remains is mostly each process's own speed: the planted 64^3
GEMM loop ran at about 210 us in some processes and 300 us in others, in both sides alike,
and a fresh allocation of its operands, the CPU it is pinned to, or turning address
randomisation off did not change a process's mode; so a 10% slowdown of it was `noisy` quiet
(its pair ratios spread by 12%).

The memory-bound cases had a cause of their own, found later: their input sets (8 MiB)
sat partly in the 32 MiB last-level cache, which the two sides, taking turns on one CPU,
shared; which side kept its sets there depended on where each process's pages fell, so in
one pass pair a gemv read 13 GB/s on one side and 48 on the other for all 200 samples
(alone, one process read 70 GB/s from any of six fresh allocations). Since they rotate
through 4x the last-level cache (`accelkit.suite.perf.rotation`), so each call reads
memory, their half-widths in whole-suite runs (A/A and planted, quiet and loaded) went from
19-44% (gemv) and 30% (1 MiB copy) to 0.5-4.6% (one triad at 6.8%) in five runs, and the
suite's share of metrics within 5% from 37% to 67-76%. The all_reduce over loopback was
next: 40 samples of 16 calls, each a mean over calls of which 35-45% waited 3-4 ms for a
virtual CPU to wake, spread by 50-70% (IQR/median) within a pass, and its half-widths were
5-12% quiet, 10-62% loaded. Its host ranks now share one CPU and each of 160 samples is
one call (`accelkit.suite.perf.collectives`): 1.1-5.3% in four whole-suite runs, and the
suite's share within 5% went to 82-92%. What stays wide is noise within each pass, not
between the sides: layer_norm rows (whose level follows each allocation of its inputs even
in one process alone: 13-24 GB/s), cold compile latency and the eager/compiled block
timings under load.

Canaries: a machine that moved (`accelkit.results.canary`)
---------------------------------------------------------
Groups guard against noise that differs between passes; they cannot see a shift that holds
for a whole run. Measured here (issue 17): two runs of the same build, the second with the
machine's memory system slower for its whole duration, gave memory-bound cases 1.4-1.6x
slower in all 5 passes, a confident copy-bandwidth ratio of 0.71 [0.68, 0.80], and 14 of 45
metrics `regressed`. So every perf pass first measures a fixed calibration set (canaries,
`suite/perf/test_canary.py`): a host memory copy (1 MiB, B/s) and a host GEMM (128^3
float32, FLOP/s), through numpy so the torch build under test cannot move them, and on a
device with its own memory a device copy and GEMM (through torch: see the limits below).
They use the same timer, passes and groups as every case, and each canary is compared with
the rule above like any metric. A canary "may have moved" when its interval reaches beyond
the band on either side: a confirmed change, but also a `noisy` canary (its noise cannot
rule out a shift larger than the threshold; measured here, a run under `stress-ng` load
left the canaries `noisy` while one GEMM loop read as `regressed` by 1.4x).

When a canary may have moved, every metric whose verdict is `regressed` or `improved` is
judged again against its reference canary: the canary of its kind (`bound`: "memory" for
bandwidth cases, "compute" for FLOP/s cases, a case's latency with them) and scope (host or
device) when that one may have moved, else the one of its scope whose band below reaches
farthest. With the
canary's interval as a slowdown [c_lo, c_hi], the machine alone is taken to slow a kernel
of that kind by anything in the environment band [c_lo^max(0, 1-s), c_hi^(1+s)]
(exponents for a slowdown; mirrored for a speed-up), s = `ENV_SPREAD` = 1.25. The metric
keeps its verdict
only when its own interval, divided by the far end of that band, is still wholly beyond the
threshold band on the same side (`relative_ci` in the comparison); otherwise its verdict is
`environment-shifted`: shown, never counted as a regression (compare does not fail on it).
A canary that moved (its interval excludes 1 and reaches beyond the band:
`canary.interval_moved`, the one rule every view uses for "moved") is itself
`environment-shifted`; a canary whose interval contains 1 did not move and keeps its verdict,
though, reaching beyond the band, it may still be the reference of a metric. Metrics whose
verdict was `unchanged` or `noisy` keep it, and nothing changes while every canary's
interval lies within the band, so the rule above and its calibration hold as they are on a
steady machine. (For an interval across 1, the band widens on both sides.)

Calibration of s, from two measurements. In the drifted run above, the memory-bound
kernels moved by 1.4-1.6x while copy bandwidth moved by 1/0.71 = 1.41x: in log space
0.97-1.37 times the canary's shift, so s >= 0.37. Under `stress-ng` load (one CPU and one
memory worker, benchmarks/bench_ab_noise.py on the shared 2-core machine, A/A): the
host-GEMM canary's slowdown interval reached 1.076, while the planted 64^3-GEMM loop slowed
by 1.40x [1.18, 1.53]: contention hits a 250 us call harder than a 40 us one, and its low
end needs s >= 1.2 (log 1.18 / log 1.076). s = 1.25 covers both; a 3x build slowdown inside
a 1.5x machine shift is still red (the band's far end is 1.5^2.25 = 2.5x). The price: in
two runs taken apart, a build change is red only when it is clearly larger than what the
canaries allow the machine; on a machine as noisy as this one that hides 10% changes, which
the interleaved mode below is for. tests/unit/results/test_canary.py checks the synthetic cases: a
machine-wide 1.5x slowdown of every memory-bound metric with the canary moved gives no
`regressed`; a 3x slowdown of one build's GEMM with steady canaries, with a 1.5x memory
shift, and with a `noisy` canary under load, is `regressed`.

The limits, by design: two runs taken apart cannot tell a build change smaller than the
machine's shift from the shift (it is `environment-shifted`, not red); measure both builds
interleaved (`accelkit test --ab`) to judge such a change, since both then see the same
machine. The device canaries run through the torch under test: a build that changes its
device copy or float32 GEMM moves them, and that kind's metrics become
`environment-shifted` rather than `regressed`. A canary measured first in each pass sees
the conditions of the pass's start; a shift that comes and goes within a pass shows as
group noise, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

import numpy as np
import numpy.typing as npt

from accelkit.results.significance import (
    FloatArray,
    IntArray,
    RankTest,
    Samples,
    finite,
    mann_whitney_u,
    paired_ratio_test,
)

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
MIN_GROUPS = 4
"""Both sides need at least this many groups (passes) for the grouped mode; otherwise the
samples are compared as independent. 4 vs 4 is the smallest balanced size at which the
exact two-sided rank test of group medians can reach p < 0.05 (min p = 2/70)."""
PAIRED_ALPHA = 0.01
"""Level of the paired mode's sign-flip test (at most `alpha`). The test is exact, so this is
the share of metrics it can confirm in a run where nothing changed, however noisy the
machine: issue 17's bound for an A/A run is 1%."""
MIN_PAIRS = 8
"""Pass pairs the paired mode needs: the fewest with which its sign-flip test can reach
`PAIRED_ALPHA` at all (2 / 2^8 = 0.0078, when every pair agrees in sign; 7 pairs: 0.016)."""

# Bound the memory of one vectorised bootstrap block (resamples x samples elements). Small
# enough that a block's arrays stay in cache and are not page-faulted in afresh every time:
# 2-3x faster than blocks of 2M elements. By sample, the draws do not depend on it.
_MAX_BLOCK_ELEMENTS = 1 << 16

Groups: TypeAlias = Sequence[int] | npt.NDArray[np.integer[Any]]


def _as_grouped(samples: Samples, groups: Groups | None) -> tuple[FloatArray, IntArray | None]:
    """The finite samples and, when given, their group labels (non-finite ones dropped)."""
    array = np.asarray(samples, dtype=np.float64).reshape(-1)
    keep = np.isfinite(array)
    if groups is None:
        return array[keep], None
    labels = np.asarray(groups, dtype=np.int64).reshape(-1)
    if labels.size != array.size:
        raise ValueError(f"{labels.size} group labels for {array.size} samples")
    return array[keep], labels[keep]


def split_groups(samples: Samples, groups: Groups) -> list[FloatArray]:
    """The finite samples of each group, groups in ascending label order (empty ones gone)."""
    array, labels = _as_grouped(samples, groups)
    assert labels is not None
    if array.size == 0:
        return []
    order = np.argsort(labels, kind="stable")
    _, starts = np.unique(labels[order], return_index=True)
    return list(np.split(array[order], starts[1:]))


def median_ratio(base: Samples, new: Samples) -> float:
    """median(new) / median(base); both must be non-empty with a non-zero base median."""
    base_median = float(np.median(finite(base)))
    new_median = float(np.median(finite(new)))
    return new_median / base_median


def _row_medians(values: FloatArray, lengths: IntArray | None = None) -> FloatArray:
    """Median of each row; with `lengths`, of each row's first `lengths[i]` values after
    sorting (the rest must be +inf padding). Sorts `values` in place. Equal to np.median,
    bit for bit; a full sort of short rows is several times faster than its partition."""
    ordered = values  # sorted in place: every caller passes a fresh array
    ordered.sort(axis=1)
    if lengths is None:
        n = values.shape[1]
        return (ordered[:, (n - 1) // 2] + ordered[:, n // 2]) / 2.0
    rows = np.arange(values.shape[0])
    return (ordered[rows, (lengths - 1) // 2] + ordered[rows, lengths // 2]) / 2.0


def _resampled_medians(samples: FloatArray, resamples: int, rng: np.random.Generator) -> FloatArray:
    n = samples.size
    rows_per_block = max(1, _MAX_BLOCK_ELEMENTS // n)
    medians = np.empty(resamples, dtype=np.float64)
    for start in range(0, resamples, rows_per_block):
        rows = min(rows_per_block, resamples - start)
        index = rng.integers(0, n, size=(rows, n))
        medians[start : start + rows] = _row_medians(samples[index])
    return medians


def _resampled_group_medians(
    groups: Sequence[FloatArray], resamples: int, rng: np.random.Generator
) -> FloatArray:
    """Two-stage bootstrap: draw len(groups) groups with replacement, resample each drawn
    group's samples with replacement (its own size), pool, take the median."""
    count = len(groups)
    sizes = np.array([group.size for group in groups], dtype=np.int64)
    float_sizes = sizes.astype(np.float64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    pooled = np.concatenate(list(groups))
    width = int(sizes.max())
    ragged = bool(np.any(sizes != width))
    if ragged:  # a padding slot reads +inf, which sorts after every real sample
        pooled = np.concatenate([pooled, [np.inf]])
    padding = pooled.size - 1
    slots = np.arange(width, dtype=np.int64)
    rows_per_block = max(1, _MAX_BLOCK_ELEMENTS // (count * width))
    medians = np.empty(resamples, dtype=np.float64)
    for start in range(0, resamples, rows_per_block):
        rows = min(rows_per_block, resamples - start)
        drawn = rng.integers(0, count, size=(rows, count))
        # floor(u * size) < size for every u in [0, 1) in float64 (sizes far below 2^53).
        # Indices stay int64: `take` converts any other integer type first, slowly.
        within = rng.random((rows, count, width)) * float_sizes[drawn][:, :, None]
        index = within.astype(np.int64) + starts[drawn][:, :, None]
        lengths: IntArray | None = None
        if ragged:
            drawn_sizes = sizes[drawn]
            index = np.where(slots < drawn_sizes[:, :, None], index, padding)
            lengths = drawn_sizes.sum(axis=1)
        medians[start : start + rows] = _row_medians(pooled.take(index.reshape(rows, -1)), lengths)
    return medians


def _percentile_interval(
    base_medians: FloatArray, new_medians: FloatArray, confidence: float
) -> tuple[float, float]:
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = new_medians / base_medians
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(ratios, [tail, 1.0 - tail])
    return float(low), float(high)


def _check_interval_args(confidence: float, resamples: int) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if resamples < 1:
        raise ValueError(f"resamples must be positive, got {resamples}")


def bootstrap_ratio_ci(
    base: Samples,
    new: Samples,
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> tuple[float, float]:
    """Percentile bootstrap interval of median(new) / median(base), samples resampled as
    independent; deterministic per seed."""
    _check_interval_args(confidence, resamples)
    base_array, new_array = finite(base), finite(new)
    if base_array.size == 0 or new_array.size == 0:
        raise ValueError("bootstrap needs samples on both sides")
    rng = np.random.default_rng(seed)
    base_medians = _resampled_medians(base_array, resamples, rng)
    new_medians = _resampled_medians(new_array, resamples, rng)
    return _percentile_interval(base_medians, new_medians, confidence)


def grouped_bootstrap_ratio_ci(
    base: Samples,
    new: Samples,
    base_groups: Groups,
    new_groups: Groups,
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> tuple[float, float]:
    """Percentile interval of median(new) / median(base) (pooled medians) from the
    two-stage bootstrap of the module docstring: groups with replacement, then samples
    within each drawn group; deterministic per seed."""
    _check_interval_args(confidence, resamples)
    base_split, new_split = split_groups(base, base_groups), split_groups(new, new_groups)
    if not base_split or not new_split:
        raise ValueError("bootstrap needs samples on both sides")
    return _grouped_interval(base_split, new_split, confidence, resamples, seed)


def _grouped_interval(
    base_split: Sequence[FloatArray],
    new_split: Sequence[FloatArray],
    confidence: float,
    resamples: int,
    seed: int,
) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    base_medians = _resampled_group_medians(base_split, resamples, rng)
    new_medians = _resampled_group_medians(new_split, resamples, rng)
    return _percentile_interval(base_medians, new_medians, confidence)


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
    elif low >= lower_band and high <= upper_band:
        return "unchanged", f"interval [{low:.3f}, {high:.3f}] within +-{threshold:.0%}"
    else:
        return "unchanged", (
            f"interval [{low:.3f}, {high:.3f}] reaches beyond +-{threshold:.0%} on one side "
            "only: no change larger than that is confirmed"
        )
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
    groups: tuple[int, int] | None = None
    """(base, new) group counts when the grouped or paired mode decided; None: by sample, or
    no statistics at all (too few samples)."""
    paired: bool = False
    """True when the paired mode (interleaved passes) decided."""


def _group_count(labels: IntArray | None) -> int:
    return 1 if labels is None or labels.size == 0 else int(np.unique(labels).size)


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
    base_groups: Groups | None = None,
    new_groups: Groups | None = None,
    paired: bool = False,
) -> SampleComparison:
    """Compare two sample sets of one metric with the rule of the module docstring.

    `paired`: group g of base and group g of new were measured side by side (interleaved
    passes, `accelkit test --ab`); with the same group labels on both sides, at least
    `MIN_PAIRS` of them, the paired mode decides.

    `base_groups` / `new_groups`: the group (pass) of each sample, parallel to the samples
    (ValueError on a length mismatch); None: one group. With at least `MIN_GROUPS` groups
    on both sides the grouped mode decides, otherwise the samples are taken as independent.
    Non-finite samples (and their labels) are ignored. Samples are expected to be positive
    (times, rates).
    """
    base_array, base_labels = _as_grouped(base, base_groups)
    new_array, new_labels = _as_grouped(new, new_groups)
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
    group_counts = (_group_count(base_labels), _group_count(new_labels))
    grouped = min(group_counts) >= MIN_GROUPS
    pairs = (
        paired
        and base_labels is not None
        and new_labels is not None
        and min(group_counts) >= MIN_PAIRS
        and np.array_equal(np.unique(base_labels), np.unique(new_labels))
    )
    if pairs:
        assert base_labels is not None and new_labels is not None
        ratio, ci, rank_test = paired_ratio_test(
            split_groups(base_array, base_labels), split_groups(new_array, new_labels), confidence
        )
        mode = f"paired: {group_counts[0]} interleaved pass pairs, sign-flip test"
    elif grouped:
        assert base_labels is not None and new_labels is not None
        base_split = split_groups(base_array, base_labels)
        new_split = split_groups(new_array, new_labels)
        ci = _grouped_interval(base_split, new_split, confidence, resamples, seed)
        rank_test = mann_whitney_u(
            [float(np.median(g)) for g in base_split],
            [float(np.median(g)) for g in new_split],
            method="auto",
        )
        test = "exact" if rank_test.exact else "normal approximation"
        mode = f"by group: {group_counts[0]} vs {group_counts[1]} groups, {test}"
    else:
        ci = bootstrap_ratio_ci(
            base_array,
            new_array,
            confidence=confidence,
            resamples=resamples,
            seed=seed,
        )
        rank_test = mann_whitney_u(base_array, new_array)
        if group_counts == (1, 1):
            mode = "by sample: one group per side"
        else:
            mode = (
                f"by sample: {group_counts[0]} vs {group_counts[1]} groups, "
                f"fewer than {MIN_GROUPS} on a side"
            )
    level = min(alpha, PAIRED_ALPHA) if pairs else alpha
    verdict, reason = decide(
        ci, rank_test, higher_is_better=higher_is_better, threshold=threshold, alpha=level
    )
    return SampleComparison(
        verdict=verdict,
        reason=f"{reason} ({mode})",
        base_median=base_median,
        new_median=new_median,
        ratio=ratio,
        ci=ci,
        p_value=rank_test.p_value,
        n_base=n_base,
        n_new=n_new,
        groups=group_counts if grouped or pairs else None,
        paired=bool(pairs),
    )
