"""Lockstep: the two sides of an interleaved A/B pass take their samples in turn.

Measured on the shared 2-core machine, the speed of one process moves within seconds (a
128^3 GEMM's median over 15 blocks: 56 to 118 us from one second to the next), so two
passes run one after the other, a few seconds each, do not see the same machine: in
`accelkit test --ab` A/A runs, the per-pair log ratios of pass medians had a spread of
15-30%. Alternating the two sides sample by sample instead halved it in a two-process
probe (GEMM 15-18% to 7-11%, copy 13-18% to 8-13%; benchmarks/bench_ab_noise.py measures
the whole suite).

So `accelkit.suite.run.ab` runs pass k of A and pass k of B at the same time, and this module
makes them take turns: one token, held by one side at a time. A side holds it to run
anything from its first measurement on (set-up, warm-up, the samples), and gives it up
before each sample (`turn()`, called by `accelkit.suite.perf.timing` at the start of each
measurement and before each sample), so the other side's sample comes next, and no sample
is taken while the other side runs. The sides never run at once between their first and
last measurement: nothing of one side's set-up competes with the other side's samples.

- `Baton` (the runner): a Unix socket in a private directory, one thread. A side connects
  on its first `turn()`, says its name, and asks for the token at every `turn()`. The
  token goes to the side that asked and did not hold it last; a side alone waits for the
  other to arrive (a barrier, so one side's start-up does not run beside the other's first
  samples) until the other side has arrived, ended (`ended()`, or its connection closed:
  a crash frees the token too), or `BARRIER_S` passed. Once one side is gone the other
  runs on alone.
- `configure(path, side)` (the pytest process that runs the cases: the xdist worker, or
  pytest itself without one): from then on `turn()` takes turns.
- `relay()` and `taking_turns(handoff)`: a case whose samples are taken in another process
  (all_reduce in its rank processes, the compile speedup in its run-scoped worker) lends
  that process its turns. Without it, the whole measurement ran inside one turn of the
  case's process: all of one side's all_reduce samples, then all of the other side's,
  seconds apart, and the machine's drift between the two stretches stayed in the
  comparison.

Both sides also take the same number of samples, so their samples are the same window of
time. Each measurement's own stopping rule (enough samples and run time, a steady spread)
would stop the two sides at different counts: a side 10% slower, or noisier, stops later,
and its last samples then meet the other side's next case, not its own. Measured in an
A/A pass pair, one side stopped after 61 samples and the other took 200, and its median
moved by a factor of 2. So at each `turn()` a side says whether its rule has enough
(`enough=True`), and the answer says whether the other side's has: a side stops when both
have (or the other side is not measuring), within one sample of the other.

A side that finds no baton (the runner gone) measures on alone: lockstep is a way to
share conditions, never a reason for a run to fail.

And both sides take each sample on the same CPU (`pinned()`, around each sample, the
re-warm block included): the highest CPU of the process's affinity mask, the same for both
sides since the runner starts both. Measured in a two-process probe on the 2-core machine,
taking turns on one CPU cut the spread of the per-pair log ratios from 5.7-20.5% (turns,
each side on whichever CPU the scheduler gave it) to 1.7-4.5%: the two CPUs of a shared
machine do not run at the same speed, and a side's samples should not depend on which one
it got. With both changes, whole-suite A/A runs (`benchmarks/bench_ab_noise.py -k perf`)
resolved GEMMs, SDPA and the host GEMM canary to +-0.4-1.4%.

The pin is the calling thread's only and only for the sample, so the processes a
case starts (rank processes, run-scoped workers, which need every CPU) never inherit it,
and only when the work runs on the calling thread: torch with one intra-op thread (the
CPU perf default, `--threads 1`) or no torch at all.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SIDES = ("A", "B")
BARRIER_S = 120.0
"""How long a side that arrived first waits for the other (start-up on a loaded machine is
seconds; longer means the other side will not measure)."""
_MORE = b"?"  # a side asks for the token; its rule wants more samples
_ENOUGH = b"."  # a side asks for the token; its rule has enough
_GO = b"!"  # the token; the other side wants more samples
_GO_OTHER_ENOUGH = b"="  # the token; the other side has enough, or is not measuring
_SOCKET = "baton.sock"


def _other(side: str) -> str:
    return SIDES[1] if side == SIDES[0] else SIDES[0]


class Baton:
    """The runner's side of lockstep for one pass pair (see the module docstring)."""

    def __init__(self, folder: Path, first: str = "A") -> None:
        if first not in SIDES:
            raise ValueError(f"side must be one of {SIDES}, got {first!r}")
        self.path = folder / _SOCKET
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(self.path))
        self._server.listen(2)
        self._lock = threading.Lock()
        self._connections: dict[str, socket.socket] = {}
        self._arrived: set[str] = set()
        self._ended: set[str] = set()
        self._waiting: set[str] = set()
        self._wants_more: set[str] = set()
        self._holder: str | None = None
        self._last = _other(first)  # so `first` gets the token first
        self._barrier_over = False
        self.turns = dict.fromkeys(SIDES, 0)
        """How many times each side was given the token (a side that ran alone: none)."""
        self._stop = threading.Event()
        self._closed = False
        self._threads = [
            threading.Thread(target=self._accept, daemon=True),
            threading.Thread(target=self._barrier_timer, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def ended(self, side: str) -> None:
        """`side`'s process has ended: the other side runs on alone."""
        with self._lock:
            self._end(side)

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            self._closed = True
            for side in SIDES:
                self._end(side)
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()
        for thread in self._threads:
            thread.join(timeout=5.0)

    # -- the server ---------------------------------------------------------------------

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _barrier_timer(self) -> None:
        if not self._stop.wait(BARRIER_S):
            with self._lock:
                self._barrier_over = True
                self._schedule()

    def _serve(self, conn: socket.socket) -> None:
        side = None
        try:
            hello = conn.recv(1)
            side = hello.decode("ascii", "replace")
            with self._lock:
                if side not in SIDES or side in self._connections or self._closed:
                    conn.close()  # a second client of a side is not taken: it runs alone
                    return
                self._connections[side] = conn
            while True:
                request = conn.recv(1)
                if request not in (_MORE, _ENOUGH):
                    break
                with self._lock:
                    self._arrived.add(side)  # at its first sample: the barrier counts it
                    if request == _MORE:
                        self._wants_more.add(side)
                    else:
                        self._wants_more.discard(side)
                    if self._holder == side:
                        self._holder = None
                    self._waiting.add(side)
                    self._schedule()
        except OSError:
            pass
        finally:
            with self._lock:
                if side is not None and self._connections.get(side) is conn:
                    self._end(side)
            conn.close()

    def _end(self, side: str) -> None:
        self._ended.add(side)
        self._waiting.discard(side)
        self._wants_more.discard(side)
        if self._holder == side:
            self._holder = None
        self._schedule()

    def _schedule(self) -> None:
        """Give the token away if nobody holds it (called with the lock held)."""
        if self._holder is not None or not self._waiting:
            return
        if len(self._waiting) == 2:
            side = _other(self._last)
        else:
            (side,) = self._waiting
            other = _other(side)
            starting = other not in self._ended and other not in self._arrived
            if starting and not self._barrier_over:
                return  # the barrier: the other side is still starting
            # The other side arrived and is between its turns only when it holds the
            # token, so here it has ended, or the barrier is over.
        self._give(side)

    def _give(self, side: str) -> None:
        self._waiting.discard(side)
        self._holder = side
        self._last = side
        self.turns[side] += 1
        answer = _GO if _other(side) in self._wants_more else _GO_OTHER_ENOUGH
        try:
            self._connections[side].sendall(answer)
        except OSError:
            self._end(side)


@contextlib.contextmanager
def baton(first: str = "A", parent: Path | None = None) -> Iterator[Baton]:
    """A `Baton` in a private directory (made in `parent`, if given), closed on the way out."""
    with tempfile.TemporaryDirectory(prefix="accelkit-lockstep-", dir=parent) as tmp:
        os.chmod(tmp, 0o700)
        held = Baton(Path(tmp), first)
        try:
            yield held
        finally:
            held.close()


# -- the sides ---------------------------------------------------------------------------

_client: socket.socket | None = None
_config: tuple[str, str] | None = None


def configure(path: str, side: str) -> None:
    """Take turns from the next `turn()` on, on the baton at `path`, as `side`."""
    global _config
    if side not in SIDES:
        raise ValueError(f"side must be one of {SIDES}, got {side!r}")
    _config = (path, side)


def from_pytest(config: Any, is_worker: bool) -> None:
    """`configure` from pytest's `--accelkit-lockstep SOCKET SIDE`, in the process that runs
    the cases only: an xdist worker, or pytest itself when it has none."""
    given = config.getoption("--accelkit-lockstep", default=None)
    if given and (is_worker or not config.getoption("numprocesses", default=None)):
        configure(*given)


def active() -> bool:
    return _config is not None


def pin_cpu(allowed: set[int] | None = None) -> int | None:
    """The CPU both sides take their samples on (see the module docstring), or None: not
    configured, no affinity on this platform, a single CPU, or the work would not run on
    the calling thread (torch with more than one intra-op thread). `allowed`: the calling
    thread's affinity, when the caller has read it already."""
    if _config is None or not hasattr(os, "sched_getaffinity"):
        return None
    if allowed is None:
        allowed = os.sched_getaffinity(0)
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != 1:
        return None
    return highest_cpu(allowed)


def highest_cpu(allowed: set[int]) -> int | None:
    """The CPU of `allowed` that both sides' samples take (`pin_cpu`), and the host
    all_reduce ranks share (`perf.collectives.shared_cpu`): the highest; None for fewer
    than two (pinning would change nothing)."""
    return max(allowed) if len(allowed) > 1 else None


@contextlib.contextmanager
def pinned() -> Iterator[int | None]:
    """Run the block on `pin_cpu()` (the calling thread only), then give the thread its
    affinity back; a no-op when there is no CPU to pin to."""
    if _config is None or not hasattr(os, "sched_getaffinity"):
        yield None  # not in lockstep: no system call on the timing path
        return
    before = os.sched_getaffinity(0)
    cpu = pin_cpu(before)
    if cpu is None:
        yield None
        return
    try:
        os.sched_setaffinity(0, {cpu})
    except OSError:
        yield None
        return
    try:
        yield cpu
    finally:
        os.sched_setaffinity(0, before)


@dataclass(frozen=True)
class Turn:
    taken: bool
    """The other side may have run meanwhile: warm up again before timing."""
    other_enough: bool
    """The other side's stopping rule has enough samples, or it is not measuring."""


ALONE = Turn(taken=False, other_enough=True)


def turn(enough: bool = False) -> Turn:
    """Give the other side its turn, and wait for ours; no-op (`ALONE`) unless configured.
    `enough`: this side's stopping rule has enough samples of the running measurement."""
    global _client, _config
    if _config is None:
        return ALONE
    try:
        if _client is None:
            client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            client.connect(_config[0])
            client.sendall(_config[1].encode("ascii"))
            _client = client
        _client.sendall(_ENOUGH if enough else _MORE)
        answer = _client.recv(1)
        if answer not in (_GO, _GO_OTHER_ENOUGH):
            raise OSError("the baton closed")
        return Turn(taken=True, other_enough=answer == _GO_OTHER_ENOUGH)
    except OSError as exc:
        # The runner is gone or refused us: measure on alone, and say so in the log (the
        # results file counts this side's turns: `run.ab.turns`).
        print(f"accelkit lockstep: {exc}; this side measures alone", file=sys.stderr)
        _config = None
        if _client is not None:
            _client.close()
            _client = None
        return ALONE


# -- turns taken in another process ------------------------------------------------------


@dataclass(frozen=True)
class Handoff:
    """Where a process that a case starts takes this side's turns (see `relay`)."""

    path: str
    side: str
    owner: int
    """The pid of the process that relays: in it, `taking_turns` changes nothing."""

    def encode(self) -> str:
        """One command-line word for a process started by argv (`decode` reads it)."""
        return f"{self.side}:{self.owner}:{self.path}"

    @classmethod
    def decode(cls, word: str) -> Handoff:
        """The `Handoff` of `encode`'s word; ValueError, in one line, for anything else."""
        side, owner, path = [*word.split(":", 2), "", ""][:3]
        if side not in SIDES or not owner.isdigit() or not path:
            raise ValueError(f"not a lockstep handoff (SIDE:PID:SOCKET): {word!r}")
        return cls(path, side, int(owner))


@contextlib.contextmanager
def relay() -> Iterator[Handoff | None]:
    """Lend this side's turns to the processes a case hands its measurement to (the
    run-scoped workers, the rank processes): they connect to a socket in a private folder,
    as a side connects to the baton, and each of their `turn()`s is this process's, taken
    by a thread while the case waits for them. None when not in lockstep."""
    if _config is None:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="accelkit-relay-") as tmp:
        os.chmod(tmp, 0o700)
        path = os.path.join(tmp, "relay.sock")
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(path)
        server.listen(1)
        thread = threading.Thread(target=_relay, args=(server, _config[1]), daemon=True)
        thread.start()
        try:
            yield Handoff(path, _config[1], os.getpid())
        finally:
            with contextlib.suppress(OSError):
                server.shutdown(socket.SHUT_RDWR)
            server.close()
            thread.join(timeout=5.0)


def _relay(server: socket.socket, side: str) -> None:
    """One client at a time; its requests become this process's `turn()`s (the case's own
    thread waits meanwhile, so the baton connection has one user)."""
    while True:
        try:
            conn, _ = server.accept()
        except OSError:
            return
        with conn:
            try:
                if conn.recv(1) != side.encode("ascii"):
                    continue
                while (request := conn.recv(1)) in (_MORE, _ENOUGH):
                    step = turn(enough=request == _ENOUGH)
                    if not step.taken:
                        break  # the baton is gone: the client measures on alone
                    conn.sendall(_GO_OTHER_ENOUGH if step.other_enough else _GO)
            except OSError:
                continue


@contextlib.contextmanager
def taking_turns(handoff: Handoff | None) -> Iterator[None]:
    """In a process a case started: take turns through `handoff` (from the case's `relay`)
    for the block, then stop. A no-op for None and in the relaying process itself."""
    global _client, _config
    if handoff is None or handoff.owner == os.getpid():
        yield
        return
    before = _config
    configure(handoff.path, handoff.side)
    try:
        yield
    finally:
        if _client is not None:
            _client.close()
            _client = None
        _config = before
