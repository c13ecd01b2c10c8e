"""Running a function in several real rank processes on loopback, for c10d cases.

Each rank is a fresh `spawn`ed process that joins a process group through a FileStore in a
temporary directory. Rank processes never outlive the case: they are joined with a deadline
and killed in `finally`, whatever happened.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import tempfile
import traceback
from collections.abc import Callable
from typing import Any

RankFn = Callable[[int, int], Any]


def _rank_main(fn: RankFn, rank: int, world_size: int, backend: str, store_path: str,
               results: Any) -> None:  # fmt: skip
    try:
        import torch.distributed as dist

        store = dist.FileStore(store_path, world_size)  # type: ignore[attr-defined]
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size)
        try:
            value = fn(rank, world_size)
        finally:
            dist.destroy_process_group()
        results.put((rank, "ok", value))
    except BaseException:
        results.put((rank, "error", traceback.format_exc(limit=8)))


def run_ranks(fn: RankFn, *, world_size: int = 2, backend: str = "gloo",
              timeout_s: float = 120.0) -> list[Any]:  # fmt: skip
    """`fn(rank, world_size)` in `world_size` processes; their return values by rank.

    `fn` must be a module-level function (spawn pickles it by reference). A rank that raises
    fails the call with its traceback; a rank that does not finish in time is killed.
    """
    context = mp.get_context("spawn")
    results: Any = context.Queue()
    with tempfile.TemporaryDirectory(prefix="accelkit-dist-") as tmp:
        store_path = os.path.join(tmp, "store")
        procs = [
            context.Process(
                target=_rank_main,
                args=(fn, rank, world_size, backend, store_path, results),
                daemon=True,
            )
            for rank in range(world_size)
        ]
        try:
            for proc in procs:
                proc.start()
            outputs: dict[int, Any] = {}
            errors: list[str] = []
            for _ in range(world_size):
                try:
                    rank, status, value = results.get(timeout=timeout_s)
                except queue.Empty:
                    missing = sorted(set(range(world_size)) - set(outputs))
                    raise AssertionError(
                        f"ranks {missing} did not finish within {timeout_s:g} s"
                    ) from None
                if status == "ok":
                    outputs[rank] = value
                else:
                    errors.append(f"rank {rank} failed:\n{value}")
                    break
            if errors:
                raise AssertionError("\n".join(errors))
            return [outputs[rank] for rank in range(world_size)]
        finally:
            for proc in procs:
                proc.join(timeout=5)
                if proc.is_alive():
                    proc.kill()
                    proc.join(timeout=5)
            results.close()
