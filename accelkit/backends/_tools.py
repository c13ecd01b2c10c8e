"""Asking vendor command-line tools (nvidia-smi, rocm-smi, xpu-smi) without ever failing."""

from __future__ import annotations

import shutil
import subprocess


def tool_output(argv: list[str], *, timeout: float = 10.0) -> str | None:
    """stdout of `argv`, or None when the tool is absent, fails or hangs."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    return proc.stdout.strip() or None
