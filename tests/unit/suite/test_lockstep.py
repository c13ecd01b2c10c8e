"""Lockstep (accelkit/suite/session/lockstep.py): the two sides of an interleaved pass take their
samples in turns, with real processes on a real Unix socket."""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from accelkit.suite.perf.compile_worker import WARM_REPEATS
from accelkit.suite.perf.timing import Timer, measure_interleaved
from accelkit.suite.session import lockstep
from tests.helpers import REPO

# A side: connect, then `turns` samples, each logged as "side start end" (monotonic ns);
# "exit" after `crash_after` turns without closing anything (a crash while holding it).
SIDE = """
import os, sys, time
from accelkit.suite.session import lockstep
path, side, turns, log, delay, crash_after = sys.argv[1:7]
time.sleep(float(delay))
lockstep.configure(path, side)
with open(log, "a") as out:
    for i in range(int(turns)):
        lockstep.turn()
        start = time.monotonic_ns()
        time.sleep(0.01)
        out.write(f"{side} {start} {time.monotonic_ns()}\\n")
        out.flush()
        if i + 1 == int(crash_after):
            os._exit(3)
"""


def _side(
    baton: lockstep.Baton,
    side: str,
    turns: int,
    log: Path,
    delay: float = 0.0,
    crash_after: int = 0,
) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-c", SIDE, str(baton.path), side, str(turns), str(log)]
    argv += [str(delay), str(crash_after)]
    return subprocess.Popen(argv, cwd=REPO)


def _samples(log: Path) -> list[tuple[str, int, int]]:
    rows = [line.split() for line in log.read_text(encoding="utf-8").splitlines()]
    return sorted(((s, int(a), int(b)) for s, a, b in rows), key=lambda row: row[1])


def _run(baton: lockstep.Baton, *procs: subprocess.Popen[bytes]) -> list[int]:
    codes = []
    for proc, side in zip(procs, ("A", "B"), strict=False):
        codes.append(proc.wait(timeout=60))
        baton.ended(side)
    return codes


def test_two_sides_alternate_sample_by_sample_and_never_overlap(tmp_path: Path) -> None:
    log = tmp_path / "log"
    with lockstep.baton(first="B") as baton:
        # A arrives first, yet waits for B (the barrier), and B goes first as asked.
        a = _side(baton, "A", 6, log)
        b = _side(baton, "B", 6, log, delay=0.5)
        assert _run(baton, a, b) == [0, 0]
    rows = _samples(log)
    assert [side for side, _, _ in rows] == ["B", "A"] * 6
    for earlier, later in itertools.pairwise(rows):
        assert earlier[2] <= later[1], "a sample ran while the other side's did"


def test_a_side_that_ends_or_crashes_frees_the_other(tmp_path: Path) -> None:
    log = tmp_path / "log"
    with lockstep.baton() as baton:
        a = _side(baton, "A", 8, log, crash_after=2)  # dies holding the token
        b = _side(baton, "B", 8, log)
        codes = [a.wait(timeout=60), b.wait(timeout=60)]
    assert codes == [3, 0]
    sides = [side for side, _, _ in _samples(log)]
    assert sides[:4] == ["A", "B", "A", "B"] and sides[4:] == ["B"] * 6


def test_a_side_alone_waits_out_the_barrier_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other side never comes (its pass found nothing to measure): the first side runs
    alone once the other has ended, or at the latest after BARRIER_S."""
    log = tmp_path / "log"
    with lockstep.baton() as baton:
        a = _side(baton, "A", 3, log)
        time.sleep(0.5)
        assert not log.exists() or not log.read_text(encoding="utf-8")  # still waiting
        baton.ended("B")
        assert a.wait(timeout=60) == 0
    monkeypatch.setattr(lockstep, "BARRIER_S", 0.3)
    log2 = tmp_path / "log2"
    with lockstep.baton() as baton:
        assert _side(baton, "A", 3, log2).wait(timeout=60) == 0
    assert [side for side, _, _ in _samples(log2)] == ["A"] * 3


def test_a_second_client_of_a_side_and_a_missing_baton_measure_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "log"
    with lockstep.baton() as baton:
        first = _side(baton, "A", 40, log)
        time.sleep(0.3)
        second = _side(baton, "A", 2, log)  # refused: runs its two samples at once
        assert second.wait(timeout=30) == 0
        baton.ended("B")
        assert first.wait(timeout=60) == 0
    lockstep.configure(str(tmp_path / "none.sock"), "A")
    try:
        lockstep.turn()  # no baton there: no error, and no waiting from now on
        assert not lockstep.active()
        # ... but the log says so (and the results file's run.ab.turns).
        assert "this side measures alone" in capsys.readouterr().err
        assert baton.turns["A"] > 0 and baton.turns["B"] == 0
    finally:
        lockstep._config = None


@pytest.mark.parametrize("active", [False, True])
def test_timing_takes_a_turn_before_each_sample(
    monkeypatch: pytest.MonkeyPatch, active: bool
) -> None:
    """Each sample comes after a turn; after a real one (the other side may have run) one
    untimed block warms up again first."""
    turns: list[str] = []
    calls: list[int] = []

    def turn(enough: bool = False) -> lockstep.Turn:
        turns.append("turn")
        return lockstep.Turn(taken=active, other_enough=True)

    monkeypatch.setattr(lockstep, "turn", turn)
    measurement = Timer(lambda: calls.append(1)).blocked_autorange(
        number=3, min_samples=4, max_samples=4, warmup_calls=1
    )
    assert len(measurement.samples) == 4
    assert len(turns) == 1 + 4  # the measurement's set-up, then every sample
    assert len(calls) == 1 + 4 * 3 + (4 * 3 if active else 0)


def test_a_fixed_count_measurement_says_enough_at_its_last_sample(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """measure_interleaved takes a fixed number of samples: it tells the baton it wants more
    until its last one, so the other side's rule does not wait on it afterwards."""
    said: list[bool] = []

    def turn(enough: bool = False) -> lockstep.Turn:
        said.append(enough)
        return lockstep.Turn(taken=False, other_enough=True)

    monkeypatch.setattr(lockstep, "turn", turn)
    timers = {"a": Timer(lambda: None), "b": Timer(lambda: None)}
    measure_interleaved(timers, rounds=2, samples_per_round=2, warmup_calls=1, min_block_time=0)
    assert said == [False] * (1 + 2 * 2 * 2 - 1) + [True]  # set-up, then 8 samples


