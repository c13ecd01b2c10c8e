"""Pooling results files of one run (measurement passes, rounds): accelkit.results.merge."""

from __future__ import annotations

from typing import Any

import pytest

from accelkit.results.merge import group_count, pool
from accelkit.results.model import Case, Metric
from tests.factories import case, metric, results

ENV = {"torch": "2.14.1"}


def _flops(samples: list[float], groups: list[int] | None = None, **extra: Any) -> Metric:
    return metric(samples=samples, groups=groups, unit="FLOP/s", higher_is_better=True, **extra)


def _case(case_id: str, status: str = "passed", message: str = "", **metrics: Metric) -> Case:
    return case(case_id, status, message=message, duration_s=1.0, metrics=metrics)


def test_samples_are_pooled_with_one_group_per_input_and_statistics_recomputed() -> None:
    recorded = {"iqr": 0.0, "noisy": False, "iqr_over_median": 0.0, "peak": 10.0}
    flops = _flops([1.0, 2.0], **recorded, peak_fraction=0.15)
    first = results([_case("perf/gemm", flops=flops)], env=ENV)
    second = results([_case("perf/gemm", flops=_flops([3.0, 4.0]))], started="later")
    pooled = pool([first, second])
    pooled_flops = pooled.cases[0].metrics["flops"]
    assert pooled_flops.samples == [1.0, 2.0, 3.0, 4.0]
    assert pooled_flops.sample_groups == [0, 0, 1, 1]
    assert pooled_flops.value == 2.5
    extra = pooled_flops.model_extra or {}
    assert extra["iqr"] == pytest.approx(1.5)
    assert extra["iqr_over_median"] == pytest.approx(0.6) and extra["noisy"] is True
    assert extra["peak_fraction"] == pytest.approx(0.25)
    assert pooled.run.started == first.run.started and pooled.env == ENV
    assert pooled.cases[0].duration_s == 2.0


def test_group_ids_stay_distinct_and_aligned_across_metrics() -> None:
    # The first input already pools two groups (say two rounds of passes); a metric missing
    # from one group does not shift the numbering of the others.
    first = results(
        [_case("perf/a", x=_flops([1.0, 1.0], [0, 1])), _case("perf/b", x=_flops([5.0], [0]))]
    )
    second = results([_case("perf/a", x=_flops([2.0])), _case("perf/b", x=_flops([6.0]))])
    assert group_count(first) == 2 and group_count(second) == 1
    pooled = pool([first, second])
    by_id = {c.id: c for c in pooled.cases}
    assert by_id["perf/a"].metrics["x"].sample_groups == [0, 1, 2]
    assert by_id["perf/b"].metrics["x"].sample_groups == [0, 2]


def test_the_worst_status_wins_with_its_message_labelled() -> None:
    first = results([_case("perf/a"), _case("perf/b", "failed", "first broke")])
    second = results([_case("perf/a", "crashed", "worker died"), _case("perf/b", "passed")])
    pooled = pool([first, second], labels=("round 1", "round 2"))
    by_id = {c.id: c for c in pooled.cases}
    assert (by_id["perf/a"].status, by_id["perf/a"].message) == ("crashed", "round 2: worker died")
    assert (by_id["perf/b"].status, by_id["perf/b"].message) == ("failed", "first broke")
    assert pooled.summary.crashed == 1 and pooled.summary.failed == 1
    assert pooled.summary.passed == 0


def test_cases_of_any_input_are_kept_in_first_seen_order() -> None:
    pooled = pool([results([_case("perf/a")]), results([_case("perf/b"), _case("perf/a")])])
    assert [c.id for c in pooled.cases] == ["perf/a", "perf/b"]


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="at least one"):
        pool([])
    with pytest.raises(ValueError, match="labels"):
        pool([results([])], labels=("a", "b"))


def test_sample_groups_must_match_the_samples() -> None:
    with pytest.raises(ValueError, match="sample_groups"):
        _flops([1.0, 2.0], [0])
