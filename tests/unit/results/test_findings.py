"""Seed exploration: findings from each seed's results, and the `--explore-seeds` options."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from accelkit.cli.explore import SEED_RANGE, exploration_seeds, output_paths, seed_results_path
from accelkit.errors import BadInput
from accelkit.results.findings import FINDINGS_SCHEMA, exploration, findings_of
from accelkit.results.render.markdown import exploration_markdown
from accelkit.suite.run.request import RunRequest, validate
from tests.factories import case, results

CHECK = {
    "what": "exp sample 0",
    "rtol": 1.3e-06,
    "atol": 1e-05,
    "index": [17],
    "actual": 7.389,
    "expected": 7.382,
    "abs_diff": 0.007,
}
REPRO = {
    "kind": "opinfo",
    "seed": 1234,
    "device": "cpu",
    "file": "conformance/test_opinfo.py",
    "function": "test_opinfo",
    "op": "exp",
    "dtype": "float32",
    "sample": 0,
    "layout": "strided",
    "check": CHECK,
}


def _seed_run(seed: int):  # type: ignore[no-untyped-def]
    return results(
        [
            case(
                "conformance/opinfo/exp/float32/noncontiguous",
                "failed",
                message="not close\nx",
                repro=REPRO,
            ),
            case("conformance/opinfo/sin/float32"),
            case("conformance/opinfo/ndtr/float32", "skipped", known_failure=True),
            case("conformance/ops/sum/float32", "crashed", message="worker died"),
        ],
        seed=seed,
        env={"torch": {"version": "2.14.1+cpu"}},
    )


def test_a_finding_is_a_disagreeing_case_with_its_reproducer() -> None:
    found = findings_of(_seed_run(1234), Path("r.seed-1234.json"))
    assert [f.case_id for f in found] == [
        "conformance/opinfo/exp/float32/noncontiguous",
        "conformance/ops/sum/float32",
    ]  # the known failure is not a finding, the crash is
    first = found[0]
    assert first.seed == 1234 and first.layout == "strided" and first.sample == 0
    assert first.repro == (
        "accelkit repro conformance/opinfo/exp/float32/noncontiguous --from r.seed-1234.json"
    )


def test_the_report_has_an_issue_text_per_finding() -> None:
    result = exploration(
        [
            (_seed_run(1234), Path("a.json"), 1),
            (results([case("conformance/ops/x")], seed=9), Path("b.json"), 0),
        ]
    )
    data = result.to_json_dict()
    assert data["schema"] == FINDINGS_SCHEMA and data["torch"] == "2.14.1+cpu"
    assert [s["findings"] for s in data["seeds"]] == [2, 0]
    text = exploration_markdown(result)
    assert "## `conformance/opinfo/exp/float32/noncontiguous` disagrees at seed 1234" in text
    assert "sample 0 in layout strided" in text
    assert "Expected 7.382, actual 7.389 at index [17]" in text and "rtol 1.3e-06" in text
    assert "Cause: (to be written by the review" in text
    clean = exploration([(results([case("conformance/ops/x")], seed=9), Path("b.json"), 0)])
    assert "No findings" in exploration_markdown(clean)


def test_seeds_are_drawn_past_the_development_seeds_or_follow_the_given_one() -> None:
    drawn = exploration_seeds(RunRequest(explore_seeds=5))
    assert len(set(drawn)) == 5 and all(SEED_RANGE[0] <= s < SEED_RANGE[1] for s in drawn)
    assert exploration_seeds(RunRequest(explore_seeds=3, seed=77)) == [77, 78, 79]


def test_outputs_sit_beside_the_findings_file_or_in_a_new_folder(tmp_path: Path) -> None:
    request = RunRequest(explore_seeds=2, json_path=tmp_path / "f.json")
    assert output_paths(request) == (tmp_path / "f.json", tmp_path / "f.md", tmp_path)
    assert seed_results_path(request, tmp_path, 9) == tmp_path / "f.seed-9.json"
    findings, _markdown, folder = output_paths(RunRequest(explore_seeds=2), now=0)
    assert folder == Path("accelkit-explore-19700101-000000") and findings.parent == folder


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"explore_seeds": -1}, "must be 1 to 1000"),
        ({"explore_seeds": 2, "suite": "perf"}, "use --suite conformance"),
        ({"explore_seeds": 2, "shard": "1/2"}, "not with --shard"),
        ({"explore_seeds": 2, "junit_path": Path("j.xml")}, "not with --junit"),
    ],
)
def test_bad_exploration_options_are_refused(changes: dict[str, object], message: str) -> None:
    with pytest.raises(BadInput, match=message):
        validate(replace(RunRequest(suite="conformance"), **changes))  # type: ignore[arg-type]


def test_the_option_round_trips_through_argv() -> None:
    request = RunRequest(explore_seeds=3, suite="conformance")
    assert "--explore-seeds" in request.to_argv()
    assert RunRequest.from_argv(request.to_argv()) == request
