"""`accelkit test --image IMAGE`: the same suite run, inside a test image (the sibling of
`accelkit.suite.run.runner`, which runs it on this host; the CLI picks between them).

The container runs `python -m accelkit test` with the same options (`RunRequest.to_argv`,
with --image dropped and the output paths mapped into the container), with the
backend's device options (accelkit.backends), the host's device-selection variables and the
variables the backend's suite needs (`Backend.suite_environment`; a value set on the host wins).
Each requested output file (--json, --junit, --log) is written by the run inside to a bind
mount of its host folder (--record-outputs: of the folder itself), so it grows on the host
as cases finish; --cases, --expectations and --durations-from are mounted read-only; the
host's ACCELKIT_COMPILE_CACHE folder is mounted read-write (Inductor's caches). Cases
are reported to `on_event` as they land in the results file. The inner exit code is the
outcome: 2 and 3 become BadInput and Unavailable with the inner error line, anything but 0/1
a failure. The container is removed afterwards, also on Ctrl-C (accelkit.containers.run).
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from accelkit.errors import BadInput, ExitCode, Failed, Unavailable
from accelkit.events import Event, EventCallback
from accelkit.suite.run import outcome
from accelkit.suite.run.environment import container_env
from accelkit.suite.run.outcome import RunOutcome
from accelkit.suite.run.request import RunRequest, validate
from accelkit.suite.session import compile_cache

#: Folders inside the container.
OUT_ROOT = "/accelkit-out"
IN_ROOT = "/accelkit-in"
#: The host's ACCELKIT_COMPILE_CACHE, mounted read-write (accelkit.suite.session.compile_cache).
CACHE_ROOT = "/accelkit-compile-cache"
#: How often the results file is read for new cases, in seconds.
POLL_S = 0.5


def run(request: RunRequest, on_event: EventCallback | None = None) -> RunOutcome:
    """Run `request` (with `image` set) in its image; BadInput/Unavailable before starting
    anything, as on the host."""
    from dataclasses import replace

    from accelkit import backends
    from accelkit.containers.engine import connect
    from accelkit.containers.run import Mount, RunOptions, run_container
    from accelkit.results.io import load_results, write_results
    from accelkit.results.junit import write_junit

    validate(request)
    if request.image is None:
        raise ValueError("a run without --image goes through accelkit.suite.run.runner")
    backend = backends.get(request.device)
    emit = on_event or (lambda event: None)
    with tempfile.TemporaryDirectory(prefix="accelkit-in-container-") as tmp:
        json_path = (request.json_path or Path(tmp, "results.json")).resolve()
        mounts: list[Mount] = []
        folders: dict[Path, str] = {}

        def inside(path: Path) -> str:
            folder = path.parent.resolve()
            folder.mkdir(parents=True, exist_ok=True)
            if folder not in folders:
                folders[folder] = f"{OUT_ROOT}/{len(folders)}"
                mounts.append(Mount(source=folder, target=folders[folder], read_only=False))
            return f"{folders[folder]}/{path.name}"

        def output(path: Path | None) -> Path | None:
            return None if path is None else Path(inside(path.resolve()))

        inner = replace(
            request,
            image=None,
            json_path=output(json_path),
            junit_path=output(request.junit_path),
            log_path=output(request.log_path),
            expectations=None,
            cases_dir=None,
            durations_from=None,
            record_outputs=None,
        )
        if request.record_outputs is not None:  # a folder: mounted itself, read-write
            outputs_dir = request.record_outputs.resolve()
            outputs_dir.mkdir(parents=True, exist_ok=True)
            mounts.append(Mount(source=outputs_dir, target=f"{OUT_ROOT}/outputs", read_only=False))
            inner = replace(inner, record_outputs=Path(f"{OUT_ROOT}/outputs"))
        if request.expectations is not None:
            source = request.expectations.resolve()
            mounts.append(Mount(source=source, target=f"{IN_ROOT}/expectations.yaml"))
            inner = replace(inner, expectations=Path(f"{IN_ROOT}/expectations.yaml"))
        if request.durations_from is not None:
            source = request.durations_from.resolve()
            mounts.append(Mount(source=source, target=f"{IN_ROOT}/durations.json"))
            inner = replace(inner, durations_from=Path(f"{IN_ROOT}/durations.json"))
        if request.cases_dir is not None:
            mounts.append(Mount(source=request.cases_dir.resolve(), target=f"{IN_ROOT}/cases"))
            inner = replace(inner, cases_dir=Path(f"{IN_ROOT}/cases"))
        cache_env: dict[str, str] = {}
        cache = os.environ.get(compile_cache.ENV, "").strip()
        if cache:  # Inductor's caches, kept on the host; keyed inside by the image's torch
            Path(cache).mkdir(parents=True, exist_ok=True)
            mounts.append(Mount(source=Path(cache).resolve(), target=CACHE_ROOT, read_only=False))
            cache_env[compile_cache.ENV] = CACHE_ROOT
        argv = ["python", "-m", "accelkit", "test", *inner.to_argv()]

        # Compiling for a target needs no device: such a run works on any host.
        device = (
            RunOptions() if request.compile_only else backend.container_options(dict(os.environ))
        )
        options = replace(
            device,
            mounts=(*device.mounts, *mounts),
            # Files land on the host owned by the user who ran accelkit, not by root.
            user=f"{os.getuid()}:{os.getgid()}",
            env={**container_env(request.device, device.env, os.environ), **cache_env},
            working_dir="/tmp",
        )
        json_path.unlink(missing_ok=True)  # a previous run's cases are not this run's
        watcher = _CaseWatcher(json_path, emit)
        watcher.start()
        client = connect()
        try:
            result = run_container(client, request.image, argv, options)
        finally:
            watcher.stop()
            client.close()

        code = result.exit_code
        error = _error_line(result.output_tail)
        if code == ExitCode.BAD_INPUT:
            raise BadInput(f"in {request.image}: {error}")
        if code == ExitCode.UNAVAILABLE:
            raise Unavailable(f"in {request.image}: {error}")
        if code == 130:
            raise KeyboardInterrupt
        if code not in (ExitCode.OK, ExitCode.FAILED) or not json_path.is_file():
            tail = "".join(f"\n  | {line}" for line in result.output_tail[-20:])
            raise Failed(f"accelkit test in {request.image} exited with code {code}{tail}")
        results = load_results(json_path)
        run_update: dict[str, Any] = {"image": request.image}
        if request.record_outputs is not None:
            run_update["outputs"] = str(request.record_outputs.resolve())
        if request.argv:
            run_update["argv"] = list(request.argv)
        results = results.model_copy(update={"run": results.run.model_copy(update=run_update)})
        write_results(results, json_path)
        if request.junit_path is not None:
            write_junit(results, request.junit_path)
        exit_code = outcome.exit_code(results, 0 if code == 0 else 1)
        if code == ExitCode.FAILED:
            exit_code = ExitCode.FAILED
        return RunOutcome(
            results=results, exit_code=exit_code, log_path=request.log_path, pytest_exit=code
        )


def _error_line(lines: tuple[str, ...]) -> str:
    for line in reversed(lines):
        if line.startswith("accelkit: error: "):
            return line.removeprefix("accelkit: error: ")
    return lines[-1] if lines else "no output"


class Poller:
    """Calls `poll()` every `interval` seconds on its own thread from `start()` to `stop()`,
    and once more in `stop()`: what landed last."""

    interval = POLL_S

    def __init__(self) -> None:
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join()
        self.poll()

    def _loop(self) -> None:
        while not self.stopped.wait(self.interval):
            self.poll()

    def poll(self) -> None:
        raise NotImplementedError


class _CaseWatcher(Poller):
    """Reads the growing results file and reports each new case as a `case` event."""

    def __init__(self, path: Path, emit: Callable[[Event], None]) -> None:
        super().__init__()
        self.path = path
        self.emit = emit
        self.seen = 0

    def poll(self) -> None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        cases = data.get("cases") if isinstance(data, dict) else None
        if not isinstance(cases, list):
            return
        for case in cases[self.seen :]:
            if isinstance(case, dict):
                self.emit({"event": "case", "case": case})
        self.seen = max(self.seen, len(cases))
