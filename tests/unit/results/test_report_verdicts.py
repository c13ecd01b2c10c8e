"""accelkit.results.report.verdicts: each run against its baseline, the canaries and the noise
bands, in the Markdown and the HTML (the command's --json and the page in headless Chromium:
tests/integration/test_report_verdicts.py).

Three CPU runs and one CUDA run (tests/factories.py, `write_canary_runs`): `base`;
`shifted`, where the machine got 1.5x slower (the host copy canary and the memory-bound case
alike); `slower-build`, where only the case did; and `cuda`, the first of its device (no
baseline, no verdicts).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelkit.results.render.html import report_html, report_html_with_plots
from accelkit.results.render.markdown import report_markdown
from accelkit.results.report.model import load_report
from accelkit.results.report.verdicts import baselines, canary_rows, compare_runs
from tests.factories import (
    HOST_COPY_CANARY,
    MEMORY_BOUND_COPY,
    canary_run,
    write_canary_runs,
)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return write_canary_runs(tmp_path)


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
    assert shifted.metric(MEMORY_BOUND_COPY, "latency").verdict == "environment-shifted"  # type: ignore[union-attr]
    assert slower.metric(MEMORY_BOUND_COPY, "latency").verdict == "regressed"  # type: ignore[union-attr]
    (row,) = canary_rows(report, compared)
    states = [s.moved if s is not None else None for s in row.states]
    assert states == [None, True, False, None]


def test_html_shows_canaries_and_the_band_beside_each_metric(folder: Path) -> None:
    page = report_html(load_report(_paths(folder)))
    assert '<table id="canaries-table">' in page
    canaries = page.split('<table id="canaries-table">', 1)[1].split("</table>", 1)[0]
    assert canaries.count("canary-moved") == 1 and canaries.count("canary-steady") == 1
    assert "moved, environment-shifted: 1.5" in canaries and "IQR" in canaries
    perf = page.split('data-suite="perf">', 1)[1].split("</table>", 1)[0]
    shifted_row = next(line for line in perf.splitlines() if MEMORY_BOUND_COPY in line)
    assert "verdict-environment-shifted" in shifted_row and "verdict-regressed" in shifted_row
    assert "environment-shifted; vs machine [" in shifted_row  # the band after the machine
    assert "(host/copy)" in shifted_row
    assert shifted_row.count('class="band">IQR ') == 4  # every run's own noise
    assert 'id="compared"' in page and "2-shifted against cpu · 1-base" in page


def test_markdown_has_the_same_information(folder: Path) -> None:
    text = report_markdown(load_report(_paths(folder)))
    assert "### Canaries: the machine" in text
    canary_line = next(
        line for line in text.splitlines() if line.startswith(f"| {HOST_COPY_CANARY}")
    )
    assert "**moved, environment-shifted: 1.5" in canary_line and "unchanged: " in canary_line
    case_line = next(
        line for line in text.splitlines() if line.startswith(f"| {MEMORY_BOUND_COPY}")
    )
    assert "environment-shifted; vs machine [" in case_line and "] regressed" in case_line
    assert "2-shifted against cpu · 1-base" in text


def test_given_comparisons_are_used_as_they_are(folder: Path) -> None:
    page, _ = report_html_with_plots(load_report(_paths(folder)), comparisons=[None] * 4)
    assert "canaries-table" in page and "canary-moved" not in page.split("</style>", 1)[1]
    assert 'class="num verdict-' not in page and 'id="compared"' not in page


def test_the_legend_names_what_differs_between_a_run_and_its_baseline(tmp_path: Path) -> None:
    base = canary_run("2026-01-01T00:00:00+00:00", 1.0, 1.0)
    new = canary_run("2026-01-02T00:00:00+00:00", 1.0, 1.0)
    new = new.model_copy(update={"env": {"torch": {"version": "2.15.0"}}})
    for name, run in (("a", base), ("b", new)):
        (tmp_path / f"{name}.json").write_text(json.dumps(run.to_json_dict()), encoding="utf-8")
    text = report_markdown(load_report(_paths(tmp_path)))
    assert "cpu · torch 2.15.0 · b against cpu · a (different torch)" in text
