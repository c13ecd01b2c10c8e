"""Run-scoped workers (accelkit.suite.session.run_scoped) and the rank group kept across passes
(accelkit.suite.distributed.ranks.run_ranks_for_run): one worker per run, its state kept between
the passes' calls, each pass getting its own records back, and nothing left running after
the run, even one killed outright."""

from __future__ import annotations

import ast
import functools
import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from accelkit.suite.distributed.ranks import run_ranks_for_run
from accelkit.suite.session import run_scoped
from tests.helpers import REPO

CLOSED: list[str] = []


@pytest.fixture(autouse=True)
def _workers_import_this_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers and ranks unpickle this module's functions: let them import it from any cwd."""
    path = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(REPO), path) if p))


class _Closer:
    def close(self) -> None:
        CLOSED.append("closed")


def _count(state: dict[str, Any]) -> tuple[int, int]:
    state["n"] = state.get("n", 0) + 1
    return os.getpid(), state["n"]


def _count_and_hold(state: dict[str, Any]) -> tuple[int, int]:
    state["closer"] = _Closer()
    return _count(state)


def _fail(state: dict[str, Any]) -> None:
    raise ValueError("planted failure")


def _rank_identity(rank: int, world_size: int) -> tuple[int, int, int]:
    import torch.distributed as dist

    return os.getpid(), dist.get_rank(), dist.get_world_size()


def _rank_fails(rank: int, world_size: int) -> None:
    if rank == 1:
        raise RuntimeError("planted rank failure")


def _gone(pid: int, within_s: float = 30.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def _call_in_new_process(what: str) -> str:
    """`run_scoped.call('t', <what>)` from a fresh interpreter, as a pass's pytest does."""
    code = (
        f"from accelkit.suite.session import run_scoped\nfrom {__name__} import {what}\n"
        f"print(run_scoped.call('t', {what}, timeout_s=120))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip()


def test_one_worker_serves_every_pass_and_ends_with_the_run() -> None:
    with run_scoped.hosting() as folder:
        assert run_scoped.hosted()
        answers = [_call_in_new_process("_count") for _ in range(3)]
        pids = {ast.literal_eval(answer)[0] for answer in answers}
        assert [ast.literal_eval(answer)[1] for answer in answers] == [1, 2, 3]
        assert len(pids) == 1
        assert (folder / "authkey").stat().st_mode & 0o077 == 0
    assert not run_scoped.hosted()
    assert _gone(pids.pop())


def test_a_failing_call_reports_the_traceback_and_the_worker_stays() -> None:
    with run_scoped.hosting():
        first = run_scoped.call("t", _count, timeout_s=120)
        with pytest.raises(AssertionError, match="planted failure"):
            run_scoped.call("t", _fail, timeout_s=120)
        second = run_scoped.call("t", _count, timeout_s=120)
    assert second == (first[0], 2)


def test_without_a_host_the_call_runs_here_and_its_state_is_closed() -> None:
    assert not run_scoped.hosted()
    CLOSED.clear()
    assert run_scoped.call_or_here("t", _count_and_hold, timeout_s=10) == (os.getpid(), 1)
    assert CLOSED == ["closed"]


@pytest.mark.parametrize("key", ["../x", "", ".hidden", "a b"])
def test_worker_keys_are_plain_names(key: str) -> None:
    with run_scoped.hosting(), pytest.raises(ValueError, match="letters, digits"):
        run_scoped.call(key, _count, timeout_s=10)


@pytest.mark.slow
def test_a_worker_of_a_killed_run_ends_itself() -> None:
    code = (
        "import os, signal\nfrom accelkit.suite.session import run_scoped\n"
        f"from {__name__} import _count\n"
        "with run_scoped.hosting():\n"
        "    print(run_scoped.call('t', _count, timeout_s=120)[0], flush=True)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert _gone(int(proc.stdout.strip()))


@pytest.mark.slow
def test_the_rank_group_is_kept_across_passes_and_each_pass_gets_its_records() -> None:
    from accelkit.suite.perf.collectives import all_reduce_rank

    sizes = (16 << 10, 256 << 10)
    one_pass = functools.partial(all_reduce_rank, backend="cpu", sizes=sizes, samples=3, threads=1)
    with run_scoped.hosting():
        identities = [
            run_ranks_for_run(_rank_identity, world_size=2, backend="gloo", timeout_s=120)
            for _ in range(2)
        ]
        records = [
            run_ranks_for_run(one_pass, world_size=2, backend="gloo", timeout_s=120)
            for _ in range(3)
        ]
        with pytest.raises(AssertionError, match="planted rank failure"):
            run_ranks_for_run(_rank_fails, world_size=2, backend="gloo", timeout_s=120)
        after = run_ranks_for_run(_rank_identity, world_size=2, backend="gloo", timeout_s=120)
    # One process group for the run: the same two rank processes answer every pass.
    assert identities[0] == identities[1]
    assert [(rank, size) for _, rank, size in identities[0]] == [(0, 2), (1, 2)]
    # Every pass returns its own records: per size, `samples` slowest-rank times, the
    # same on both ranks (all_reduce MAX).
    assert len(records) == 3
    for per_rank in records:
        assert per_rank[0] == per_rank[1]
        assert sorted(per_rank[0]) == list(sizes)
        assert all(len(s) == 3 and all(t > 0 for t in s) for s in per_rank[0].values())
    # A failed pass closes the group; the next one starts a new group.
    assert {pid for pid, _, _ in after}.isdisjoint({pid for pid, _, _ in identities[0]})
    for pid, _, _ in identities[0] + after:
        assert _gone(pid)


@pytest.mark.parametrize(
    ("argv", "hosts"),
    [
        (["--device", "cpu"], True),  # the default run: 5 passes
        (["--device", "cpu", "--suite", "perf", "--passes", "2"], True),
        (["--device", "cpu", "--passes", "1"], False),
        (["--device", "cpu", "--suite", "conformance"], False),
    ],
)
def test_the_runner_hosts_workers_for_runs_of_several_perf_passes(
    argv: list[str], hosts: bool
) -> None:
    from accelkit.suite.run.request import RunRequest
    from accelkit.suite.run.runner import _run_workers

    with _run_workers(RunRequest.from_argv(argv)):
        assert run_scoped.hosted() == hosts
    assert not run_scoped.hosted()
