"""accelkit.results.report: discovery, alignment, Markdown, HTML and plots.

The command end to end, and the page in a real headless Chromium:
tests/integration/test_report.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from accelkit.errors import BadInput
from accelkit.results.render.html import report_html, report_html_with_plots
from accelkit.results.render.markdown import report_markdown
from accelkit.results.render.plots import render_plots
from accelkit.results.report.discover import discover
from accelkit.results.report.model import build_report, load_report
from tests.factories import (
    case,
    report_run,
    write_history,
    write_nightly,
    write_results,
)

# --------------------------------------------------------------------------------------
# Discovery


def test_directory_scan_skips_other_json_and_shows_dead_legs(tmp_path: Path) -> None:
    runs, skipped = discover([write_nightly(tmp_path / "results")])
    by_leg = {r.leg: r for r in runs}
    assert set(by_leg) == {"cpu", "cuda", "xpu"}
    assert by_leg["xpu"].missing and not by_leg["cpu"].missing
    assert by_leg["cpu"].label == "cpu · torch 2.14.1 · cpu"
    # Every backend's device name comes from the fingerprint, the CPU's as any other.
    assert (by_leg["cpu"].device_name, by_leg["cuda"].device_name) == (
        "CPU Model X",
        "CUDA Model X",
    )
    # cpu/setup.json, cpu/build.json, xpu/setup.json (junit.xml is not even *.json)
    assert len(skipped) == 3
    assert all("not an accelkit results file" in s for s in skipped)


def test_explicit_file_that_is_not_results_is_bad_input(tmp_path: Path) -> None:
    other = tmp_path / "setup.json"
    other.write_text('{"image": "x"}', encoding="utf-8")
    with pytest.raises(BadInput, match="unknown schema"):
        discover([other])
    broken = tmp_path / "broken.json"
    broken.write_text("{not json", encoding="utf-8")
    with pytest.raises(BadInput, match="not valid JSON"):
        discover([broken])
    with pytest.raises(BadInput, match="no such file"):
        discover([tmp_path / "absent.json"])


def test_invalid_results_file_inside_a_directory_is_bad_input(tmp_path: Path) -> None:
    write_results(tmp_path / "ok" / "results.json", report_run())
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "results.json").write_text(
        json.dumps({"schema": "accelkit.results/1", "run": {"device": "cpu"}}), encoding="utf-8"
    )
    with pytest.raises(BadInput, match="invalid results file"):
        discover([tmp_path])


def test_directory_without_results_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / "setup.json").write_text("{}", encoding="utf-8")
    with pytest.raises(BadInput, match="no accelkit results files"):
        discover([tmp_path])


def test_same_leg_twice_gets_distinct_labels(tmp_path: Path) -> None:
    runs, _ = discover([write_history(tmp_path / "history", nights=2)])
    labels = [r.label for r in runs]
    assert len(set(labels)) == len(labels)
    assert [r.group for r in runs if r.leg == "cpu"] == ["2026-01-01", "2026-01-02"]


# --------------------------------------------------------------------------------------
# The report as data


def test_metrics_line_up_by_case_with_gaps(tmp_path: Path) -> None:
    a = write_results(tmp_path / "a.json", report_run("cpu"))
    b = write_results(tmp_path / "b.json", report_run("cuda", gemm=None))
    report = load_report([a, b])
    flops = next(m for m in report.metrics if m.metric == "flops")
    assert flops.unit == "FLOP/s" and flops.higher_is_better
    assert flops.cells[0] is not None and flops.cells[1] is None
    assert flops.cells[0].peak_fraction == pytest.approx(0.5)
    assert flops.cells[0].samples == 10 and flops.cells[0].p25 is not None
    assert report.counts[0]["conformance"] == {
        "passed": 1,
        "failed": 1,
        "skipped": 0,
        "error": 0,
        "crashed": 0,
        "timeout": 0,
    }
    data = report.to_json_dict()
    assert data["metrics"][0]["values"][1] is None or data["metrics"][1]["values"][1] is None
    json.dumps(data)  # serialisable


def test_markdown_summary(tmp_path: Path) -> None:
    report = load_report([write_nightly(tmp_path / "results")])
    text = report_markdown(report)
    assert "| run | device | torch | started | conformance | perf |" in text
    assert "**missing**" in text  # the dead xpu leg
    assert "1 passed, 1 failed" in text
    assert "50.0% of peak" in text and "25000.0% of peak" in text  # 1e12 and 5e14 of 2e12
    assert "mismatch \\| 3 of 10" in text  # pipes escaped inside cells
    assert "conformance/ops/add/float32" not in text  # passing everywhere: only counted


def test_markdown_is_capped(tmp_path: Path) -> None:
    many = [
        case(f"conformance/ops/op{i}/float32", "failed", message="x" * 150) for i in range(20000)
    ]
    report = build_report(
        discover([write_results(tmp_path / "r.json", report_run(extra_cases=many))])[0]
    )
    text = report_markdown(report, max_bytes=200_000)
    assert len(text.encode("utf-8")) <= 200_000
    assert "Truncated" in text


def test_html_is_self_contained_with_plots(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    report = load_report([write_nightly(tmp_path / "results")])
    page, note = report_html_with_plots(report)
    assert note is None
    assert page.count("<svg") >= 1
    assert '<table id="runs-table">' in page and 'class="metrics"' in page
    # Offline: nothing fetched (the SVG namespace URI is a name, not a request).
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "<script" not in page
    bars = [p for p in render_plots(report) if p.kind == "bars"]
    assert bars and all("missing" in p.svg for p in bars)  # the dead xpu leg has a row


def test_history_draws_trends_with_missing_points(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    report = load_report([write_history(tmp_path / "history")])
    plots = render_plots(report)
    kinds = {p.kind for p in plots}
    assert kinds == {"bars", "trend"}
    trend = next(p for p in plots if p.kind == "trend" and "flops" in p.title)
    assert "cuda: missing" in trend.svg  # the dead night is marked, not interpolated
    # Bars show the newest run per leg only, not every night.
    bars = next(p for p in plots if p.kind == "bars" and "flops" in p.title)
    assert bars.svg.count("2026-01-01") == 0


def test_html_without_plots_renders() -> None:
    report = build_report([], [])
    page = report_html(report, plots_note="Plots need matplotlib")
    assert "Plots need matplotlib" in page and page.rstrip().endswith("</html>")
