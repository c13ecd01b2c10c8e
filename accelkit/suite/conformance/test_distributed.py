"""c10d in real rank processes: every collective with exact expected values, group splitting,
reconfigure-based fault tolerance, the Flight Recorder, nccl2, RMA windows and shrink_group.

The collectives run on the backend torch assigns to the device under test (gloo on the CPU
with 2 ranks; nccl/xccl with one rank per device). Spawning ranks costs seconds, so each
rank *session* runs many named checks at once (`run_checks`) and is shared by the cases
that assert on it, once per run even across pytest-xdist workers (a file lock in pytest's
shared temporary directory; pytest-xdist's documented recipe). Every case still asserts
only on its own checks, with its own message. Rank processes are joined or killed before
the session's first case finishes.

What runs inside the ranks (each session's rank function, its named checks and their
inputs) is in `accelkit.suite.distributed.checks`; this module holds the sessions, the
expected values and the cases that compare the two.

The same cases run across nodes (`accelkit test --suite distributed --nnodes N`): each rank
session is then a torchrun job over the nodes (`accelkit.suite.distributed.multinode`), with the
world
size the session asks for split over them (accelerators: one rank per device on every node).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from accelkit.backends.base import Backend
from accelkit.suite.distributed.checks import (
    FLOAT_OPS,
    FR_BUFFER_SIZE,
    FR_SIZES,
    INT_OPS,
    accelerator_init_kwargs,
    collectives_rank,
    enable_reconfigure,
    flight_recorder_rank,
    int_input,
    nccl2_blocking_init,
    nccl2_nonblocking_init,
    nccl2_rank,
    reconfigure_rank,
    reduce_input,
    shrink_rank,
    window_rank,
)
from accelkit.suite.distributed.ranks import CheckSkipped, check_result, node_count, run_ranks
from accelkit.suite.session.failures import add_failure_info, failure_info

# The rank sessions are shared by the module's cases: `accelkit test --shard` keeps them in
# one shard, so no shard starts them again.
pytestmark = pytest.mark.shard_group("distributed")

# --------------------------------------------------------------------------------------
# Expected values (pure functions of rank and world size)


def _expected_reduce(op: str, world_size: int) -> list[float]:
    columns = list(zip(*(reduce_input(r) for r in range(world_size)), strict=True))
    result: list[float] = []
    for col in columns:
        if op == "SUM":
            result.append(sum(col))
        elif op == "PRODUCT":
            value = 1.0
            for c in col:
                value *= c
            result.append(value)
        elif op == "MIN":
            result.append(min(col))
        elif op == "MAX":
            result.append(max(col))
        elif op == "AVG":
            result.append(sum(col) / world_size)
    return result


def _expected_int(op: str, world_size: int) -> list[int]:
    columns = list(zip(*(int_input(r) for r in range(world_size)), strict=True))
    result = []
    for col in columns:
        value = col[0]
        for c in col[1:]:
            value = value & c if op == "BAND" else value | c if op == "BOR" else value ^ c
        result.append(value)
    return result


# --------------------------------------------------------------------------------------
# What runs inside each rank


# --------------------------------------------------------------------------------------
# Sessions: run once per test run, shared by the cases (and pytest-xdist workers)


def _shared_dir(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    base = tmp_path_factory.getbasetemp()
    return base.parent if worker_id != "master" else base


def _session(
    request: pytest.FixtureRequest, name: str, start: Callable[[], list[Any]]
) -> list[Any]:
    """`start()` once per run; its per-rank results (or its failure) shared by all cases."""
    from filelock import FileLock

    factory: pytest.TempPathFactory = request.getfixturevalue("tmp_path_factory")
    worker_id = getattr(request.config, "workerinput", {}).get("workerid", "master")
    folder = _shared_dir(factory, worker_id)
    path = folder / f"accelkit-dist-{name}.json"
    with FileLock(str(path) + ".lock"):
        if not path.exists():
            try:
                payload: dict[str, Any] = {"ranks": start()}
            except AssertionError as exc:
                # A hang's forensics (where each rank stopped) go to every case it fails.
                payload = {"failed": str(exc), "hang": failure_info(exc).get("hang")}
            path.write_text(json.dumps(payload), encoding="utf-8")
        payload = json.loads(path.read_text(encoding="utf-8"))
    if "failed" in payload:
        error = AssertionError(f"the {name} rank session failed:\n{payload['failed']}")
        if payload.get("hang"):
            add_failure_info(error, hang=payload["hang"])
        raise error
    return list(payload["ranks"])


def _world(spec: Backend, capability_table: dict[str, dict[str, Any]]) -> tuple[str, str, int]:
    """(c10d backend, tensor device type, world size) for the backend under test, or skip."""
    backend = spec.collective_backend
    if backend is None:
        pytest.skip(f"torch has no collective backend for {spec.name} devices")
    entry = capability_table.get(backend, {"available": False, "reason": "unknown backend"})
    if not entry.get("available"):
        pytest.skip(f"{backend}: {entry.get('reason') or 'unavailable'}")
    if spec.host_memory:  # every rank shares its host's one device: two ranks per host
        return backend, spec.torch_device_type, 2 * node_count()
    import torch

    count = torch.accelerator.device_count()
    if count * node_count() < 2:
        pytest.skip(
            f"{backend} collectives run one rank per device: needs 2 {spec.name} devices, "
            f"found {count}"
        )
    return backend, spec.torch_device_type, count * node_count()


@pytest.fixture
def collectives(
    request: pytest.FixtureRequest, backend: Backend, capability_table: dict[str, dict[str, Any]]
) -> tuple[list[Any], int]:
    c10d, tensor_device, world_size = _world(backend, capability_table)
    env = {
        "ACCELKIT_DIST_BACKEND": c10d,
        "ACCELKIT_DIST_DEVICE": tensor_device,
        "TORCH_FR_BUFFER_SIZE": str(FR_BUFFER_SIZE),
    }
    init = None if backend.host_memory else accelerator_init_kwargs
    ranks = _session(
        request,
        f"collectives-{c10d}",
        lambda: run_ranks(
            collectives_rank,
            world_size=world_size,
            backend=c10d,
            env=env,
            init_kwargs=init,
            timeout_s=180.0,
        ),
    )
    return ranks, world_size


def _expect(per_rank: list[Any], name: str, expected: Callable[[int], Any]) -> None:
    try:
        values = check_result(per_rank, name)
    except CheckSkipped as why:
        pytest.skip(f"{name}: {why}")
    for rank, value in enumerate(values):
        want = expected(rank)
        assert value == want, f"{name}: rank {rank} got {value}, expected {want}"


# --------------------------------------------------------------------------------------
# Collectives


@pytest.mark.parametrize("op", [*FLOAT_OPS, *INT_OPS, "PREMUL_SUM"])
def test_all_reduce(op: str, collectives: tuple[list[Any], int]) -> None:
    per_rank, world_size = collectives
    if op in INT_OPS:
        want: Any = _expected_int(op, world_size)
    elif op == "PREMUL_SUM":
        want = [2.0 * v for v in _expected_reduce("SUM", world_size)]
    else:
        want = _expected_reduce(op, world_size)
    _expect(per_rank, f"all_reduce/{op}", lambda rank: want)


@pytest.mark.parametrize("form", ["list", "single"])
def test_all_gather(form: str, collectives: tuple[list[Any], int]) -> None:
    per_rank, ws = collectives
    rows = [[r + 1.0, float(-r)] for r in range(ws)]
    if form == "list":
        _expect(per_rank, "all_gather", lambda rank: rows)
    else:
        _expect(per_rank, "all_gather_single", lambda rank: [v for row in rows for v in row])


@pytest.mark.parametrize("form", ["list", "single"])
def test_reduce_scatter(form: str, collectives: tuple[list[Any], int]) -> None:
    per_rank, ws = collectives
    if form == "list":
        # Rank r's chunk for destination d is [r + 1, 10 d]; d receives the sum over r.
        total = float(sum(r + 1 for r in range(ws)))
        _expect(per_rank, "reduce_scatter", lambda rank: [total, 10.0 * rank * ws])
    else:
        # Rank r contributes r*100 + i at position i; destination d gets positions 2d, 2d+1.
        def chunk(rank: int) -> list[float]:
            return [float(sum(r * 100 + i for r in range(ws))) for i in (2 * rank, 2 * rank + 1)]

        _expect(per_rank, "reduce_scatter_single", chunk)


def test_broadcast(collectives: tuple[list[Any], int]) -> None:
    per_rank, ws = collectives
    _expect(per_rank, "broadcast", lambda rank: [[root * 7 + 1.0, -1.0] for root in range(ws)])


@pytest.mark.parametrize("form", ["list", "single"])
def test_all_to_all(form: str, collectives: tuple[list[Any], int]) -> None:
    per_rank, ws = collectives
    # Rank s sends 10 s + d to rank d: rank d receives [10 s + d for every s].
    if form == "list":
        _expect(per_rank, "all_to_all", lambda rank: [[10.0 * s + rank] for s in range(ws)])
    else:
        _expect(per_rank, "all_to_all_single", lambda rank: [10.0 * s + rank for s in range(ws)])


def test_send_recv(collectives: tuple[list[Any], int]) -> None:
    per_rank, ws = collectives

    def expected(rank: int) -> Any:
        # The ring brings the previous rank's tensor; the blocking pair goes 0 -> 1.
        return {"ring": [float((rank - 1) % ws), 42.0], "plain": [123.0] if rank == 1 else [0.0]}

    _expect(per_rank, "send_recv", expected)


def test_barrier(collectives: tuple[list[Any], int]) -> None:
    per_rank, ws = collectives
    _expect(per_rank, "barrier", lambda rank: [True] * ws)


@pytest.mark.parametrize("how", ["split_group", "new_subgroups"])
def test_split(how: str, collectives: tuple[list[Any], int]) -> None:
    per_rank, ws = collectives
    if how == "split_group":

        def expected(rank: int) -> Any:
            members = [r for r in range(ws) if r % 2 == rank % 2]
            return {
                "sum": [float(sum(r + 1 for r in members))],
                "size": len(members),
                "ranks": members,
            }
    else:

        def expected(rank: int) -> Any:
            return {
                "sub_sum": [rank + 1.0],
                "sub_size": 1,
                "count": ws,
                "group_sum": [float(sum(r + 1 for r in range(ws)))],
            }

    _expect(per_rank, how, expected)


# --------------------------------------------------------------------------------------
# Flight Recorder (gloo records natively; the hook attaches to any group)


@pytest.fixture
def flight_recorder(
    request: pytest.FixtureRequest, backend: Backend, capability_table: dict[str, dict[str, Any]]
) -> list[Any]:
    for name in ("flight_recorder", "gloo"):
        if not capability_table.get(name, {}).get("available"):
            pytest.skip(f"{name}: {capability_table.get(name, {}).get('reason')}")
    if backend.collective_backend == "gloo":  # the collectives session records them
        return request.getfixturevalue("collectives")[0]  # type: ignore[no-any-return]
    env = {"TORCH_FR_BUFFER_SIZE": str(FR_BUFFER_SIZE)}
    return _session(request, "flight-recorder", lambda: run_ranks(flight_recorder_rank, env=env))


def _check(per_rank: list[Any], name: str) -> list[Any]:
    try:
        return check_result(per_rank, name)
    except CheckSkipped as why:
        pytest.skip(f"{name}: {why}")


def test_flight_recorder_records_gloo(flight_recorder: list[Any]) -> None:
    for rank, trace in enumerate(_check(flight_recorder, "flight_recorder/recorded")):
        assert "entries" in trace["keys"], f"rank {rank}: dump has no 'entries': {trace['keys']}"
        by_size = {e["input_sizes"][0][0]: e for e in trace["entries"]}
        for name, size in FR_SIZES.items():
            entry = by_size.get(size)
            assert entry is not None, f"rank {rank}: no entry for {name} of size {size}"
            assert entry["profiling_name"] == f"gloo:{name}", (
                f"rank {rank}: {name} recorded as {entry['profiling_name']!r}"
            )
            assert entry["state"] in ("scheduled", "started", "completed"), (
                f"rank {rank}: {name} in unknown state {entry['state']!r}"
            )
        seq = [by_size[size]["collective_seq_id"] for size in FR_SIZES.values()]
        assert seq == sorted(seq) and len(set(seq)) == len(seq), (
            f"rank {rank}: collective_seq_id not increasing in issue order: {seq}"
        )


def test_flight_recorder_hook(flight_recorder: list[Any]) -> None:
    for rank, counts in enumerate(_check(flight_recorder, "flight_recorder/hook")):
        assert counts["with_hook"] == 1, (
            f"rank {rank}: FlightRecorderHook recorded {counts['with_hook']} c10d:allreduce "
            "entries for one all_reduce (expected 1)"
        )
        assert counts["after_remove"] == 0, (
            f"rank {rank}: {counts['after_remove']} entries recorded after remove()"
        )


def test_flight_recorder_buffer_size(flight_recorder: list[Any]) -> None:
    for rank, count in enumerate(_check(flight_recorder, "flight_recorder/ring_buffer")):
        assert count == FR_BUFFER_SIZE, (
            f"rank {rank}: TORCH_FR_BUFFER_SIZE={FR_BUFFER_SIZE} but the dump holds {count} entries"
        )


# --------------------------------------------------------------------------------------
# Fault tolerance: reconfigure (gloo implements it, so it runs on the CPU)

RECONFIGURE_WORLD = 3


@pytest.fixture
def reconfigured(
    request: pytest.FixtureRequest, capability_table: dict[str, dict[str, Any]]
) -> tuple[list[Any], int]:
    entry = capability_table.get("c10d_reconfigure", {})
    if not entry.get("available"):
        pytest.skip(f"c10d_reconfigure: {entry.get('reason')}")
    # At least one rank per node; on N < 3 nodes some node runs one rank alone (shrink).
    world_size = max(RECONFIGURE_WORLD, node_count())
    ranks = _session(
        request,
        "reconfigure",
        lambda: run_ranks(
            reconfigure_rank,
            world_size=world_size,
            backend="gloo",
            init_kwargs=enable_reconfigure,
        ),
    )
    return ranks, world_size


@pytest.mark.parametrize("step", ["configure", "reorder", "shrink"])
def test_reconfigure(step: str, reconfigured: tuple[list[Any], int]) -> None:
    per_rank, ws = reconfigured
    total = float(sum(range(1, ws + 1)))
    if step == "configure":
        _expect(
            per_rank, step, lambda rank: {"supported": True, "size": ws, "rank": rank, "sum": total}
        )
    elif step == "reorder":
        _expect(
            per_rank,
            step,
            lambda rank: {"rank": ws - 1 - rank, "size": ws, "sum": total, "broadcast": ws - 1.0},
        )
    else:
        # One rank was killed (SIGKILL); the survivors reconfigured without it, new ranks
        # 0..ws-2 each adding rank + 1.
        values = _check(per_rank, step)
        killed = [rank for rank, value in enumerate(values) if "killed" in value]
        assert len(killed) == 1, f"shrink: expected one killed rank, got {values}"
        lost = killed[0]
        survivor = {"size": ws - 1, "sum": float(sum(range(1, ws))), "lost": lost}
        _expect(per_rank, step, lambda rank: values[lost] if rank == lost else survivor)


# --------------------------------------------------------------------------------------
# nccl2, RMA windows, shrink_group


@pytest.mark.requires("nccl2", "cuda")
@pytest.mark.parametrize("communicator", ["blocking", "nonblocking"])
def test_nccl2_collectives(communicator: str, backend: Backend) -> None:
    import torch

    if "nccl2" not in backend.collective_backends:
        pytest.skip(f"nccl2 does not serve {backend.name} devices")
    world_size = torch.cuda.device_count()
    init = nccl2_nonblocking_init if communicator == "nonblocking" else nccl2_blocking_init
    per_rank = run_ranks(nccl2_rank, world_size=world_size, backend="nccl2", init_kwargs=init)
    ws = world_size
    every_rank = {
        "all_reduce": [float(sum(range(1, ws + 1)))] * 4,
        "all_gather": [[float(r)] * 2 for r in range(ws)],
        "broadcast": [5.0] * 3,
        "backend": "nccl2",
        "pg_type": "ProcessGroupNCCL2",
    }
    _expect(per_rank, "collectives", lambda rank: every_rank)


@pytest.mark.requires("rma_window")
def test_nccl2_rma_window() -> None:
    import torch

    ws = torch.cuda.device_count()
    per_rank = run_ranks(
        window_rank, world_size=ws, backend="nccl2", init_kwargs=nccl2_blocking_init
    )
    # Every rank's window receives what its left neighbour put there.
    _expect(per_rank, "window", lambda rank: [float((rank - 1) % ws + 1)] * 4)


@pytest.mark.requires("shrink_group")
def test_shrink_group() -> None:
    import torch

    ws = torch.cuda.device_count()
    per_rank = run_ranks(
        shrink_rank, world_size=ws, backend="nccl", init_kwargs=nccl2_blocking_init
    )
    total = float(sum(range(1, ws)))
    survivor = {"size": ws - 1, "sum": [total, total]}
    _expect(per_rank, "shrink", lambda rank: {"left": True} if rank == ws - 1 else survivor)
