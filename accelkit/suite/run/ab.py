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
(`image:REF`: each pass in a fresh container; "Sides" below). Each must import
torch, numpy, pydantic, pytest, pytest-xdist and pytest-timeout; accelkit itself is this
installation's, copied for the run (`copy_accelkit`), so both sides run the very
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

Sides. A side is a python interpreter or venv folder on this host (`HostSide`), or a test
image (`ImageSide`): one `accelkit setup` built, or any local image whose `python` imports
what the suite needs (`_PROBE`). A run may mix the two. Which spellings name a side is
checked where the request is validated (`accelkit.suite.run.interpreters`).

Both sides run the very same cases and plugin: the run copies this accelkit package (2 MB)
into its private folder, and every side imports accelkit from there (first on PYTHONPATH)
and collects the cases there (`--rootdir`). The copy holds accelkit alone, on purpose: the
folder that holds an installed accelkit is site-packages, and putting that first on a
side's PYTHONPATH would hand the side this host's torch instead of its own.

An image side runs each pass in a fresh container of its image (`accelkit.containers.run`:
labelled, removed afterwards, never pulled), as the host's user, with the network off, the
backend's device options (`Backend.container_options`, as `accelkit test --image` has them)
and bind mounts at the same paths as on the host: the run's folder, read-write (the pass's
results file, its events file, and the baton's folder: a Unix socket, so the two sides take
turns across the container's boundary as two host processes do,
`accelkit.suite.session.lockstep`), and read-only the copy of accelkit in it (one side cannot
change the other's code) and the files a run may name (--cases, --expectations,
--durations-from). Its events reach the run through a file that the plugin appends to and the
run reads as it grows (`--accelkit-events-file`), not a pipe. Run-scoped workers would die
with a pass's container, so an image side does its set-up in every pass.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import accelkit
from accelkit.errors import BadInput, ExitCode, Unavailable
from accelkit.events import Event, EventCallback
from accelkit.suite.run import outcome, run_plan
from accelkit.suite.run.container import Poller
from accelkit.suite.run.environment import child_env, perf_env
from accelkit.suite.run.interpreters import image_of, interpreter
from accelkit.suite.run.outcome import NO_TESTS
from accelkit.suite.run.request import RunRequest, cases_root, validate
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
    first on PYTHONPATH ("Sides" in the module docstring)."""
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
                exits[index] = runner.combined_exit(exits[index], status)
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
            kept_log = runner.keep_log(log_path)
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
    from accelkit.suite.run.runner import keep_log, last_error_line

    kept = keep_log(log_path)
    return Failed(
        f"--ab side {side.upper()}: pytest ended with status {status}: "
        f"{last_error_line(log_path)} (log: {kept})"
    )


# The sides: where each side's passes run.

#: The label (its value: the side's own id) on an image side's containers, to stop them.
SIDE_LABEL = "org.accelkit.ab-side"
#: How often an image side's events file is read for new lines, in seconds.
EVENTS_POLL_S = 0.2


def copy_accelkit(folder: Path) -> Path:
    """This accelkit package, copied to `folder`/accelkit (bytecode left out); returns
    `folder`: the one PYTHONPATH entry a side needs for it."""
    package = Path(accelkit.__file__).resolve().parent
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(package, folder / "accelkit", ignore=ignore)
    return folder


@dataclass(frozen=True)
class Pass:
    """One side's pass of a pair: its results file, log, events, number, log label and
    (baton socket, side letter) for `--accelkit-lockstep`."""

    part: Path
    log: Path
    on_event: EventCallback
    number: int
    label: str
    lockstep: tuple[str, str]


def side_request(request: RunRequest, source: Path) -> RunRequest:
    """The request a side runs: the built-in cases of the copy in `source` unless --cases."""
    if request.cases_dir is not None:
        return request
    return replace(request, cases_dir=source / "accelkit" / "suite")


@dataclass
class HostSide:
    """A python interpreter (or venv) on this host: each pass is its child process."""

    spec: str
    python: str
    env: dict[str, str]
    _procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def record(self) -> dict[str, str]:
        """What the side's results file says about it (`run.ab`, with its side letter)."""
        return {"python": self.python}

    def probe(self, request: RunRequest, code: str, timeout: float) -> tuple[int, str, str]:
        """`python -c code` on the side: (exit status, stdout, stderr)."""
        try:
            proc = subprocess.run(
                [self.python, "-c", code],
                capture_output=True,
                text=True,
                env=self.env,
                timeout=timeout,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise Unavailable(f"--ab {self.spec} ({self.python}): cannot start it: {exc}") from None
        return proc.returncode, proc.stdout, proc.stderr

    def run_pass(self, request: RunRequest, run: Pass) -> int:
        from accelkit.suite.run import runner

        return runner.run_pytest(
            request,
            run.part,
            run.log,
            run.on_event,
            pass_number=run.number,
            suites=("perf",),
            workers=min(request.worker_count, 1),
            append_log=True,
            python=self.python,
            env=self.env,
            label=run.label,
            lockstep=run.lockstep,
            started=self._procs.append,
        )

    def stop(self) -> None:
        from accelkit.suite.run import child_process

        for proc in self._procs:
            child_process.stop_group(proc)


@dataclass
class ImageSide:
    """A test image: each pass runs in a fresh container of it (module docstring)."""

    spec: str
    image: str
    env: dict[str, str]
    folder: Path
    """The run's folder, mounted read-write (results, events, the baton)."""
    source: Path
    """The folder in it holding the run's copy of accelkit, mounted read-only."""
    named: tuple[Path, ...] = ()
    """The files and folders the run names (--cases, --expectations, --durations-from),
    mounted read-only."""
    _id: str = field(default_factory=lambda: uuid.uuid4().hex[:16])

    @property
    def record(self) -> dict[str, str]:
        return {"image": self.image, "python": "python"}

    def _options(self, request: RunRequest, working_dir: Path) -> Any:
        from accelkit import backends
        from accelkit.containers.run import Mount
        from accelkit.suite.run.environment import container_env

        device = backends.get(request.device).container_options(dict(os.environ))
        mounts = [Mount(self.folder, str(self.folder), read_only=False)]
        mounts += [Mount(p, str(p)) for p in (self.source, *self.named)]
        return replace(
            device,
            mounts=(*device.mounts, *mounts),
            user=f"{os.getuid()}:{os.getgid()}",
            env={**container_env(request.device, device.env, os.environ), **self.env},
            working_dir=str(working_dir),
            labels={SIDE_LABEL: self._id},
        )

    def _run(
        self,
        request: RunRequest,
        argv: list[str],
        working_dir: Path,
        on_line: Callable[[str], None] | None = None,
        timeout: float | None = None,
    ) -> Any:
        from accelkit.containers.engine import connect
        from accelkit.containers.run import run_container

        client = connect()
        try:
            options = self._options(request, working_dir)
            return run_container(
                client, self.image, argv, options, on_line=on_line, timeout=timeout
            )
        finally:
            client.close()

    def probe(self, request: RunRequest, code: str, timeout: float) -> tuple[int, str, str]:
        from accelkit.errors import Failed

        try:
            result = self._run(request, ["python", "-c", code], Path("/tmp"), timeout=timeout)
        except Failed as exc:  # no `python` in the image, for one: it cannot run the suite
            raise Unavailable(f"--ab {self.spec}: cannot run the suite: {exc}") from None
        if result.timed_out:
            raise Unavailable(f"--ab {self.spec}: the probe timed out after {timeout:.0f} s")
        out = "\n".join(result.output_tail)
        return result.exit_code, out, out

    def run_pass(self, request: RunRequest, run: Pass) -> int:
        from accelkit.suite.run import runner

        events_path = run.part.with_name(run.part.name + ".events")
        events_path.write_bytes(b"")
        argv = runner.pytest_argv(
            request,
            run.part,
            None,
            run.number,
            suites=("perf",),
            workers=min(request.worker_count, 1),
            python="python",
            lockstep=run.lockstep,
            events_file=events_path,
            ini=self.source / "accelkit" / "suite" / "pytest.ini",
        )
        tail = _EventsTail(events_path, run.on_event)
        with open(run.log, "ab") as out:
            out.write(runner.pass_header("perf", run.number, run.label))
            out.flush()

            def line(text: str) -> None:
                out.write(text.encode() + b"\n")

            tail.start()
            try:
                result = self._run(request, argv, cases_root(request), on_line=line)
            finally:
                tail.stop()
        return int(result.exit_code)

    def stop(self) -> None:
        from accelkit.containers.engine import connect

        with contextlib.suppress(Exception):
            client = connect()
            try:
                mine = {"label": f"{SIDE_LABEL}={self._id}"}
                for container in client.containers.list(filters=mine):
                    with contextlib.suppress(Exception):
                        container.kill()
            finally:
                client.close()


class _EventsTail(Poller):
    """Reads an events file as the plugin appends to it; each complete JSON line is an event."""

    interval = EVENTS_POLL_S

    def __init__(self, path: Path, on_event: EventCallback) -> None:
        super().__init__()
        self.path = path
        self.on_event = on_event
        self.offset = 0
        self.partial = b""

    def poll(self) -> None:
        try:
            with open(self.path, "rb") as stream:
                stream.seek(self.offset)
                chunk = stream.read()
        except OSError:
            return
        self.offset += len(chunk)
        *lines, self.partial = (self.partial + chunk).split(b"\n")
        for raw in lines:
            with contextlib.suppress(ValueError):
                event = json.loads(raw)
                if isinstance(event, dict):
                    self.on_event(event)


Side = HostSide | ImageSide
