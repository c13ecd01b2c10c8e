"""Worker processes that live for a whole `accelkit test` run, across its measurement passes.

Each measurement pass of the perf suite is its own pytest process (`--passes`,
accelkit.results.merge). Some perf cases pay seconds of set-up that is not what they
measure, again in every pass: the all_reduce case starts two rank processes and joins a
process group, the compile-speedup case compiles its block. A run-scoped worker pays it once
per run: the first pass that asks starts the worker, and every pass sends it the same
measurement and gets that pass's samples back. Each pass still measures at its own time,
between the same cases as before, and records its own samples (one sample group per pass).

- `hosting()` (the runner, around all passes of a run): makes a private directory for the
  run's workers, names it in `ENV` for the pytest children, and when the run ends stops
  every worker started there (SIGTERM to its process group, then SIGKILL), whatever happened.
- `call(key, fn)` (a case): `fn(state)` in the run's worker named `key`, started on first
  use; `state` is a dict that the worker keeps between calls (what the set-up made). `fn`
  must pickle by reference (a module-level function or a functools.partial of one, in a
  module the worker can import: not a test module).
- `hosted()`: whether a run hosts workers; without one (pytest run directly, or a single
  pass) the cases do their set-up in their own process; `call_or_here(key, fn)` does
  either, with the same `fn`.

A worker runs `python -m accelkit.suite.session.run_scoped DIR KEY` in its own session, serves one
request at a time on a Unix socket in DIR (authenticated with the run's key, a file only
this user can read), and answers `("ok", value)` or `("error", traceback)`. A request that
does not come back within its deadline stops the worker (the next call starts a new one).
A worker whose run was killed outright (no `finally` ran) notices that the runner's
process is gone and ends itself and its children within a second.
"""

from __future__ import annotations

import contextlib
import gc
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from multiprocessing.connection import Client, Listener
from pathlib import Path
from typing import Any

from accelkit.torch_import import torch_or_none

ENV = "ACCELKIT_RUN_WORKERS"
"""The directory of this run's workers, set by `hosting()` for the pytest children."""
START_TIMEOUT_S = 300.0
"""How long a worker may take to start listening (an interpreter start: seconds, or minutes
on a loaded machine)."""
STOP_WAIT_S = 5.0
_AUTHKEY = "authkey"
_HOST = "runner"  # its pid; not a "*.pid" file: stop_all stops those
_POLL_S = 0.05


def hosted() -> bool:
    """Whether this process runs inside a run that hosts run-scoped workers."""
    return bool(os.environ.get(ENV))


@contextlib.contextmanager
def hosting(*, export: bool = True) -> Iterator[Path]:
    """Host run-scoped workers for the pytest children started inside (see the module
    docstring); yields the directory. `export`: name it in this process's `ENV` (children
    inherit it); otherwise the caller puts `ENV` in the children's environment itself (the
    two sides of `--ab`, a host each). Stops every worker started there on the way out."""
    previous = os.environ.get(ENV)
    with tempfile.TemporaryDirectory(prefix="accelkit-workers-") as tmp:
        folder = Path(tmp)
        key = folder / _AUTHKEY
        key.write_bytes(secrets.token_bytes(32))
        key.chmod(0o600)
        (folder / _HOST).write_text(str(os.getpid()), encoding="utf-8")
        if export:
            os.environ[ENV] = str(folder)
        try:
            yield folder
        finally:
            if export and previous is None:
                os.environ.pop(ENV, None)
            elif export:
                os.environ[ENV] = str(previous)
            stop_all(folder)


def stop_all(folder: Path) -> None:
    """Stop every worker started in `folder` and its children (a worker's own process
    group), all at once: each closes what it holds in parallel with the others."""
    pids: list[int] = []
    for pid_file in sorted(folder.glob("*.pid")):
        with contextlib.suppress(ValueError, OSError):
            pids.append(int(pid_file.read_text(encoding="utf-8")))
        pid_file.unlink(missing_ok=True)
    _stop(pids)


def _stop(pids: list[int]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, sig)
        deadline = time.monotonic() + STOP_WAIT_S
        while pids and time.monotonic() < deadline:
            pids = [pid for pid in pids if _alive(pid)]
            if pids:
                time.sleep(_POLL_S)
        if not pids:
            return


def _alive(pid: int) -> bool:
    """Whether process `pid` still runs (a zombie child is reaped and counts as gone)."""
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _check_key(key: str) -> None:
    if not key or not all(c.isalnum() or c in "-_." for c in key) or key.startswith("."):
        raise ValueError(f"run-scoped worker key {key!r}: letters, digits, '-', '_', '.' only")


