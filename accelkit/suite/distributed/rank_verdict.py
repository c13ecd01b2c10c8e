"""Node 0's verdict on a multi-node rank session (`accelkit.suite.distributed.multinode`): from what
the
ranks and the nodes' torchrun left in the store, whether the job passed, or which rank
failed first and how (died, raised, hung), naming its node and pid.
"""

from __future__ import annotations

import pickle
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Verdict:
    """What node 0 makes of a job (see `judge`)."""

    ok: bool
    head: str = ""
    lines: list[str] = field(default_factory=list)
    results: dict[int, dict[str, Any]] = field(default_factory=dict)
    dumps: str = ""

    def message(self) -> str:
        return "\n".join([self.head, *self.lines, *([self.dumps] if self.dumps else [])])


def _who(rank: int, started: Mapping[int, Mapping[str, Any]]) -> str:
    place = started.get(rank)
    if place is None:
        return f"rank {rank} (never started)"
    return f"rank {rank} (node {place['node']}, pid {place['pid']})"


def death(failure: Mapping[str, Any]) -> tuple[str, bool]:
    """(how a failed rank process ended, whether it was stopped rather than died)."""
    code = int(failure.get("exitcode", 0))
    if code < 0:
        name = failure.get("signal") or f"signal {-code}"
        stopped = -code == signal.SIGTERM
        what = f"stopped by its node's torchrun agent ({name})" if stopped else None
        return what or f"killed by signal {-code} ({name})", stopped
    if code == 128 + signal.SIGTERM:
        return "stopped by its node's torchrun agent (SIGTERM)", True
    return f"exited with code {code} without a result", False


def judge(
    world_size: int,
    nnodes: int,
    started: Mapping[int, Mapping[str, Any]],
    results: Mapping[int, Mapping[str, Any]],
    reports: Mapping[int, Mapping[str, Any]],
    *,
    timed_out: float | None = None,
) -> Verdict | None:
    """The verdict on a job from what the store holds, or None while it is still running.

    Done when every rank reported (ok when none raised), a rank raised, a node's torchrun
    ended without some of its ranks' results, or `timed_out` (the deadline in seconds) is
    given. The head names the cause: ranks that died, else the first rank that raised, else
    the ranks that did not finish in time, else the ranks their node's torchrun ended
    without; one line follows for every other rank without a good result."""
    raised = sorted(r for r, res in results.items() if res.get("status") != "ok")
    missing = [r for r in range(world_size) if r not in results]
    if not missing and not raised:
        return Verdict(ok=True, results={rank: dict(value) for rank, value in results.items()})
    fates: dict[int, str] = {}
    died: list[int] = []
    gone: list[int] = []
    for rank in missing:
        place = started.get(rank)
        report = reports.get(int(place["node"])) if place is not None else None
        failure = (report or {}).get("failures", {}).get(str(rank))
        if failure is not None:
            fates[rank], stopped = death(failure)
            (gone if stopped else died).append(rank)
        elif report is not None:
            fates[rank] = f"no result: its node's torchrun ended (exit code {report.get('exit')})"
            gone.append(rank)
        elif place is None and len(reports) >= nnodes:
            fates[rank] = "never started"
            gone.append(rank)
        else:
            fates[rank] = "still running" if place is not None else "not started"
    if not (raised or died or gone or timed_out is not None):
        return None
    if died:
        head = "; ".join(f"{_who(r, started)} died: {fates[r]}" for r in died)
        named = set(died)
    elif raised:
        head = f"{_who(raised[0], started)} raised:\n{results[raised[0]].get('value', '')}"
        named = {raised[0]}
    elif timed_out is not None:
        head = f"ranks {missing} did not finish within {timed_out:g} s"
        named = set()
    else:
        head = "; ".join(f"{_who(r, started)}: {fates[r]}" for r in gone)
        named = set(gone)
        for node, report in sorted(reports.items()):
            if report.get("exit") not in (0, None) and not report.get("stopped"):
                tail = " | ".join(report.get("log_tail", [])[-3:])
                head += f"\nnode {node}: torchrun exit code {report.get('exit')}: {tail}"
    lines = [f"  {_who(r, started)}: {fates[r]}" for r in missing if r not in named]
    lines += [f"  {_who(r, started)}: raised" for r in raised if r not in named]
    return Verdict(
        ok=False,
        head=head.rstrip(),
        lines=lines,
        results={rank: dict(value) for rank, value in results.items()},
    )


def last_collective(data: bytes) -> str:
    """The last collective a dump recorded: `gloo:all_reduce #4 (started)`."""
    try:
        dump = pickle.loads(data)  # written by this run's own ranks through node 0's store
        entries = dump.get("entries") or []
    except Exception:
        return "unreadable dump"
    if not entries:
        return "no collective recorded"
    last = entries[-1]
    return (
        f"last collective {last.get('profiling_name', '?')} "
        f"#{last.get('collective_seq_id', '?')} ({last.get('state', '?')})"
    )
