"""Distributed hang forensics: every rank's Flight Recorder dump, read by torch's analyzer and
by accelkit, names the rank and the collective where a case stopped.

tests/integration/test_test_hang_forensics.py runs planted failures with gloo on the CPU
(tests/fixtures/hang_cases): one rank skips an `all_reduce` (a real hang, stopped at the
deadline), one rank dies. The tests here read synthetic dumps shaped like gloo's
(torch 2.14.1: `_dump_fr_trace`).
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

from accelkit.suite.distributed.hang_forensics import analyze, describe, read_dumps

DEFAULT_PG = ("0", "default_pg")


def _entry(
    seq: int, name: str, *, done: bool, group: tuple[str, str] = DEFAULT_PG, pg_id: int = 0
) -> dict[str, Any]:
    return {
        "record_id": seq - 1,
        "pg_id": pg_id,
        "process_group": group,
        "collective_seq_id": seq,
        "p2p_seq_id": 0,
        "op_id": seq,
        "profiling_name": f"gloo:{name}",
        "thread_name": "python",
        "thread_id": "1",
        "time_created_ns": 1_000_000 * seq,
        "input_sizes": [[4]],
        "input_dtypes": ["Float"],
        "output_sizes": [[4]],
        "output_dtypes": ["Float"],
        "state": "scheduled",
        "time_discovered_started_ns": None,
        "time_discovered_completed_ns": None,
        "retired": done,
        "timeout_ms": 60_000,
        "is_p2p": False,
        "frames": [],
    }


def _dump(*entries: dict[str, Any], world_size: int = 2) -> dict[str, Any]:
    """A dump as gloo writes it: pg_config names the default group '' (its entries say '0')."""
    completed = max((e["collective_seq_id"] for e in entries if e["retired"]), default=0)
    return {
        "version": "2.10",
        "pg_config": {"": {"name": "", "desc": "", "ranks": str(list(range(world_size)))}},
        "pg_status": {
            "0": {
                "last_enqueued_collective": len(entries),
                "last_started_collective": -1,
                "last_completed_collective": completed,
            }
        },
        "entries": list(entries),
    }


FIRST_TWO = (_entry(1, "all_reduce", done=True), _entry(2, "broadcast", done=True))


def test_a_rank_that_skipped_a_collective_is_named_with_the_collective() -> None:
    dumps = {
        0: _dump(*FIRST_TWO, _entry(3, "all_reduce", done=False)),
        1: _dump(*FIRST_TWO),
    }
    summary, stops, stuck = read_dumps(dumps, 2, {0: "still running", 1: "still running"})
    assert stuck
    assert summary == (
        "rank 1 never entered all_reduce #3 of process group 0 (default_pg), in which rank 0 waits"
    )
    assert stops[0] == {
        "rank": 0,
        "process_group": "0 (default_pg)",
        "seq": 3,
        "state": "waiting",
        "collective": "all_reduce",
        "note": "still running",
    }
    assert stops[1]["state"] == "missing" and stops[1]["collective"] == "all_reduce"
    assert stops[1]["note"] == "its last collective: broadcast #2; still running"


def test_a_rank_in_another_collective_at_that_number_is_a_mismatch() -> None:
    dumps = {
        0: _dump(*FIRST_TWO, _entry(3, "all_reduce", done=False)),
        1: _dump(*FIRST_TWO, _entry(3, "barrier", done=False)),
    }
    summary, stops, _ = read_dumps(dumps, 2, {})
    assert "rank 1 entered barrier as #3 of process group 0 (default_pg)" in summary
    assert "where rank 0 entered all_reduce" in summary
    assert stops[1]["state"] == "mismatch" and stops[1]["collective"] == "barrier"


def test_a_rank_without_a_dump_is_reported_with_its_fate() -> None:
    dumps = {0: _dump(*FIRST_TWO, _entry(3, "all_reduce", done=False))}
    summary, stops, stuck = read_dumps(dumps, 2, {1: "died with exit code 7"})
    assert stuck
    assert "rank 0 waits in all_reduce #3" in summary
    assert "no dump from rank 1 (died with exit code 7)" in summary
    assert stops[1]["state"] == "no dump" and stops[1]["note"] == "died with exit code 7"


def test_a_rank_whose_peer_died_says_where_it_got_to() -> None:
    """gloo fails the collective a dead peer left (rank 0 raised there): nothing is open in
    the dumps, so the verdict names where each rank that dumped was last."""
    dumps = {0: _dump(*FIRST_TWO, _entry(3, "all_reduce", done=True))}
    fates = {0: "raised an error", 1: "died with exit code 7"}
    summary, stops, stuck = read_dumps(dumps, 2, fates)
    assert stuck
    assert summary == (
        "no dump from rank 1 (died with exit code 7); rank 0 was last in all_reduce #3 of "
        "process group 0 (default_pg) (raised an error)"
    )
    assert (stops[0]["state"], stops[0]["collective"], stops[0]["seq"]) == (
        "completed",
        "all_reduce",
        3,
    )
    assert "rank 0: completed up to all_reduce #3" in describe({"summary": summary, "ranks": stops})


def test_dumps_where_everything_completed_are_not_a_hang() -> None:
    summary, stops, stuck = read_dumps({0: _dump(*FIRST_TWO), 1: _dump(*FIRST_TWO)}, 2, {})
    assert not stuck
    assert summary == "every collective the dumps record completed"
    assert [s["state"] for s in stops] == ["completed", "completed"]


def test_a_second_process_group_is_named_by_its_own_numbers() -> None:
    side = ("1", "undefined")
    dumps = {
        0: _dump(*FIRST_TWO, _entry(1, "all_gather", done=False, group=side, pg_id=1)),
        1: _dump(*FIRST_TWO, _entry(1, "all_gather", done=True, group=side, pg_id=1)),
    }
    dumps[1]["pg_status"]["1"] = {"last_completed_collective": 1}
    summary, stops, _ = read_dumps(dumps, 2, {})
    assert summary == "rank 0 waits in all_gather #1 of process group 1 (undefined)"
    assert stops[1]["state"] == "completed"


def test_torch_analyzer_reads_gloo_dumps_after_their_groups_are_named(tmp_path: Path) -> None:
    """torch 2.14.1's torchfrtrace raises KeyError on gloo's dumps as they are; accelkit runs
    it on copies whose pg_config names the groups as the entries do, and says so."""
    dump_dir = tmp_path / "flight-recorder"
    dump_dir.mkdir()
    dumps = {
        0: _dump(*FIRST_TWO, _entry(3, "all_reduce", done=False)),
        1: _dump(*FIRST_TWO),
    }
    for rank, dump in dumps.items():
        (dump_dir / f"rank_{rank}").write_bytes(pickle.dumps(dump))
    hang = analyze(dump_dir, 2, {})
    assert hang["analyzer"] == "torchfrtrace", hang
    output = hang["analyzer_output"]
    assert "KeyError" in output and "on copies whose pg_config names each group" in output
    assert "Not all ranks joining collective, sequence number: 3" in output
    assert "missing ranks: {1}" in output
    assert "collective: gloo:all_reduce" in output
    text = describe(hang)
    assert text.startswith("Flight Recorder: rank 1 never entered all_reduce #3")
    assert "  rank 1: never entered all_reduce #3 of process group 0 (default_pg)" in text


def test_no_dumps_at_all_still_says_so(tmp_path: Path) -> None:
    hang = analyze(tmp_path, 2, {0: "died with exit code -9", 1: "died with exit code -9"})
    assert hang["analyzer"] == "dumps"
    assert hang["summary"] == "no Flight Recorder dump came back from any rank"
    assert [s["state"] for s in hang["ranks"]] == ["no dump", "no dump"]
