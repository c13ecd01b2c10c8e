"""all_reduce timing inside the rank processes (spawned by accelkit.suite.distributed.ranks)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from accelkit.suite.session import lockstep

SAMPLES_PER_MIN_SAMPLE = 8
"""Samples per size: this many times the tier's `min_samples` (160 on the host tier). A
sample is one call. Calls over loopback are bimodal: most take the message's time, and a
minority wait for a CPU (3-4 ms against 0.2-0.4 ms for 16 KiB under `stress-ng`, 35-40% of
calls). The median of single calls stays in the first mode; the mean of a block of calls
counts however many of the waits the block caught, so blocks of 16 spread by 25-90% of
their median within one pass. Measured in interleaved A/A runs of 10 pass pairs
(benchmarks/bench_ab_noise.py -k 'all_reduce or canary', 2026-12-03): with 40 blocks of 16
calls, CI half-widths 5-12% quiet and 10-62% loaded; with 160 single calls, 2.7% quiet and
4.8-6.0% loaded, for about 40 s more per run."""


def shared_cpu() -> int | None:
    """The one CPU both host ranks run on while they are timed, or None (one CPU allowed,
    or no affinity on this platform): the highest this process may use, the CPU
    `lockstep.pin_cpu` gives an interleaved run's samples, so both sides' ranks share it.

    Why one CPU: on the shared 2-core VM, a gloo all_reduce between ranks on two CPUs
    waits for the other virtual CPU to wake in 35-45% of calls (3-4 ms against 0.2-0.5 ms
    for a 16 KiB message, measured quiet with each rank pinned to its own CPU, and
    unpinned). That wake-up is the hypervisor's, not the collective's: a sample of 16
    calls varied 25-90% by how many of its calls it hit. With both ranks on one CPU, the
    16 KiB call took 0.18-0.35 ms (5th-95th percentile) quiet and under `stress-ng`."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    return lockstep.highest_cpu(os.sched_getaffinity(0))


@contextlib.contextmanager
def process_on_cpu(cpu: int | None) -> Iterator[None]:
    """Every thread of this process (the collective library's own threads too, started
    before the block) runs on `cpu` for the block, then gets its affinity back. No-op for
    None."""
    if cpu is None:
        yield
        return
    before: dict[int, set[int]] = {}
    for tid in _threads():
        with contextlib.suppress(OSError):  # a thread may end between listing and pinning
            previous = os.sched_getaffinity(tid)
            os.sched_setaffinity(tid, {cpu})
            before[tid] = previous
    try:
        yield
    finally:
        for tid, previous in before.items():
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, previous)


def _threads() -> list[int]:
    """This process's thread ids (Linux's /proc), else 0: the calling thread alone."""
    try:
        return [int(name) for name in os.listdir("/proc/self/task")]
    except OSError:
        return [0]


def all_reduce_rank(
    rank: int,
    world_size: int,
    *,
    backend: str,
    sizes: tuple[int, ...],
    samples: int,
    threads: int | None = None,
    turns: lockstep.Handoff | None = None,
    cpu: int | None = None,
) -> dict[int, list[float]]:
    """Seconds per all_reduce for each size in bytes; each sample is the slowest rank's.
    `backend` is the accelkit backend under test: it names each rank's device.

    `turns` (an interleaved A/B pass, from the case's `lockstep.relay()`): rank 0 takes
    the side's turn before each sample and the barrier holds rank 1 until it has; then
    both ranks make one untimed call (the other side's turn left the caches cold) and take
    the sample. Every sample of one side then lies between two of the other's, as in the
    cases timed in the case's own process.

    `cpu` (host ranks, from `shared_cpu()`): every rank runs on that one CPU while it
    measures."""
    import torch
    import torch.distributed as dist

    from accelkit import backends
    from accelkit.suite.perf.timing import Timer

    if threads:
        torch.set_num_threads(threads)
    spec = backends.get(backend)
    device: Any = torch.device(spec.rank_device(rank))
    if not spec.host_memory:
        torch.accelerator.set_device_index(rank)
    timed_device = None if spec.host_memory else device
    out: dict[int, list[float]] = {}
    with lockstep.taking_turns(turns if rank == 0 else None), process_on_cpu(cpu):
        for nbytes in sizes:
            # Zeros stay zeros however often they are summed: no overflow to inf.
            tensor = torch.zeros(nbytes // 4, dtype=torch.float32, device=device)
            timer = Timer(dist.all_reduce, args=(tensor,), device=timed_device)
            timer.warmup(3)
            mine: list[float] = []
            for index in range(samples):
                if rank == 0:
                    # A fixed count: enough once the last sample is next (lockstep.turn).
                    lockstep.turn(enough=index == samples - 1)
                dist.barrier()
                if turns is not None:
                    timer.timeit(1)  # on every rank (a collective): the first call after a turn
                mine.append(timer.sample(1))
            slowest = torch.tensor(mine, dtype=torch.float64)
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
            out[nbytes] = slowest.tolist()
    return out
