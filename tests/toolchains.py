"""Compiler toolchains that the compile-only tests of several modules point accelkit at."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def triton_bin(name: str) -> Path:
    """A tool that the installed triton bundles (its own ptxas builds, ...)."""
    spec = importlib.util.find_spec("triton")
    assert spec is not None and spec.origin is not None, "triton is not installed"
    return Path(spec.origin).parent / "backends" / "nvidia" / "bin" / name


#: triton 3.8's own ptxas for capability >= 10.0: CUDA 13.3, which does not know sm_107.
BUNDLED_BLACKWELL_PTXAS = triton_bin("ptxas-blackwell")
