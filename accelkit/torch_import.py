"""torch, imported once and lazily, never raising: a machine without torch (or with a broken
build) still gets `accelkit doctor`, `--help` and the matrix tools. The backends and the probe
both load torch through here, so neither imports the other for it."""

from __future__ import annotations

import functools
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
    return module, ""


def torch_or_none() -> ModuleType | None:
    """The torch module, or None when it cannot be imported (see `torch_import_error`)."""
    return _import_torch()[0]


def torch_import_error() -> str:
    return _import_torch()[1]
