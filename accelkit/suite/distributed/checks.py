"""What runs inside the rank processes of the conformance suite's distributed cases
(suite/conformance/test_distributed.py): each rank session's rank function, the named
checks it runs (`run_checks`) and the inputs they start from.

Rank functions import torch inside: spawn pickles them by reference, and a rank imports this
module before torch. The expected values, and the cases that assert on them, are in the
cases module."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from accelkit.suite.distributed.ranks import (
    CheckSkipped,
    failure_domains,
    kill_this_rank,
    local_index,
    run_checks,
)

#: A rank's checks by name, each returning what the cases compare with their expectation.
Checks = dict[str, Callable[[], Any]]
#: What a rank function returns: each check's result (or its skip or failure) by name.
RankResults = dict[str, dict[str, Any]]

FR_BUFFER_SIZE = 64
# Distinctive sizes so the Flight Recorder entries of the recorded collectives can be found.
FR_SIZES = {"all_reduce": 13, "broadcast": 5, "all_gather": 3}
#: The fields of a Flight Recorder entry that the cases check.
FR_ENTRY_FIELDS = (
    "profiling_name",
    "input_sizes",
    "state",
    "retired",
    "collective_seq_id",
    "process_group",
)
FLOAT_OPS = ("SUM", "PRODUCT", "MIN", "MAX", "AVG")
INT_OPS = ("BAND", "BOR", "BXOR")


def reduce_input(rank: int) -> list[float]:
    return [rank + 2.0, 3.0 - rank, 0.5 * (rank + 1)]


def int_input(rank: int) -> list[int]:
    return [0b1100 | rank, 0b1010 ^ (rank + 1), 1 << rank]


def _device_env() -> tuple[str, str]:
    return os.environ["ACCELKIT_DIST_BACKEND"], os.environ["ACCELKIT_DIST_DEVICE"]


def accelerator_init_kwargs(rank: int, world_size: int) -> dict[str, Any]:
    """One rank per device: bind each rank's default group to its device (split needs it)."""
    import torch

    device = os.environ["ACCELKIT_DIST_DEVICE"]
    torch.accelerator.set_device_index(local_index(rank))
    return {"device_id": torch.device(device, local_index(rank))}


def _collective_checks(rank: int, world_size: int) -> Checks:
    import torch
    import torch.distributed as dist

    backend, device = _device_env()

    def t(values: list[float] | list[int], dtype: Any = torch.float32) -> Any:
        return torch.tensor(values, dtype=dtype, device=device)

    checks: Checks = {}

    def all_reduce(op: str) -> Any:
        tensor = t(reduce_input(rank))
        dist.all_reduce(tensor, op=getattr(dist.ReduceOp, op))
        return tensor.tolist()

    def all_reduce_int(op: str) -> Any:
        tensor = t(int_input(rank), torch.int64)
        dist.all_reduce(tensor, op=getattr(dist.ReduceOp, op))
        return tensor.tolist()

    def premul_sum() -> Any:
        make = getattr(dist, "_make_nccl_premul_sum", None)
        if backend == "gloo" or make is None:
            raise CheckSkipped(f"ReduceOp.PREMUL_SUM is NCCL-only; not offered by {backend}")
        tensor = t(reduce_input(rank))
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
        ops = [
            dist.P2POp(dist.isend, t([float(rank), 42.0]), right),
            dist.P2POp(dist.irecv, got, left),
        ]
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

    # Each of these checks is named after its function.
    named: tuple[Callable[[], Any], ...] = (all_gather, all_gather_single, reduce_scatter)
    named += (reduce_scatter_single, broadcast)
    named += (all_to_all, all_to_all_single, send_recv, barrier)
    checks.update({check.__name__: check for check in named})

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
        return {
            "sum": tensor.tolist(),
            "size": child.size(),
            "ranks": dist.get_process_group_ranks(child),
        }

    def new_subgroups() -> Any:
        mine, groups = dist.new_subgroups(group_size=1)
        tensor = t([rank + 1.0])
        dist.all_reduce(tensor, group=mine)
        pair = dist.new_group(list(range(world_size)))
        both = t([rank + 1.0])
        dist.all_reduce(both, group=pair)
        return {
            "sub_sum": tensor.tolist(),
            "sub_size": mine.size(),
            "count": len(groups),
            "group_sum": both.tolist(),
        }

    checks["split_group"] = split_group
    checks["new_subgroups"] = new_subgroups
    return checks


def _flight_recorder_checks(rank: int, world_size: int) -> Checks:
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
            {k: e.get(k) for k in FR_ENTRY_FIELDS}
            for e in trace.get("entries", [])
            if e.get("input_sizes") in ([[n]] for n in FR_SIZES.values())
        ]
        return {"keys": sorted(trace), "version": trace.get("version"), "entries": entries}

    def hook() -> Any:
        group = dist.new_group(list(range(world_size)), backend="gloo")

        def generic(size: int) -> int:
            return sum(
                1
                for e in dump().get("entries", [])
                if str(e.get("profiling_name", "")).startswith("c10d:")
                and e.get("input_sizes") == [[size]]
            )

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

    return {
        "flight_recorder/recorded": recorded,
        "flight_recorder/hook": hook,
        "flight_recorder/ring_buffer": ring_buffer,
    }


def collectives_rank(rank: int, world_size: int) -> RankResults:
    checks = _collective_checks(rank, world_size)
    if _device_env()[0] == "gloo":  # the CPU session also serves the Flight Recorder cases
        checks.update(_flight_recorder_checks(rank, world_size))
    return run_checks(checks)


def flight_recorder_rank(rank: int, world_size: int) -> RankResults:
    return run_checks(_flight_recorder_checks(rank, world_size))


def reconfigure_rank(rank: int, world_size: int) -> RankResults:
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
        return {
            "supported": supported,
            "size": group.size(),
            "rank": group.rank(),
            "sum": all_reduce(),
        }

    def reorder() -> Any:
        # A list assigns ranks by position: reversed handles reverse the ranks.
        dist._reconfigure(2, handles("second", list(reversed(range(world_size))))).wait()
        tensor = torch.tensor([float(rank)])
        dist.broadcast(tensor, src=0)  # new rank 0 is the old last rank
        return {
            "rank": group.rank(),
            "size": group.size(),
            "sum": all_reduce(),
            "broadcast": float(tensor.item()),
        }

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


def nccl2_rank(rank: int, world_size: int) -> RankResults:
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
        return {
            "all_reduce": tensor.tolist(),
            "all_gather": [g.tolist() for g in gathered],
            "broadcast": root.tolist(),
            "backend": str(backend),
            "pg_type": type(dist.group.WORLD._get_backend(device)).__name__,
        }

    return run_checks({"collectives": collectives})


def nccl2_nonblocking_init(rank: int, world_size: int) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(local_index(rank))
    options = dist.ProcessGroupNCCL.Options()
    options.config.blocking = 0  # a non-blocking communicator
    return {"pg_options": options, "device_id": torch.device("cuda", local_index(rank))}


def nccl2_blocking_init(rank: int, world_size: int) -> dict[str, Any]:
    import torch

    torch.cuda.set_device(local_index(rank))
    return {"device_id": torch.device("cuda", local_index(rank))}


def enable_reconfigure(rank: int, world_size: int) -> dict[str, Any]:
    return {"enable_reconfigure": True}


def window_rank(rank: int, world_size: int) -> RankResults:
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


def shrink_rank(rank: int, world_size: int) -> RankResults:
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
