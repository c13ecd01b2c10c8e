"""accelkit.results.stats: the rank test, the bootstrap interval and the verdict rule.

The calibration tests are the issue's acceptance criteria, on synthetic samples with
lognormal noise of the IQR/median that CPU timings show (2-5%): two sample sets from one
distribution are flagged in at most 1% of metrics, a 10% slowdown is flagged as regressed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from accelkit.results import stats
from accelkit.results.stats import RankTest, compare_samples, decide, mann_whitney_u


def sigma_for(iqr_over_median: float) -> float:
    """Lognormal sigma whose IQR/median is the given one: 2 sinh(0.6745 sigma)."""
    return math.asinh(iqr_over_median / 2.0) / 0.6744897501960817


def test_sigma_for_gives_the_intended_spread() -> None:
    rng = np.random.default_rng(0)
    samples = rng.lognormal(0.0, sigma_for(0.05), 200_000)
    p25, median, p75 = np.percentile(samples, [25, 50, 75])
    assert (p75 - p25) / median == pytest.approx(0.05, rel=0.02)


# ---------------------------------------------------------------------------------------
# Building blocks
# ---------------------------------------------------------------------------------------


def test_mann_whitney_by_hand() -> None:
    test = mann_whitney_u([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    assert test.u == 9.0
    # mean 4.5, variance 3*3/12*7 = 5.25, continuity correction 0.5
    z = (9.0 - 4.5 - 0.5) / math.sqrt(5.25)
    assert test.z == pytest.approx(z)
    assert test.p_value == pytest.approx(math.erfc(z / math.sqrt(2.0)))
    reverse = mann_whitney_u([4.0, 5.0, 6.0], [1.0, 2.0, 3.0])
    assert reverse.z == pytest.approx(-z) and reverse.p_value == pytest.approx(test.p_value)


def test_mann_whitney_all_ties_has_no_evidence() -> None:
    test = mann_whitney_u([2.0] * 5, [2.0] * 7)
    assert test.p_value == 1.0 and test.z == 0.0


def test_mann_whitney_matches_scipy_with_ties() -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(3)
    cases = [
        (rng.integers(0, 5, 12).astype(float), rng.integers(1, 6, 9).astype(float)),
        (rng.normal(size=30), rng.normal(0.5, size=25)),
        (np.array([1.0, 1.0, 2.0, 2.0, 3.0]), np.array([2.0, 2.0, 3.0, 3.0, 4.0, 4.0])),
    ]
    for base, new in cases:
        ours = mann_whitney_u(base, new)
        theirs = scipy_stats.mannwhitneyu(
            new, base, alternative="two-sided", method="asymptotic", use_continuity=True
        )
        assert ours.u == pytest.approx(theirs.statistic)
        assert ours.p_value == pytest.approx(theirs.pvalue, rel=1e-9)


def test_bootstrap_is_deterministic_per_seed_and_brackets_the_ratio() -> None:
    rng = np.random.default_rng(1)
    base = rng.lognormal(0.0, 0.03, 15)
    new = rng.lognormal(np.log(1.05), 0.03, 15)
    first = stats.bootstrap_ratio_ci(base, new)
    assert first == stats.bootstrap_ratio_ci(base.tolist(), new.tolist())
    assert first != stats.bootstrap_ratio_ci(base, new, seed=1)
    ratio = stats.median_ratio(base, new)
    assert first[0] < ratio < first[1]
    wider = stats.bootstrap_ratio_ci(base, new, confidence=0.99)
    assert wider[0] <= first[0] and wider[1] >= first[1]


def test_compare_samples_is_deterministic() -> None:
    rng = np.random.default_rng(2)
    base, new = rng.lognormal(0, 0.04, 12), rng.lognormal(0.02, 0.04, 12)
    assert compare_samples(base, new, higher_is_better=False) == compare_samples(
        base, new, higher_is_better=False
    )


def test_bootstrap_handles_many_samples_in_blocks() -> None:
    rng = np.random.default_rng(4)
    base = rng.lognormal(0.0, 0.02, 5000)
    low, high = stats.bootstrap_ratio_ci(base, base * 1.1, resamples=1000)
    assert 1.09 < low < 1.1 < high < 1.11


# ---------------------------------------------------------------------------------------
# The decision rule
# ---------------------------------------------------------------------------------------

SIGNIFICANT_UP = RankTest(u=0.0, z=3.0, p_value=0.003)
SIGNIFICANT_DOWN = RankTest(u=0.0, z=-3.0, p_value=0.003)
NOT_SIGNIFICANT = RankTest(u=0.0, z=1.0, p_value=0.3)


@pytest.mark.parametrize(
    ("ci", "rank", "higher_is_better", "expected"),
    [
        ((1.05, 1.12), SIGNIFICANT_UP, False, "regressed"),  # latency up: slower
        ((1.05, 1.12), SIGNIFICANT_UP, True, "improved"),  # throughput up: faster
        ((0.85, 0.95), SIGNIFICANT_DOWN, False, "improved"),
        ((0.85, 0.95), SIGNIFICANT_DOWN, True, "regressed"),
        ((0.99, 1.02), SIGNIFICANT_UP, False, "unchanged"),  # real but below 3%
        ((1.01, 1.20), SIGNIFICANT_UP, False, "unchanged"),  # not surely beyond 3%
        ((0.90, 1.10), NOT_SIGNIFICANT, False, "noisy"),  # spans both +-3%
        ((1.05, 1.12), NOT_SIGNIFICANT, False, "noisy"),  # rank test disagrees
        ((1.05, 1.12), SIGNIFICANT_DOWN, False, "noisy"),  # rank test points the other way
    ],
)
def test_decide(
    ci: tuple[float, float], rank: RankTest, higher_is_better: bool, expected: str
) -> None:
    verdict, reason = decide(ci, rank, higher_is_better=higher_is_better)
    assert verdict == expected
    assert reason


def test_threshold_band_is_symmetric_in_log_space() -> None:
    # 1/1.03 = 0.9709: an interval just beyond it is a change, just inside is not.
    assert decide((0.90, 0.9700), SIGNIFICANT_DOWN, higher_is_better=True)[0] == "regressed"
    assert decide((0.90, 0.9720), SIGNIFICANT_DOWN, higher_is_better=True)[0] == "unchanged"
    assert decide((1.02, 1.2), SIGNIFICANT_UP, higher_is_better=False, threshold=0.01)[0] == (
        "regressed"
    )
    with pytest.raises(ValueError):
        decide((1.0, 1.0), NOT_SIGNIFICANT, higher_is_better=False, threshold=0.0)


def test_latency_and_derived_throughput_get_the_same_verdict() -> None:
    rng = np.random.default_rng(5)
    for shift in (0.9, 1.0, 1.1):
        base = rng.lognormal(0.0, 0.03, 11)
        new = rng.lognormal(np.log(shift), 0.03, 11)
        latency = compare_samples(base, new, higher_is_better=False)
        throughput = compare_samples(1e9 / base, 1e9 / new, higher_is_better=True)
        assert latency.verdict == throughput.verdict
        assert latency.ratio is not None and throughput.ratio is not None
        assert throughput.ratio == pytest.approx(1.0 / latency.ratio)


def test_too_few_samples_cannot_decide() -> None:
    result = compare_samples([1.0, 1.0], [2.0, 2.0, 2.0], higher_is_better=False)
    assert result.verdict == "noisy"
    assert "too few samples" in result.reason
    assert result.ratio == 2.0 and result.ci is None and result.p_value is None
    empty = compare_samples([], [1.0], higher_is_better=False)
    assert empty.verdict == "noisy" and empty.ratio is None and empty.base_median is None


def test_three_samples_each_never_reach_significance() -> None:
    # n=3 vs 3: the smallest two-sided rank p is ~0.08, so even a doubling is only "noisy".
    result = compare_samples([1.0, 1.01, 0.99], [2.0, 2.02, 1.98], higher_is_better=False)
    assert result.verdict == "noisy"
    assert result.p_value is not None and result.p_value > stats.DEFAULT_ALPHA


def test_non_positive_and_non_finite_samples() -> None:
    result = compare_samples([0.0, 1.0, 1.0], [1.0, 1.0, 1.0], higher_is_better=False)
    assert result.verdict == "noisy" and "positive" in result.reason
    nan = compare_samples([1.0, 1.0, 1.0, math.nan], [1.0] * 3, higher_is_better=False)
    assert nan.n_base == 3 and nan.verdict == "unchanged"


def test_identical_constant_samples_are_unchanged() -> None:
    result = compare_samples([2.0] * 5, [2.0] * 5, higher_is_better=True)
    assert result.verdict == "unchanged" and result.ratio == 1.0 and result.p_value == 1.0


def test_a_clear_regression() -> None:
    base = [1.00, 1.01, 0.99, 1.02, 0.98, 1.00, 1.01, 0.99, 1.00, 1.01]
    new = [x * 1.2 for x in base]
    result = compare_samples(base, new, higher_is_better=False)
    assert result.verdict == "regressed"
    assert result.ratio == pytest.approx(1.2)
    assert result.ci is not None and result.ci[0] > 1.03
    assert result.p_value is not None and result.p_value < 0.001


# ---------------------------------------------------------------------------------------
# Calibration: the targets
# ---------------------------------------------------------------------------------------

NOISE_AND_SIZES = [(0.02, 10), (0.05, 10), (0.05, 20), (0.03, 30)]


@pytest.mark.parametrize(("iqr_over_median", "n"), NOISE_AND_SIZES)
def test_a_a_false_positive_rate_is_at_most_one_percent(iqr_over_median: float, n: int) -> None:
    rng = np.random.default_rng(2024)
    sigma = sigma_for(iqr_over_median)
    trials = 500
    flagged = 0
    for _ in range(trials):
        base = rng.lognormal(0.0, sigma, n)
        new = rng.lognormal(0.0, sigma, n)
        verdict = compare_samples(base, new, higher_is_better=False).verdict
        flagged += verdict in ("regressed", "improved")
    assert flagged / trials <= 0.01, f"{flagged} of {trials} A/A metrics flagged"


def test_a_a_with_outliers_is_not_flagged() -> None:
    # Timing noise has a heavy right tail (preemption, page faults): 10% of samples 1.3-2x.
    rng = np.random.default_rng(7)
    sigma = sigma_for(0.03)
    trials, flagged = 500, 0
    for _ in range(trials):
        sides = []
        for _side in range(2):
            samples = rng.lognormal(0.0, sigma, 15)
            hit = rng.random(15) < 0.1
            samples[hit] *= rng.uniform(1.3, 2.0, int(hit.sum()))
            sides.append(samples)
        verdict = compare_samples(sides[0], sides[1], higher_is_better=False).verdict
        flagged += verdict in ("regressed", "improved")
    assert flagged / trials <= 0.01


@pytest.mark.parametrize(
    ("iqr_over_median", "n", "min_detection"),
    # The worst corner (5% noise, 10 samples) is near what any median-based test can do:
    # the median's standard error makes 10% - 3% only ~3 standard errors of the ratio.
    [(0.02, 10, 0.99), (0.05, 10, 0.90), (0.05, 20, 0.99), (0.03, 30, 0.99)],
)
def test_ten_percent_slowdown_is_detected(
    iqr_over_median: float, n: int, min_detection: float
) -> None:
    rng = np.random.default_rng(2025)
    sigma = sigma_for(iqr_over_median)
    trials = 200
    detected = 0
    for _ in range(trials):
        base = rng.lognormal(0.0, sigma, n)
        new = rng.lognormal(math.log(1.10), sigma, n)
        detected += compare_samples(base, new, higher_is_better=False).verdict == "regressed"
    assert detected / trials >= min_detection, f"{detected} of {trials} slowdowns flagged"


def test_ten_percent_throughput_drop_is_a_regression_and_gain_an_improvement() -> None:
    rng = np.random.default_rng(11)
    sigma = sigma_for(0.03)
    regressed = improved = 0
    for _ in range(100):
        base = rng.lognormal(0.0, sigma, 15)
        slower = rng.lognormal(math.log(0.9), sigma, 15)
        faster = rng.lognormal(math.log(1.1), sigma, 15)
        regressed += compare_samples(base, slower, higher_is_better=True).verdict == "regressed"
        improved += compare_samples(base, faster, higher_is_better=True).verdict == "improved"
    assert regressed >= 99 and improved >= 99
