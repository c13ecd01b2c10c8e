"""all_reduce timing inside the rank processes (spawned by accelkit.suite.distributed)."""

from __future__ import annotations

from typing import Any

from accelkit.suite import lockstep

# Calls per sample by size: the same on every rank (a per-rank estimate could differ and
# deadlock the collective), enough that small all_reduces are not timer-bound (a 16 KiB
# all_reduce over loopback takes 0.5-2 ms here).
TARGET_BYTES_PER_SAMPLE = 2 << 20
MAX_CALLS_PER_SAMPLE = 16
SAMPLES_PER_MIN_SAMPLE = 2
"""Samples per size: this many times the tier's `min_samples`. Over loopback the samples of
one pass spread widely (IQR 25-60% of the median on the 2-core machine), so the pass's
median needs more of them than a kernel's; shorter samples (16 calls, not 64) pay for it."""


def calls_per_sample(nbytes: int) -> int:
    return max(1, min(MAX_CALLS_PER_SAMPLE, TARGET_BYTES_PER_SAMPLE // max(1, nbytes)))


def all_reduce_rank(
    rank: int,
    world_size: int,
    *,
    backend: str,
    sizes: tuple[int, ...],
    samples: int,
    threads: int | None = None,
    turns: lockstep.Handoff | None = None,
) -> dict[int, list[float]]:
    """Seconds per all_reduce for each size in bytes; each sample is the slowest rank's.
    `backend` is the accelkit backend under test: it names each rank's device.

    `turns` (an interleaved A/B pass, from the case's `lockstep.relay()`): rank 0 takes
    the side's turn before each sample and the barrier holds rank 1 until it has; then
    both ranks make one untimed call (the other side's turn left the caches cold) and take
    the sample. Every sample of one side then lies between two of the other's, as in the
    cases timed in the case's own process."""
    import torch
    import torch.distributed as dist

    from accelkit import backends
    from accelkit.suite.timing import Timer

    if threads:
        torch.set_num_threads(threads)
    spec = backends.get(backend)
    device: Any = torch.device(spec.rank_device(rank))
    if not spec.host_memory:
        torch.accelerator.set_device_index(rank)
    timed_device = None if spec.host_memory else device
    out: dict[int, list[float]] = {}
    with lockstep.taking_turns(turns if rank == 0 else None):
        for nbytes in sizes:
            # Zeros stay zeros however often they are summed: no overflow to inf.
            tensor = torch.zeros(nbytes // 4, dtype=torch.float32, device=device)
            timer = Timer(dist.all_reduce, args=(tensor,), device=timed_device)
            timer.warmup(3)
            number = calls_per_sample(nbytes)
            mine: list[float] = []
            for index in range(samples):
                if rank == 0:
                    # A fixed count: enough once the last sample is next (lockstep.turn).
                    lockstep.turn(enough=index == samples - 1)
                dist.barrier()
                if turns is not None:
                    timer.timeit(1)  # on every rank (a collective): the first call after a turn
                mine.append(timer.sample(number))
            slowest = torch.tensor(mine, dtype=torch.float64)
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
            out[nbytes] = slowest.tolist()
    return out
