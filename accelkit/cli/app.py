"""The typer application every command module registers itself on (accelkit/cli/<command>.py),
and its global options. `accelkit.cli.main` imports the command modules and runs it."""

from __future__ import annotations

from typing import Annotated

import typer

from accelkit import __version__

app = typer.Typer(
    name="accelkit",
    help="Build, set up and test PyTorch accelerator variants with one shared suite.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

#: Global options, set by the root callback.
state = {"debug": False}


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"accelkit {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: Annotated[
        bool, typer.Option("--debug", help="Show tracebacks for unexpected errors.")
    ] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version_callback, is_eager=True, help="Print the version."
        ),
    ] = False,
) -> None:
    state["debug"] = debug
