"""Where each rank of a hung distributed case stopped, from its Flight Recorder dump.

`run_ranks` (accelkit.suite.distributed.ranks) runs the ranks; when one does not finish in time or
dies, it asks every rank still alive for its Flight Recorder dump before killing it:

- in each rank, `serve_dumps` starts a thread that writes the rank's dump when the parent
  asks (`request_dumps`; the main thread may be blocked inside a collective; c10d releases the GIL
  while it waits), and `write_dump` writes one as the rank's function returns or raises, so a
  rank that went on and exited leaves its record behind;
- the parent reads the dumps with torch's own analyzer, `torchfrtrace`
  (`torch.distributed.flight_recorder`), where it works, and always reads them itself
  (`read_dumps`), which gives every rank's state: waiting in a collective, missing it,
  in another one at that sequence number, or no dump at all.

torch 2.14.1's analyzer fails on gloo's dumps as they are (KeyError on the process group:
gloo's dump names the default group '' in `pg_config` while its entries say '0'); accelkit
then gives it a copy whose `pg_config` names each group as its entries do, and says so.

Dumps are pickles written by the ranks of this run (torch's format: `_dump_fr_trace`),
named `rank_<r>` as torchfrtrace expects.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import pickle
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DUMP_PREFIX = "rank_"
_POLL_S = 0.2
DEFAULT_BUFFER_SIZE = "2000"
"""TORCH_FR_BUFFER_SIZE for rank processes that do not set it: the recorder is off at 0."""


# --------------------------------------------------------------------------------------
# In the ranks


def write_dump(rank: int, dump_dir: str) -> None:
    """Write this rank's Flight Recorder dump as `<dump_dir>/rank_<rank>` (atomically: a
    partial file never carries the analyzer's name). Without stack traces: symbolising them
    takes seconds."""
    try:
        import torch._C._distributed_c10d as c10d

        dump_fr_trace = getattr(c10d, "_dump_fr_trace", None)  # private: not in torch's stubs
        if dump_fr_trace is None:
            return
        try:
            data = dump_fr_trace(includeStackTraces=False)
        except TypeError:  # releases without the keyword
            data = dump_fr_trace()
    except (ImportError, AttributeError, RuntimeError):
        return
    final = os.path.join(dump_dir, f"{DUMP_PREFIX}{rank}")
    partial = os.path.join(os.path.dirname(dump_dir), f".partial-{rank}-{threading.get_ident()}")
    with open(partial, "wb") as handle:
        handle.write(data)
    os.replace(partial, final)


def serve_dumps(rank: int, dump_dir: str) -> None:
    """Start a daemon thread that writes the rank's dump once the parent asks for dumps
    (`request_dumps`). It polls for a file: a multiprocessing Event cannot be used, because
    setting one waits for every waiter to wake, and a rank that died never does."""

    def serve() -> None:
        while not os.path.exists(_request_path(dump_dir)):
            time.sleep(_POLL_S)
        write_dump(rank, dump_dir)

    threading.Thread(target=serve, name="accelkit-flight-recorder-dump", daemon=True).start()


def request_dumps(dump_dir: Path) -> None:
    """Ask every rank still running for its dump (see `serve_dumps`)."""
    Path(_request_path(str(dump_dir))).touch()


def _request_path(dump_dir: str) -> str:
    return os.path.join(os.path.dirname(dump_dir), "dump-requested")


# --------------------------------------------------------------------------------------
# In the parent


def load_dumps(dump_dir: Path) -> dict[int, dict[str, Any]]:
    """The dumps in `dump_dir` by rank (unreadable ones are left out)."""
    dumps: dict[int, dict[str, Any]] = {}
    for path in sorted(dump_dir.glob(f"{DUMP_PREFIX}*")):
        try:
            rank = int(path.name.removeprefix(DUMP_PREFIX))
            with path.open("rb") as handle:
                data = pickle.load(handle)  # written by this run's own rank processes
        except (ValueError, OSError, pickle.UnpicklingError, EOFError):
            continue
        if isinstance(data, dict):
            dumps[rank] = data
    return dumps


def _collective(entry: Mapping[str, Any]) -> str:
    """`gloo:all_reduce` -> `all_reduce`."""
    return str(entry.get("profiling_name", "?")).rpartition(":")[2] or "?"


def _group_label(group: Any) -> str:
    if isinstance(group, (list, tuple)) and len(group) == 2:
        name, desc = group
        return f"{name} ({desc})" if desc else str(name)
    return str(group)


def _completed(entry: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    if entry.get("state") == "completed" or entry.get("time_discovered_completed_ns"):
        return True
    last = status.get("last_completed_collective")
    seq = entry.get("collective_seq_id")
    if isinstance(last, int) and isinstance(seq, int) and last >= seq:
        return True
    return bool(entry.get("retired"))


@dataclass
class _GroupView:
    label: str
    members: set[int] = field(default_factory=set)
    # rank -> seq -> (collective, completed)
    entered: dict[int, dict[int, tuple[str, bool]]] = field(default_factory=dict)


def read_dumps(
    dumps: Mapping[int, Mapping[str, Any]], world_size: int, fates: Mapping[int, str]
) -> tuple[str, list[dict[str, Any]], bool]:
    """accelkit's own reading: (summary, one RankStop record per rank, whether some
    collective did not complete).

    In each process group the first collective (by sequence number) that some rank entered
    and did not complete is where the group stopped; each member rank is then waiting in it,
    missing from it (its last collective has a lower number), in another collective at that
    number (mismatch), or has no dump. `fates` says what each rank's process did (finished,
    raised, died, still running) and goes into each record's note."""
    groups: dict[str, _GroupView] = {}
    for rank, dump in dumps.items():
        status_by_pg = dump.get("pg_status") or {}
        for entry in dump.get("entries") or []:
            if entry.get("is_p2p"):
                continue
            label = _group_label(entry.get("process_group"))
            view = groups.setdefault(label, _GroupView(label))
            view.members.add(rank)
            seq = entry.get("collective_seq_id")
            if not isinstance(seq, int):
                continue
            status = status_by_pg.get(str(entry.get("pg_id")), {})
            done = _completed(entry, status if isinstance(status, dict) else {})
            view.entered.setdefault(rank, {})[seq] = (_collective(entry), done)
    stops: dict[int, dict[str, Any]] = {}
    summaries: list[str] = []
    for label, view in sorted(groups.items()):
        if "default_pg" in label:
            view.members |= set(range(world_size))
        pending = [
            (seq, name)
            for seqs in view.entered.values()
            for seq, (name, done) in seqs.items()
            if not done
        ]
        if not pending:
            continue
        stuck_seq = min(seq for seq, _ in pending)
        entered_it = sorted(
            r for r, seqs in view.entered.items() if stuck_seq in seqs and not seqs[stuck_seq][1]
        )
        # The collective most ranks entered at that number is the one the others miss.
        names = [view.entered[r][stuck_seq][0] for r in entered_it]
        stuck_name = max(names, key=lambda n: (names.count(n), -names.index(n)))
        waiting = [r for r in entered_it if view.entered[r][stuck_seq][0] == stuck_name]
        missing: list[int] = []
        for rank in sorted(view.members):
            seqs = view.entered.get(rank, {})
            stop: dict[str, Any] = {"rank": rank, "process_group": label, "seq": stuck_seq}
            if rank not in dumps:
                stop.update(state="no dump", collective=None, seq=None)
            elif stuck_seq in seqs and seqs[stuck_seq][0] != stuck_name:
                stop.update(state="mismatch", collective=seqs[stuck_seq][0])
            elif stuck_seq in seqs:
                stop.update(state="completed" if seqs[stuck_seq][1] else "waiting")
                stop["collective"] = stuck_name
            else:
                missing.append(rank)
                stop.update(state="missing", collective=stuck_name)
                before = [s for s in seqs if s < stuck_seq]
                if before:
                    last = max(before)
                    stop["note"] = f"its last collective: {seqs[last][0]} #{last}"
            stops.setdefault(rank, stop)
        where = f"{stuck_name} #{stuck_seq} of process group {label}"
        waiters = ", ".join(map(str, waiting)) or "none"
        if missing:
            who = ", ".join(map(str, missing))
            summaries.append(
                f"rank{'s' if len(missing) > 1 else ''} {who} never entered {where}, "
                f"in which rank{'s' if len(waiting) > 1 else ''} {waiters} wait"
                + ("" if len(waiting) > 1 else "s")
            )
        mismatched = [s for s in stops.values() if s["state"] == "mismatch"]
        for stop in mismatched:
            summaries.append(
                f"rank {stop['rank']} entered {stop['collective']} as #{stuck_seq} of process "
                f"group {label}, where rank {waiters} entered {stuck_name}"
            )
        if not missing and not mismatched:
            summaries.append(
                f"rank{'s' if len(waiting) > 1 else ''} {waiters} "
                f"wait{'' if len(waiting) > 1 else 's'} in {where}"
            )
    for rank in range(world_size):
        if rank not in stops:
            state = "no dump" if rank not in dumps else "completed"
            stops[rank] = {"rank": rank, "state": state, **_last_collective(dumps.get(rank))}
    silent = sorted(r for r in range(world_size) if r not in dumps)
    if silent and dumps:
        who = ", ".join(f"rank {r} ({fates[r]})" if fates.get(r) else f"rank {r}" for r in silent)
        summaries.append(f"no dump from {who}")
        if len(summaries) == 1:  # nothing open: say where the others got to (a peer died)
            for rank in sorted(dumps):
                reached = stops[rank]
                if reached.get("collective"):
                    summaries.append(
                        f"rank {rank} was last in {reached['collective']} #{reached['seq']} of "
                        f"process group {reached['process_group']}"
                        + (f" ({fates[rank]})" if fates.get(rank) else "")
                    )
    for rank, stop in stops.items():
        fate = fates.get(rank)
        if fate:
            stop["note"] = f"{stop['note']}; {fate}" if stop.get("note") else fate
    if not dumps:
        summary = "no Flight Recorder dump came back from any rank"
    elif summaries:
        summary = "; ".join(summaries)
    else:
        summary = "every collective the dumps record completed"
    return summary, [stops[r] for r in sorted(stops)], bool(summaries)