# A side's measurement whose own rule has enough after `min_samples` steady samples; prints
# how many it took.
COUNTING_SIDE = """
import sys
from accelkit.suite.session import lockstep
from accelkit.suite.perf.timing import Timer
path, side, min_samples = sys.argv[1:4]
lockstep.configure(path, side)
ticks = iter(range(10**6))
timer = Timer(lambda: None, clock=lambda: float(next(ticks)))
m = timer.blocked_autorange(number=1, min_samples=int(min_samples), max_samples=50,
                            min_run_time=0.0, max_run_time=1e9, warmup_calls=1)
print(len(m.samples))
"""


def test_both_sides_take_as_many_samples_as_the_side_that_wants_more(tmp_path: Path) -> None:
    """Side A's rule has enough after 3 samples, B's after 9: both stop together, so their
    samples cover the same window of time (A took 200 where B took 61 before)."""
    with lockstep.baton() as baton:
        procs = {
            side: subprocess.Popen(
                [sys.executable, "-c", COUNTING_SIDE, str(baton.path), side, wanted],
                cwd=REPO,
                stdout=subprocess.PIPE,
                text=True,
            )
            for side, wanted in (("A", "3"), ("B", "9"))
        }
        counts = {}
        for side, proc in procs.items():
            out, _ = proc.communicate(timeout=60)
            assert proc.returncode == 0
            counts[side] = int(out)
            baton.ended(side)
    assert counts["B"] == 9
    assert counts["A"] in (9, 10)  # within one sample of the other side


def test_samples_run_pinned_to_one_cpu_and_the_thread_gets_its_cpus_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Both sides sample on the highest CPU of their mask, the calling thread only and only
    for the sample: a process started after it (a rank process) has every CPU again."""
    allowed = os.sched_getaffinity(0)
    seen: list[set[int]] = []
    # Without torch's threads to consider (an earlier test in this process may have
    # imported torch, with its own thread count: test_no_pin_when_torch_... covers that).
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(lockstep, "turn", lambda enough=False: lockstep.Turn(True, True))
    monkeypatch.setattr(lockstep, "_config", ("/unused.sock", "A"))
    Timer(lambda: seen.append(os.sched_getaffinity(0))).blocked_autorange(
        number=2, min_samples=3, max_samples=3, warmup_calls=1
    )
    assert os.sched_getaffinity(0) == allowed
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert child.stdout.strip() == str(sorted(allowed))
    if len(allowed) < 2:  # nothing to pin to: one CPU
        assert lockstep.pin_cpu() is None and set(map(len, seen)) == {len(allowed)}
        return
    assert seen[0] == allowed  # the warm-up call, before any sample
    assert seen[-3 * 2 * 2 :] == [{max(allowed)}] * (3 * 2 * 2)  # re-warm + sample, each 2
    monkeypatch.setattr(lockstep, "_config", None)
    assert lockstep.pin_cpu() is None  # not in lockstep: never pinned


def test_no_pin_when_torch_runs_the_work_on_other_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lockstep, "_config", ("/unused.sock", "A"))
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(get_num_threads=lambda: 2))
    assert lockstep.pin_cpu() is None
    with lockstep.pinned() as cpu:
        assert cpu is None
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(get_num_threads=lambda: 1))
    if len(os.sched_getaffinity(0)) >= 2:
        assert lockstep.pin_cpu() == max(os.sched_getaffinity(0))


def test_side_names_are_checked() -> None:
    with pytest.raises(ValueError, match="side"):
        lockstep.configure("/x", "C")
    with pytest.raises(ValueError, match="side"), lockstep.baton(first="C"):
        pass


# A side whose case hands its samples to another process (the rank processes, a run-scoped
# worker): one sample of its own, then `turns` samples in a child through `relay()`.
RELAYING_SIDE = """
import subprocess, sys, time
from accelkit.suite.session import lockstep
path, side, turns, log = sys.argv[1:5]
lockstep.configure(path, side)
lockstep.turn()
start = time.monotonic_ns()
time.sleep(0.01)
with open(log, "a") as out:
    out.write(f"{side} {start} {time.monotonic_ns()}\\n")
