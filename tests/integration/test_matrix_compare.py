"""`accelkit matrix compare` end to end: a nightly's CPU legs against the previous nightly,
its exit codes, Markdown summary and --json (the judgement itself:
tests/unit/results/test_nightly.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelkit.results.findings import FINDINGS_SCHEMA
from tests.factories import LAST_NIGHT, TONIGHT, night_run, write_leg
from tests.helpers import REPO, assert_one_line_error, run_cli

NIGHTLY = str(REPO / "matrices" / "nightly.yaml")


def _cpu_nights(tmp_path: Path, *, tonight_gemm: float) -> tuple[Path, Path]:
    base, new = tmp_path / "baseline", tmp_path / "results"
    for python in ("3.10", "3.11", "3.12", "3.13"):
        write_leg(base, f"cpu-py{python}", night_run(LAST_NIGHT, seed=1))
        write_leg(new, f"cpu-py{python}", night_run(TONIGHT, gemm=tonight_gemm, seed=2))
    # The explore leg's findings, downloaded apart from the results (one finding: not red).
    findings = tmp_path / "findings" / "cpu-py3.12-explore" / "findings.json"
    findings.parent.mkdir(parents=True)
    found = [{"case_id": "conformance/opinfo/exp/float32", "seed": 4242}]
    data = {"schema": FINDINGS_SCHEMA, "seeds": [{"seed": 4242}], "findings": found}
    findings.write_text(json.dumps(data))
    return base, new


@pytest.mark.slow
def test_cli_exit_codes_and_outputs(tmp_path: Path) -> None:
    base, new = _cpu_nights(tmp_path, tonight_gemm=1e-3)
    summary = tmp_path / "summary.md"
    run_file = tmp_path / "run.json"
    run_file.write_text(json.dumps({"databaseId": 5, "number": 3, "createdAt": LAST_NIGHT}))
    args = ["matrix", "compare", NIGHTLY, "--filter", "backend=cpu", "--results", str(new)]
    extra = ["--baseline", str(base), "--baseline-run", str(run_file)]
    extra += ["--findings", str(tmp_path / "findings")]
    ok = run_cli(*args, *extra, "--markdown", str(summary), "--json")
    assert ok.returncode == 0, ok.stderr
    assert [leg["state"] for leg in json.loads(ok.stdout)["legs"]] == ["green"] * 4
    (explored,) = json.loads(ok.stdout)["explorations"]
    assert (explored["name"], explored["state"]) == ("cpu-py3.12-explore", "explored")
    assert "every leg green" in summary.read_text() and "run #3" in summary.read_text()
    assert "### Seed explorations: 1 finding(s), not failures" in summary.read_text()
    # Without its findings (the exploration could not run), the explore leg is red.
    lost = run_cli(*args, *extra[:-2], "--findings", str(tmp_path / "none"), "--json")
    assert lost.returncode == 1
    (explored,) = json.loads(lost.stdout)["explorations"]
    assert explored["state"] == "red" and "produced no findings" in explored["reasons"][0]
    slow = tmp_path / "slow"
    base, new = _cpu_nights(slow, tonight_gemm=1.3e-3)
    red = run_cli(*args[:-1], str(new), "--baseline", str(base))
    assert red.returncode == 1 and "regressed" in red.stdout
    # An empty baseline folder (the download found nothing): every leg named, exit 0.
    empty = tmp_path / "empty"
    empty.mkdir()
    findings = ["--findings", str(slow / "findings")]
    named = run_cli(*args[:-1], str(new), "--baseline", str(empty), *findings, "--json")
    assert named.returncode == 0
    assert {leg["state"] for leg in json.loads(named.stdout)["legs"]} == {"no-baseline"}
    assert_one_line_error(run_cli(*args[:-1], str(tmp_path / "nope")), 2, "not a directory")
    bad_run = tmp_path / "bad.json"
    bad_run.write_text("[1]")
    assert_one_line_error(
        run_cli(*args, "--baseline-run", str(bad_run)), 2, "expected one run object"
    )
