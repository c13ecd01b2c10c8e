"""`accelkit test` on a planted distributed hang: the case fails naming the rank and the
collective, from the Flight Recorder dumps of every rank."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from accelkit.results.io import load_results
from tests.helpers import REPO, run_cli

HANG_CASES = REPO / "tests" / "fixtures" / "hang_cases"


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_planted_hang_names_the_rank_and_the_collective(tmp_path: Path) -> None:
    results_path = tmp_path / "results.json"
    args = ["--device", "cpu", "--cases", str(HANG_CASES), "--suite", "conformance"]
    args += ["--json", str(results_path), "--workers", "2", "--timeout", "240"]
    proc = run_cli("test", *args, env={"ACCELKIT_PLANTED_HANG_DEADLINE_S": "10"}, timeout=600)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    cases = {c.id: c for c in load_results(results_path).cases}

    skipped = cases["conformance/planted_hang/one_rank_skips_an_all_reduce"]
    assert skipped.status == "failed"
    assert "ranks [0, 1] did not finish within 10 s" in skipped.message
    assert (
        "Flight Recorder: rank 1 never entered all_reduce #3 of process group 0 (default_pg), "
        "in which rank 0 waits"
    ) in skipped.message
    assert skipped.hang is not None and skipped.hang.analyzer == "torchfrtrace"
    stops = {s.rank: s for s in skipped.hang.ranks}
    assert (stops[1].state, stops[1].collective, stops[1].seq) == ("missing", "all_reduce", 3)
    assert (stops[0].state, stops[0].collective, stops[0].seq) == ("waiting", "all_reduce", 3)
    assert stops[0].process_group == "0 (default_pg)"
    assert "missing ranks: {1}" in skipped.hang.analyzer_output

    died = cases["conformance/planted_hang/one_rank_dies"]
    assert died.status == "failed"
    assert died.hang is not None
    assert "no dump from rank 1 (died with exit code 7)" in died.hang.summary
    # Rank 0 either still waits in all_reduce #3 when its dump is taken, or gloo has already
    # failed it there (the connection to the dead rank closed): both name that collective.
    assert re.search(
        r"rank 0 (waits in|was last in) all_reduce #3 of process group 0 \(default_pg\)",
        died.hang.summary,
    ), died.message
