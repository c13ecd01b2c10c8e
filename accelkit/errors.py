"""User-facing failures, each carrying the exit code of DESIGN.md's contract.

Raised anywhere in the core, caught in one place (`accelkit.cli.main`) and printed as one
line. Anything else that escapes is a bug and prints a traceback only with --debug.
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    OK = 0
    FAILED = 1  # a case failed/errored/crashed/timed out, or a compare found a regression
    BAD_INPUT = 2  # usage, config or file problems
    UNAVAILABLE = 3  # the environment cannot do what was asked (device absent, no Docker)


class AccelkitError(Exception):
    """Base of every error meant for the user: its message is one line."""

    exit_code: ExitCode = ExitCode.FAILED

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class BadInput(AccelkitError):
    """Bad flags, values or files (exit 2)."""

    exit_code = ExitCode.BAD_INPUT


class ConfigError(BadInput):
    """Bad content in a config file; `location` is `file:line` when known."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        self.path = path
        self.line = line
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(f"{where}{message}")


class Unavailable(AccelkitError):
    """The machine cannot do what was asked: device absent, Docker unreachable (exit 3)."""

    exit_code = ExitCode.UNAVAILABLE


class Failed(AccelkitError):
    """An operation ran and failed (a build step, a container command) (exit 1)."""

    exit_code = ExitCode.FAILED
