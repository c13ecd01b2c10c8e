"""c10d in real rank processes: every collective with exact expected values, group splitting,
reconfigure-based fault tolerance, the Flight Recorder, nccl2, RMA windows and shrink_group.

The collectives run on the backend torch assigns to the device under test (gloo on the CPU
with 2 ranks; nccl/xccl with one rank per device). Spawning ranks costs seconds, so each
rank *session* runs many named checks at once (`run_checks`) and is shared by the cases
that assert on it, once per run even across pytest-xdist workers (a file lock in pytest's
shared temporary directory; pytest-xdist's documented recipe). Every case still asserts
only on its own checks, with its own message. Rank processes are joined or killed before
the session's first case finishes.

Rank functions import torch inside: spawn pickles them by reference and this module must
import cheaply in a rank.

The same cases run across nodes (`accelkit test --suite distributed --nnodes N`): each rank
session is then a torchrun job over the nodes (`accelkit.suite.multinode`), with the world
size the session asks for split over them (accelerators: one rank per device on every node).

Longer than 600 lines because each rank session's rank function sits beside the cases that
assert on its checks, so a check and its expected values are read together; the sessions are
independent, and the module splits along them when the multi-node (torchrun) path arrives.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from accelkit.backends.base import Backend
from accelkit.suite.distributed import (
    CheckSkipped,
    check_result,
    failure_domains,
    kill_this_rank,
    local_index,
    node_count,
    run_checks,
    run_ranks,
)
from accelkit.suite.failures import add_failure_info, failure_info

# The rank sessions are shared by the module's cases: `accelkit test --shard` keeps them in
# one shard, so no shard starts them again.
pytestmark = pytest.mark.shard_group("distributed")

FR_BUFFER_SIZE = 64
# Distinctive sizes so the Flight Recorder entries of the recorded collectives can be found.
FR_SIZES = {"all_reduce": 13, "broadcast": 5, "all_gather": 3}
FLOAT_OPS = ("SUM", "PRODUCT", "MIN", "MAX", "AVG")
INT_OPS = ("BAND", "BOR", "BXOR")

# --------------------------------------------------------------------------------------
# Expected values (pure functions of rank and world size)


def _reduce_input(rank: int) -> list[float]:
    return [rank + 2.0, 3.0 - rank, 0.5 * (rank + 1)]


def _expected_reduce(op: str, world_size: int) -> list[float]:
    columns = list(zip(*(_reduce_input(r) for r in range(world_size)), strict=True))
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


def _int_input(rank: int) -> list[int]:
    return [0b1100 | rank, 0b1010 ^ (rank + 1), 1 << rank]


def _expected_int(op: str, world_size: int) -> list[int]:
    columns = list(zip(*(_int_input(r) for r in range(world_size)), strict=True))
    result = []
    for col in columns:
        value = col[0]
        for c in col[1:]:
            value = value & c if op == "BAND" else value | c if op == "BOR" else value ^ c
        result.append(value)
    return result


# --------------------------------------------------------------------------------------
# What runs inside each rank


def _device_env() -> tuple[str, str]:
    return os.environ["ACCELKIT_DIST_BACKEND"], os.environ["ACCELKIT_DIST_DEVICE"]


def _accelerator_init_kwargs(rank: int, world_size: int) -> dict[str, Any]:
    """One rank per device: bind each rank's default group to its device (split needs it)."""
    import torch

    device = os.environ["ACCELKIT_DIST_DEVICE"]
    torch.accelerator.set_device_index(local_index(rank))
    return {"device_id": torch.device(device, local_index(rank))}


