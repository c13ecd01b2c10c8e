"""accelkit.results.compare: verdicts, status changes, rendering (the command end to end:
tests/integration/test_compare.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from accelkit.results.compare import (
    Comparison,
    MetricComparison,
    StatusChange,
    compare,
)
from accelkit.results.render.markdown import comparison_markdown
from accelkit.results.render.step_summary import MARKDOWN_LIMIT_BYTES
from tests.factories import (
    STATUS_BASE,
    STATUS_NEW,
    case,
    grouped_metric,
    grouped_run,
    perf_run,
    results,
    sampled_metric,
)

# ---------------------------------------------------------------------------------------
# compare()
# ---------------------------------------------------------------------------------------


def test_same_run_is_unchanged_and_does_not_fail() -> None:
    comparison = compare(perf_run(), perf_run(seed=10))
    assert [m.verdict for m in comparison.metrics] == ["unchanged"] * 3
    assert comparison.cases == ()
    assert not comparison.fails
    summary = comparison.summary()
    assert summary["unchanged"] == 3 and summary["regressed"] == 0 and summary["ok"] is True


def test_planted_slowdown_regresses_only_that_kernel() -> None:
    comparison = compare(perf_run(1e-3), perf_run(1.15e-3, seed=10))
    by_key = {(m.case, m.metric): m for m in comparison.metrics}
    latency = by_key[("perf/mm[float32-256]", "latency")]
    assert latency.verdict == "regressed"
    assert latency.ratio == pytest.approx(1.15, rel=0.03)
    assert latency.ci is not None and latency.ci[0] > 1.03
    assert latency.p_value is not None and latency.p_value < 0.01
    assert latency.unit == "s" and latency.base_samples == 15 == latency.new_samples
    assert by_key[("perf/mm[float32-256]", "throughput")].verdict == "regressed"
    assert by_key[("perf/add[1M]", "latency")].verdict == "unchanged"
    assert comparison.fails


def test_speedup_is_an_improvement_and_does_not_fail() -> None:
    comparison = compare(perf_run(1e-3), perf_run(0.8e-3, seed=10))
    verdicts = {(m.case, m.metric): m.verdict for m in comparison.metrics}
    assert verdicts[("perf/mm[float32-256]", "latency")] == "improved"
    assert verdicts[("perf/mm[float32-256]", "throughput")] == "improved"
    assert not comparison.fails


def test_json_dict_shape() -> None:
    comparison = compare(perf_run(1e-3), perf_run(1.15e-3, seed=10))
    data = comparison.to_json_dict()
    assert list(data) == ["environment", "metrics", "cases", "summary"]
    first = data["metrics"][0]
    for key in (
        "case",
        "metric",
        "verdict",
        "ratio",
        "ci",
        "p_value",
        "base_median",
        "new_median",
        "unit",
        "higher_is_better",
        "base_samples",
        "new_samples",
    ):
        assert key in first
    assert isinstance(first["ci"], list) and len(first["ci"]) == 2
    # Strict JSON: no NaN or Infinity anywhere.
    json.dumps(data, allow_nan=False)


def test_missing_metrics_are_listed_and_never_counted_as_changes() -> None:
    base = results(
        [
            case(
                "perf/a",
                metrics={"latency": sampled_metric(1e-3), "old": sampled_metric(1.0, unit="x")},
            ),
            case("perf/b", metrics={"bw": sampled_metric(1e9, unit="B/s", higher_is_better=True)}),
        ]
    )
    new = results(
        [
            case(
                "perf/a",
                metrics={"latency": sampled_metric(1e-3, seed=4), "fresh": sampled_metric(2e-3)},
            ),
            case("perf/b", metrics={"bw": sampled_metric(1e9, unit="GB/s", higher_is_better=True)}),
        ]
    )
    comparison = compare(base, new)
    missing = {(m.case, m.metric): m for m in comparison.metrics_with("missing")}
    assert set(missing) == {("perf/a", "old"), ("perf/a", "fresh"), ("perf/b", "bw")}
    assert missing[("perf/a", "old")].missing_in == "new"
    assert missing[("perf/a", "fresh")].missing_in == "base"
    assert "unit changed" in missing[("perf/b", "bw")].reason
    assert all(m.ratio is None and m.ci is None for m in missing.values())
    summary = comparison.summary()
    assert summary["missing"] == 3 and summary["unchanged"] == 1
    assert summary["regressed"] == summary["improved"] == 0
    assert summary["metrics"] == 4
    assert not comparison.fails


def test_metrics_of_a_case_missing_in_new_are_missing_too() -> None:
    comparison = compare(perf_run(), results([case("conformance/abs[float32]")]))
    assert {m.verdict for m in comparison.metrics} == {"missing"}
    kinds = {c.case: c.kind for c in comparison.cases}
    assert kinds == {"perf/mm[float32-256]": "missing_in_new", "perf/add[1M]": "missing_in_new"}
    assert not comparison.fails


def test_status_changes() -> None:
    comparison = compare(results(STATUS_BASE), results(STATUS_NEW))
    changes = {c.case: c for c in comparison.cases}
    assert {k: c.kind for k, c in changes.items()} == {
        "c/pass-fail": "newly_failing",
        "c/pass-crash": "newly_failing",
        "c/skip-error": "newly_failing",
        "c/fail-pass": "newly_passing",
        "c/pass-skip": "newly_skipped",
        "c/fail-timeout": "still_failing",
        "c/gone": "missing_in_new",
        "c/added": "new_case",
    }
    skipped = changes["c/pass-skip"]
    assert (skipped.base_status, skipped.new_status) == ("passed", "skipped")
    assert skipped.message == "sm_107 target absent"
    assert changes["c/pass-fail"].message == "max abs diff 0.5 > 1e-5"
    assert comparison.fails
    summary = comparison.summary()
    assert summary["newly_failing"] == 3 and summary["newly_passing"] == 1
    assert summary["newly_skipped"] == 1 and summary["missing_in_new"] == 1


def test_newly_passing_alone_does_not_fail() -> None:
    comparison = compare(
        results([case("c/x", "failed", suite="conformance")]),
        results([case("c/x", suite="conformance")]),
    )
    assert [c.kind for c in comparison.cases] == ["newly_passing"]
    assert not comparison.fails


def test_threshold_is_validated_and_used() -> None:
    with pytest.raises(ValueError):
        compare(perf_run(), perf_run(), threshold=0.0)
    base, new = perf_run(1e-3), perf_run(1.15e-3, seed=10)
    lenient = compare(base, new, threshold=0.5)
    assert "regressed" not in {m.verdict for m in lenient.metrics}


# ---------------------------------------------------------------------------------------
# Samples in groups (measurement passes)
# ---------------------------------------------------------------------------------------


def test_sample_groups_give_group_counts_in_the_json() -> None:
    comparison = compare(grouped_run(seed=1), grouped_run(seed=2))
    by_case = {m.case: m for m in comparison.metrics}
    grouped = by_case["perf/mm[float32-256]"]
    assert (grouped.base_groups, grouped.new_groups) == (5, 5)
    assert "by group: 5 vs 5 groups" in grouped.reason
    assert grouped.base_samples == 100 == grouped.new_samples
    single = by_case["perf/add[1M]"]  # no sample_groups: one group, samples independent
    assert single.base_groups is None and single.new_groups is None
    assert "by sample" in single.reason
    data = comparison.to_json_dict()
    rows = {m["case"]: m for m in data["metrics"]}
    assert rows["perf/mm[float32-256]"]["base_groups"] == 5
    assert rows["perf/mm[float32-256]"]["new_groups"] == 5
    assert rows["perf/add[1M]"]["base_groups"] is None
    assert rows["perf/add[1M]"]["new_groups"] is None
    # The existing keys are all still there, the JSON strict.
    for key in ("case", "metric", "verdict", "ratio", "ci", "p_value", "base_samples"):
        assert key in rows["perf/mm[float32-256]"]
    json.dumps(data, allow_nan=False)


def test_grouped_planted_slowdown_regresses_and_reports_the_pooled_ratio() -> None:
    base, new = grouped_run(1e-3, seed=1), grouped_run(1.15e-3, seed=2)
    latency = compare(base, new).metrics[0]
    assert latency.verdict == "regressed" and latency.base_groups == 5
    base_samples = base.cases[0].metrics["latency"].samples
    new_samples = new.cases[0].metrics["latency"].samples
    assert latency.ratio == pytest.approx(np.median(new_samples) / np.median(base_samples))
    assert latency.p_value == pytest.approx(2 / 252)  # exact: all 5 new passes slower


def test_too_few_passes_on_one_side_compare_samples_as_independent() -> None:
    comparison = compare(grouped_run(seed=1), grouped_run(seed=2, passes=2))
    latency = comparison.metrics[0]
    assert latency.base_groups is None and latency.new_groups is None
    assert "by sample: 5 vs 2 groups" in latency.reason


def test_merged_group_ids_need_not_start_at_zero() -> None:
    base = results([case("perf/x", metrics={"latency": grouped_metric(1e-3, seed=1)})])
    offset = results(
        [case("perf/x", metrics={"latency": grouped_metric(1e-3, seed=1, first_group=10)})]
    )
    new = results([case("perf/x", metrics={"latency": grouped_metric(1e-3, seed=3)})])
    assert compare(base, new).metrics[0] == compare(offset, new).metrics[0]


# ---------------------------------------------------------------------------------------
# Markdown
# ---------------------------------------------------------------------------------------


def test_markdown_orders_regressions_then_failures_then_improvements() -> None:
    base = results(
        [
            case("perf/slow", metrics={"latency": sampled_metric(1e-3)}),
            case("perf/fast", metrics={"latency": sampled_metric(1e-3, seed=3)}),
            case("c/broken|pipe", suite="conformance"),
        ]
    )
    new = results(
        [
            case("perf/slow", metrics={"latency": sampled_metric(1.2e-3, seed=5)}),
            case("perf/fast", metrics={"latency": sampled_metric(0.7e-3, seed=6)}),
            case("c/broken|pipe", "failed", suite="conformance", message="bad\nvalue"),
        ]
    )
    text = comparison_markdown(compare(base, new), base_label="base.json", new_label="new.json")
    regressions = text.index("### Regressions")
    failing = text.index("### Newly failing")
    improvements = text.index("### Improvements")
    assert regressions < failing < improvements
    assert text.index("perf/slow") < failing < text.index("perf/fast")
    assert "c/broken\\|pipe" in text and "bad value" in text  # escaped, one line
    assert " µs | " in text  # values carry their unit with an SI prefix
    assert text.startswith("## accelkit compare: ❌")


def _big_comparison(rows: int) -> Comparison:
    metrics = tuple(
        MetricComparison(
            case=f"perf/some_rather_long_case_name_{i:06d}[float32-4096x4096-contiguous]",
            metric="latency",
            verdict="regressed" if i % 2 else "improved",
            reason="",
            unit="s",
            higher_is_better=False,
            base_median=1e-3,
            new_median=1.2e-3,
            ratio=1.2,
            ci=(1.1, 1.3),
            p_value=1e-4,
            base_samples=10,
            new_samples=10,
        )
        for i in range(rows)
    )
    changes = tuple(
        StatusChange(
            case=f"c/{i}",
            suite="conformance",
            kind="newly_failing",
            base_status="passed",
            new_status="failed",
            message="x" * 500,
        )
        for i in range(rows // 10)
    )
    return Comparison(metrics=metrics, cases=changes, threshold=0.03, confidence=0.9)


def test_markdown_is_capped_under_one_mebibyte_with_a_note() -> None:
    text = comparison_markdown(_big_comparison(20_000))
    size = len(text.encode("utf-8"))
    assert size < MARKDOWN_LIMIT_BYTES
    assert size > MARKDOWN_LIMIT_BYTES // 2  # it used the room it had
    assert "Truncated:" in text.splitlines()[-1]
    assert text.index("### Regressions") < text.index("Truncated:")


def test_small_markdown_is_not_truncated() -> None:
    text = comparison_markdown(compare(perf_run(), perf_run(seed=10)))
    assert "Truncated" not in text
    assert "3 metrics unchanged" in text
    assert comparison_markdown(_big_comparison(50), max_bytes=3000).count("\n") < 60


# --- environments and lost coverage (issue 11) ---------------------------------------------


def test_cases_that_passed_and_are_now_skipped_are_listed_first() -> None:
    comparison = compare(results(STATUS_BASE), results(STATUS_NEW))
    lost = comparison.skipped_after_passing
    assert [c.case for c in lost] == ["c/pass-skip"]
    assert comparison.summary()["skipped_after_passing"] == 1
    text = comparison_markdown(comparison)
    section = text.index("### Passed before, skipped now")
    assert section < text.index("### Other status changes")
    assert "| c/pass-skip | passed | skipped | sm_107 target absent |" in text
    # A failure that is now skipped is a skip, not lost coverage.
    other = compare(
        results([case("c/y", "failed", suite="conformance")]),
        results([case("c/y", "skipped", suite="conformance")]),
    )
    assert other.skipped_after_passing == () and other.changes_of("newly_skipped")
