"""`accelkit report` end to end: the command's outputs and exit codes, and the HTML page checked
in a real headless Chromium (tests/browser.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from accelkit.results.render.html import report_html_with_plots
from accelkit.results.report.model import load_report
from tests.browser import browse, console_lines, find_chromium
from tests.factories import report_run, write_history, write_nightly, write_results
from tests.helpers import assert_one_line_error, run_cli


@pytest.mark.slow
def test_cli_writes_outputs_and_json(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    root = write_nightly(tmp_path / "results")
    html, md = tmp_path / "report.html", tmp_path / "summary.md"
    proc = run_cli("report", str(root), "--html", str(html), "--markdown", str(md), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert [r["leg"] for r in data["runs"]] == ["cpu", "cuda", "xpu"]
    assert data["runs"][2]["missing"] is True
    assert html.read_text(encoding="utf-8").count("<svg") >= 1
    assert md.stat().st_size < 1 << 20


@pytest.mark.slow
def test_cli_bad_input_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    other = tmp_path / "setup.json"
    other.write_text("{}", encoding="utf-8")
    html = tmp_path / "report.html"
    proc = run_cli("report", str(other), "--html", str(html))
    assert_one_line_error(proc, 2, "unknown schema")
    assert not html.exists()
    proc = run_cli("report", str(tmp_path / "nope"))
    assert_one_line_error(proc, 2, "no such file or directory")
    good = write_results(tmp_path / "r.json", report_run())
    proc = run_cli("report", str(good), "--markdown", str(tmp_path / "missing-dir" / "s.md"))
    assert_one_line_error(proc, 2, "does not exist")
    proc = run_cli("report")
    assert proc.returncode == 2


@pytest.mark.slow
def test_html_in_headless_chromium(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    chromium = find_chromium()
    report = load_report([write_history(tmp_path / "history")])
    page_text, _ = report_html_with_plots(report)
    page = tmp_path / "report.html"
    page.write_text(page_text, encoding="utf-8")

    # The console detector works: a page with an error is caught.
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>console.error('boom'); nope();</script></body></html>")
    assert console_lines(browse(chromium, bad, tmp_path / "p0", "--dump-dom").stderr)

    dom = browse(chromium, page, tmp_path / "p1", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert console_lines(dom.stderr) == []
    assert '<table id="runs-table">' in dom.stdout
    assert dom.stdout.count("<svg") >= 2
    assert 'data-kind="trend"' in dom.stdout and 'data-kind="bars"' in dom.stdout
    assert "produced no results" in dom.stdout

    shot = Path(os.environ.get("ACCELKIT_REPORT_SCREENSHOT", str(tmp_path / "report.png")))
    snap = browse(
        chromium,
        page,
        tmp_path / "p2",
        f"--screenshot={shot}",
        "--window-size=1400,2400",
        "--hide-scrollbars",
    )
    assert snap.returncode == 0, snap.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
