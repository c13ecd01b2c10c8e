"""Sharding (`accelkit test --shard I/N`, `--durations-from`) and merging shards back into one
leg result (`accelkit merge`): the assignment rule, the refusals, and real sharded runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from accelkit.errors import BadInput
from accelkit.results.io import load_results
from accelkit.results.model import Results
from accelkit.results.shards import merge_shards
from accelkit.suite.request import RunRequest, validate
from accelkit.suite.sharding import ShardSpec, assign, select, selection_digest, units
from tests.factories import case, results, shard
from tests.helpers import FIXTURE_CASES, assert_one_line_error, run_cli

# ---- which cases a shard runs ------------------------------------------------------------


def test_the_docstring_example() -> None:
    durations = {"a": 10.0, "b": 6.0, "c": 5.0, "d": 1.0}
    ids = ["a", "b", "c", "d", "e"]
    assert select(ids, ShardSpec(1, 2), durations=durations) == {"a", "d", "e"}
    assert select(ids, ShardSpec(2, 2), durations=durations) == {"b", "c"}


def test_shards_partition_the_cases_whatever_the_balancing() -> None:
    ids = [f"conformance/x/{i}" for i in range(103)]
    durations = {c: float((i * 37) % 11) for i, c in enumerate(ids) if i % 7}
    groups = {c: "pair" for c in ids[10:14]}
    for count in (1, 2, 3, 7, 103, 150):
        for weights in (None, durations):
            chosen = [
                select(ids, ShardSpec(i, count), groups=groups, durations=weights)
                for i in range(1, count + 1)
            ]
            assert sum(len(c) for c in chosen) == len(ids)
            assert set().union(*chosen) == set(ids)
            # A group stays together.
            assert sum(1 for c in chosen if set(ids[10:14]) <= c) == 1


def test_without_durations_shards_differ_by_at_most_one_case() -> None:
    ids = [f"c{i}" for i in range(100)]
    sizes = [len(select(ids, ShardSpec(i, 3))) for i in (1, 2, 3)]
    assert sorted(sizes) == [33, 33, 34]


def test_durations_balance_the_time_not_the_count() -> None:
    # One long case and many short ones: the long one gets a shard of its own.
    durations = {"long": 30.0, **{f"short{i}": 1.0 for i in range(30)}}
    plan = assign(units(list(durations), {}, durations), 2)
    totals = [sum(u.weight for u in shard_units) for shard_units in plan]
    assert totals == [30.0, 30.0]
    assert [u.key for u in plan[0]] == ["case:long"]


def test_new_cases_are_dealt_round_robin_from_the_lightest_shard() -> None:
    durations = {"a": 5.0, "b": 1.0}
    plan = assign(units(["a", "b", "n1", "n2", "n3"], {}, durations), 2)
    assert [[u.key.removeprefix("case:") for u in units_] for units_ in plan] == [
        ["a", "n2"],
        ["b", "n1", "n3"],
    ]


def test_a_group_weighs_its_cases_together() -> None:
    found = units(["x", "y", "z"], {"x": "g", "z": "g"}, {"x": 2.0, "y": 1.0})
    assert [(u.key, u.ids, u.weight, u.known) for u in found] == [
        ("group:g", ("x", "z"), 2.0, True),
        ("case:y", ("y",), 1.0, True),
    ]


def test_the_selection_digest_ignores_order() -> None:
    assert selection_digest(["b", "a"]) == selection_digest(["a", "b", "a"])
    assert selection_digest(["a"]) != selection_digest(["a", "b"])


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("3", "expected I/N"),
        ("0/3", "1 to 3"),
        ("4/3", "1 to 3"),
        ("1/0", "number of shards"),
        ("a/b", "expected I/N"),
        ("1/3/4", "expected I/N"),
    ],
)
def test_bad_shard_specs(text: str, words: str) -> None:
    with pytest.raises(BadInput, match=words):
        ShardSpec.parse(text)


def test_the_request_checks_its_shard_options(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="only with --shard"):
        validate(RunRequest(durations_from=tmp_path / "r.json"))
    with pytest.raises(BadInput, match=r"--durations-from .*no such file"):
        validate(RunRequest(shard="1/2", durations_from=tmp_path / "r.json"))
    with pytest.raises(BadInput, match="expected I/N"):
        validate(RunRequest(shard="2"))


# ---- merging shards ----------------------------------------------------------------------

TORCH = {"version": "2.14.1", "git_version": "abc123", "cuda": None, "hip": None}
ENV = {"accelkit": "0.1", "torch": TORCH, "backends": {"cpu": {"devices": [{"name": "EPYC"}]}}}


def _shard(index: int, ids: list[str], *, count: int = 3, **changes: Any) -> tuple[str, Results]:
    env = changes.pop("env", ENV)
    digest = changes.pop("digest", "d" * 64)
    made = results(
        [case(i, changes.pop("status", "passed")) for i in ids],
        env=env,
        finished=changes.pop("finished", f"2026-01-01T00:0{index}:00+00:00"),
        shard=shard(index, count, selections={"conformance": (9, len(ids), digest)}),
        seed=changes.pop("seed", 0),
        suites=["conformance"],
        **changes,
    )
    return f"s{index}.json", made


def _three() -> list[tuple[str, Results]]:
    return [
        _shard(1, ["conformance/a/1", "conformance/a/4"]),
        _shard(2, ["conformance/a/2", "conformance/a/5"]),
        _shard(3, ["conformance/a/3"]),
    ]


def test_merging_shards_gives_one_leg_result() -> None:
    merged = merge_shards(list(reversed(_three())))  # any order
    assert [c.id for c in merged.cases] == [f"conformance/a/{i}" for i in (1, 4, 2, 5, 3)]
    assert merged.run.shard is None and merged.run.shards == 3
    assert merged.run.finished == "2026-01-01T00:03:00+00:00"
    assert merged.summary.passed == 5


def test_a_shard_that_did_not_finish_leaves_the_merge_unfinished() -> None:
    parts = _three()
    parts[1] = _shard(2, ["conformance/a/2"], finished=None)
    assert merge_shards(parts).run.finished is None


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda p: p[:2], "missing shard 3/3"),
        (lambda p: [p[0], p[0], p[2]], "shard 1/3 given twice"),
        (lambda p: [*p[:2], _shard(3, ["conformance/a/3"], count=4)], "one of 3"),
        (lambda p: [*p[:2], _shard(3, ["conformance/a/1"])], "conformance/a/1 is in two shards"),
        (lambda p: [*p[:2], _shard(3, [], digest="e" * 64)], "from different lists"),
        (lambda p: [*p[:2], _shard(3, [], seed=4)], "seed"),
        (lambda p: [*p[:2], _shard(3, [], device="cuda")], "differ in device"),
        (
            lambda p: [*p[:2], _shard(3, [], env={**ENV, "torch": {**TORCH, "git_version": "f"}})],
            "torch build",
        ),
        (
            lambda p: [
                *p[:2],
                _shard(3, [], env={**ENV, "backends": {"cpu": {"devices": [{"name": "Xeon"}]}}}),
            ],
            "differ in devices",
        ),
        (lambda p: [*p[:2], ("whole.json", results([case("conformance/a/3")]))], "not a shard"),
    ],
)
def test_merge_refuses_what_is_not_one_whole_run(change: Any, words: str) -> None:
    with pytest.raises(BadInput, match=words):
        merge_shards(change(_three()))


def test_the_same_collection_error_in_every_shard_counts_once() -> None:
    error = {"status": "error", "message": "collection failed: ImportError"}
    parts = [
        (
            f"s{i}.json",
            results(
                [case("conformance/broken", **error)],
                env=ENV,
                shard=shard(i, 2, selections={"conformance": (3, 1, "d" * 64)}),
            ),
        )
        for i in (1, 2)
    ]
    assert [c.id for c in merge_shards(parts).cases] == ["conformance/broken"]


def test_merge_cli_writes_the_leg_and_refuses_in_one_line(tmp_path: Path) -> None:
    paths = []
    for name, made in _three():
        path = tmp_path / name
        path.write_text(json.dumps(made.to_json_dict()))
        paths.append(str(path))
    out = tmp_path / "leg.json"
    proc = run_cli("merge", *paths, "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "merged 3 shards: 5 cases (5 passed)" in proc.stdout
    assert load_results(out).run.shards == 3
    refused = tmp_path / "refused.json"
    proc = run_cli("merge", *paths[:2], "-o", str(refused))
    assert_one_line_error(proc, 2, "missing shard 3/3")
    assert not refused.exists()


# ---- real sharded runs -------------------------------------------------------------------


def _ids_and_statuses(path: Path) -> dict[str, str]:
    return {c.id: c.status for c in load_results(path).cases}


#: The fixture cases of a sharded run, their statuses, and the seconds "last night" took.
SHARDED_CASES = {
    "conformance/statuses/fails": ("failed", 5.0),
    "conformance/statuses/passes": ("passed", 3.0),
    "conformance/statuses/setup_error": ("error", 1.0),
    "conformance/statuses/after_the_others": ("passed", 1.0),
    "conformance/statuses/needs_xpu_graph": ("skipped", None),  # new since last night
    "conformance/worker_layout/conformance_layout": ("passed", None),
    "perf/repeats/breaks_in_pass_two": ("failed", 4.0),
    "perf/repeats/pass_numbered_metric": ("passed", 3.0),
    "perf/repeats/single_pass_metric": ("passed", 2.0),
    "perf/metric/records": ("passed", 1.0),
    "perf/perf_layout": ("passed", 1.0),
}


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_shards_with_workers_and_passes_merge_into_the_whole_run(tmp_path: Path) -> None:
    """Two shards of the fixture cases, with pytest-xdist workers and two measurement passes,
    balanced by recorded durations: together they run every case once, and each pass of a
    shard measures the same perf cases (otherwise a case would land in both shards' files,
    or a repeated case would miss its second pass)."""
    durations = tmp_path / "last-night.json"
    recorded = [case(i, duration_s=d) for i, (_, d) in SHARDED_CASES.items() if d is not None]
    durations.write_text(json.dumps(results(recorded).to_json_dict()))
    common = ["test", "--device", "cpu", "--cases", str(FIXTURE_CASES), "--timeout", "20"]
    common += ["-k", "not hangs and not crashes and not tick", "--passes", "2"]
    common += ["--workers", "2", "--durations-from", str(durations)]
    shards = [tmp_path / "shard1.json", tmp_path / "shard2.json"]
    for index, path in enumerate(shards, start=1):
        proc = run_cli(*common, "--shard", f"{index}/2", "--json", str(path), timeout=240)
        assert proc.returncode == 1, proc.stdout + proc.stderr  # each shard has a failure
    # Greedy by duration: fails (5 s) | passes (3 s) + setup_error + after_the_others, then
    # the new cases round-robin; perf: breaks (4 s) | numbered (3 s) + single (2 s), ...
    first, second = (set(_ids_and_statuses(p)) for p in shards)
    assert {"conformance/statuses/fails", "perf/repeats/breaks_in_pass_two"} <= first
    assert {
        "conformance/statuses/passes",
        "conformance/statuses/setup_error",
        "conformance/statuses/after_the_others",
        "perf/repeats/pass_numbered_metric",
        "perf/repeats/single_pass_metric",
    } <= second
    leg = tmp_path / "leg.json"
    proc = run_cli("merge", *map(str, shards), "-o", str(leg))
    assert proc.returncode == 0, proc.stderr
    assert _ids_and_statuses(leg) == {i: status for i, (status, _) in SHARDED_CASES.items()}
    merged = load_results(leg)
    for loaded in map(load_results, shards):
        assert loaded.run.shard is not None and loaded.run.shard.balanced_by == "durations"
        assert set(loaded.run.shard.selections) == {"conformance", "perf"}
        assert loaded.run.shard.selections["perf"].cases == 5
    for made in merged.cases:
        if made.suite == "perf" and made.id != "perf/repeats/single_pass_metric":
            for metric in made.metrics.values():
                assert set(metric.sample_groups or []) == {0, 1}, made.id
