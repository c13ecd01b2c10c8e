"""A nightly against the previous nightly (accelkit.results.nightly): which legs are red, which
are only named, and the summary the workflow and the rehearsal write (`accelkit matrix
compare` end to end: tests/integration/test_matrix_compare.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelkit.results.findings import FINDINGS_SCHEMA
from accelkit.results.nightly import judge_nightly
from accelkit.results.render.markdown import nightly_markdown
from tests.factories import LAST_NIGHT, TONIGHT, night_run, write_leg

ADD = "conformance/ops/add/float32"
MUL = "conformance/ops/mul/float32"


def _nights(tmp_path: Path) -> tuple[Path, Path]:
    base, new = tmp_path / "baseline", tmp_path / "results"
    # Same build both nights.
    write_leg(base, "same", night_run(LAST_NIGHT, seed=1))
    write_leg(new, "same", night_run(TONIGHT, seed=2))
    # The GEMM got 25% slower.
    write_leg(base, "slower", night_run(LAST_NIGHT, seed=1))
    write_leg(new, "slower", night_run(TONIGHT, gemm=1.25e-3, seed=2))
    # add fails tonight (new), mul failed last night too (not listed: still red).
    write_leg(base, "failing", night_run(LAST_NIGHT, statuses={MUL: "failed"}, seed=1))
    write_leg(new, "failing", night_run(TONIGHT, statuses={ADD: "failed", MUL: "failed"}, seed=2))
    # mul is listed as a known failure: recorded skipped with known_failure, green.
    write_leg(base, "known", night_run(LAST_NIGHT, statuses={MUL: "skipped"}, known=(MUL,), seed=1))
    write_leg(new, "known", night_run(TONIGHT, statuses={MUL: "skipped"}, known=(MUL,), seed=2))
    # add ran last night and is skipped tonight, not as a known failure.
    write_leg(base, "skipping", night_run(LAST_NIGHT, seed=1))
    write_leg(new, "skipping", night_run(TONIGHT, statuses={ADD: "skipped"}, seed=2))
    # A new leg: nothing last night.
    write_leg(new, "new-leg", night_run(TONIGHT, seed=2))
    # The last results of this leg are a week old.
    write_leg(base, "stale", night_run("2026-02-23T02:17:00+00:00", seed=1))
    write_leg(new, "stale", night_run(TONIGHT, seed=2))
    # "dead" produced nothing tonight (its folder holds only setup.json).
    write_leg(base, "dead", night_run(LAST_NIGHT, seed=1))
    (new / "dead").mkdir()
    (new / "dead" / "setup.json").write_text("{}", encoding="utf-8")
    return base, new


LEGS = ["same", "slower", "failing", "known", "skipping", "new-leg", "stale", "dead"]


def test_verdict_per_leg(tmp_path: Path) -> None:
    base, new = _nights(tmp_path)
    verdict = judge_nightly(LEGS, new, base, max_age_hours=48)
    by = {leg.name: leg for leg in verdict.legs}
    assert {name: leg.state for name, leg in by.items()} == {
        "same": "green",
        "slower": "red",
        "failing": "red",
        "known": "green",
        "skipping": "red",
        "new-leg": "no-baseline",
        "stale": "stale-baseline",
        "dead": "red",
    }
    assert verdict.red
    assert by["slower"].regressed == ("perf/gemm · latency",)
    assert any("1 new failures: " + ADD in r for r in by["failing"].reasons)
    assert any(
        "failing since last night, not listed" in r and MUL in r for r in by["failing"].reasons
    )
    assert by["skipping"].newly_skipped == (ADD,)
    assert by["dead"].reasons == ("produced no results",)
    assert "no baseline" in by["new-leg"].notes[0]
    assert by["stale"].baseline_age_hours == pytest.approx(7 * 24)
    assert "7.0 days old" in by["stale"].notes[0]
    data = verdict.to_json_dict()
    json.dumps(data)
    legs = {leg["name"]: leg for leg in data["legs"]}
    assert legs["slower"]["metric_verdicts"] == {"perf/gemm · latency": "regressed"}


def test_green_night_and_a_failing_new_leg(tmp_path: Path) -> None:
    base, new = _nights(tmp_path)
    assert not judge_nightly(["same", "known", "stale"], new, base).red
    # Without a baseline, an unlisted failure is still red: no list, no excuse.
    write_leg(new, "new-broken", night_run(TONIGHT, statuses={ADD: "crashed"}))
    (leg,) = judge_nightly(["new-broken"], new, base).legs
    assert leg.red and leg.state == "red" and "1 failing cases" in leg.reasons[0]
    # No previous nightly at all: every leg is named, none compared.
    verdict = judge_nightly(["same", "new-leg"], new, None)
    assert [leg.state for leg in verdict.legs] == ["no-baseline", "no-baseline"]
    assert "no completed nightly before this one" in nightly_markdown(verdict)


def test_markdown_names_red_and_baseline_less_legs(tmp_path: Path) -> None:
    base, new = _nights(tmp_path)
    run = {"databaseId": 41, "number": 7, "createdAt": LAST_NIGHT, "conclusion": "failure"}
    text = nightly_markdown(judge_nightly(LEGS, new, base, baseline_run=run))
    assert text.startswith("## Nightly against the previous nightly: ❌ 4 of 8 legs red")
    assert "run #7 of 2026-03-01T02:17:00 (conclusion: failure)" in text
    assert "**2 legs without a usable baseline**" in text
    assert "`new-leg` (no-baseline)" in text and "`stale` (stale-baseline)" in text
    assert "| dead | ❌ red |" in text
    assert "### slower" in text and "### Regressions" in text  # the leg's compare details


def _findings(root: Path, leg: str, found: list[tuple[str, int]]) -> Path:
    """An explore leg's findings.json (and .md) as `accelkit test --explore-seeds` writes it."""
    path = root / leg / "findings.json"
    path.parent.mkdir(parents=True)
    seeds = sorted({seed for _, seed in found} | {1234})
    data = {
        "schema": FINDINGS_SCHEMA,
        "device": "cpu",
        "torch": "2.14.0",
        "seeds": [{"seed": seed} for seed in seeds],
        "findings": [{"case_id": case, "seed": seed} for case, seed in found],
    }
    path.write_text(json.dumps(data), encoding="utf-8")
    path.with_suffix(".md").write_text("# Seed exploration\n", encoding="utf-8")
    return path


