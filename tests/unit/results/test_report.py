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
from accelkit.results.model import Case, Results
from accelkit.results.report.discover import discover
from accelkit.results.report.html import render_html, render_html_with_plots
from accelkit.results.report.markdown import render_markdown
from accelkit.results.report.model import build_report, load_report
from accelkit.results.report.plots import render_plots
from tests.factories import STARTED, case, even_samples, metric, results

# --------------------------------------------------------------------------------------
# Synthetic results


def _results(
    device: str = "cpu",
    started: str = STARTED,
    gemm: float | None = 1e12,
    torch_version: str = "2.14.1",
    extra_cases: list[Case] | None = None,
) -> Results:
    """A run with a passing and a failing conformance case, a skipped perf case and (unless
    `gemm` is None) a GEMM at `gemm` FLOP/s against a table peak of 2e12."""
    cases = [
        case("conformance/ops/add/float32"),
        case("conformance/ops/mul/float32", "failed", message="mismatch | 3 of 10 elements"),
        case("perf/graphs/replay_overhead", "skipped", message="cuda_graph: no CUDA device"),
    ]
    if gemm is not None:
        latency = 2 * 256**3 / gemm
        flops = metric(
            gemm,
            samples=even_samples(gemm),
            unit="FLOP/s",
            higher_is_better=True,
            peak_fraction=gemm / 2e12,
            peak_source="table",
        )
        cases.append(
            case(
                "perf/gemm/bfloat16/256x256x256",
                metrics={"flops": flops, "latency": metric(samples=even_samples(latency))},
            )
        )
    cases += extra_cases or []
    return results(
        cases,
        device=device,
        started=started,
        finished=started,
        suites=["conformance", "perf"],
        env={
            "torch": {"version": torch_version},
            "backends": {device: {"devices": [{"name": f"{device.upper()} Model X"}]}},
        },
    )


def _write(path: Path, results: Results) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results.to_json_dict()), encoding="utf-8")
    return path


def _nightly(root: Path) -> Path:
    """results/<leg>/results.json plus the files a leg leaves beside it, and a dead leg."""
    _write(root / "cpu" / "results.json", _results("cpu"))
    (root / "cpu" / "junit.xml").write_text("<testsuites/>", encoding="utf-8")
    (root / "cpu" / "setup.json").write_text('{"image": "x"}', encoding="utf-8")
    (root / "cpu" / "build.json").write_text("[1, 2]", encoding="utf-8")
    _write(root / "cuda" / "results.json", _results("cuda", gemm=5e14))
    (root / "xpu").mkdir()
    (root / "xpu" / "setup.json").write_text('{"error": "no device"}', encoding="utf-8")
    return root


def _history(root: Path, nights: int = 4) -> Path:
    """history/<night>/<leg>/results.json; the cuda leg produced nothing on night 2."""
    for night in range(nights):
        day = f"2026-01-0{night + 1}"
        started = f"{day}T02:00:00+00:00"
        _write(
            root / day / "cpu" / "results.json",
            _results("cpu", started=started, gemm=1e12 * (1 + 0.01 * night)),
        )
        if night == 2:
            (root / day / "cuda").mkdir(parents=True)
            (root / day / "cuda" / "setup.json").write_text("{}", encoding="utf-8")
        else:
            _write(
                root / day / "cuda" / "results.json", _results("cuda", started=started, gemm=5e14)
            )
    return root


# --------------------------------------------------------------------------------------
# Discovery


def test_directory_scan_skips_other_json_and_shows_dead_legs(tmp_path: Path) -> None:
    runs, skipped = discover([_nightly(tmp_path / "results")])
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
    _write(tmp_path / "ok" / "results.json", _results())
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
    runs, _ = discover([_history(tmp_path / "history", nights=2)])
    labels = [r.label for r in runs]
    assert len(set(labels)) == len(labels)
    assert [r.group for r in runs if r.leg == "cpu"] == ["2026-01-01", "2026-01-02"]


# --------------------------------------------------------------------------------------
# The report as data


def test_metrics_line_up_by_case_with_gaps(tmp_path: Path) -> None:
    a = _write(tmp_path / "a.json", _results("cpu"))
    b = _write(tmp_path / "b.json", _results("cuda", gemm=None))
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
    report = load_report([_nightly(tmp_path / "results")])
    text = render_markdown(report)
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
    report = build_report(discover([_write(tmp_path / "r.json", _results(extra_cases=many))])[0])
    text = render_markdown(report, max_bytes=200_000)
    assert len(text.encode("utf-8")) <= 200_000
    assert "Truncated" in text


def test_html_is_self_contained_with_plots(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    report = load_report([_nightly(tmp_path / "results")])
    page, note = render_html_with_plots(report)
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
    report = load_report([_history(tmp_path / "history")])
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
    page = render_html(report, plots_note="Plots need matplotlib")
    assert "Plots need matplotlib" in page and page.rstrip().endswith("</html>")
