"""Output a person can read anywhere, and one truth in every view (issue 48).

Two CPU runs of the same build (tests/factories.py), the second on a machine whose host GEMM
got 2% slower (the GEMM canary's interval excludes 1 and reaches past 3%: it moved) while
its copy canary's interval contains 1 (it did not), with long perf case ids that differ
only at their end (float32 / float16), conformance cases skipped in both runs and one that
newly fails.

- piped (stdout not a terminal) at COLUMNS=80, `compare`, `report` and `matrix expand` print
  every case id and leg name whole, on one line;
- the terminal table, `compare --markdown`, `compare --json` and `report --html` say the same
  verdict word for every metric, and "moved" for a canary only where its interval
  excludes 1;
- the report lists the cases skipped in every run as one line with a count.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from accelkit.matrix import load_legs
from accelkit.results.model import Results
from tests.factories import case, grouped_metric, results, write_results

REPO = Path(__file__).resolve().parents[2]

#: Long enough that rich's 80-column fallback cut them (`perf/gemm/fl…`), and alike but
#: for their ends.
LONG_CASES = (
    "perf/gemm/float32/256x1024x512/transposed_b_with_bias",
    "perf/gemm/float16/256x1024x512/transposed_b_with_bias",
    "perf/memory/stream/triad/float32/4194304_elements_rotated",
)
SKIPPED = tuple(f"conformance/ops/fft/rfftn/complex128/{i}" for i in range(30))
NEWLY_FAILING = "conformance/linalg/lstsq/float64/gelsd_driver_with_rank_deficient_input"


def _run(seed: int, *, gemm_canary: float, started: str) -> Results:
    def timed(seconds: float, offset: int, **tags: str) -> dict[str, object]:
        return {
            "latency": grouped_metric(
                seconds, seed=seed + offset, between=0.01, within=0.015, **tags
            )
        }

    cases = [
        case("perf/canary/host/copy", metrics=timed(2e-5, 0, canary="memory", scope="host")),
        case(
            "perf/canary/host/gemm",
            metrics=timed(5e-5 * gemm_canary, 1, canary="compute", scope="host"),
        ),
        *(
            case(case_id, metrics=timed(1e-4, 10 + i, bound="compute", scope="host"))
            for i, case_id in enumerate(LONG_CASES)
        ),
        *(case(case_id, "skipped", message="no CUDA device") for case_id in SKIPPED),
        case(NEWLY_FAILING, "failed" if seed else "passed", message="mismatch: 3 of 10"),
    ]
    return results(cases, started=started)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("views")
    base = write_results(
        folder / "1-base.json", _run(0, gemm_canary=1.0, started="2026-01-01T00:00:00+00:00")
    )
    new = write_results(
        folder / "2-new.json", _run(100, gemm_canary=1.02, started="2026-01-02T00:00:00+00:00")
    )
    return base, new


def _piped(*args: str) -> subprocess.CompletedProcess[str]:
    """The real command with stdout a pipe (no terminal), told the width is 80."""
    env = {**os.environ, "COLUMNS": "80", "PYTHONIOENCODING": "utf-8"}
    env.pop("FORCE_COLOR", None)
    return subprocess.run(
        [sys.executable, "-m", "accelkit", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=REPO,
        check=False,
    )


def _assert_whole(out: str, names: list[str]) -> None:
    for name in names:
        assert any(name in line for line in out.splitlines()), (name, out[-3000:])
    assert "…" not in out, out[-3000:]


@pytest.mark.slow
def test_piped_compare_report_and_matrix_truncate_no_case_id(
    runs: tuple[Path, Path], tmp_path: Path
) -> None:
    base, new = runs
    compare = _piped("compare", str(base), str(new))
    assert compare.returncode == 1, compare.stderr  # the newly failing case
    _assert_whole(compare.stdout, [*LONG_CASES, NEWLY_FAILING, "perf/canary/host/gemm"])
    assert "\x1b[" not in compare.stdout  # no colour codes in a log

    report = _piped("report", str(base), str(new))
    assert report.returncode == 0, report.stderr
    _assert_whole(report.stdout, [base.name.removesuffix(".json"), new.name.removesuffix(".json")])

    nightly = REPO / "matrices" / "nightly.yaml"
    matrix = _piped("matrix", "expand", str(nightly))
    assert matrix.returncode == 0, matrix.stderr
    _assert_whole(matrix.stdout, [leg.name for leg in load_legs(str(nightly), [])])


def _terminal_words(stdout: str) -> dict[tuple[str, str], str]:
    """(case, metric) -> verdict from compare's table, as printed."""
    words: dict[tuple[str, str], str] = {}
    verdicts = "regressed|improved|environment-shifted|unchanged|noisy|missing"
    for line in stdout.splitlines():
        found = re.match(rf"^│ ({verdicts}) +│ (\S+) +│ (\S+) +│", line)
        if found:
            words[(found[2], found[3])] = found[1]
    return words


