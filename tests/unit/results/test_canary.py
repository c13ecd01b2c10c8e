"""Canaries in `accelkit compare`: a machine that moved is not a build that regressed.

Synthetic perf runs (tests/factories.py) shaped like the CPU suite: canaries, memory-bound
cases (bandwidth + latency from the same samples) and GEMMs (FLOP/s + latency), each timed
in 5 passes. The method is documented in accelkit/results/stats.py's docstring.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from accelkit.results import canary
from accelkit.results.compare import compare
from accelkit.results.model import Case, Metric, Results
from tests.factories import case, grouped_metric, metric, results

MEMORY_CASES = (
    "perf/memory/stream/copy/float32/262144",
    "perf/memory/stream/triad/float32/262144",
    "perf/memory/stream/sum/float32/262144",
    "perf/memory/rows/softmax/float32/128x1024",
    "perf/memory/rows/layer_norm/float32/128x1024",
    "perf/gemv/float32/1024x512",
    "perf/gemv/float32/2048x512",
)
COMPUTE_CASES = ("perf/gemm/float32/128x128x128", "perf/gemm/float32/16x512x256")
GEMM = COMPUTE_CASES[0]


def _timed(
    case_id: str, seconds: float, *, seed: int, bound: str | None = None, canary_of: str = ""
) -> Case:
    """A case timed in 5 passes: its latency, and the throughput from the same samples."""
    latency = grouped_metric(seconds, seed=seed, between=0.01, within=0.015)
    work = 1e6
    tags = {"canary": canary_of} if canary_of else {"bound": bound}
    throughput = metric(
        samples=[work / s for s in latency.samples],
        groups=latency.sample_groups,
        unit="B/s" if (bound or canary_of) == "memory" else "FLOP/s",
        higher_is_better=True,
        scope="host",
        **tags,
    )
    metrics = {"throughput": throughput}
    if not canary_of:
        metrics["latency"] = latency
    return case(case_id, metrics=metrics)


def _run(
    seed: int,
    *,
    memory: float | list[float] = 1.0,
    compute: float = 1.0,
    gemm: float = 1.0,
    canaries: bool = True,
) -> Results:
    """One run; `memory`/`compute`: the machine's slowdown of those kinds (the canaries
    move with it), `gemm`: the build's slowdown of one GEMM only."""
    factors = memory if isinstance(memory, list) else [memory] * len(MEMORY_CASES)
    cases = []
    if canaries:
        cases.append(
            _timed("perf/canary/host/copy", 2e-5 * factors[0], seed=seed, canary_of="memory")
        )
        cases.append(
            _timed("perf/canary/host/gemm", 5e-5 * compute, seed=seed + 1, canary_of="compute")
        )
    for index, case_id in enumerate(MEMORY_CASES):
        cases.append(_timed(case_id, 1e-4 * factors[index], seed=seed + 10 + index, bound="memory"))
    for index, case_id in enumerate(COMPUTE_CASES):
        build = gemm if case_id == GEMM else 1.0
        cases.append(
            _timed(case_id, 5e-5 * compute * build, seed=seed + 30 + index, bound="compute")
        )
    return results(cases)


def _verdicts(base: Results, new: Results) -> dict[tuple[str, str], str]:
    return {(m.case, m.metric): m.verdict for m in compare(base, new).metrics}


# The machine-wide shift of the issue: memory-bound kernels 1.4-1.6x slower, the copy canary
# (first factor) 1.5x.
DRIFT = list(np.linspace(1.5, 1.4, 4)) + list(np.linspace(1.45, 1.6, 3))


