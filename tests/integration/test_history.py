"""The results history (`accelkit matrix record`, `accelkit report --history`): twelve nights
built from a real results file with known shifts, recorded night by night the way the
nightly does (judge against the night before, record the night and its verdict), then drawn
as trends and checked in headless Chromium like the report.

tests/fixtures/results/cpu-real.json is a real `accelkit test --device cpu --suite all
--passes 2` run on a CPU, trimmed to nine cases (six conformance, three perf with 40 to
400 samples from two passes).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from accelkit.errors import BadInput
from accelkit.results.history_store import load_index, record_night
from accelkit.results.model import Results
from accelkit.results.nightly import judge_nightly
from accelkit.results.render.html import report_html_with_plots
from accelkit.results.render.markdown import history_markdown
from accelkit.results.render.sparkline import sparkline
from accelkit.results.report.trends import load_history, trend_rows
from tests.browser import browse, console_lines, find_chromium
from tests.helpers import REPO, assert_one_line_error, run_cli
from tests.helpers import SMALL_GEMM as GEMM

REAL = REPO / "tests" / "fixtures" / "results" / "cpu-real.json"
A, B = "cpu-py3.12", "cpu-py3.13"
NIGHTS = 12

GEMV = "perf/gemv/float32/1x1024x512"
FAILS_ON_NIGHT = 10
FLAKY_CASE = "conformance/control_flow/while_loop/compiled"


def _night_id(n: int) -> str:
    return f"2026-03-{n + 1:02d}-r{100 + n}"


def _shifted(n: int, leg: str) -> Results:
    """The real run as leg `leg` ran it on night `n`, with the shifts this history knows:
    A's float32 GEMM 25% slower from night 6 on, B's GEMV 30% faster from night 9 on, a
    conformance case of A failing on night 10 only; every night within ±0.3% otherwise."""
    data: dict[str, Any] = json.loads(REAL.read_text(encoding="utf-8"))
    day = f"2026-03-{n + 1:02d}T02:17:00+00:00"
    data["run"]["started"] = data["run"]["finished"] = day
    wobble = 1 + 0.003 * ((n % 3) - 1)
    for case in data["cases"]:
        factor = wobble
        if leg == A and case["id"] == GEMM and n >= 6:
            factor *= 1.25
        if leg == B and case["id"] == GEMV and n >= 9:
            factor /= 1.3
        for metric in case["metrics"].values():
            # Latencies scale with the factor, throughputs with its inverse.
            scale = 1 / factor if metric["higher_is_better"] else factor
            metric["value"] *= scale
            metric["samples"] = [s * scale for s in metric["samples"]]
        if leg == A and case["id"] == FLAKY_CASE and n == FAILS_ON_NIGHT:
            case["status"] = "failed"
            case["message"] = "mismatch: 3 of 64 elements"
    statuses = [c["status"] for c in data["cases"]]
    data["summary"] = {s: statuses.count(s) for s in data["summary"]}
    return Results.model_validate(data)


def _build_history(root: Path) -> Path:
    """Record NIGHTS nights into root/store; B produced nothing on night 3."""
    store = root / "store"
    previous: Path | None = None
    for n in range(NIGHTS):
        tonight = root / "artifacts" / _night_id(n)
        for leg in (A, B):
            (tonight / leg).mkdir(parents=True)
            if leg == B and n == 3:
                (tonight / leg / "setup.json").write_text("{}", encoding="utf-8")
                continue
            (tonight / leg / "results.json").write_text(
                json.dumps(_shifted(n, leg).to_json_dict()), encoding="utf-8"
            )
        verdict = judge_nightly([A, B], tonight, previous)
        record_night(store, tonight, verdict=verdict.to_json_dict(), run_number=100 + n)
        previous = tonight
    return store


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build_history(tmp_path_factory.mktemp("history"))


def test_the_index_keeps_every_night_and_leg(store: Path) -> None:
    nights = load_index(store)
    assert [n.night for n in nights] == [_night_id(n) for n in range(NIGHTS)]
    third = nights[3]
    assert third.legs[B].results is None and third.legs[B].state == "red"
    assert third.legs[A].results == f"nights/{_night_id(3)}/{A}/results.json"
    assert (store / third.legs[A].results).is_file()
    assert nights[0].legs[A].state == "no-baseline"  # the first night had nothing before it
    assert nights[6].legs[A].metric_verdicts[f"{GEMM} · latency"] == "regressed"


def test_verdict_changes_are_the_known_shifts(store: Path) -> None:
    history = load_history(store)
    nights = history.nights
    assert [(c.night, c.before, c.after) for c in history.state_changes(A)] == [
        (nights[1], "no-baseline", "green"),  # the first night had nothing to compare with
        (nights[6], "green", "red"),  # the GEMM got slower
        (nights[7], "red", "green"),  # and stayed there: unchanged against night 6
        (nights[10], "green", "red"),  # a case failed
        (nights[11], "red", "green"),
    ]
    assert [(c.night, c.after) for c in history.state_changes(B)] == [
        (nights[1], "green"),
        (nights[3], "red"),  # produced no results
        (nights[4], "no-baseline"),
        (nights[5], "green"),
    ]
    gemm = [(c.night, c.before, c.after) for c in history.metric_changes(A, f"{GEMM} · latency")]
    assert gemm == [(nights[6], "unchanged", "regressed"), (nights[7], "regressed", "unchanged")]
    gemv = [c.after for c in history.metric_changes(B, f"{GEMV} · bandwidth")]
    assert gemv == ["improved", "unchanged"]


def test_trends_and_sparklines(store: Path) -> None:
    history = load_history(store)
    rows = {(r.leg, r.case, r.metric): r for r in trend_rows(history)}
    gemm = rows[(A, GEMM, "latency")]
    line = sparkline(gemm.values)
    assert set(line[:6]) <= set("▁▂") and set(line[6:]) == {"█"}, line
    assert gemm.change == pytest.approx(0.25, abs=0.01)
    gemv = rows[(B, GEMV, "bandwidth")]
    assert gemv.values[3] is None and sparkline(gemv.values)[3] == "·"  # a gap, not a value
    assert gemv.change == pytest.approx(0.3, abs=0.02)
    text = history_markdown(history)
    assert f"## accelkit history: {NIGHTS} nights" in text
    assert f"`{line}`" in text
    assert f"{history.nights[6]}: unchanged → regressed" in text
    assert "❌◆" in text and "✅◆" in text  # verdict changes are marked per leg and night
    last10 = load_history(store, nights=10)
    assert last10.nights == history.nights[2:]
    with pytest.raises(BadInput, match="at least 2 nights"):
        load_history(store, nights=1)


def test_a_night_is_recorded_once(store: Path, tmp_path: Path) -> None:
    again = tmp_path / "again" / A
    again.mkdir(parents=True)
    (again / "results.json").write_text(
        json.dumps(_shifted(11, A).to_json_dict()), encoding="utf-8"
    )
    before = (store / "index.json").read_text()
    with pytest.raises(BadInput, match="already in"):
        record_night(store, again.parent, run_number=111)
    assert (store / "index.json").read_text() == before
    with pytest.raises(BadInput, match="not a results history"):
        load_history(tmp_path)


@pytest.mark.slow
def test_history_html_in_headless_chromium(store: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    chromium = find_chromium()
    history = load_history(store)
    page_text, note = report_html_with_plots(history.report, history)
    assert note is None
    page = tmp_path / "history.html"
    page.write_text(page_text, encoding="utf-8")
    dom = browse(chromium, page, tmp_path / "p1", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert console_lines(dom.stderr) == []
    assert '<table id="verdicts">' in dom.stdout and '<table id="trends-table">' in dom.stdout
    # Five changes of A, four of B: each an outlined cell.
    assert dom.stdout.count('changed"') == 9
    assert dom.stdout.count('class="spark"') == len(trend_rows(history))
    assert 'data-kind="trend"' in dom.stdout
    assert f"{A}: regressed" in dom.stdout  # the trend plot marks the night it changed
    shot = tmp_path / "history.png"
    window = ("--window-size=1400,2400", "--hide-scrollbars")
    snap = browse(chromium, page, tmp_path / "p2", f"--screenshot={shot}", *window)
    assert snap.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_report_history_cli(store: Path, tmp_path: Path) -> None:
    html, md = tmp_path / "h.html", tmp_path / "h.md"
    outputs = ("--html", str(html), "--markdown", str(md), "--json")
    proc = run_cli("report", "--history", str(store), "--nights", "10", *outputs)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert len({run["group"] for run in data["runs"]}) == 10
    assert "Trends over 10 nights" in md.read_text(encoding="utf-8")
    assert html.read_text(encoding="utf-8").count("<svg") > 10
    assert_one_line_error(run_cli("report", "--history", str(tmp_path)), 2, "not a results history")
    assert_one_line_error(
        run_cli("report", str(store), "--history", str(store)), 2, "one or the other"
    )


@pytest.mark.slow
def test_matrix_record_cli(tmp_path: Path) -> None:
    tonight = tmp_path / "results"
    (tonight / A).mkdir(parents=True)
    (tonight / A / "results.json").write_text(json.dumps(_shifted(0, A).to_json_dict()))
    verdict = tmp_path / "verdict.json"
    verdict.write_text(json.dumps(judge_nightly([A, B], tonight, None).to_json_dict()))
    store = tmp_path / "store"
    args = ["matrix", "record", str(store), "--results", str(tonight), "--verdict", str(verdict)]
    proc = run_cli(*args, "--run-id", "8123", "--run-number", "100", "--sha", "0a1b2c")
    assert proc.returncode == 0, proc.stderr
    (night,) = load_index(store)
    assert (night.run_id, night.sha) == (8123, "0a1b2c")
    assert night.legs[B].results is None and night.legs[B].state == "red"  # named, not lost
    assert_one_line_error(run_cli(*args, "--run-number", "100"), 2, "recorded once")
    assert_one_line_error(
        run_cli(*args[:3], "--results", str(tmp_path / "x")), 2, "not a directory"
    )