@pytest.mark.slow
def test_every_view_says_the_same_word_for_every_metric(
    runs: tuple[Path, Path], tmp_path: Path
) -> None:
    base, new = runs
    summary = tmp_path / "summary.md"
    as_json = _piped("compare", str(base), str(new), "--json")
    truth = {(m["case"], m["metric"]): m["verdict"] for m in json.loads(as_json.stdout)["metrics"]}
    gemm_canary = ("perf/canary/host/gemm", "latency")
    copy_canary = ("perf/canary/host/copy", "latency")
    # One rule for "moved": the GEMM canary's interval excludes 1, the copy canary's does not.
    assert truth[gemm_canary] == "environment-shifted"
    assert truth[copy_canary] == "unchanged"

    terminal = _piped("compare", str(base), str(new), "--markdown", str(summary))
    assert _terminal_words(terminal.stdout) == truth
    # Each verdict's reason beside it, and a summary line naming the canaries.
    gemm_line = next(ln for ln in terminal.stdout.splitlines() if "│ perf/canary/host/gemm" in ln)
    assert "canary: the machine moved" in gemm_line and "beyond ±3%" in gemm_line
    canaries = next(ln for ln in terminal.stdout.splitlines() if ln.startswith("canaries"))
    assert "perf/canary/host/gemm latency environment-shifted (moved)" in canaries
    assert "perf/canary/host/copy latency unchanged" in canaries

    text = summary.read_text(encoding="utf-8")
    listed = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) > 3 and (cells[0], cells[1]) in truth:
            listed[(cells[0], cells[1])] = cells[2]
    unchanged = {key for key, word in truth.items() if word == "unchanged"}
    assert listed == {key: word for key, word in truth.items() if key not in unchanged}
    assert f"{len(unchanged)} metrics unchanged" in text
    assert "perf/canary/host/gemm latency environment-shifted (moved)" in text

    page_path = tmp_path / "report.html"
    report = _piped("report", str(base), str(new), "--html", str(page_path))
    assert report.returncode == 0, report.stderr
    page = page_path.read_text(encoding="utf-8")
    rows = page.split('data-suite="perf">', 1)[1].split("</table>", 1)[0]
    for (case_id, name), word in truth.items():
        row = next(r for r in rows.split("<tr>") if r.startswith(f"<td>{case_id}</td><td>{name}"))
        assert f"verdict-{word}" in row and f"] {word}" in row, (case_id, name, word)
    canary_table = page.split('<table id="canaries-table">', 1)[1].split("</table>", 1)[0]
    assert canary_table.count("canary-moved") == 1
    assert "moved, environment-shifted: " in canary_table and "unchanged: " in canary_table


@pytest.mark.slow
def test_the_report_collapses_cases_skipped_in_every_run(
    runs: tuple[Path, Path], tmp_path: Path
) -> None:
    base, new = runs
    page_path, summary = tmp_path / "r.html", tmp_path / "r.md"
    proc = _piped(
        "report", str(base), str(new), "--html", str(page_path), "--markdown", str(summary)
    )
    assert proc.returncode == 0, proc.stderr
    line = f'{len(SKIPPED)} cases skipped in every run, not listed (most often: "no CUDA device"'
    for text in (page_path.read_text(encoding="utf-8"), summary.read_text(encoding="utf-8")):
        assert line in text.replace("&quot;", '"')
        assert SKIPPED[0] not in text
        assert NEWLY_FAILING in text  # what differs is still listed
