"""Running a function in several real rank processes on loopback, for c10d cases.

Each rank is a fresh `spawn`ed process that joins a process group through a FileStore in a
temporary directory. Rank processes never outlive the case: they are joined with a deadline
and killed in `finally`, whatever happened.

A rank process costs a fresh interpreter and a torch import (seconds on a small machine),
so cases batch related checks into one rank function with `run_checks`: every check runs
and reports on its own (value or traceback), and the case asserts on each by name.

The same rank functions run across nodes as a torchrun job when `accelkit test --nnodes N`
started the pytest session (`accelkit.suite.distributed.multinode`): `run_ranks` hands them to it,
and
the cases do not change. A check may end its own rank the hard way (`kill_this_rank`, as a
lost host would) after reporting what it ran; `failure_domains` says which ranks go down
with it (under torchrun, its node's agent stops the node's other ranks).

When a rank does not finish in time or dies, `run_ranks` collects every rank's Flight
Recorder dump before killing the ranks and says which rank stopped at which collective
(`accelkit.suite.distributed.hang_forensics`): in the error's message, and on the error for the
results
file (`Case.hang`).
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing as mp
import os
import queue
import signal
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any, NoReturn

from accelkit.torch_import import freeze_loaded

RankFn = Callable[[int, int], Any]
# (rank, world_size) -> extra keyword arguments for init_process_group, built in the rank
# (options objects such as ProcessGroupNCCL.Options cannot be pickled).
InitKwargsFn = Callable[[int, int], dict[str, Any]]
CheckFn = Callable[[], Any]

# How long one collective may block before c10d gives up: far below the case's deadline,
# so a rank whose peer died fails with c10d's message instead of being killed silently.
PG_TIMEOUT = timedelta(seconds=60)
START_TIMEOUT_S = 300.0
"""How long the ranks may take to start and join the process group (a fresh interpreter and
a torch import each: seconds, or minutes on a loaded machine)."""
DUMP_WAIT_S = 15.0
"""How long the ranks still running get to write their Flight Recorder dumps."""
_POLL_S = 0.5


# How this rank hands its final value to the launcher now (set in each rank process by the
# launcher that started it): what `kill_this_rank` reports before it dies.
_deliver: Callable[[Any], None] | None = None


def set_delivery(deliver: Callable[[Any], None] | None) -> None:
    global _deliver
    _deliver = deliver


def _rank_main(
    fn: RankFn,
    rank: int,
    world_size: int,
    backend: str,
    store_path: str,
    results: Any,
    env: Mapping[str, str],
    init_kwargs: InitKwargsFn | None,
    dump_dir: str,
) -> None:
    from accelkit.suite.distributed.hang_forensics import serve_dumps, write_dump

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

        freeze_loaded()
        serve_dumps(rank, dump_dir)
        store = dist.FileStore(store_path, world_size)  # type: ignore[attr-defined]
        kwargs: dict[str, Any] = {"timeout": PG_TIMEOUT}
        if init_kwargs is not None:
            kwargs.update(init_kwargs(rank, world_size))
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size, **kwargs)
        results.put((rank, "ready", None))
        try:
            value = fn(rank, world_size)
        finally:
            write_dump(rank, dump_dir)  # a rank that goes on and exits leaves its record
            dist.destroy_process_group()
        results.put((rank, "ok", value))
    except BaseException:
        results.put((rank, "error", traceback.format_exc(limit=8)))


def run_ranks(
    fn: RankFn,
    *,
    world_size: int = 2,
    backend: str = "gloo",
    timeout_s: float = 120.0,
    env: Mapping[str, str] | None = None,
    init_kwargs: InitKwargsFn | None = None,
) -> list[Any]:
    """`fn(rank, world_size)` in `world_size` processes; their return values by rank.

    `fn` and `init_kwargs` must be module-level functions (spawn pickles them by
    reference). `env` is set in each rank before the process group is created (with
    TORCH_FR_BUFFER_SIZE on unless it says otherwise). `timeout_s` counts from the moment
    every rank has joined the process group (starting interpreters and importing torch
    may take long on a loaded machine; that gets `START_TIMEOUT_S`). A rank that raises
    fails the call with its traceback; when a rank does not finish in time or dies, the
    call fails with where each rank stopped (its Flight Recorder dump), recorded on the
    error as `hang`. Under `accelkit test --nnodes` the ranks are a torchrun job across the
    nodes instead (`accelkit.suite.distributed.multinode` judges those).
    """
    from accelkit.suite.distributed import multinode
    from accelkit.suite.distributed.hang_forensics import (
        DEFAULT_BUFFER_SIZE,
        analyze,
        describe,
        request_dumps,
    )
    from accelkit.suite.session.failures import add_failure_info

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
    rank_env = {"TORCH_FR_BUFFER_SIZE": DEFAULT_BUFFER_SIZE, **(env or {})}
    with tempfile.TemporaryDirectory(prefix="accelkit-dist-") as tmp:
        store_path = os.path.join(tmp, "store")
        dump_dir = Path(tmp) / "flight-recorder"
        dump_dir.mkdir()
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
                    rank_env,
                    init_kwargs,
                    str(dump_dir),
                ),
                daemon=True,
            )
            for rank in range(world_size)
        ]
        try:
            for proc in procs:
                proc.start()
            outputs, errors, stopped = _gather(procs, results, timeout_s)
            if not errors and stopped is None:
                return [outputs[rank] for rank in range(world_size)]
            fates = _fates(procs, outputs, errors)
            request_dumps(dump_dir)
            _await_dumps(dump_dir, procs)
            hang = analyze(dump_dir, world_size, fates)
            # A rank that raised on its own (a failed check) leaves every collective
            # completed: its traceback says it all. Anything else gets the forensics,
            # right after the first line (reports show a message's start).
            if stopped is None and not hang["stuck"]:
                raise AssertionError("\n".join(errors))
            raised = ", ".join(e.split(":", 1)[0] for e in errors)
            head = stopped or f"{raised}; the other ranks were stopped"
            error = AssertionError("\n".join([head, describe(hang), *errors]))
            add_failure_info(error, hang=hang)
            raise error
        finally:
            for proc in procs:
                proc.join(timeout=5)
                if proc.is_alive():
                    proc.kill()
                    proc.join(timeout=5)
            results.close()


def _gather(
    procs: list[Any], results: Any, timeout_s: float
) -> tuple[dict[int, Any], list[str], str | None]:
    """(values by rank, errors, why the ranks stopped short: a deadline or a dead rank)."""
    outputs: dict[int, Any] = {}
    errors: list[str] = []
    ready: set[int] = set()
    start_deadline = time.monotonic() + START_TIMEOUT_S
    deadline: float | None = None
    while len(outputs) < len(procs) and not errors:
        try:
            rank, status, value = results.get(timeout=_POLL_S)
        except queue.Empty:
            dead = [r for r, p in enumerate(procs) if r not in outputs and p.exitcode is not None]
            if dead and not _drained(results, outputs, errors, ready):
                codes = ", ".join(f"rank {r} (exit code {procs[r].exitcode})" for r in dead)
                return outputs, errors, f"a rank died without a result: {codes}"
            now = time.monotonic()
            if deadline is None and now >= start_deadline:
                late = sorted(set(range(len(procs))) - ready)
                return outputs, errors, f"ranks {late} did not start within {START_TIMEOUT_S:g} s"
            if deadline is not None and now >= deadline:
                missing = sorted(set(range(len(procs))) - set(outputs))
                return outputs, errors, f"ranks {missing} did not finish within {timeout_s:g} s"
            continue
        _take(rank, status, value, outputs, errors, ready)
        if deadline is None and len(ready) == len(procs):
            deadline = time.monotonic() + timeout_s
    return outputs, errors, None


def _take(
    rank: int,
    status: str,
    value: Any,
    outputs: dict[int, Any],
    errors: list[str],
    ready: set[int],
) -> None:
    if status == "ready":
        ready.add(rank)
    elif status == "ok":
        ready.add(rank)
        outputs[rank] = value
    else:
        errors.append(f"rank {rank} failed:\n{value}")


def _drained(results: Any, outputs: dict[int, Any], errors: list[str], ready: set[int]) -> bool:
    """Read what is left in the queue (a rank that exited right after its result); True if
    a result or an error came."""
    came = False
    while True:
        try:
            rank, status, value = results.get(timeout=0.2)
        except queue.Empty:
            return came
        came = came or status != "ready"
        _take(rank, status, value, outputs, errors, ready)


def _fates(procs: list[Any], outputs: Mapping[int, Any], errors: list[str]) -> dict[int, str]:
    raised = {int(e.split()[1]) for e in errors}
    fates: dict[int, str] = {}
    for rank, proc in enumerate(procs):
        if rank in outputs:
            fates[rank] = "finished its function"
        elif rank in raised:
            fates[rank] = "raised an error"
        elif proc.exitcode is not None:
            fates[rank] = f"died with exit code {proc.exitcode}"
        else:
            fates[rank] = "still running when the ranks were stopped"
    return fates


def _await_dumps(dump_dir: Path, procs: list[Any]) -> None:
    """Wait (at most DUMP_WAIT_S) for the dump of every rank still alive."""
    deadline = time.monotonic() + DUMP_WAIT_S
    alive = [r for r, p in enumerate(procs) if p.exitcode is None]
    while time.monotonic() < deadline:
        if all((dump_dir / f"rank_{r}").exists() for r in alive):
            return
        time.sleep(0.1)


# --------------------------------------------------------------------------------------
# Ranks that live for a whole run (across measurement passes)


def _serve_rank(
    rank: int,
    world_size: int,
    backend: str,
    store_path: str,
    jobs: Any,
    results: Any,
    env: Mapping[str, str],
) -> None:
    """A rank of a `RankGroup`: join the process group once, then run each job sent
    (`fn(rank, world_size)`) until None comes."""
    try:
        os.environ.update(env)
        import torch.distributed as dist

        freeze_loaded()
        store = dist.FileStore(store_path, world_size)  # type: ignore[attr-defined]
        dist.init_process_group(
            backend, store=store, rank=rank, world_size=world_size, timeout=PG_TIMEOUT
        )
        results.put((rank, "ready", None))
    except BaseException:
        results.put((rank, "error", traceback.format_exc(limit=8)))
        return
    try:
        while (fn := jobs.get()) is not None:
            try:
                results.put((rank, "ok", fn(rank, world_size)))
            except BaseException:
                results.put((rank, "error", traceback.format_exc(limit=8)))
    finally:
        dist.destroy_process_group()


class RankGroup:
    """`world_size` rank processes in one process group, kept for many `run` calls: what
    `run_ranks` does per call, with the start-up (interpreters, torch imports, joining the
    group) paid once. Used through `run_ranks_for_run`; `close()` ends the ranks."""

    def __init__(self, *, world_size: int, backend: str, env: Mapping[str, str] | None = None):
        context = mp.get_context("spawn")
        self._tmp = tempfile.TemporaryDirectory(prefix="accelkit-dist-")
        self._results: Any = context.Queue()
        self._jobs: list[Any] = [context.Queue() for _ in range(world_size)]
        store_path = os.path.join(self._tmp.name, "store")
        self._procs = [
            context.Process(
                target=_serve_rank,
                args=(rank, world_size, backend, store_path, self._jobs[rank], self._results),
                kwargs={"env": dict(env or {})},
                daemon=True,
            )
            for rank in range(world_size)
        ]
        for proc in self._procs:
            proc.start()
        _, errors, stopped = _gather_status(self._procs, self._results, "ready", START_TIMEOUT_S)
        if errors or stopped:
            self.close()
            raise AssertionError("\n".join([*([stopped] if stopped else []), *errors]))

    def run(self, fn: RankFn, *, timeout_s: float) -> list[Any]:
        """`fn(rank, world_size)` on every rank, inside the group; the values by rank.
        A rank that raised, died or did not finish in time fails the call (and the group
        should then be closed: its collectives may be out of step)."""
        for jobs in self._jobs:
            jobs.put(fn)
        outputs, errors, stopped = _gather_status(self._procs, self._results, "ok", timeout_s)
        if errors or stopped:
            raise AssertionError("\n".join([*([stopped] if stopped else []), *errors]))
        return [outputs[rank] for rank in range(len(self._procs))]

    def close(self) -> None:
        for jobs, proc in zip(self._jobs, self._procs, strict=True):
            if proc.is_alive():
                with contextlib.suppress(Exception):
                    jobs.put(None)
        for proc in self._procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=5)
        self._results.close()
        self._tmp.cleanup()


def _gather_status(
    procs: list[Any], results: Any, wanted: str, timeout_s: float
) -> tuple[dict[int, Any], list[str], str | None]:
    """Wait for `wanted` ("ready" or "ok") from every rank of a `RankGroup`: (values by
    rank, errors, why the ranks stopped short)."""
    outputs: dict[int, Any] = {}
    errors: list[str] = []
    deadline = time.monotonic() + timeout_s
    while len(outputs) < len(procs) and not errors:
        try:
            rank, status, value = results.get(timeout=_POLL_S)
        except queue.Empty:
            dead = [r for r, p in enumerate(procs) if r not in outputs and p.exitcode is not None]
            if dead:
                codes = ", ".join(f"rank {r} (exit code {procs[r].exitcode})" for r in dead)
                return outputs, errors, f"a rank died without a result: {codes}"
            if time.monotonic() >= deadline:
                missing = sorted(set(range(len(procs))) - set(outputs))
                return outputs, errors, f"ranks {missing} did not finish within {timeout_s:g} s"
            continue
        if status == wanted:
            outputs[rank] = value
        elif status == "error":
            errors.append(f"rank {rank} failed:\n{value}")
    return outputs, errors, None


def run_ranks_for_run(
    fn: RankFn, *, world_size: int = 2, backend: str = "gloo", timeout_s: float = 120.0
) -> list[Any]:
    """`run_ranks`, but when the run hosts run-scoped workers (`accelkit test --passes N`,
    accelkit.suite.session.run_scoped) the rank processes and their process group are started once
    and kept for every pass of the run: each call runs `fn` once more inside the same group.
    Without a host (a single pass, pytest run directly) and across nodes, it is `run_ranks`.
    A failed call closes the group; the next call starts a new one."""
    from accelkit.suite.distributed import multinode
    from accelkit.suite.session import run_scoped

    if multinode.active() or not run_scoped.hosted():
        return run_ranks(fn, world_size=world_size, backend=backend, timeout_s=timeout_s)
    job = functools.partial(
        _in_group, fn=fn, world_size=world_size, backend=backend, timeout_s=timeout_s
    )
    # One deadline for the whole call, starting the group included: a case's own timeout
    # must not end the pass first (it would leave the worker busy for the next pass).
    value: list[Any] = run_scoped.call(f"ranks-{backend}-{world_size}", job, timeout_s=timeout_s)
    return value


def _in_group(
    state: dict[str, Any], *, fn: RankFn, world_size: int, backend: str, timeout_s: float
) -> list[Any]:
    """In the run-scoped worker: `fn` on the kept `RankGroup` (started on first use)."""
    group = state.get("group")
    if group is None:
        group = state["group"] = RankGroup(world_size=world_size, backend=backend)
    try:
        return group.run(fn, timeout_s=timeout_s)
    except BaseException:
        state.pop("group").close()
        raise


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
    from accelkit.suite.distributed import multinode

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