def test_machine_wide_memory_slowdown_with_moved_canaries_is_not_a_regression() -> None:
    comparison = compare(_run(0), _run(100, memory=DRIFT))
    verdicts = {(m.case, m.metric): m for m in comparison.metrics}
    assert comparison.metrics_with("regressed") == ()
    assert not comparison.fails
    shifted = comparison.metrics_with("environment-shifted")
    memory_metrics = [m for m in comparison.metrics if m.case in MEMORY_CASES]
    assert {m.case for m in shifted} >= set(MEMORY_CASES)
    assert all(m.verdict == "environment-shifted" for m in memory_metrics)
    assert verdicts[("perf/canary/host/copy", "throughput")].verdict == "environment-shifted"
    triad = verdicts[("perf/memory/stream/triad/float32/262144", "throughput")]
    assert triad.canary == "perf/canary/host/copy"
    assert triad.relative_ci is not None and "machine" in triad.reason
    assert comparison.summary()["environment-shifted"] == len(shifted)


def test_without_canaries_the_same_drift_reads_as_regressions() -> None:
    """The control: what compare said before canaries (the issue's 14 of 45)."""
    comparison = compare(_run(0, canaries=False), _run(100, memory=DRIFT, canaries=False))
    regressed = {m.case for m in comparison.metrics_with("regressed")}
    assert regressed == set(MEMORY_CASES)


def test_build_only_3x_slowdown_with_steady_canaries_is_regressed() -> None:
    comparison = compare(_run(0), _run(100, gemm=3.0))
    verdicts = {(m.case, m.metric): m.verdict for m in comparison.metrics}
    assert verdicts[(GEMM, "throughput")] == "regressed"
    assert verdicts[(GEMM, "latency")] == "regressed"
    assert [m.case for m in comparison.metrics_with("regressed")] == [GEMM, GEMM]
    assert comparison.metrics_with("environment-shifted") == ()
    assert comparison.fails


def test_build_3x_slowdown_inside_a_machine_shift_is_still_regressed() -> None:
    comparison = compare(_run(0), _run(100, memory=DRIFT, gemm=3.0))
    regressed = comparison.metrics_with("regressed")
    assert {m.case for m in regressed} == {GEMM}
    assert all(m.canary == "perf/canary/host/copy" for m in regressed)


def test_a_moved_compute_canary_shifts_compute_metrics_only() -> None:
    comparison = compare(_run(0), _run(100, compute=1.5))
    by_case = {m.case: m for m in comparison.metrics if m.metric == "throughput"}
    assert by_case[GEMM].verdict == "environment-shifted"
    assert by_case[GEMM].canary == "perf/canary/host/gemm"
    assert by_case[MEMORY_CASES[0]].verdict == "unchanged"
    assert comparison.metrics_with("regressed") == ()


def test_a_steady_run_is_judged_as_without_canaries() -> None:
    with_canaries = _verdicts(_run(0), _run(100))
    without = _verdicts(_run(0, canaries=False), _run(100, canaries=False))
    assert {k: v for k, v in with_canaries.items() if not k[0].startswith("perf/canary")} == without
    assert "regressed" not in with_canaries.values()


def _shift(
    low: float, high: float, kind: str = "memory", verdict: str = "regressed"
) -> canary.CanaryShift:
    return canary.CanaryShift(
        case=f"perf/canary/host/{kind}",
        metric="throughput",
        kind=kind,
        scope="host",
        verdict=verdict,
        slowdown=math.sqrt(low * high),
        slowdown_ci=(low, high),
    )


def test_environment_band_widens_away_from_one() -> None:
    spread, near = canary.ENV_SPREAD, max(0.0, 1.0 - canary.ENV_SPREAD)
    low, high = _shift(1.4, 1.6).environment_band()
    assert low == pytest.approx(1.4**near) and low >= 1.0
    assert high == pytest.approx(1.6 ** (1 + spread))
    fast_low, fast_high = _shift(0.6, 0.8, verdict="improved").environment_band()
    assert fast_low == pytest.approx(0.6 ** (1 + spread))
    assert fast_high == pytest.approx(0.8**near) and fast_high <= 1.0
    across_low, across_high = _shift(0.9, 1.1, verdict="noisy").environment_band()
    assert across_low == pytest.approx(0.9 ** (1 + spread))
    assert across_high == pytest.approx(1.1 ** (1 + spread))


