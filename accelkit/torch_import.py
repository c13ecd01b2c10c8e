"""torch, imported once and lazily, never raising: a machine without torch (or with a broken
build) still gets `accelkit doctor`, `--help` and the matrix tools. The backends and the probe
both load torch through here, so neither imports the other for it."""

from __future__ import annotations

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
    freeze_loaded()
    return module, ""


def freeze_loaded() -> None:
    """Hand everything loaded so far (torch's modules and their objects) to the permanent
    generation, out of the cyclic garbage collector's reach; call it once torch (and, in
    a pytest worker, the collected cases) are loaded.

    An interpreter that imported torch spends 1.3 s on its way out here, most of it in the
    last cyclic collection over torch's millions of objects, and every `accelkit test` runs
    several such processes one after the other (the CLI, each pytest session's workers,
    the perf passes, the run-scoped and compile workers). Frozen, they are not traversed
    again: not at exit, nor by each `gc.collect()` on the way (the timer collects before it
    measures). Objects made later are collected as usual, so an unclosed file in a cycle is
    still flushed at exit (freezing at exit would lose it). Frozen objects that become
    garbage stay until exit: what an import made lives that long anyway."""
    gc.freeze()


def torch_or_none() -> ModuleType | None:
    """The torch module, or None when it cannot be imported (see `torch_import_error`)."""
    return _import_torch()[0]


def torch_import_error() -> str:
    return _import_torch()[1]