def _last_collective(dump: Mapping[str, Any] | None) -> dict[str, Any]:
    """The collective, sequence number and process group of a dump's last collective entry
    ({} when there is none)."""
    entries = [e for e in (dump or {}).get("entries") or [] if not e.get("is_p2p")]
    if not entries or not isinstance(entries[-1].get("collective_seq_id"), int):
        return {}
    last = entries[-1]
    return {
        "collective": _collective(last),
        "seq": last["collective_seq_id"],
        "process_group": _group_label(last.get("process_group")),
    }


def _normalized(dumps: Mapping[int, Mapping[str, Any]], world_size: int) -> dict[int, Any]:
    """Copies whose `pg_config` names each group as its entries do (see the module doc)."""
    members: dict[tuple[str, str], set[int]] = {}
    for rank, dump in dumps.items():
        for entry in dump.get("entries") or []:
            group = entry.get("process_group")
            if isinstance(group, (list, tuple)) and len(group) == 2:
                members.setdefault((str(group[0]), str(group[1])), set()).add(rank)
    fixed: dict[int, Any] = {}
    for rank, dump in dumps.items():
        config: dict[str, dict[str, str]] = {}
        for (name, desc), ranks in members.items():
            if desc == "default_pg":
                ranks = set(range(world_size))
            config[name] = {"name": name, "desc": desc, "ranks": str(sorted(ranks))}
        fixed[rank] = {**dump, "pg_config": config}
    return fixed


