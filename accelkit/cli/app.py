"""The typer application every command module registers itself on (accelkit/cli/<command>.py),
and its global options. `accelkit.cli.main` imports the command modules and runs it."""

from __future__ import annotations

from typing import Annotated

import typer
from typer.models import CommandInfo, TyperInfo

from accelkit import __version__

app = typer.Typer(
    name="accelkit",
    help="Build, set up and test PyTorch accelerator variants with one shared suite.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

#: Each command in one line, as `accelkit --help` lists it (its own --help has the whole text).
SUMMARIES: dict[str, str] = {
    "bisect": "Find the build that broke a case: run it on each build, name the first bad one.",
    "build": "Build a PyTorch wheel for a backend in a builder container and validate it.",
    "compare": "Compare two results files; exit 1 on a regression or a newly failing case.",
    "diff": "Compare what two runs computed, case by case, against the cases' tolerances.",
    "doctor": "Describe this machine and check every backend and PyTorch 2.14 feature.",
    "merge": "Join the shards of one run into one results file.",
    "report": "Show runs side by side, or the nightly history (terminal, Markdown, HTML).",
    "repro": "Write and run a standalone reproducer of a recorded case.",
    "setup": "Build and verify a backend's test image (the torch under test and accelkit).",
    "test": "Run the shared conformance and performance suite on a device.",
    "matrix": "Validate, expand and rehearse the build and test matrices for GitHub Actions.",
}


def apply_summaries() -> None:
    """Give every registered command its one line (a command without one is an error), and
    list the commands by name, whatever order their modules were imported in."""

    def name_of(info: CommandInfo | TyperInfo) -> str:
        callback = info.callback
        return info.name or (callback.__name__ if callback is not None else "")

    app.registered_commands.sort(key=name_of)
    infos: list[CommandInfo | TyperInfo] = [*app.registered_commands, *app.registered_groups]
    for info in infos:
        name = name_of(info)
        if name not in SUMMARIES:
            raise KeyError(f"accelkit {name}: no one-line summary in accelkit.cli.app.SUMMARIES")
        info.short_help = SUMMARIES[name]


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
