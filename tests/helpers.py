"""Shared helpers for accelkit's own tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURE_CASES = REPO / "tests" / "fixtures" / "cases"


def run_cli(*args: str, timeout: float = 600, cwd: Path | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """`accelkit ARGS` in a real subprocess, as a user would run it (no terminal)."""
    return subprocess.run(
        [sys.executable, "-m", "accelkit", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        check=False,
    )


def assert_one_line_error(proc: subprocess.CompletedProcess[str], code: int, needle: str) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("accelkit: error: "), lines
    assert needle in lines[0], lines
    assert "Traceback" not in proc.stderr + proc.stdout
