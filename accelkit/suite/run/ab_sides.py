"""The two sides of `accelkit test --ab A B` (`accelkit.suite.run.ab`): where a side's passes run.

A side is a python interpreter or venv folder on this host (`HostSide`), or a test image
(`image:REF`, `ImageSide`): one `accelkit setup` built, or any local image whose `python`
imports what the suite needs (`ab._PROBE`). A run may mix the two.

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
turns across the container's boundary as two host processes do, `accelkit.suite.session.lockstep`),
and read-only the copy of accelkit in it (one side cannot change the other's code) and the
files a run may name (--cases, --expectations, --durations-from).
Its events reach the run through a file that the plugin appends to and the run reads as it
grows (`--accelkit-events-file`), not a pipe. Run-scoped workers
(`accelkit.suite.session.run_scoped`)
would die with a pass's container, so an image side does its set-up in every pass.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import accelkit
from accelkit.errors import Unavailable
from accelkit.events import EventCallback
from accelkit.suite.run.container import Poller
from accelkit.suite.run.request import RunRequest, cases_root

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

        return runner._run_pytest(
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
