"""`accelkit test --explore-seeds N` as a user runs it: findings, not failures."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from accelkit.results.io import load_results
from tests.helpers import FAULTS, REPO, run_cli

pytestmark = pytest.mark.slow

KEYWORD = "opinfo and not opinfo_compiled and ([exp/float32] or [sin/float32])"


def test_an_exploration_lists_each_disagreement_with_its_reproducer(tmp_path: Path) -> None:
    """A wrong exp kernel (tests/fixtures/faults) at two seeds: exit 0, one finding per seed
    with its repro command and issue text, every seed's results file beside the findings."""
    env = {
        "PYTHONPATH": os.pathsep.join([str(FAULTS), str(REPO), os.environ.get("PYTHONPATH", "")]),
        "PYTEST_PLUGINS": "perturb_plugin",
        "ACCELKIT_FAULT_OP": "aten.exp.default",
    }
    findings_path = tmp_path / "explore.json"
    args = ["test", "--device", "cpu", "--suite", "conformance", "-k", KEYWORD]
    args += ["--explore-seeds", "2", "--seed", "4242", "--workers", "0"]
    proc = run_cli(*args, "--json", str(findings_path), env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads(findings_path.read_text())
    assert [s["seed"] for s in data["seeds"]] == [4242, 4243]
    assert [(f["case_id"], f["seed"]) for f in data["findings"]] == [
        ("conformance/opinfo/exp/float32", 4242),
        ("conformance/opinfo/exp/float32", 4243),
    ]
    for finding in data["findings"]:
        seed_file = Path(finding["results_file"])
        assert load_results(seed_file).run.seed == finding["seed"]
        assert finding["repro"] == (
            f"accelkit repro conformance/opinfo/exp/float32 --from {seed_file}"
        )
    text = findings_path.with_suffix(".md").read_text()
    assert text.count("disagrees at seed") == 2 and "Cause: (to be written" in text
    assert "2 finding(s) over 2 seed(s)" in proc.stdout
    assert "FINDING  conformance/opinfo/exp/float32 at seed 4242" in proc.stdout


def test_a_bad_exploration_is_one_line_and_exit_2(tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(REPO)}  # this checkout's accelkit, whatever is installed
    proc = run_cli("test", "--explore-seeds", "2", "--suite", "perf", cwd=tmp_path, env=env)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "accelkit: error: --explore-seeds: explores the conformance suite; use --suite conformance"
    ]
    assert list(tmp_path.iterdir()) == []  # nothing written


@pytest.mark.timeout(300)
def test_the_nightlys_explore_leg_rehearsed_end_to_end(tmp_path: Path) -> None:
    """matrices/nightly.yaml's explore leg as `accelkit matrix run` rehearses it (on this
    host, two ops, 2 seeds): its findings files, the summary's exploration row naming its
    findings.md, and a green verdict whatever it found."""
    from accelkit.matrix import load_legs

    (nightly,) = [
        leg for leg in load_legs(str(REPO / "matrices" / "nightly.yaml")) if leg.explore_seeds
    ]
    matrix = tmp_path / "explore.yaml"
    matrix.write_text(
        "schema: 1\n"
        "entries:\n"
        "  - backend: cpu\n"
        '    python: ["3.11"]\n'
        "    torch: {channel: nightly}\n"
        f"    suites: {json.dumps(list(nightly.suites))}\n"
        "    container: false\n"
        "    runner: [self-hosted, linux.4xlarge]\n"
        "    timeout_minutes: 60\n"
        f"    variant: {nightly.variant}\n"
        "    explore_seeds: 2\n"
    )
    out, baseline = tmp_path / "leg-results", tmp_path / "baseline"
    baseline.mkdir()  # no previous nightly: the explore leg has none either way
    args = ["matrix", "run", str(matrix), "-k", KEYWORD, "--test-arg=--workers=0"]
    args += ["--test-arg=--seed=4242", "--output", str(out), "--baseline", str(baseline)]
    proc = run_cli(*args, "--json", env={"PYTHONPATH": str(REPO)}, timeout=280)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads(proc.stdout)
    (leg,) = data["outcome"]["legs"]
    assert leg["name"] == "cpu-py3.11-explore" and leg["status"] == "passed"
    leg_dir = out / "cpu-py3.11-explore"
    findings = json.loads((leg_dir / "findings.json").read_text())
    assert [s["seed"] for s in findings["seeds"]] == [4242, 4243]
    assert (leg_dir / "findings.md").is_file()
    assert {p.name for p in leg_dir.glob("findings.seed-*.json")} == {
        "findings.seed-4242.json",
        "findings.seed-4243.json",
    }
    assert not (leg_dir / "results.json").exists()  # findings, not a leg's results
    verdict = data["verdict"]
    assert not verdict["red"] and verdict["legs"] == []
    (explored,) = verdict["explorations"]
    assert explored["state"] == "explored" and explored["seeds"] == [4242, 4243]
    assert len(explored["findings"]) == len(findings["findings"])
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert summary.startswith("## Nightly against the previous nightly: ✅ every leg green")
    assert "### Seed explorations" in summary
    assert f"`{leg_dir / 'findings.md'}`" in summary