_ANALYZER_LINES = (
    "We cannot decide",
    "Not all ranks joining",
    "Collective sequence number",
    "group info",
    "collective:",
    "missing ranks",
    "error msg",
)


def _torch_analyzer(dump_dir: Path) -> list[str]:
    """torchfrtrace's findings (its log lines that matter), from the dumps in `dump_dir`."""
    from torch.distributed.flight_recorder.components.builder import build_db
    from torch.distributed.flight_recorder.components.config_manager import JobConfig
    from torch.distributed.flight_recorder.components.loader import read_dir

    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.extend(str(record.getMessage()).splitlines())

    logger = logging.getLogger("Flight Recorder")
    own_handlers = logger.handlers[:]  # it prints to stderr; the case's message says it
    logger.handlers = [Collect()]
    try:
        args = JobConfig().parse_args(
            [str(dump_dir), "--prefix", DUMP_PREFIX, "--allow-incomplete-ranks"]
        )
        details, version = read_dir(args)
        database = build_db(details, args, version)
    finally:
        logger.handlers = own_handlers
    for collective in database.collectives:
        mismatches = getattr(collective, "mismatch_collectives", None) or {}
        if not getattr(collective, "pass_check", True) and mismatches:
            found = ", ".join(f"rank {r}: {c.collective_name}" for r, c in mismatches.items())
            lines.append(f"collective #{collective.collective_seq_id} mismatched ({found})")
    kept = [line.strip() for line in lines if line.strip().startswith(_ANALYZER_LINES)]
    # It repeats "We cannot decide ..." once per entry it cannot decide: say it once.
    return [line for n, line in enumerate(kept) if n == 0 or line != kept[n - 1]]


