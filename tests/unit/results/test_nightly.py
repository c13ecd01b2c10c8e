"""A nightly against the previous nightly (accelkit.results.nightly): which legs are red, which
are only named, and the summary the workflow and the rehearsal write (`accelkit matrix
compare` end to end: tests/integration/test_matrix_compare.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelkit.results.model import Results
from accelkit.results.nightly import judge_nightly, render_markdown
from tests.factories import case, grouped_metric, results

LAST_NIGHT = "2026-03-01T02:17:00+00:00"
TONIGHT = "2026-03-02T02:17:00+00:00"


def _run(
    started: str,
    *,
    gemm: float = 1e-3,
    statuses: dict[str, str] | None = None,
    known: tuple[str, ...] = (),
    seed: int = 0,
) -> Results:
    """Three conformance cases (statuses as given, default passed) and one timed GEMM."""
    statuses = statuses or {}
    cases = []
    for name in ("add", "mul", "eig"):
        case_id = f"conformance/ops/{name}/float32"
        status = statuses.get(case_id, "passed")
        extra = {"known_failure": True} if case_id in known else {}
        cases.append(case(case_id, status, message="boom" if status != "passed" else "", **extra))
    cases.append(case("perf/gemm", metrics={"latency": grouped_metric(gemm, seed=seed)}))
    return results(cases, started=started, finished=started)


def _write(root: Path, leg: str, data: Results) -> None:
    (root / leg).mkdir(parents=True, exist_ok=True)
    (root / leg / "results.json").write_text(json.dumps(data.to_json_dict()), encoding="utf-8")


ADD = "conformance/ops/add/float32"
MUL = "conformance/ops/mul/float32"


def _nights(tmp_path: Path) -> tuple[Path, Path]:
    base, new = tmp_path / "baseline", tmp_path / "results"
    # Same build both nights.
    _write(base, "same", _run(LAST_NIGHT, seed=1))
    _write(new, "same", _run(TONIGHT, seed=2))
    # The GEMM got 25% slower.
    _write(base, "slower", _run(LAST_NIGHT, seed=1))
    _write(new, "slower", _run(TONIGHT, gemm=1.25e-3, seed=2))
    # add fails tonight (new), mul failed last night too (not listed: still red).
    _write(base, "failing", _run(LAST_NIGHT, statuses={MUL: "failed"}, seed=1))
    _write(new, "failing", _run(TONIGHT, statuses={ADD: "failed", MUL: "failed"}, seed=2))
    # mul is listed as a known failure: recorded skipped with known_failure, green.
    _write(base, "known", _run(LAST_NIGHT, statuses={MUL: "skipped"}, known=(MUL,), seed=1))
    _write(new, "known", _run(TONIGHT, statuses={MUL: "skipped"}, known=(MUL,), seed=2))
    # add ran last night and is skipped tonight, not as a known failure.
    _write(base, "skipping", _run(LAST_NIGHT, seed=1))
    _write(new, "skipping", _run(TONIGHT, statuses={ADD: "skipped"}, seed=2))
    # A new leg: nothing last night.
    _write(new, "new-leg", _run(TONIGHT, seed=2))
    # The last results of this leg are a week old.
    _write(base, "stale", _run("2026-02-23T02:17:00+00:00", seed=1))
    _write(new, "stale", _run(TONIGHT, seed=2))
    # "dead" produced nothing tonight (its folder holds only setup.json).
    _write(base, "dead", _run(LAST_NIGHT, seed=1))
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
    _write(new, "new-broken", _run(TONIGHT, statuses={ADD: "crashed"}))
    (leg,) = judge_nightly(["new-broken"], new, base).legs
    assert leg.red and leg.state == "red" and "1 failing cases" in leg.reasons[0]
    # No previous nightly at all: every leg is named, none compared.
    verdict = judge_nightly(["same", "new-leg"], new, None)
    assert [leg.state for leg in verdict.legs] == ["no-baseline", "no-baseline"]
    assert "no completed nightly before this one" in render_markdown(verdict)


def test_markdown_names_red_and_baseline_less_legs(tmp_path: Path) -> None:
    base, new = _nights(tmp_path)
    run = {"databaseId": 41, "number": 7, "createdAt": LAST_NIGHT, "conclusion": "failure"}
    text = render_markdown(judge_nightly(LEGS, new, base, baseline_run=run))
    assert text.startswith("## Nightly against the previous nightly: ❌ 4 of 8 legs red")
    assert "run #7 of 2026-03-01T02:17:00 (conclusion: failure)" in text
    assert "**2 legs without a usable baseline**" in text
    assert "`new-leg` (no-baseline)" in text and "`stale` (stale-baseline)" in text
    assert "| dead | ❌ red |" in text
    assert "### slower" in text and "### Regressions" in text  # the leg's compare details
