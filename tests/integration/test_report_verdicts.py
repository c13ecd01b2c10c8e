"""`accelkit report` end to end on runs with canaries and noise bands: its --json, and the page
in headless Chromium (the verdicts themselves: tests/unit/results/test_report_verdicts.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.browser import browse, console_lines, find_chromium
from tests.factories import MEMORY_BOUND_COPY, write_canary_runs
from tests.helpers import run_cli


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return write_canary_runs(tmp_path)


def test_cli_json_lists_the_comparisons(folder: Path) -> None:
    proc = run_cli("report", str(folder), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    compared = {(c["run"], c["baseline"]) for c in data["compared"]}
    assert compared == {
        ("cpu · 2-shifted", "cpu · 1-base"),
        ("cpu · 3-slower-build", "cpu · 1-base"),
    }
    verdicts = {(c["run"], m["case"]): m["verdict"] for c in data["compared"] for m in c["metrics"]}
    assert verdicts[("cpu · 2-shifted", MEMORY_BOUND_COPY)] == "environment-shifted"
    assert verdicts[("cpu · 3-slower-build", MEMORY_BOUND_COPY)] == "regressed"


@pytest.mark.slow
def test_canaries_and_bands_in_headless_chromium(folder: Path, tmp_path: Path) -> None:
    chromium = find_chromium()
    html = tmp_path / "report.html"
    proc = run_cli("report", str(folder), "--html", str(html))
    assert proc.returncode == 0, proc.stderr
    dom = browse(chromium, html, tmp_path / "profile", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert console_lines(dom.stderr) == []
    assert '<table id="canaries-table">' in dom.stdout
    assert 'class="num canary-moved"' in dom.stdout
    assert "verdict-environment-shifted" in dom.stdout and "verdict-regressed" in dom.stdout
