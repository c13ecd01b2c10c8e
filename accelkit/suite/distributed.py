"""Running a function in several real rank processes on loopback, for c10d cases.

Each rank is a fresh `spawn`ed process that joins a process group through a FileStore in a
temporary directory. Rank processes never outlive the case: they are joined with a deadline
and killed in `finally`, whatever happened.

A rank process costs a fresh interpreter and a torch import (seconds on a small machine),
so cases batch related checks into one rank function with `run_checks`: every check runs
and reports on its own (value or traceback), and the case asserts on each by name.

The same rank functions run across nodes as a torchrun job when `accelkit test --nnodes N`
started the pytest session (`accelkit.suite.multinode`): `run_ranks` hands them to it, and
the cases do not change. A check may end its own rank the hard way (`kill_this_rank`, as a
lost host would) after reporting what it ran; `failure_domains` says which ranks go down
with it (under torchrun, its node's agent stops the node's other ranks).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import signal
import tempfile
import traceback
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any, NoReturn

RankFn = Callable[[int, int], Any]
# (rank, world_size) -> extra keyword arguments for init_process_group, built in the rank
# (options objects such as ProcessGroupNCCL.Options cannot be pickled).
InitKwargsFn = Callable[[int, int], dict[str, Any]]
CheckFn = Callable[[], Any]

# How long one collective may block before c10d gives up: far below the case's deadline,
# so a rank whose peer died fails with c10d's message instead of being killed silently.
PG_TIMEOUT = timedelta(seconds=60)


# How this rank hands its final value to the launcher now (set in each rank process by the
# launcher that started it): what `kill_this_rank` reports before it dies.
_deliver: Callable[[Any], None] | None = None


def set_delivery(deliver: Callable[[Any], None] | None) -> None:
    global _deliver
    _deliver = deliver


def _rank_main(fn: RankFn, rank: int, world_size: int, backend: str, store_path: str,
               results: Any, env: Mapping[str, str],
               init_kwargs: InitKwargsFn | None) -> None:  # fmt: skip
    def deliver(value: Any) -> None:  # then SIGKILL: flush the queue's feeder thread first
        results.put((rank, "ok", value))
        results.close()
        results.join_thread()

    set_delivery(deliver)
    try:
        # Before torch reads its environment (the Flight Recorder's buffer size, NCCL
        # options): c10d reads these when the first process group is created.
        os.environ.update(env)
        import torch.distributed as dist

        store = dist.FileStore(store_path, world_size)  # type: ignore[attr-defined]
        kwargs: dict[str, Any] = {"timeout": PG_TIMEOUT}
        if init_kwargs is not None:
            kwargs.update(init_kwargs(rank, world_size))
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size, **kwargs)
        try:
            value = fn(rank, world_size)
        finally:
            dist.destroy_process_group()
        results.put((rank, "ok", value))
    except BaseException:
        results.put((rank, "error", traceback.format_exc(limit=8)))


def run_ranks(fn: RankFn, *, world_size: int = 2, backend: str = "gloo",
              timeout_s: float = 120.0, env: Mapping[str, str] | None = None,
              init_kwargs: InitKwargsFn | None = None) -> list[Any]:  # fmt: skip
    """`fn(rank, world_size)` in `world_size` processes; their return values by rank.

    `fn` and `init_kwargs` must be module-level functions (spawn pickles them by
    reference). `env` is set in each rank before the process group is created. A rank that
    raises fails the call with its traceback; a rank that does not finish in time is killed.
    Under `accelkit test --nnodes` the ranks are a torchrun job across the nodes instead.
    """
    from accelkit.suite import multinode

    if multinode.active():
        return multinode.run_job(
            fn,
            world_size=world_size,
            backend=backend,
            timeout_s=timeout_s,
            env=env,
            init_kwargs=init_kwargs,
            pg_timeout=PG_TIMEOUT,
        )
    context = mp.get_context("spawn")
    results: Any = context.Queue()
    with tempfile.TemporaryDirectory(prefix="accelkit-dist-") as tmp:
        store_path = os.path.join(tmp, "store")
        procs = [
            context.Process(
                target=_rank_main,
                args=(
                    fn,
                    rank,
                    world_size,
                    backend,
                    store_path,
                    results,
                    dict(env or {}),
                    init_kwargs,
                ),
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


# --------------------------------------------------------------------------------------
# Many named checks in one rank session


class CheckSkipped(Exception):
    """Raised by a check that cannot run with this backend; the message is the reason."""


def run_checks(checks: Mapping[str, CheckFn]) -> dict[str, dict[str, Any]]:
    """Run each check in order; `{name: {"ok": value} | {"skip": why} | {"error": tb}}`.

    A failing check does not stop the others (a collective that raised on every rank leaves
    the group usable). Values must be picklable (they travel back over a queue).
    """
    out: dict[str, dict[str, Any]] = {}
    for name, check in checks.items():
        _running.update(out=out, current=name)
        try:
            out[name] = {"ok": check()}
        except CheckSkipped as why:
            out[name] = {"skip": str(why)}
        except Exception:
            out[name] = {"error": traceback.format_exc(limit=6)}
    _running.clear()
    return out


_running: dict[str, Any] = {}
"""The checks `run_checks` has run so far in this rank, and the one running now."""


def kill_this_rank(reason: str) -> NoReturn:
    """End this rank by SIGKILL, as a lost host or the OOM killer would, after reporting the
    checks run so far and the running one as `{"killed": reason}` (`check_result` returns
    that for this rank), so a check can prove the others carry on without it."""
    if _deliver is None or not _running:
        raise RuntimeError("kill_this_rank: only inside a check of a rank started by run_ranks")
    value = {**_running["out"], _running["current"]: {"killed": reason}}
    _deliver(value)
    os.kill(os.getpid(), signal.SIGKILL)
    raise AssertionError("unreachable: SIGKILL was sent")


def failure_domains(world_size: int) -> list[int]:
    """A failure domain per rank: ranks with the same one go down together. Under torchrun
    a node's ranks share one (its agent stops them all when one fails); ranks started by
    `run_ranks` on one host are independent processes, one domain each."""
    text = os.environ.get("ACCELKIT_RANK_NODES")
    if not text:
        return list(range(world_size))
    return [int(part) for part in text.split(",")]


def local_index(rank: int) -> int:
    """The device index of `rank` on its own host: its local rank under torchrun."""
    return int(os.environ.get("LOCAL_RANK", rank))


def node_count() -> int:
    """How many nodes the rank sessions of this run span (1 but under `--nnodes`)."""
    from accelkit.suite import multinode

    config = multinode.active()
    return config.nnodes if config is not None else 1


def check_result(per_rank: list[dict[str, dict[str, Any]]], name: str) -> list[Any]:
    """The values check `name` returned on each rank; raises AssertionError on an error.

    A check skipped on any rank raises CheckSkipped with that rank's reason; a rank the check
    killed (`kill_this_rank`) has the value `{"killed": reason}`.
    """
    values: list[Any] = []
    for rank, results in enumerate(per_rank):
        entry = results.get(name)
        if entry is None:
            raise AssertionError(f"{name}: rank {rank} did not run this check")
        if "error" in entry:
            raise AssertionError(f"{name}: rank {rank} raised:\n{entry['error']}")
        if "skip" in entry:
            raise CheckSkipped(entry["skip"])
        values.append({"killed": entry["killed"]} if "killed" in entry else entry["ok"])
    return values
