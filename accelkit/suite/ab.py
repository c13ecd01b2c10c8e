"""`accelkit test --suite perf --ab A B`: two torch builds measured in alternating passes.

Two runs taken apart see two machines: a shift in between (another job's load, a memory
system that got slower for a while) reads as a change of the build, and the canaries can
only turn such a change into `environment-shifted` (`accelkit.results.stats`, "Canaries").
Measured interleaved, both builds see the same machine: pass k of A and pass k of B run at
the same time, for k = 1 .. --passes, each its own pytest process run by that side's
interpreter, and take turns sample by sample (`accelkit.suite.lockstep`: one token passed
between them, so their samples alternate and never overlap); the side that starts
alternates, A B, B A, ... (counterbalanced, as Chromium's pinpoint alternates its runs).
The speed of a process on a shared machine moves within seconds, so samples taken
milliseconds apart share far more of it than passes taken one after the other; what
remains shared by a pair, compare's paired mode (`accelkit.results.stats`, "Paired
mode": per-pair ratios) takes out instead of reading it as a change.

A and B are python interpreters, or venv folders (their `bin/python`). Each must import
torch, numpy, pydantic, pytest, pytest-xdist and pytest-timeout; accelkit itself comes from
this installation (its folder is put first on the side's PYTHONPATH), so both sides run the
very same cases and plugin. Each side's results file is an ordinary results file (its `env`
is that interpreter's fingerprint, `run.ab` names the side), pooled pass by pass as
`--passes` pools them; `accelkit compare A B` on the two gives the verdict printed, which
is also written as JSON. The paired comparison needs at least 8 passes
(`stats.MIN_PAIRS`; the default with --ab is 10); with fewer, compare falls back to the
grouped mode (4-7 passes) or to treating the samples as independent (fewer), which is only
good for a smoke run. Each side's pytest output goes to its own log during a pair and is
appended to the run's log, in the pair's order, afterwards. Container images (an image per
side) are not supported yet. With several passes each side hosts its own run-scoped workers
(`accelkit.suite.run_scoped`, run by that side's interpreter), as a plain run does.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import accelkit
from accelkit.errors import BadInput, ExitCode, Unavailable
from accelkit.events import Event, EventCallback
from accelkit.suite import child_process, lockstep, outcome, run_scoped
from accelkit.suite.environment import child_env, perf_env
from accelkit.suite.interpreters import interpreter
from accelkit.suite.outcome import NO_TESTS
from accelkit.suite.request import RunRequest, validate

SIDES = ("a", "b")
PROBE_TIMEOUT_S = 300.0
_PROBE = (
    "import json, numpy, pydantic, pytest, xdist, pytest_timeout, torch\n"
    "import accelkit.suite.plugin\n"
    "from accelkit.probe.fingerprint import fingerprint\n"
    "print(json.dumps(fingerprint(include_docker=False)))\n"
)


@dataclass(frozen=True)
class AbOutcome:
    """Both sides' results (a, b), compare's verdict of b against a, where they were written."""

    results: tuple[Any, Any]
    comparison: Any  # accelkit.results.compare.Comparison
    paths: tuple[Path, Path, Path] | None
    """(a, b, comparison JSON) when --json was given."""
    exit_code: ExitCode
    log_path: Path | None


def side_paths(json_path: Path) -> tuple[Path, Path, Path]:
    """`R.json` -> (`R.a.json`, `R.b.json`, `R.compare.json`)."""
    stem = json_path.name.removesuffix(".json")
    return tuple(json_path.with_name(f"{stem}.{part}.json") for part in (*SIDES, "compare"))  # type: ignore[return-value]


def side_env(request: RunRequest) -> dict[str, str]:
    """A side's pytest environment: the suite's, with this accelkit first on PYTHONPATH."""
    env = {**child_env(request.device), **perf_env(request.perf_threads)}
    source = str(Path(accelkit.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (source, env.get("PYTHONPATH", "")) if p)
    return env


def probe(python: str, label: str, env: dict[str, str]) -> dict[str, Any]:
    """The side's environment fingerprint; Unavailable (exit 3) when it cannot run the suite."""
    try:
        proc = subprocess.run(
            [python, "-c", _PROBE],
            capture_output=True,
            text=True,
            env=env,
            timeout=PROBE_TIMEOUT_S,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Unavailable(f"--ab {label} ({python}): cannot start it: {exc}") from None
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines() or ["no output"]
        raise Unavailable(f"--ab {label} ({python}): cannot run the suite: {lines[-1][:300]}")
    try:
        data: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise Unavailable(f"--ab {label} ({python}): no fingerprint printed") from None
    return data


def _side_events(side: str, number: int, passes: int, on_event: EventCallback) -> EventCallback:
    """Side A's first pass reports like a plain run; every other pass like a later pass."""

    def forward(event: Event) -> None:
        kind = event.get("event")
        if side == "a" and number == 1:
            on_event(event)
        elif kind == "collected":
            total = event.get("total")
            on_event(
                {"event": "pass", "pass": number, "passes": passes, "total": total, "side": side}
            )
        elif kind == "case":
            on_event({"event": "pass_case", "pass": number, "case": event.get("case")})
        elif kind == "start":
            on_event(event)

    return forward


def run(request: RunRequest, on_event: EventCallback | None = None) -> AbOutcome:
    """Measure both sides in alternating passes and compare them (module docstring)."""
    from accelkit.results.compare import compare
    from accelkit.results.io import atomic_write_text, load_results, write_results
    from accelkit.results.merge import pool
    from accelkit.results.writer import ResultsWriter
    from accelkit.suite import runner

    validate(request)
    if request.ab is None:
        raise ValueError("not an --ab request")
    runner.check_device(request)
    pythons = tuple(interpreter(spec) for spec in request.ab)
    env = side_env(request)
    fingerprints = [probe(p, spec, env) for p, spec in zip(pythons, request.ab, strict=True)]
    emit = on_event or (lambda e: None)
    pooled: list[Any] = [None, None]
    exits = [NO_TESTS, NO_TESTS]
    with (
        tempfile.TemporaryDirectory(prefix="accelkit-ab-") as tmp,
        contextlib.ExitStack() as stack,
    ):
        # Each side its own run-scoped workers (its interpreter runs them), kept across passes.
        env.pop(run_scoped.ENV, None)
        sides_env = [dict(env), dict(env)]
        if request.passes > 1:
            for own in sides_env:
                own[run_scoped.ENV] = str(stack.enter_context(run_scoped.hosting(export=False)))
        log_path = (request.log_path or Path(tmp) / "pytest.log").resolve()
        log_path.write_bytes(b"")
        common = runner.header(request)
        headers = [
            _header(common, fingerprints[i], SIDES[i], pythons[i], request) for i in range(2)
        ]
        emit_lock = threading.Lock()

        def locked_emit(event: Event) -> None:
            with emit_lock:
                emit(event)

        for number in range(1, request.passes + 1):
            order = (0, 1) if number % 2 else (1, 0)  # A B, B A, A B, ...: drift cancels
            parts = [Path(tmp) / f"{side}.pass{number}.json" for side in SIDES]
            for index in range(2):
                ResultsWriter(parts[index], headers[index]).write()
            statuses = _run_pair(
                request,
                parts,
                log_path,
                number,
                order,
                [_side_events(SIDES[i], number, request.passes, locked_emit) for i in range(2)],
                pythons,
                sides_env,
            )
            for index in order:
                side = SIDES[index]
                part = parts[index]
                status = statuses[index]
                exits[index] = runner._combined_exit(exits[index], status)
                if status not in (0, 1, NO_TESTS):
                    raise _stopped(side, status, log_path)
                if status == NO_TESTS:
                    if number == 1:
                        what = f"-k {request.keyword!r}" if request.keyword else "the selection"
                        raise BadInput(f"{what} matched no case")
                    continue
                part_results = load_results(part)
                labels = (f"passes 1-{number - 1}", f"pass {number}")
                pooled[index] = (
                    part_results
                    if pooled[index] is None
                    else pool([pooled[index], part_results], labels)
                )
                pooled[index].run.passes = number
        comparison = compare(pooled[0], pooled[1])
        paths = side_paths(request.json_path) if request.json_path is not None else None
        if paths is not None:
            for index in range(2):
                write_results(pooled[index], paths[index])
            atomic_write_text(paths[2], json.dumps(comparison.to_json_dict(), indent=2))
        codes = [outcome.exit_code(pooled[i], exits[i]) for i in range(2)]
        failed = comparison.fails or any(code != ExitCode.OK for code in codes)
        kept_log = request.log_path
        if kept_log is None and failed:
            kept_log = runner._keep(log_path)
        return AbOutcome(
            results=(pooled[0], pooled[1]),
            comparison=comparison,
            paths=paths,
            exit_code=ExitCode.FAILED if failed else ExitCode.OK,
            log_path=kept_log,
        )


def _run_pair(
    request: RunRequest,
    parts: list[Path],
    log_path: Path,
    number: int,
    order: tuple[int, int],
    events: list[EventCallback],
    pythons: tuple[str, ...],
    sides_env: list[dict[str, str]],
) -> list[int]:
    """Pass `number` of both sides at once, taking turns (`accelkit.suite.lockstep`); each
    side's pytest output goes to its own log, appended to `log_path` in `order` afterwards.
    Returns the two pytest statuses (a, b)."""
    from accelkit.suite import runner

    statuses = [NO_TESTS, NO_TESTS]
    errors: list[BaseException] = []
    procs: list[subprocess.Popen[bytes]] = []
    logs = [log_path.with_name(f"{log_path.name}.{side}") for side in SIDES]
    with lockstep.baton(first=SIDES[order[0]].upper()) as held:

        def one(index: int) -> None:
            side = SIDES[index]
            try:
                statuses[index] = runner._run_pytest(
                    request,
                    parts[index],
                    logs[index],
                    events[index],
                    pass_number=number,
                    suites=("perf",),
                    workers=min(request.worker_count, 1),
                    append_log=True,
                    python=pythons[index],
                    env=sides_env[index],
                    label=f", side {side.upper()} ({pythons[index]})",
                    lockstep=(str(held.path), side.upper()),
                    started=procs.append,
                )
            except BaseException as exc:
                errors.append(exc)
            finally:
                held.ended(side.upper())

        other = threading.Thread(target=one, args=(order[1],), daemon=True)
        other.start()
        try:
            one(order[0])
        finally:
            if errors:  # this side failed or was interrupted: the other stops too
                for proc in procs:
                    child_process.stop_group(proc)
            other.join()
    with open(log_path, "ab") as log:
        for index in order:
            with contextlib.suppress(OSError):
                log.write(logs[index].read_bytes())
                logs[index].unlink()
    if errors:
        raise errors[0]
    return statuses


def _header(common: Any, env: dict[str, Any], side: str, python: str, request: RunRequest) -> Any:
    """A side's results header: the run's, with that interpreter's fingerprint."""
    run = common.run.model_copy(
        update={
            "passes": 1,
            "threads": request.perf_threads,
            "ab": {"side": side.upper(), "python": python, "order": "ABBA"},
        }
    )
    return common.model_copy(update={"run": run, "env": env})


def _stopped(side: str, status: int, log_path: Path) -> Exception:
    from accelkit.errors import Failed
    from accelkit.suite.runner import _keep, _last_error_line

    kept = _keep(log_path)
    return Failed(
        f"--ab side {side.upper()}: pytest ended with status {status}: "
        f"{_last_error_line(log_path)} (log: {kept})"
    )
