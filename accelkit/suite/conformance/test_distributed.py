"""c10d collectives in real rank processes (gloo on the CPU)."""

from __future__ import annotations

from typing import Any

import pytest

from accelkit.suite.distributed import run_ranks


def _all_reduce_rank(rank: int, world_size: int) -> list[float]:
    import torch
    import torch.distributed as dist

    tensor = torch.arange(4, dtype=torch.float32) + rank * 10
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor.tolist()


def _all_gather_rank(rank: int, world_size: int) -> list[list[float]]:
    import torch
    import torch.distributed as dist

    mine = torch.full((3,), float(rank + 1))
    gathered = [torch.empty(3) for _ in range(world_size)]
    dist.all_gather(gathered, mine)
    return [t.tolist() for t in gathered]


@pytest.mark.requires("gloo")
def test_all_reduce(accelkit_backend: str) -> None:
    out: list[Any] = run_ranks(_all_reduce_rank, world_size=2, backend="gloo")
    expected = [float(i * 2 + 10) for i in range(4)]  # rank 0: i, rank 1: i + 10
    for rank, values in enumerate(out):
        assert values == expected, f"rank {rank}: {values} != {expected}"


@pytest.mark.requires("gloo")
def test_all_gather(accelkit_backend: str) -> None:
    out: list[Any] = run_ranks(_all_gather_rank, world_size=2, backend="gloo")
    expected = [[1.0] * 3, [2.0] * 3]
    for rank, values in enumerate(out):
        assert values == expected, f"rank {rank}: {values} != {expected}"