def test_reference_prefers_its_own_kind_then_the_largest_shift() -> None:
    memory, compute = _shift(1.4, 1.6), _shift(1.1, 1.2, kind="compute")
    steady = _shift(0.99, 1.01, kind="compute", verdict="unchanged")
    assert canary.reference([memory, compute], "compute", "host") is compute
    assert canary.reference([memory, steady], "compute", "host") is memory
    assert canary.reference([memory, compute], None, None) is memory
    assert canary.reference([memory], "memory", "device") is None
    assert canary.reference([steady], "compute", "host") is None


def test_rejudge_keeps_a_change_beyond_the_machine_and_orients_throughput() -> None:
    shift = _shift(1.45, 1.55)
    verdict, _, relative = canary.rejudge("regressed", 1 / 3, (0.31, 0.35), True, shift, 0.03)
    assert verdict == "regressed"
    assert relative[1] < 1.0  # throughput orientation: below 1 is worse
    verdict, reason, _ = canary.rejudge("regressed", 1.5, (1.45, 1.6), False, shift, 0.03)
    assert verdict == "environment-shifted" and "machine moved" in reason


def test_canary_tags_are_read_from_the_metric() -> None:
    tagged = Metric(value=1.0, unit="B/s", higher_is_better=True, canary="memory", scope="host")
    assert canary.canary_kind(tagged) == ("memory", "host")
    assert canary.canary_kind(Metric(value=1.0, unit="s", higher_is_better=False)) is None


def test_a_noisy_canary_under_load_still_shields_the_metrics_of_its_kind() -> None:
    """Under load the canary's passes scatter (its interval spans both sides of the band):
    it cannot rule out the machine's shift, so a memory-bound slowdown of that size is
    environment-shifted, while a 3x GEMM slowdown stays regressed."""
    base = _run(0)
    new = _run(100, memory=1.3, gemm=3.0)
    loaded = grouped_metric(2e-5 * 1.3, seed=7, between=0.25, within=0.015)
    noisy_canary = metric(
        samples=[1e6 / s for s in loaded.samples],
        groups=loaded.sample_groups,
        unit="B/s",
        higher_is_better=True,
        canary="memory",
        scope="host",
    )
    new.cases[0] = case("perf/canary/host/copy", metrics={"throughput": noisy_canary})
    comparison = compare(base, new)
    by_key = {(m.case, m.metric): m for m in comparison.metrics}
    assert by_key[("perf/canary/host/copy", "throughput")].verdict == "noisy"
    regressed = {m.case for m in comparison.metrics_with("regressed")}
    assert regressed == {GEMM}
    assert all(by_key[(c, "throughput")].verdict == "environment-shifted" for c in MEMORY_CASES)


@pytest.mark.parametrize(
    ("ci", "moved"),
    [
        ((1.022, 1.097), True),  # the host GEMM canary: a confirmed shift past 3%
        ((0.994, 1.041), False),  # its copy canary: the interval contains 1
        ((1.005, 1.02), False),  # confirmed, but within the band
        ((0.90, 1.10), False),  # noisy
    ],
)
def test_one_rule_decides_moved(ci: tuple[float, float], moved: bool) -> None:
    assert canary.interval_moved(ci, 0.03) is moved


def test_a_moved_canary_is_environment_shifted_even_when_its_own_verdict_was_unchanged() -> None:
    # The GEMM canary 2% slower: an interval that excludes 1 and reaches past 3% on one side
    # (raw verdict unchanged); the copy canary's interval contains 1.
    comparison = compare(_run(0), _run(100, compute=1.02))
    by_case = {m.case: m for m in comparison.canaries()}
    gemm, copy = by_case["perf/canary/host/gemm"], by_case["perf/canary/host/copy"]
    assert gemm.ci is not None and copy.ci is not None
    assert gemm.ci[1] < 1.0 < copy.ci[1] and copy.ci[0] < 1.0
    assert gemm.verdict == "environment-shifted"
    assert gemm.reason.startswith("canary: the machine moved 0.979x [")
    assert copy.verdict == "unchanged"
