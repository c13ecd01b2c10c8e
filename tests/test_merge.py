"""Pooling results files of one run (measurement passes, rounds): accelkit.results.merge."""

from __future__ import annotations

from typing import Any

import pytest

from accelkit.results.merge import group_count, pool
from accelkit.results.model import Results


def _results(cases: list[dict[str, Any]], started: str = "2026-11-29T10:00:00+00:00") -> Results:
    return Results.model_validate(
        {
            "schema": "accelkit.results/1",
            "run": {"started": started, "device": "cpu", "suites": ["perf"], "argv": []},
            "env": {"torch": "2.14.1"},
            "cases": cases,
        }
    )


def _case(case_id: str, status: str = "passed", message: str = "", **metrics: Any) -> dict:
    return {
        "id": case_id,
        "suite": "perf",
        "status": status,
        "message": message,
        "duration_s": 1.0,
        "metrics": metrics,
    }


def _metric(samples: list[float], groups: list[int] | None = None, **extra: Any) -> dict:
    metric = {"value": sorted(samples)[len(samples) // 2], "unit": "FLOP/s",
              "higher_is_better": True, "samples": samples, **extra}  # fmt: skip
    if groups is not None:
        metric["sample_groups"] = groups
    return metric


def test_samples_are_pooled_with_one_group_per_input_and_statistics_recomputed() -> None:
    first = _results([_case("perf/gemm", flops=_metric([1.0, 2.0], iqr=0.0, noisy=False,
                                                       iqr_over_median=0.0, peak=10.0,
                                                       peak_fraction=0.15))])  # fmt: skip
    second = _results([_case("perf/gemm", flops=_metric([3.0, 4.0]))], started="later")
    pooled = pool([first, second])
    metric = pooled.cases[0].metrics["flops"]
    assert metric.samples == [1.0, 2.0, 3.0, 4.0]
    assert metric.sample_groups == [0, 0, 1, 1]
    assert metric.value == 2.5
    extra = metric.model_extra or {}
    assert extra["iqr"] == pytest.approx(1.5)
    assert extra["iqr_over_median"] == pytest.approx(0.6) and extra["noisy"] is True
    assert extra["peak_fraction"] == pytest.approx(0.25)
    assert pooled.run.started == first.run.started and pooled.env == {"torch": "2.14.1"}
    assert pooled.cases[0].duration_s == 2.0


def test_group_ids_stay_distinct_and_aligned_across_metrics() -> None:
    # The first input already pools two groups (say two rounds of passes); a metric missing
    # from one group does not shift the numbering of the others.
    first = _results([
        _case("perf/a", x=_metric([1.0, 1.0], [0, 1])),
        _case("perf/b", x=_metric([5.0], [0])),
    ])  # fmt: skip
    second = _results([_case("perf/a", x=_metric([2.0])), _case("perf/b", x=_metric([6.0]))])
    assert group_count(first) == 2 and group_count(second) == 1
    pooled = pool([first, second])
    by_id = {case.id: case for case in pooled.cases}
    assert by_id["perf/a"].metrics["x"].sample_groups == [0, 1, 2]
    assert by_id["perf/b"].metrics["x"].sample_groups == [0, 2]


def test_the_worst_status_wins_with_its_message_labelled() -> None:
    first = _results([_case("perf/a"), _case("perf/b", "failed", "first broke")])
    second = _results([_case("perf/a", "crashed", "worker died"), _case("perf/b", "passed")])
    pooled = pool([first, second], labels=("round 1", "round 2"))
    by_id = {case.id: case for case in pooled.cases}
    assert (by_id["perf/a"].status, by_id["perf/a"].message) == ("crashed", "round 2: worker died")
    assert (by_id["perf/b"].status, by_id["perf/b"].message) == ("failed", "first broke")
    assert pooled.summary.crashed == 1 and pooled.summary.failed == 1
    assert pooled.summary.passed == 0


def test_cases_of_any_input_are_kept_in_first_seen_order() -> None:
    pooled = pool([_results([_case("perf/a")]), _results([_case("perf/b"), _case("perf/a")])])
    assert [case.id for case in pooled.cases] == ["perf/a", "perf/b"]


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="at least one"):
        pool([])
    with pytest.raises(ValueError, match="labels"):
        pool([_results([])], labels=("a", "b"))


def test_sample_groups_must_match_the_samples() -> None:
    with pytest.raises(ValueError, match="sample_groups"):
        _results([_case("perf/a", x=_metric([1.0, 2.0], [0]))])