def _collective_checks(rank: int, world_size: int) -> dict[str, Callable[[], Any]]:
    import torch
    import torch.distributed as dist

    backend, device = _device_env()

    def t(values: list[float] | list[int], dtype: Any = torch.float32) -> Any:
        return torch.tensor(values, dtype=dtype, device=device)

    checks: dict[str, Callable[[], Any]] = {}

    def all_reduce(op: str) -> Any:
        tensor = t(_reduce_input(rank))
        dist.all_reduce(tensor, op=getattr(dist.ReduceOp, op))
        return tensor.tolist()

    def all_reduce_int(op: str) -> Any:
        tensor = t(_int_input(rank), torch.int64)
        dist.all_reduce(tensor, op=getattr(dist.ReduceOp, op))
        return tensor.tolist()

    def premul_sum() -> Any:
        make = getattr(dist, "_make_nccl_premul_sum", None)
        if backend == "gloo" or make is None:
            raise CheckSkipped(f"ReduceOp.PREMUL_SUM is NCCL-only; not offered by {backend}")
        tensor = t(_reduce_input(rank))
        dist.all_reduce(tensor, op=make(2.0))
        return tensor.tolist()

    for op in FLOAT_OPS:
        checks[f"all_reduce/{op}"] = lambda op=op: all_reduce(op)
    for op in INT_OPS:
        checks[f"all_reduce/{op}"] = lambda op=op: all_reduce_int(op)
    checks["all_reduce/PREMUL_SUM"] = premul_sum

    def all_gather() -> Any:
        out = [t([0.0, 0.0]) for _ in range(world_size)]
        dist.all_gather(out, t([rank + 1.0, -rank]))
        return [o.tolist() for o in out]

    def all_gather_single() -> Any:
        fn = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        out = t([0.0] * (2 * world_size))
        fn(out, t([rank + 1.0, -rank]))
        return out.tolist()

    def reduce_scatter() -> Any:
        out = t([0.0, 0.0])
        dist.reduce_scatter(out, [t([rank + 1.0, 10.0 * r]) for r in range(world_size)])
        return out.tolist()

    def reduce_scatter_single() -> Any:
        fn = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        out = t([0.0, 0.0])
        fn(out, t([float(rank * 100 + i) for i in range(2 * world_size)]))
        return out.tolist()

    def broadcast() -> Any:
        got = []
        for root in range(world_size):
            tensor = t([float(rank * 7 + 1), -1.0])
            dist.broadcast(tensor, src=root)
            got.append(tensor.tolist())
        return got

    def all_to_all() -> Any:
        out = [t([0.0]) for _ in range(world_size)]
        dist.all_to_all(out, [t([10.0 * rank + dst]) for dst in range(world_size)])
        return [o.tolist() for o in out]

    def all_to_all_single() -> Any:
        out = t([0.0] * world_size)
        dist.all_to_all_single(out, t([10.0 * rank + dst for dst in range(world_size)]))
        return out.tolist()

    def send_recv() -> Any:
        # A ring: everyone sends to the next rank and receives from the previous one.
        right, left = (rank + 1) % world_size, (rank - 1) % world_size
        got = t([0.0, 0.0])
        ops = [dist.P2POp(dist.isend, t([float(rank), 42.0]), right),
               dist.P2POp(dist.irecv, got, left)]  # fmt: skip
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        # And the blocking pair, rank 0 -> 1.
        plain = t([0.0])
        if rank == 0:
            dist.send(t([123.0]), dst=1)
        elif rank == 1:
            dist.recv(plain, src=0)
        return {"ring": got.tolist(), "plain": plain.tolist()}

    def barrier() -> Any:
        # Everyone writes a key, then waits: after the barrier every key must be there.
        store = dist.distributed_c10d._get_default_store()
        store.set(f"barrier/{rank}", "1")
        dist.barrier()
        return [store.check([f"barrier/{r}"]) for r in range(world_size)]

    checks.update({
        "all_gather": all_gather, "all_gather_single": all_gather_single,
        "reduce_scatter": reduce_scatter, "reduce_scatter_single": reduce_scatter_single,
        "broadcast": broadcast, "all_to_all": all_to_all,
        "all_to_all_single": all_to_all_single, "send_recv": send_recv, "barrier": barrier,
    })  # fmt: skip

    def split_group() -> Any:
        # One child group per rank parity; the split keeps the parent's rank order.
        parity = [[r for r in range(world_size) if r % 2 == p] for p in (0, 1)]
        try:
            child = dist.split_group(split_ranks=[p for p in parity if p])
        except RuntimeError as exc:
            if "No device associated with the default pg" in str(exc):
                raise CheckSkipped(
                    f"split_group needs a default group bound to an accelerator (device_id); "
                    f"{backend} on the CPU has none: {exc}"
                ) from None
            raise
        tensor = t([rank + 1.0])
        dist.all_reduce(tensor, group=child)
        return {"sum": tensor.tolist(), "size": child.size(),
                "ranks": dist.get_process_group_ranks(child)}  # fmt: skip

    def new_subgroups() -> Any:
        mine, groups = dist.new_subgroups(group_size=1)
        tensor = t([rank + 1.0])
        dist.all_reduce(tensor, group=mine)
        pair = dist.new_group(list(range(world_size)))
        both = t([rank + 1.0])
        dist.all_reduce(both, group=pair)
        return {"sub_sum": tensor.tolist(), "sub_size": mine.size(), "count": len(groups),
                "group_sum": both.tolist()}  # fmt: skip

    checks["split_group"] = split_group
    checks["new_subgroups"] = new_subgroups
    return checks


