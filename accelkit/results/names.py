"""The results file's fixed vocabulary (statuses, suites), with the standard library only:
code that runs in every pytest worker (`suite/session/caseid.py`) names suites without loading the
pydantic models of `results/model.py` (0.3 s a process), which re-exports these."""

from __future__ import annotations

from typing import Literal

Status = Literal["passed", "failed", "skipped", "error", "crashed", "timeout"]
STATUSES: tuple[Status, ...] = ("passed", "failed", "skipped", "error", "crashed", "timeout")
# Statuses that make `accelkit test` exit 1.
BAD_STATUSES: frozenset[str] = frozenset({"failed", "error", "crashed", "timeout"})
Suite = Literal["conformance", "perf"]
SUITES: tuple[Suite, ...] = ("conformance", "perf")
