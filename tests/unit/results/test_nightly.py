"""A nightly against the previous nightly (accelkit.results.nightly): which legs are red, which
are only named, and the summary the workflow and the rehearsal write (`accelkit matrix
compare` end to end: tests/integration/test_matrix_compare.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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