def call(key: str, fn: Callable[[dict[str, Any]], Any], *, timeout_s: float) -> Any:
    """`fn(state)` in this run's worker `key` (started here when it is not running); its
    value. Raises AssertionError with the worker's traceback when `fn` raised, and when
    the worker died or did not answer within `timeout_s` (it is then stopped)."""
    _check_key(key)
    folder = Path(os.environ[ENV])
    authkey = (folder / _AUTHKEY).read_bytes()
    address = str(folder / f"{key}.sock")
    pid_file = folder / f"{key}.pid"
    if not pid_file.exists() or not _alive(int(pid_file.read_text(encoding="utf-8"))):
        _start(folder, key, address)
    pid = int(pid_file.read_text(encoding="utf-8"))
    try:
        with Client(address, family="AF_UNIX", authkey=authkey) as conn:
            conn.send(fn)
            if not conn.poll(timeout_s):
                raise TimeoutError(f"no answer within {timeout_s:g} s")
            status, value = conn.recv()
    except (OSError, EOFError, TimeoutError) as error:
        _stop([pid])
        pid_file.unlink(missing_ok=True)
        raise AssertionError(
            f"run-scoped worker {key!r} failed: {error}\n{_log_tail(folder, key)}"
        ) from None
    if status != "ok":
        raise AssertionError(f"in run-scoped worker {key!r}:\n{value}")
    return value


def call_or_here(key: str, fn: Callable[[dict[str, Any]], Any], *, timeout_s: float) -> Any:
    """`call(key, fn)` when this run hosts workers; otherwise `fn` here, with a fresh state
    that is closed afterwards (what a worker's state gets when it stops)."""
    if hosted():
        return call(key, fn, timeout_s=timeout_s)
    state: dict[str, Any] = {}
    try:
        return fn(state)
    finally:
        _close(state)


def _close(state: dict[str, Any]) -> None:
    for value in state.values():
        close = getattr(value, "close", None)
        if callable(close):
            with contextlib.suppress(Exception):
                close()


def _start(folder: Path, key: str, address: str) -> None:
    ready = folder / f"{key}.ready"
    for stale in (Path(address), ready):
        stale.unlink(missing_ok=True)
    log = open(folder / f"{key}.log", "ab")  # noqa: SIM115 (the child holds it)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "accelkit.suite.session.run_scoped", str(folder), key],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # outlives this pass; hosting() stops its group
        )
    finally:
        log.close()
    (folder / f"{key}.pid").write_text(str(proc.pid), encoding="utf-8")
    deadline = time.monotonic() + START_TIMEOUT_S
    while not ready.exists():
        if proc.poll() is not None:
            raise AssertionError(
                f"run-scoped worker {key!r} exited {proc.returncode} before listening:\n"
                f"{_log_tail(folder, key)}"
            )
        if time.monotonic() > deadline:
            _stop([proc.pid])
            raise AssertionError(
                f"run-scoped worker {key!r} did not listen within {START_TIMEOUT_S:g} s"
            )
        time.sleep(_POLL_S)


def _log_tail(folder: Path, key: str, lines: int = 15) -> str:
    try:
        text = (folder / f"{key}.log").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


def serve(folder: Path, key: str) -> int:
    """The worker: answer requests until stopped; SIGTERM closes what the state holds."""
    state: dict[str, Any] = {}

    def shut(signum: int, frame: Any) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, shut)
    torch_or_none()  # every job needs it; loaded here, its objects are frozen (freeze_loaded)
    host = int((folder / _HOST).read_text(encoding="utf-8"))
    threading.Thread(target=_end_with_host, args=(host,), daemon=True).start()
    authkey = (folder / _AUTHKEY).read_bytes()
    address = str(folder / f"{key}.sock")
    try:
        with Listener(address, family="AF_UNIX", authkey=authkey) as listener:
            (folder / f"{key}.ready").touch()
            while True:
                try:
                    conn = listener.accept()
                except (OSError, EOFError):
                    continue  # a client that failed to authenticate
                with conn:
                    try:
                        fn = conn.recv()
                        answer: tuple[str, Any] = ("ok", fn(state))
                    except Exception:
                        answer = ("error", traceback.format_exc(limit=8))
                    with contextlib.suppress(OSError):
                        conn.send(answer)
    finally:
        _close(state)
        # Stopping: nothing is left to do but exit, so spare the exit its collection over
        # torch and the compiler stack the jobs loaded (torch_import.freeze_loaded).
        sys.stdout.flush()
        sys.stderr.flush()
        gc.freeze()


def _end_with_host(host: int) -> None:
    """A worker whose run was killed (SIGKILL leaves no `finally`) ends itself and its
    children rather than linger."""
    while _alive(host):
        time.sleep(1.0)
    os.killpg(os.getpgid(0), signal.SIGKILL)


if __name__ == "__main__":
    raise SystemExit(serve(Path(sys.argv[1]), sys.argv[2]))