def torch_analysis(
    dump_dir: Path, dumps: Mapping[int, Mapping[str, Any]], world_size: int
) -> tuple[list[str], str]:
    """(torchfrtrace's findings, how it went): on the dumps as they are, else on copies with
    their `pg_config` normalised; ([], why) where it does not work at all."""
    try:
        import torch.distributed.flight_recorder.components.builder  # noqa: F401
    except ImportError as exc:
        return [], f"torch's analyzer is not available here ({exc})"
    try:
        return _torch_analyzer(dump_dir), "torchfrtrace"
    except (Exception, SystemExit) as exc:  # the analyzer raises bare asserts and exits
        first = f"{type(exc).__name__}: {exc}"
    fixed_dir = dump_dir.parent / "normalized"
    fixed_dir.mkdir(exist_ok=True)
    for rank, dump in _normalized(dumps, world_size).items():
        (fixed_dir / f"{DUMP_PREFIX}{rank}").write_bytes(pickle.dumps(dump))
    try:
        found = _torch_analyzer(fixed_dir)
    except (Exception, SystemExit) as exc:
        second = f"{type(exc).__name__}: {exc}"
        return [], f"torchfrtrace failed ({first}; on normalised dumps: {second})"
    return found, (
        f"torchfrtrace (on the dumps as they are: {first}; on copies whose pg_config names "
        "each group as its entries do: ran)"
    )


def analyze(dump_dir: Path, world_size: int, fates: Mapping[int, str]) -> dict[str, Any]:
    """The `Case.hang` record of a run whose dumps are in `dump_dir`."""
    dumps = load_dumps(dump_dir)
    summary, stops, stuck = read_dumps(dumps, world_size, fates)
    findings: list[str] = []
    how = "no dumps to analyze"
    if dumps:
        with contextlib.redirect_stdout(io.StringIO()):  # it prints notes we do not need
            findings, how = torch_analysis(dump_dir, dumps, world_size)
    analyzer = "torchfrtrace" if how.startswith("torchfrtrace") and findings else "dumps"
    output = [f"analyzer: {how}", *findings]
    return {
        "analyzer": analyzer,
        "summary": summary,
        "ranks": stops,
        "analyzer_output": "\n".join(output),
        "stuck": stuck or len(dumps) < world_size,
    }


_STATE_WORDS = {
    "waiting": "waiting in",
    "missing": "never entered",
    "mismatch": "entered instead",
    "completed": "completed up to",
}


def describe(hang: Mapping[str, Any]) -> str:
    """The lines a case's message gets: the summary, each rank, torch's analyzer."""
    lines = [f"Flight Recorder: {hang['summary']}"]
    for stop in hang.get("ranks", []):
        text = f"  rank {stop['rank']}: "
        if stop.get("collective"):
            verb = _STATE_WORDS.get(stop["state"], stop["state"])
            group = stop.get("process_group")
            text += f"{verb} {stop['collective']} #{stop.get('seq')} of process group {group}"
        else:
            text += stop["state"]
        lines.append(text + (f" ({stop['note']})" if stop.get("note") else ""))
    lines += [f"  {line}" for line in str(hang.get("analyzer_output", "")).splitlines()]
    return "\n".join(lines)
