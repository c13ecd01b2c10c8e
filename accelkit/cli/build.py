"""`accelkit build <backend>`: plan, build in a container, validate and record a torch wheel."""

from __future__ import annotations

import json
import sys
from typing import Any

import typer

from accelkit import options
from accelkit.cli.app import app
from accelkit.options import Opt
from accelkit.wheels.request import BUILD_OPTIONS

#: Options of the command itself (how to present it), not of the build it asks for.
_PRESENTATION = (
    Opt("dry_run", ("--dry-run",), bool, False, "Print the plan; run nothing."),
    Opt("as_json", ("--json",), bool, False, "Print the plan (--dry-run) or the outcome as JSON."),
)


def build(*, dry_run: bool, as_json: bool, **params: Any) -> None:
    # Nothing here imports torch or docker before the plan is printed (--dry-run).
    from accelkit.wheels.recipes import plan as make_plan
    from accelkit.wheels.request import BuildRequest

    request = BuildRequest.from_params(params)
    plan = make_plan(request)
    if dry_run:
        if as_json:
            typer.echo(plan.to_json())
        else:
            for line in plan.render():
                typer.echo(line)
        return

    from accelkit.cli.console import is_plain, make_console
    from accelkit.containers.engine import connect
    from accelkit.wheels.execute import execute

    out = make_console()
    err = make_console(stderr=True)
    log = err if as_json else out
    client = connect()
    try:
        steps = [step.name for step in plan.steps] + (["smoke"] if request.smoke else [])
        view = _StepLines(log) if is_plain(log) else _StepProgress(log, steps)
        with view as progress:
            outcome = execute(
                plan,
                client,
                on_line=progress.on_line,
                on_step=progress.on_step,
                smoke_image=request.smoke_image,
            )
    finally:
        client.close()
    if as_json:
        sys.stdout.write(json.dumps(outcome.to_dict()) + "\n")
    else:
        for wheel in outcome.wheels:
            out.print(f"wheel: {wheel}")
        out.print(f"manifest: {outcome.manifest}")
        out.print(f"log: {outcome.log}")
    raise typer.Exit(0)


app.command(
    name="build",
    help="Build a PyTorch wheel for a backend in a builder container (ROCm: against "
    "TheRock's pip SDK), validate it and write manifest.json next to it.",
)(options.command((*BUILD_OPTIONS, *_PRESENTATION), build))


class _StepLines:
    """Where there is no terminal (a CI log): one line per step and state, then its log lines;
    no spinner frames and no redrawn table."""

    def __init__(self, console: Any) -> None:
        self.console = console

    def __enter__(self) -> _StepLines:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def on_line(self, line: str) -> None:
        self.console.print(f"| {line}", markup=False, soft_wrap=True)

    def on_step(self, name: str, state: str) -> None:
        self.console.print(f"step {name}: {state}", markup=False)


class _StepProgress:
    """Per-step progress (rich) above the build's live log lines, on a terminal."""

    def __init__(self, console: Any, steps: list[str]) -> None:
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.console = console
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        names = ["builder-image", *steps]
        self.tasks = {name: self.progress.add_task(name, total=1, start=False) for name in names}

    def __enter__(self) -> _StepProgress:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(None, None, None)

    def on_line(self, line: str) -> None:
        self.progress.console.print(f"| {line}", markup=False, style="dim", soft_wrap=True)

    def on_step(self, name: str, state: str) -> None:
        task = self.tasks.get(name)
        if task is None:
            return
        if state == "start":
            self.progress.start_task(task)
        elif state in ("done", "cached", "skipped"):
            self.progress.update(task, completed=1, description=f"{name} [green]{state}[/]")
        elif state == "failed":
            self.progress.update(task, description=f"{name} [red]failed[/]")
