"""Sharding (`accelkit test --shard I/N`, `--durations-from`) and merging shards back into one
leg result: the assignment rule and the refusals. Real sharded runs:
tests/integration/test_test_sharding.py; the `accelkit merge` command:
tests/integration/test_merge.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from accelkit.errors import BadInput
from accelkit.results.shards import merge_shards
from accelkit.suite.run.request import RunRequest, validate
from accelkit.suite.session.sharding import ShardSpec, assign, select, selection_digest, units
from tests.factories import CPU_ENV, CPU_TORCH, case, results, shard, shard_results, three_shards

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


def test_checking_a_request_loads_neither_pytest_nor_the_results_model() -> None:
    """The request parses --shard with `ShardSpec`; the session side of the module imports
    pytest and pydantic's results model only where it runs."""
    code = (
        "import sys\n"
        "import accelkit.suite.run.request\n"
        "print('pytest' in sys.modules, 'pydantic' in sys.modules)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert proc.stdout.split() == ["False", "False"]


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
    # Without --shard it seeds the progress view's estimate; a missing file is still refused.
    with pytest.raises(BadInput, match=r"--durations-from .*no such file"):
        validate(RunRequest(durations_from=tmp_path / "r.json"))
    with pytest.raises(BadInput, match=r"--durations-from .*no such file"):
        validate(RunRequest(shard="1/2", durations_from=tmp_path / "r.json"))
    with pytest.raises(BadInput, match="expected I/N"):
        validate(RunRequest(shard="2"))


# ---- merging shards ----------------------------------------------------------------------


def test_merging_shards_gives_one_leg_result() -> None:
    merged = merge_shards(list(reversed(three_shards())))  # any order
    assert [c.id for c in merged.cases] == [f"conformance/a/{i}" for i in (1, 4, 2, 5, 3)]
    assert merged.run.shard is None and merged.run.shards == 3
    assert merged.run.finished == "2026-01-01T00:03:00+00:00"
    assert merged.summary.passed == 5


def test_a_shard_that_did_not_finish_leaves_the_merge_unfinished() -> None:
    parts = three_shards()
    parts[1] = shard_results(2, ["conformance/a/2"], finished=None)
    assert merge_shards(parts).run.finished is None


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda p: p[:2], "missing shard 3/3"),
        (lambda p: [p[0], p[0], p[2]], "shard 1/3 given twice"),
        (lambda p: [*p[:2], shard_results(3, ["conformance/a/3"], count=4)], "one of 3"),
        (
            lambda p: [*p[:2], shard_results(3, ["conformance/a/1"])],
            "conformance/a/1 is in two shards",
        ),
        (lambda p: [*p[:2], shard_results(3, [], digest="e" * 64)], "from different lists"),
        (lambda p: [*p[:2], shard_results(3, [], seed=4)], "seed"),
        (lambda p: [*p[:2], shard_results(3, [], device="cuda")], "differ in device"),
        (
            lambda p: [
                *p[:2],
                shard_results(3, [], env={**CPU_ENV, "torch": {**CPU_TORCH, "git_version": "f"}}),
            ],
            "torch build",
        ),
        (
            lambda p: [
                *p[:2],
                shard_results(
                    3, [], env={**CPU_ENV, "backends": {"cpu": {"devices": [{"name": "Xeon"}]}}}
                ),
            ],
            "differ in devices",
        ),
        (lambda p: [*p[:2], ("whole.json", results([case("conformance/a/3")]))], "not a shard"),
    ],
)
def test_merge_refuses_what_is_not_one_whole_run(change: Any, words: str) -> None:
    with pytest.raises(BadInput, match=words):
        merge_shards(change(three_shards()))


def test_the_same_collection_error_in_every_shard_counts_once() -> None:
    error = {"status": "error", "message": "collection failed: ImportError"}
    parts = [
        (
            f"s{i}.json",
            results(
                [case("conformance/broken", **error)],
                env=CPU_ENV,
                shard=shard(i, 2, selections={"conformance": (3, 1, "d" * 64)}),
            ),
        )
        for i in (1, 2)
    ]
    assert [c.id for c in merge_shards(parts).cases] == ["conformance/broken"]
