"""accelkit.results.report.verdicts: each run against its baseline, the canaries and the noise
bands, in the Markdown and the HTML (the command's --json and the page in headless Chromium:
tests/integration/test_report_verdicts.py).

Three CPU runs and one CUDA run: `base`; `shifted`, where the machine got 1.5x slower (the
host copy canary and the memory-bound case alike); `slower-build`, where only the case did;
and `cuda`, the first of its device (no baseline, no verdicts).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelkit.results.model import Results
from accelkit.results.report.html import render_html, render_html_with_plots
from accelkit.results.report.markdown import render_markdown
from accelkit.results.report.model import load_report
from accelkit.results.report.verdicts import baselines, canary_rows, compare_runs
from tests.factories import case, grouped_metric, results

CANARY = "perf/canary/host/copy"
CASE = "perf/copy/float32/262144"


def _run(started: str, canary_factor: float, case_factor: float, device: str = "cpu") -> Results:
    def timed(median: float, seed: int, **tags: str) -> object:
        return grouped_metric(median, seed=seed, between=0.005, within=0.01, **tags)

    return results(
        [
            case(CANARY, metrics={"latency": timed(1e-5 * canary_factor, 1, canary="memory")}),
            case(
                CASE,
                metrics={"latency": timed(2e-5 * case_factor, 2, bound="memory", scope="host")},
            ),
        ],
        device=device,
        started=started,
    )


def write_runs(folder: Path) -> Path:
    """The four runs of the module docstring, as results files in `folder`."""
    runs = {
        "1-base": _run("2026-01-01T00:00:00+00:00", 1.0, 1.0),
        "2-shifted": _run("2026-01-02T00:00:00+00:00", 1.5, 1.5),
        "3-slower-build": _run("2026-01-03T00:00:00+00:00", 1.0, 1.5),
        "4-cuda": _run("2026-01-04T00:00:00+00:00", 1.0, 1.0, device="cuda"),
    }
    for name, run in runs.items():
        (folder / f"{name}.json").write_text(json.dumps(run.to_json_dict()), encoding="utf-8")
    return folder


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return write_runs(tmp_path)


def _paths(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.json"))


def test_each_run_is_compared_with_the_first_run_of_its_device(folder: Path) -> None:
    report = load_report(_paths(folder))
    assert [r.leg for r in report.runs] == ["1-base", "2-shifted", "3-slower-build", "4-cuda"]
    assert baselines(report) == (None, 0, 0, None)
    compared = compare_runs(report)
    shifted, slower = compared[1], compared[2]
    assert compared[0] is None and compared[3] is None
    assert shifted is not None and slower is not None
    assert shifted.metric(CASE, "latency").verdict == "environment-shifted"  # type: ignore[union-attr]
    assert slower.metric(CASE, "latency").verdict == "regressed"  # type: ignore[union-attr]
    (row,) = canary_rows(report, compared)
    states = [s.moved if s is not None else None for s in row.states]
    assert states == [None, True, False, None]


def test_html_shows_canaries_and_the_band_beside_each_metric(folder: Path) -> None:
    page = render_html(load_report(_paths(folder)))
    assert '<table id="canaries-table">' in page
    canaries = page.split('<table id="canaries-table">', 1)[1].split("</table>", 1)[0]
    assert canaries.count("canary-moved") == 1 and canaries.count("canary-steady") == 1
    assert "moved: 1.5" in canaries and "IQR" in canaries
    perf = page.split('data-suite="perf">', 1)[1].split("</table>", 1)[0]
    shifted_row = next(line for line in perf.splitlines() if CASE in line)
    assert "verdict-environment-shifted" in shifted_row and "verdict-regressed" in shifted_row
    assert "environment-shifted; vs machine [" in shifted_row  # the band after the machine
    assert "(host/copy)" in shifted_row
    assert shifted_row.count('class="band">IQR ') == 4  # every run's own noise
    assert 'id="compared"' in page and "2-shifted against cpu · 1-base" in page


def test_markdown_has_the_same_information(folder: Path) -> None:
    text = render_markdown(load_report(_paths(folder)))
    assert "### Canaries: the machine" in text
    canary_line = next(line for line in text.splitlines() if line.startswith(f"| {CANARY}"))
    assert "**moved: 1.5" in canary_line and "steady: " in canary_line
    case_line = next(line for line in text.splitlines() if line.startswith(f"| {CASE}"))
    assert "environment-shifted; vs machine [" in case_line and "] regressed" in case_line
    assert "2-shifted against cpu · 1-base" in text


def test_given_comparisons_are_used_as_they_are(folder: Path) -> None:
    page, _ = render_html_with_plots(load_report(_paths(folder)), comparisons=[None] * 4)
    assert "canaries-table" in page and "canary-moved" not in page.split("</style>", 1)[1]
    assert 'class="num verdict-' not in page and 'id="compared"' not in page


def test_the_legend_names_what_differs_between_a_run_and_its_baseline(tmp_path: Path) -> None:
    base = _run("2026-01-01T00:00:00+00:00", 1.0, 1.0)
    new = _run("2026-01-02T00:00:00+00:00", 1.0, 1.0)
    new = new.model_copy(update={"env": {"torch": {"version": "2.15.0"}}})
    for name, run in (("a", base), ("b", new)):
        (tmp_path / f"{name}.json").write_text(json.dumps(run.to_json_dict()), encoding="utf-8")
    text = render_markdown(load_report(_paths(tmp_path)))
    assert "cpu · torch 2.15.0 · b against cpu · a (different torch)" in text
