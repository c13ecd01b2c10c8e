"""all_reduce timing inside the rank processes (spawned by accelkit.suite.distributed)."""

from __future__ import annotations

from typing import Any

# Calls per sample by size: the same on every rank (a per-rank estimate could differ and
# deadlock the collective), enough that small all_reduces are not timer-bound.
TARGET_BYTES_PER_SAMPLE = 8 << 20


def calls_per_sample(nbytes: int) -> int:
    return max(1, min(64, TARGET_BYTES_PER_SAMPLE // max(1, nbytes)))


def all_reduce_rank(
    rank: int,
    world_size: int,
    *,
    backend: str,
    sizes: tuple[int, ...],
    samples: int,
    threads: int | None = None,
) -> dict[int, list[float]]:
    """Seconds per all_reduce for each size in bytes; each sample is the slowest rank's.
    `backend` is the accelkit backend under test: it names each rank's device."""
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
    out: dict[int, list[float]] = {}
    for nbytes in sizes:
        # Zeros stay zeros however often they are summed: no overflow to inf.
        tensor = torch.zeros(nbytes // 4, dtype=torch.float32, device=device)
        timer = Timer(dist.all_reduce, args=(tensor,), device=None if spec.host_memory else device)
        timer.warmup(3)
        number = calls_per_sample(nbytes)
        mine: list[float] = []
        for _ in range(samples):
            dist.barrier()
            mine.append(timer.sample(number))
        slowest = torch.tensor(mine, dtype=torch.float64)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        out[nbytes] = slowest.tolist()
    return out