with lockstep.relay() as handoff:
    with lockstep.taking_turns(handoff):  # the relaying process itself: no change
        assert lockstep._config == (path, side)
    argv = [handoff.path, handoff.side, str(handoff.owner), turns, log]
    subprocess.run([sys.executable, "-c", sys.argv[5], *argv], check=True)
"""
HELPER = """
import sys, time
from accelkit.suite.session import lockstep
path, side, owner, turns, log = sys.argv[1:6]
with lockstep.taking_turns(lockstep.Handoff(path, side, int(owner))):
    with open(log, "a") as out:
        for i in range(int(turns)):
            lockstep.turn(enough=i == int(turns) - 1)
            start = time.monotonic_ns()
            time.sleep(0.01)
            out.write(f"{side} {start} {time.monotonic_ns()}\\n")
            out.flush()
assert not lockstep.active()
"""


def test_a_process_the_case_starts_takes_the_sides_turns_through_its_relay(
    tmp_path: Path,
) -> None:
    log = tmp_path / "log"
    with lockstep.baton(first="A") as baton:
        argv = [sys.executable, "-c", RELAYING_SIDE, str(baton.path), "A", "5", str(log), HELPER]
        a = subprocess.Popen(argv, cwd=REPO)
        b = _side(baton, "B", 6, log)
        assert _run(baton, a, b) == [0, 0]
    rows = _samples(log)
    # Without the relay the child's five samples would come in one turn of A's.
    assert [side for side, _, _ in rows] == ["A", "B"] * 6
    for earlier, later in itertools.pairwise(rows):
        assert earlier[2] <= later[1], "a sample ran while the other side's did"


def test_no_relay_outside_lockstep() -> None:
    with lockstep.relay() as handoff:
        assert handoff is None
    with lockstep.taking_turns(None):
        assert not lockstep.active()


def test_a_handoff_travels_as_one_command_line_word() -> None:
    handoff = lockstep.Handoff("/tmp/x:y/relay.sock", "B", 4242)
    assert lockstep.Handoff.decode(handoff.encode()) == handoff
    for word in ("", "B", "C:1:/s", "A:pid:/s", "A:1:"):
        with pytest.raises(ValueError, match="not a lockstep handoff"):
            lockstep.Handoff.decode(word)


# A side whose case is the compile latency: its compile worker takes the side's turns.
COMPILING_SIDE = """
import os, subprocess, sys
from accelkit.suite.session import lockstep
path, side, cache, out = sys.argv[1:5]
lockstep.configure(path, side)
with lockstep.relay() as handoff:
    argv = [sys.executable, "-m", "accelkit.suite.perf.compile_worker", "cpu", "1", "8"]
    argv += ["--threads", "1", "--turns", handoff.encode()]
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache, "TORCHINDUCTOR_COMPILE_THREADS": "1"}
    with open(out, "w") as stdout:
        subprocess.run(argv, check=True, env=env, stdout=stdout)
"""


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_compile_worker_takes_a_turn_for_each_compile(tmp_path: Path) -> None:
    if importlib.util.find_spec("torch") is None:  # not imported here: see the pin test
        pytest.skip("torch is not installed")
    log, out = tmp_path / "log", tmp_path / "out.json"
    with lockstep.baton(first="B") as baton:
        argv = [sys.executable, "-c", COMPILING_SIDE, str(baton.path), "A"]
        a = subprocess.Popen([*argv, str(tmp_path / "cache"), str(out)], cwd=REPO)
        turns = 2 + WARM_REPEATS  # the first compile, one cold sample, its warm repeats
        b = _side(baton, "B", turns, log)
        assert _run(baton, a, b) == [0, 0]
        # Each compile took a turn of A's, right after one of B's.
        assert baton.turns == {"A": turns, "B": turns}
    run = json.loads(out.read_text(encoding="utf-8").splitlines()[-1])
    assert len(run["samples_s"]) == 1 and len(run["warm_s"]) == WARM_REPEATS
    assert run["cold_cache_hits"] == 0 and run["warm_cache_hits"] >= WARM_REPEATS
