"""`accelkit test --suite perf --ab A B`: two torch builds measured in alternating passes.

Two runs taken apart see two machines: a shift in between (another job's load, a memory
system that got slower for a while) reads as a change of the build, and the canaries can
only turn such a change into `environment-shifted` (`accelkit.results.stats`, "Canaries").
Measured interleaved, both builds see the same machine: pass k of A and pass k of B run at
the same time, for k = 1 .. --passes, each its own pytest process run by that side's
interpreter, and take turns sample by sample (`accelkit.suite.session.lockstep`: one token passed
between them, so their samples alternate and never overlap); the side that starts
alternates, A B, B A, ... (counterbalanced, as Chromium's pinpoint alternates its runs).
The speed of a process on a shared machine moves within seconds, so samples taken
milliseconds apart share far more of it than passes taken one after the other; what
remains shared by a pair, compare's paired mode (`accelkit.results.stats`, "Paired
mode": per-pair ratios) takes out instead of reading it as a change.

A and B are python interpreters, venv folders (their `bin/python`), or test images
(`image:REF`: each pass in a fresh container, `accelkit.suite.run.ab_sides`). Each must import
torch, numpy, pydantic, pytest, pytest-xdist and pytest-timeout; accelkit itself is this
installation's, copied for the run (`ab_sides.copy_accelkit`), so both sides run the very
same cases and plugin. Each side's results file is an ordinary results file (its `env`
is that side's fingerprint, `run.ab` names the side, and `run.image` its image), pooled
pass by pass as `--passes` pools them; `accelkit compare A B` on the two gives the verdict
printed, which is also written as JSON. The paired comparison needs at least 8 passes
(`stats.MIN_PAIRS`; the default with --ab is 10); with fewer, compare falls back to the
grouped mode (4-7 passes) or to treating the samples as independent (fewer), which is only
good for a smoke run. Each side's pytest output goes to its own log during a pair and is
appended to the run's log, in the pair's order, afterwards. With several passes each host
side hosts its own run-scoped workers (`accelkit.suite.session.run_scoped`, run by that side's
interpreter), as a plain run does.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelkit.errors import BadInput, ExitCode, Unavailable
from accelkit.events import Event, EventCallback
from accelkit.suite.run import outcome, run_plan
from accelkit.suite.run.ab_sides import (
    HostSide,
    ImageSide,
    Pass,
    Side,
    copy_accelkit,
    side_request,
)
from accelkit.suite.run.environment import child_env, perf_env
from accelkit.suite.run.interpreters import image_of, interpreter
from accelkit.suite.run.outcome import NO_TESTS
from accelkit.suite.run.request import RunRequest, validate
from accelkit.suite.session import lockstep, run_scoped

SIDES = ("a", "b")
PROBE_TIMEOUT_S = 300.0
_PROBE = (
    "import json, numpy, pydantic, pytest, xdist, pytest_timeout, torch\n"
    "import accelkit.suite.session.plugin\n"
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


def side_env(request: RunRequest, source: Path) -> dict[str, str]:
    """A host side's pytest environment: the suite's, with the copy of accelkit in `source`
    first on PYTHONPATH (`accelkit.suite.run.ab_sides`)."""
    env = {**child_env(request.device), **perf_env(request.perf_threads)}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(source), env.get("PYTHONPATH", "")) if p)
    return env


def image_env(request: RunRequest, source: Path) -> dict[str, str]:
    """What an image side's container gets on top of `container_env`: the copy of accelkit
    first on its PYTHONPATH, the perf threads, only the plugins accelkit names."""
    return {
        **perf_env(request.perf_threads),
        "PYTHONPATH": str(source),
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def make_side(spec: str, request: RunRequest, folder: Path, source: Path) -> Side:
    """The side `spec` names, run from `folder` (the run's private folder, holding the copy
    of accelkit in `source`)."""
    image = image_of(spec)
    if image is None:
        return HostSide(spec, interpreter(spec), side_env(request, source))
    named = [request.cases_dir, request.expectations, request.durations_from]
    resolved = tuple(p.resolve() for p in named if p is not None)
    return ImageSide(spec, image, image_env(request, source), folder, source, resolved)


def probe(side: Side, request: RunRequest) -> dict[str, Any]:
    """The side's environment fingerprint; Unavailable (exit 3) when it cannot run the suite."""
    code, stdout, stderr = side.probe(request, _PROBE, PROBE_TIMEOUT_S)
    if code != 0:
        lines = (stderr or stdout).strip().splitlines() or ["no output"]
        raise Unavailable(f"--ab {side.spec}: cannot run the suite: {lines[-1][:300]}")
    try:
        data: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise Unavailable(f"--ab {side.spec}: no fingerprint printed") from None
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
    from accelkit.suite.run import runner

    validate(request)
    if request.ab is None:
        raise ValueError("not an --ab request")
    runner.check_device(request)
    emit = on_event or (lambda e: None)
    emit(run_plan.plan_event(request, [(("perf",), 1)], sides=SIDES))
    pooled: list[Any] = [None, None]
    exits = [NO_TESTS, NO_TESTS]
    turns = [0, 0]  # the lockstep turns each side took, all passes together
    with (
        tempfile.TemporaryDirectory(prefix="accelkit-ab-") as tmp,
        contextlib.ExitStack() as stack,
    ):
        folder = Path(tmp).resolve()
        source = copy_accelkit(folder / "src")
        sides = [make_side(spec, request, folder, source) for spec in request.ab]
        inner = side_request(request, source)
        fingerprints = [probe(side, inner) for side in sides]
        # Each host side its own run-scoped workers (its interpreter runs them), kept
        # across passes; an image side's would end with its pass's container.
        for each in sides:
            each.env.pop(run_scoped.ENV, None)
            if request.passes > 1 and isinstance(each, HostSide):
                each.env[run_scoped.ENV] = str(
                    stack.enter_context(run_scoped.hosting(export=False))
                )
        log_path = (request.log_path or Path(tmp) / "pytest.log").resolve()
        log_path.write_bytes(b"")
        common = runner.header(request)
        headers = [_header(common, fingerprints[i], SIDES[i], sides[i], request) for i in range(2)]
        emit_lock = threading.Lock()

        def locked_emit(event: Event) -> None:
            with emit_lock:
                emit(event)

        for number in range(1, request.passes + 1):
            order = (0, 1) if number % 2 else (1, 0)  # A B, B A, A B, ...: drift cancels
            parts = [Path(tmp) / f"{side}.pass{number}.json" for side in SIDES]
            for index in range(2):
                ResultsWriter(parts[index], headers[index]).write()
            statuses, pair_turns = _run_pair(
                inner,
                parts,
                log_path,
                number,
                order,
                [_side_events(SIDES[i], number, request.passes, locked_emit) for i in range(2)],
                sides,
                folder,
            )
            for index in range(2):
                turns[index] += pair_turns[SIDES[index].upper()]
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
        for index in range(2):  # in its results file: proof that the sides took turns
            record = {**(pooled[index].run.ab or {}), "turns": str(turns[index])}
            pooled[index].run.ab = record
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
    sides: list[Side],
    folder: Path,
) -> tuple[list[int], dict[str, int]]:
    """Pass `number` of both sides at once, taking turns (`accelkit.suite.session.lockstep`, its
    baton in the run's `folder`, which an image side's container sees); each side's pytest
    output goes to its own log, appended to `log_path` in `order` afterwards. Returns the
    two pytest statuses (a, b) and the turns each side took ("A", "B")."""
    statuses = [NO_TESTS, NO_TESTS]
    errors: list[BaseException] = []
    logs = [log_path.with_name(f"{log_path.name}.{side}") for side in SIDES]
    with lockstep.baton(first=SIDES[order[0]].upper(), parent=folder) as held:

        def one(index: int) -> None:
            side = SIDES[index]
            try:
                label = f", side {side.upper()} ({sides[index].spec})"
                lockstep_of = (str(held.path), side.upper())
                run = Pass(parts[index], logs[index], events[index], number, label, lockstep_of)
                statuses[index] = sides[index].run_pass(request, run)
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
                for running in sides:
                    running.stop()
            other.join()
        turns = dict(held.turns)
    with open(log_path, "ab") as log:
        for index in order:
            with contextlib.suppress(OSError):
                log.write(logs[index].read_bytes())
                logs[index].unlink()
    if errors:
        raise errors[0]
    return statuses, turns


def _header(common: Any, env: dict[str, Any], side: str, runs: Side, request: RunRequest) -> Any:
    """A side's results header: the run's, with that side's fingerprint (and its image)."""
    update: dict[str, Any] = {
        "passes": 1,
        "threads": request.perf_threads,
        "ab": {"side": side.upper(), **runs.record, "order": "ABBA"},
    }
    if isinstance(runs, ImageSide):
        update["image"] = runs.image
    run = common.run.model_copy(update=update)
    return common.model_copy(update={"run": run, "env": env})


def _stopped(side: str, status: int, log_path: Path) -> Exception:
    from accelkit.errors import Failed
    from accelkit.suite.run.runner import _keep, _last_error_line

    kept = _keep(log_path)
    return Failed(
        f"--ab side {side.upper()}: pytest ended with status {status}: "
        f"{_last_error_line(log_path)} (log: {kept})"
    )