def _flight_recorder_checks(rank: int, world_size: int) -> dict[str, Callable[[], Any]]:
    """Record a known sequence on a fresh gloo group, then read the recorder's JSON dump."""
    import json as json_module

    import torch
    import torch._C._distributed_c10d as c10d
    import torch.distributed as dist

    def dump() -> dict[str, Any]:
        return dict(json_module.loads(c10d._dump_fr_trace_json()))

    def recorded() -> Any:
        group = dist.new_group(list(range(world_size)), backend="gloo")
        dist.all_reduce(torch.ones(FR_SIZES["all_reduce"]), group=group)
        dist.broadcast(torch.ones(FR_SIZES["broadcast"]), src=0, group=group)
        gathered = [torch.empty(FR_SIZES["all_gather"]) for _ in range(world_size)]
        dist.all_gather(gathered, torch.ones(FR_SIZES["all_gather"]), group=group)
        trace = dump()
        entries = [
            {
                k: e.get(k)
                for k in (
                    "profiling_name",
                    "input_sizes",
                    "state",
                    "retired",
                    "collective_seq_id",
                    "process_group",
                )
            }
            for e in trace.get("entries", [])
            if e.get("input_sizes") in ([[n]] for n in FR_SIZES.values())
        ]
        return {"keys": sorted(trace), "version": trace.get("version"), "entries": entries}

    def hook() -> Any:
        group = dist.new_group(list(range(world_size)), backend="gloo")

        def generic(size: int) -> int:
            return sum(
                1 for e in dump().get("entries", [])
                if str(e.get("profiling_name", "")).startswith("c10d:")
                and e.get("input_sizes") == [[size]]
            )  # fmt: skip

        handle = c10d.FlightRecorderHook.attach(group)
        dist.all_reduce(torch.ones(11), group=group)
        with_hook = generic(11)
        handle.remove()
        dist.all_reduce(torch.ones(17), group=group)
        return {"with_hook": with_hook, "after_remove": generic(17)}

    def ring_buffer() -> Any:
        # More collectives than the buffer holds: the dump keeps exactly the newest ones.
        group = dist.new_group(list(range(world_size)), backend="gloo")
        for _ in range(FR_BUFFER_SIZE + 8):
            dist.all_reduce(torch.ones(2), group=group)
        return len(dump().get("entries", []))

    return {"flight_recorder/recorded": recorded, "flight_recorder/hook": hook,
            "flight_recorder/ring_buffer": ring_buffer}  # fmt: skip


def _collectives_rank(rank: int, world_size: int) -> dict[str, dict[str, Any]]:
    checks = _collective_checks(rank, world_size)
    if _device_env()[0] == "gloo":  # the CPU session also serves the Flight Recorder cases
        checks.update(_flight_recorder_checks(rank, world_size))
    return run_checks(checks)


def _flight_recorder_rank(rank: int, world_size: int) -> dict[str, dict[str, Any]]:
    return run_checks(_flight_recorder_checks(rank, world_size))