def test_an_explore_leg_is_judged_by_its_exploration_never_by_its_findings(
    tmp_path: Path,
) -> None:
    base, new = _nights(tmp_path)
    findings = tmp_path / "findings"
    _findings(findings, "finds", [(ADD, 1234), (MUL, 5678)])
    _findings(findings, "clean", [])
    (findings / "bad").mkdir()
    (findings / "bad" / "findings.json").write_text("{}", encoding="utf-8")
    explore = ["finds", "clean", "errored", "bad"]  # errored: a seed's run exited 3, no file
    verdict = judge_nightly(["same"], new, base, explore=explore, findings_dir=findings)
    by = {e.name: e for e in verdict.explorations}
    assert {name: e.state for name, e in by.items()} == {
        "finds": "explored",
        "clean": "explored",
        "errored": "red",
        "bad": "red",
    }
    assert by["finds"].findings == (f"{ADD} at seed 1234", f"{MUL} at seed 5678")
    assert by["finds"].seeds == (1234, 5678)
    assert by["finds"].markdown == str(findings / "finds" / "findings.md")
    assert by["errored"].reasons[0].startswith("produced no findings")
    assert "does not read" in by["bad"].reasons[0]
    assert [leg.name for leg in verdict.legs] == ["same"]  # never compared as a leg
    data = verdict.to_json_dict()
    assert data["red"] and [e["state"] for e in data["explorations"]][:2] == ["explored"] * 2
    # Findings alone: a green night.
    green = judge_nightly(["same"], new, base, explore=["finds", "clean"], findings_dir=findings)
    assert not green.red
    text = nightly_markdown(green)
    assert text.startswith("## Nightly against the previous nightly: ✅ every leg green")
    assert "### Seed explorations: 2 finding(s), not failures" in text
    assert f"| finds | 🔎 explored | 1234, 5678 | 2 | `{findings}/finds/findings.md` |" in text
    assert f"{ADD} at seed 1234, {MUL} at seed 5678" in text
    assert "every case agreed with its bound at every seed" in text
    # An exploration that did not run: red, counted in the title.
    red = nightly_markdown(verdict)
    assert red.startswith("## Nightly against the previous nightly: ❌ 2 of 5 legs red")
    assert "| errored | ❌ red | — | — | — | produced no findings" in red
    # Without explore legs the summary has no exploration section.
    assert "Seed explorations" not in nightly_markdown(judge_nightly(["same"], new, base))


def test_findings_default_to_the_results_folder(tmp_path: Path) -> None:
    base, new = _nights(tmp_path)
    _findings(new, "explore", [])
    (e,) = judge_nightly(["same"], new, base, explore=["explore"]).explorations
    assert e.state == "explored" and e.findings_file == str(new / "explore" / "findings.json")
