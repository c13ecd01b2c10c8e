"""The pytest child of a run: stopped with everything it started, whatever happens to accelkit.

`accelkit.suite.run.runner` starts pytest in its own process group with `die_with_parent()`,
turns a SIGTERM into an interrupt around it (`sigterm_as_interrupt`), and stops the whole
group on the way out (`stop_group`); `accelkit.suite.run.ab` stops the other side's pytest of a
pass pair the same way.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: stop the suite like a Ctrl-C, so nothing is left running."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Terminated()


def die_with_parent() -> Callable[[], None] | None:
    """A pre-exec hook (Linux): the pytest child is killed if accelkit is killed outright.

    Everything is resolved here, in the parent: between fork and exec the hook only makes
    one system call, taking no lock another thread (rich's refresh thread) could hold.
    """
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig, sigkill = 1, int(signal.SIGKILL)
    return lambda: prctl(pr_set_pdeathsig, sigkill)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    """Stop pytest and all its workers: SIGTERM first (the plugin writes what finished), then
    SIGKILL. Not SIGINT: a shell's background job inherits it ignored."""
    for sig, wait_s in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait_s)
            break
        except subprocess.TimeoutExpired:
            continue
    # Workers may linger after the leader exits; the group goes with it.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