def _reconfigure_rank(rank: int, world_size: int) -> dict[str, dict[str, Any]]:
    """Fault tolerance with gloo: (re)configure the world group at run time, reorder its
    ranks, then lose the last peer and carry on with the survivors."""
    import torch
    import torch.distributed as dist

    store = dist.distributed_c10d._get_default_store()
    group = dist.group.WORLD

    def handles(round_name: str, peers: list[int]) -> list[str]:
        store.set(f"{round_name}/{rank}", dist._get_reconfigure_handle())
        return [store.get(f"{round_name}/{peer}").decode() for peer in peers]

    def all_reduce() -> float:
        tensor = torch.tensor([float(rank + 1)])
        dist.all_reduce(tensor)
        return float(tensor.item())

    def configure() -> Any:
        supported = dist._supports_reconfigure()
        dist._reconfigure(1, handles("first", list(range(world_size)))).wait()
        return {"supported": supported, "size": group.size(), "rank": group.rank(),
                "sum": all_reduce()}  # fmt: skip

    def reorder() -> Any:
        # A list assigns ranks by position: reversed handles reverse the ranks.
        dist._reconfigure(2, handles("second", list(reversed(range(world_size))))).wait()
        tensor = torch.tensor([float(rank)])
        dist.broadcast(tensor, src=0)  # new rank 0 is the old last rank
        return {"rank": group.rank(), "size": group.size(), "sum": all_reduce(),
                "broadcast": float(tensor.item())}  # fmt: skip

    def shrink() -> Any:
        # Lose a rank the hard way (SIGKILL, as a lost host would) and carry on without it:
        # the highest rank alone in its failure domain, so no other rank goes with it.
        domains = failure_domains(world_size)
        alone = [r for r in range(world_size) if domains.count(domains[r]) == 1]
        if not alone:
            raise CheckSkipped("no rank runs alone on its node: killing one stops its peers too")
        lost = alone[-1]
        if rank == lost:
            kill_this_rank("SIGKILL, as a lost host")
        survivors = [r for r in range(world_size) if r != lost]
        dist._reconfigure(3, handles("third", survivors)).wait()
        tensor = torch.tensor([float(group.rank() + 1)])
        dist.all_reduce(tensor)
        return {"size": group.size(), "sum": float(tensor.item()), "lost": lost}

    return run_checks({"configure": configure, "reorder": reorder, "shrink": shrink})


def _nccl2_rank(rank: int, world_size: int) -> dict[str, dict[str, Any]]:
    import torch
    import torch.distributed as dist

    def collectives() -> Any:
        device = torch.device("cuda", local_index(rank))
        tensor = torch.full((4,), float(rank + 1), device=device)
        dist.all_reduce(tensor)
        gathered = [torch.empty(2, device=device) for _ in range(world_size)]
        dist.all_gather(gathered, torch.full((2,), float(rank), device=device))
        root = torch.full((3,), float(rank + 5), device=device)
        dist.broadcast(root, src=0)
        torch.cuda.synchronize(device)
        backend = dist.get_backend()
        return {"all_reduce": tensor.tolist(), "all_gather": [g.tolist() for g in gathered],
                "broadcast": root.tolist(), "backend": str(backend),
                "pg_type": type(dist.group.WORLD._get_backend(device)).__name__}  # fmt: skip

    return run_checks({"collectives": collectives})


def _nccl2_nonblocking_init(rank: int, world_size: int) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(local_index(rank))
    options = dist.ProcessGroupNCCL.Options()
    options.config.blocking = 0  # a non-blocking communicator
    return {"pg_options": options, "device_id": torch.device("cuda", local_index(rank))}


def _nccl2_blocking_init(rank: int, world_size: int) -> dict[str, Any]:
    import torch

    torch.cuda.set_device(local_index(rank))
    return {"device_id": torch.device("cuda", local_index(rank))}


# --------------------------------------------------------------------------------------
# Sessions: run once per test run, shared by the cases (and pytest-xdist workers)


