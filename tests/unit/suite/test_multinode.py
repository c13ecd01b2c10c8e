"""Multi-node rank sessions (`accelkit test --suite distributed --nnodes N --node-rank R
--rdzv-endpoint HOST:PORT`): the options' checks and node 0's verdict on a job. The command
itself, and a real two-node torchrun run: tests/integration/test_test_multinode.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelkit.errors import BadInput
from accelkit.suite.distributed.multinode import parse_endpoint, split_world
from accelkit.suite.distributed.rank_verdict import judge
from accelkit.suite.run.request import RunRequest, validate

# ---- the options ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"nnodes": 0}, "--nnodes: must be >= 1"),
        ({"nnodes": 2, "node_rank": 2}, "--node-rank 2: must be 0 to 1"),
        ({"node_rank": -1}, "--node-rank -1"),
        ({"rdzv_endpoint": "127.0.0.1:29500"}, "only with --nnodes 2 or more"),
        ({"nnodes": 2}, "needs --rdzv-endpoint HOST:PORT"),
        ({"nnodes": 2, "rdzv_endpoint": "nohost"}, "expected HOST:PORT"),
        ({"nnodes": 2, "rdzv_endpoint": "h:99999"}, "port must be 1 to 65535"),
        ({"nnodes": 2, "rdzv_endpoint": "h:1", "suite": "all"}, "add --suite distributed"),
        ({"nnodes": 2, "rdzv_endpoint": "h:1", "join_timeout_s": 0.0}, "--join-timeout"),
        ({"nnodes": 2, "rdzv_endpoint": "h:1", "shard": "1/2"}, "not with --nnodes"),
        ({"nnodes": 2, "rdzv_endpoint": "h:1", "image": "accelkit-test-cpu:0"}, "--image: not"),
        (
            {"nnodes": 2, "node_rank": 1, "rdzv_endpoint": "h:1", "json_path": Path("r.json")},
            "node 1 writes no results",
        ),
    ],
)
def test_the_request_checks_its_node_options(changes: dict[str, object], words: str) -> None:
    base = {"suite": "distributed"}
    with pytest.raises(BadInput, match=words):
        validate(RunRequest(**{**base, **changes}))  # type: ignore[arg-type]


def test_endpoints_and_world_splits() -> None:
    assert parse_endpoint("127.0.0.1:29500") == ("127.0.0.1", 29500)
    assert parse_endpoint("[::1]:29500") == ("::1", 29500)
    assert parse_endpoint("node-0.cluster:1") == ("node-0.cluster", 1)
    assert split_world(4, 2) == [2, 2]
    assert split_world(3, 2) == [2, 1]
    with pytest.raises(AssertionError, match="cannot span 3 nodes"):
        split_world(2, 3)


# ---- node 0's verdict ---------------------------------------------------------------------

STARTED = {r: {"node": r // 2, "pid": 100 + r} for r in range(4)}


def _ok(value: object) -> dict[str, object]:
    return {"status": "ok", "value": value}


def test_a_job_runs_until_every_rank_reported() -> None:
    assert judge(4, 2, STARTED, {0: _ok(1), 1: _ok(1)}, {}) is None
    verdict = judge(4, 2, STARTED, {r: _ok(r) for r in range(4)}, {})
    assert verdict is not None and verdict.ok
    assert [verdict.results[r]["value"] for r in range(4)] == [0, 1, 2, 3]


def test_a_killed_rank_is_named_before_the_ranks_that_raised_because_of_it() -> None:
    results = {r: {"status": "error", "value": "peer closed"} for r in range(3)}
    node1 = {"exit": 1, "stopped": False, "failures": {"3": {"exitcode": -9, "signal": "SIGKILL"}}}
    verdict = judge(4, 2, STARTED, results, {1: node1})
    assert verdict is not None and not verdict.ok
    assert verdict.head == "rank 3 (node 1, pid 103) died: killed by signal 9 (SIGKILL)"
    assert "  rank 0 (node 0, pid 100): raised" in verdict.lines


def test_a_rank_that_raised_is_named_with_its_traceback() -> None:
    results = {0: _ok(1), 2: {"status": "error", "value": "Traceback: ValueError: x"}}
    verdict = judge(4, 2, STARTED, results, {})
    assert verdict is not None and not verdict.ok
    assert verdict.head.startswith("rank 2 (node 1, pid 102) raised:\nTraceback")


def test_a_hung_rank_fails_the_job_at_the_deadline() -> None:
    results = {r: _ok(r) for r in range(3)}
    assert judge(4, 2, STARTED, results, {}) is None
    verdict = judge(4, 2, STARTED, results, {}, timed_out=150.0)
    assert verdict is not None and verdict.head == "ranks [3] did not finish within 150 s"
    assert verdict.lines == ["  rank 3 (node 1, pid 103): still running"]


def test_a_node_whose_torchrun_ended_without_a_rank_fails_the_job() -> None:
    report = {"exit": 1, "stopped": False, "failures": {}, "log_tail": ["rendezvous closed"]}
    started = {r: place for r, place in STARTED.items() if r != 3}
    verdict = judge(4, 2, started, {r: _ok(r) for r in range(3)}, {0: report, 1: report})
    assert verdict is not None and not verdict.ok
    assert "rank 3 (never started): never started" in verdict.head
    assert "node 1: torchrun exit code 1: rendezvous closed" in verdict.head


# ---- node 0's store -----------------------------------------------------------------------


def test_node_0_does_not_wait_for_a_node_that_never_joined_to_leave(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Alone, node 0 reports the missing node and stops: on the way out it waits for the
    nodes that joined to say they left, and for no other (it used to wait STOP_WAIT_S for
    a node that was never there)."""
    import socket

    from accelkit.errors import Unavailable
    from accelkit.suite.distributed import multinode

    waited: list[list[str]] = []
    real_wait = multinode._wait_keys

    def wait_keys(store: object, keys: list[str], timeout_s: float) -> list[str]:
        waited.append(list(keys))
        return real_wait(store, keys, timeout_s)

    monkeypatch.setattr(multinode, "_wait_keys", wait_keys)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = multinode.NodeConfig(3, 0, f"127.0.0.1:{port}", join_timeout_s=0.2)
    with pytest.raises(Unavailable, match="node 1, 2 did not join"), multinode.hosted(config):
        pass
    assert waited == [["accelkit/node/1", "accelkit/node/2"], []]
