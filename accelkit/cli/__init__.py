"""The `accelkit` command: thin typer commands that parse, call the core and render.

Start-up must stay fast: nothing imported here may import torch (or pydantic, docker):
command bodies import the core lazily. `benchmarks/bench_startup.py` measures it.
"""

from __future__ import annotations

import os
import sys

import typer

from accelkit.cli.app import app
from accelkit.errors import AccelkitError, ExitCode

_INTERRUPTED = 130  # 128 + SIGINT, as shells report it

# typer re-exports click's exception classes under its own names (recent typer releases
# vendor click): reach them through typer so both kinds of release work.
_UsageError: type[Exception] = typer.BadParameter.__mro__[1]
_ClickException: type[Exception] = typer.BadParameter.__mro__[2]


__all__ = ["app", "main"]


def register_commands() -> None:
    """Import every command module; each adds its commands to `app` (cheap: the commands
    import their cores lazily)."""
    from accelkit.cli import (  # noqa: F401
        bisect,
        build,
        compare,
        diff,
        doctor,
        matrix,
        merge,
        report,
        repro,
        setup,
        test,
    )
    from accelkit.cli.app import apply_summaries

    apply_summaries()


def _error_line(message: str) -> None:
    """Print one line on stderr, plus a GitHub Actions annotation when running there."""
    sys.stderr.write(f"accelkit: error: {message}\n")
    if os.environ.get("GITHUB_ACTIONS") == "true":
        # Annotation messages must be single-line; '%' and newlines are escaped per the spec.
        escaped = message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
        sys.stdout.write(f"::error::{escaped}\n")


def main(argv: list[str] | None = None) -> None:
    """Entry point: every user-facing failure becomes one line and its exit code."""
    register_commands()
    command = typer.main.get_command(app)
    args = sys.argv[1:] if argv is None else argv
    debug = "--debug" in args
    try:
        rv = command.main(args=args, prog_name="accelkit", standalone_mode=False)
    except AccelkitError as exc:
        if debug:
            raise
        _error_line(exc.message)
        sys.exit(int(exc.exit_code))
    except _UsageError as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # help was printed already
            sys.exit(int(ExitCode.BAD_INPUT))
        ctx = getattr(exc, "ctx", None)
        hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        _error_line(f"{exc.format_message()}{hint}")  # type: ignore[attr-defined]
        sys.exit(int(ExitCode.BAD_INPUT))
    except (typer.Abort, KeyboardInterrupt):
        _error_line("interrupted")
        sys.exit(_INTERRUPTED)
    except _ClickException as exc:
        _error_line(exc.format_message())  # type: ignore[attr-defined]
        sys.exit(int(getattr(exc, "exit_code", 1)))
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except Exception as exc:
        if debug:
            raise
        _error_line(
            f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)"
        )
        sys.exit(int(ExitCode.FAILED))
    code = int(rv) if isinstance(rv, int) else 0
    if code == _INTERRUPTED:  # typer turns Ctrl-C (and our SIGTERM) into exit code 130
        _error_line("interrupted")
    sys.exit(code)
