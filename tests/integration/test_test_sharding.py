"""Real sharded runs (`accelkit test --shard I/N --durations-from`) merged back into one leg
result with `accelkit merge`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelkit.results.io import load_results
from tests.factories import case, results
from tests.helpers import FIXTURE_CASES, run_cli


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


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_shard_with_no_share_of_a_narrow_selection_is_an_empty_result(tmp_path: Path) -> None:
    """Two cases over three shards: the third shard gets none and says so (exit 0, a results
    file with no case and what the selection had), the merge holds both cases; a selection
    that matches nothing at all is still bad input (exit 2, no file)."""
    common = ["test", "--device", "cpu", "--cases", str(FIXTURE_CASES), "--suite", "conformance"]
    common += ["-k", "passes or after_the_others", "--workers", "0"]
    shards = [tmp_path / f"shard{i}.json" for i in (1, 2, 3)]
    for index, path in enumerate(shards, start=1):
        proc = run_cli(*common, "--shard", f"{index}/3", "--json", str(path), timeout=240)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    counts = [len(load_results(p).cases) for p in shards]
    assert sorted(counts) == [0, 1, 1], counts
    empty = load_results(shards[counts.index(0)])
    assert empty.run.shard is not None
    assert empty.run.shard.selections["conformance"].cases == 2
    merged = tmp_path / "leg.json"
    proc = run_cli("merge", *map(str, shards), "-o", str(merged))
    assert proc.returncode == 0, proc.stderr
    assert set(_ids_and_statuses(merged)) == {
        "conformance/statuses/passes",
        "conformance/statuses/after_the_others",
    }
    nothing = tmp_path / "nothing.json"
    args = [*common[:-4], "-k", "no_such_case", "--shard", "1/3", "--json", str(nothing)]
    proc = run_cli(*args)
    assert proc.returncode == 2 and "matched no case" in proc.stderr
    assert not nothing.exists()
