"""torch, imported once and lazily, never raising: a machine without torch (or with a broken
build) still gets `accelkit doctor`, `--help` and the matrix tools. The backends and the probe
both load torch through here, so neither imports the other for it."""

from __future__ import annotations

import atexit
import functools
import gc
import importlib
from types import ModuleType


@functools.lru_cache(maxsize=1)
def _import_torch() -> tuple[ModuleType | None, str]:
    try:
        module = importlib.import_module("torch")
    except ImportError as exc:
        return None, f"torch is not installed ({exc})"
    except Exception as exc:  # a broken build (missing shared libraries, ...) must not crash us
        return None, f"torch failed to import: {type(exc).__name__}: {exc}"
    quick_exit()
    return module, ""


@functools.lru_cache(maxsize=1)
def quick_exit() -> None:
    """Make this process's exit about 1 s faster once it has imported torch.

    An interpreter that imported torch spends 1.3 s of CPU on its way out here, most of it
    in the last cyclic garbage collection over torch's millions of objects (0.1 s with that
    collection skipped). Every `accelkit test` runs several such processes one after the
    other (the CLI, each pytest session and its workers, the perf passes, the run-scoped
    and compile workers), so it adds up to tens of seconds a run. `gc.freeze()` at exit
    (an atexit hook, registered once) moves every object to the permanent generation, so
    that collection has nothing to do. Objects are still freed by reference counting
    as modules are torn down; only objects in reference cycles are left to the OS, which
    reclaims the process anyway (files are flushed by their `close()`, never by a cycle
    collection)."""
    atexit.register(gc.freeze)


def torch_or_none() -> ModuleType | None:
    """The torch module, or None when it cannot be imported (see `torch_import_error`)."""
    return _import_torch()[0]


def torch_import_error() -> str:
    return _import_torch()[1]