def _shared_dir(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    base = tmp_path_factory.getbasetemp()
    return base.parent if worker_id != "master" else base


def _session(request: pytest.FixtureRequest, name: str,
             start: Callable[[], list[Any]]) -> list[Any]:  # fmt: skip
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
    init = None if backend.host_memory else _accelerator_init_kwargs
    ranks = _session(
        request,
        f"collectives-{c10d}",
        lambda: run_ranks(
            _collectives_rank,
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
    _expect(per_rank, "send_recv", lambda rank: {
        "ring": [float((rank - 1) % ws), 42.0],
        "plain": [123.0] if rank == 1 else [0.0],
    })  # fmt: skip


def test_barrier(collectives: tuple[list[Any], int]) -> None:
    per_rank, ws = collectives
    _expect(per_rank, "barrier", lambda rank: [True] * ws)


@pytest.mark.parametrize("how", ["split_group", "new_subgroups"])
def test_split(how: str, collectives: tuple[list[Any], int]) -> None:
    per_rank, ws = collectives
    if how == "split_group":

        def expected(rank: int) -> Any:
            members = [r for r in range(ws) if r % 2 == rank % 2]
            return {"sum": [float(sum(r + 1 for r in members))], "size": len(members),
                    "ranks": members}  # fmt: skip
    else:

        def expected(rank: int) -> Any:
            return {"sub_sum": [rank + 1.0], "sub_size": 1, "count": ws,
                    "group_sum": [float(sum(r + 1 for r in range(ws)))]}  # fmt: skip

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
    return _session(request, "flight-recorder", lambda: run_ranks(_flight_recorder_rank, env=env))


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
            _reconfigure_rank,
            world_size=world_size,
            backend="gloo",
            init_kwargs=_enable_reconfigure,
        ),
    )
    return ranks, world_size


def _enable_reconfigure(rank: int, world_size: int) -> dict[str, Any]:
    return {"enable_reconfigure": True}


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
    init = _nccl2_nonblocking_init if communicator == "nonblocking" else _nccl2_blocking_init
    per_rank = run_ranks(_nccl2_rank, world_size=world_size, backend="nccl2", init_kwargs=init)
    ws = world_size
    _expect(per_rank, "collectives", lambda rank: {
        "all_reduce": [float(sum(range(1, ws + 1)))] * 4,
        "all_gather": [[float(r)] * 2 for r in range(ws)],
        "broadcast": [5.0] * 3,
        "backend": "nccl2",
        "pg_type": "ProcessGroupNCCL2",
    })  # fmt: skip


def _window_rank(rank: int, world_size: int) -> dict[str, dict[str, Any]]:
    import torch
    import torch.distributed as dist

    def window() -> Any:
        device = torch.device("cuda", local_index(rank))
        if not dist._supports_window():
            raise AssertionError("the nccl2 group does not support windows")
        buffer = torch.zeros(4, device=device)
        win = dist._new_window(buffer)
        peer = (rank + 1) % world_size
        # Window.put(tensor, dst_rank, target_offset_nelems, async_op) in 2.14.1.
        for work in (
            win.put(torch.full((4,), float(rank + 1), device=device), peer, 0, False),
            win.signal(peer, False),
            win.wait_signal((rank - 1) % world_size, False),
        ):
            if work is not None:
                work.wait()
        torch.cuda.synchronize(device)
        return buffer.tolist()

    return run_checks({"window": window})


@pytest.mark.requires("rma_window")
def test_nccl2_rma_window() -> None:
    import torch

    ws = torch.cuda.device_count()
    per_rank = run_ranks(_window_rank, world_size=ws, backend="nccl2",
                         init_kwargs=_nccl2_blocking_init)  # fmt: skip
    # Every rank's window receives what its left neighbour put there.
    _expect(per_rank, "window", lambda rank: [float((rank - 1) % ws + 1)] * 4)


def _shrink_rank(rank: int, world_size: int) -> dict[str, dict[str, Any]]:
    import torch
    import torch.distributed as dist

    def shrink() -> Any:
        device = torch.device("cuda", local_index(rank))
        last = world_size - 1
        if rank == last:
            return {"left": True}
        group = dist.shrink_group([last])
        tensor = torch.full((2,), float(rank + 1), device=device)
        dist.all_reduce(tensor, group=group)
        torch.cuda.synchronize(device)
        return {"size": group.size(), "sum": tensor.tolist()}

    return run_checks({"shrink": shrink})


@pytest.mark.requires("shrink_group")
def test_shrink_group() -> None:
    import torch

    ws = torch.cuda.device_count()
    per_rank = run_ranks(_shrink_rank, world_size=ws, backend="nccl",
                         init_kwargs=_nccl2_blocking_init)  # fmt: skip
    total = float(sum(range(1, ws)))
    _expect(per_rank, "shrink", lambda rank: {"left": True} if rank == ws - 1
            else {"size": ws - 1, "sum": [total, total]})  # fmt: skip
