"""`accelkit matrix`: validate, expand and export matrix files (matrices/*.yaml).

The core lives in `accelkit.matrix`; it is imported inside each command so that the
CLI's start-up never pays for PyYAML (or anything heavier).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from accelkit.cli.app import app
from accelkit.errors import BadInput

if TYPE_CHECKING:
    from accelkit.matrix import MatrixEntry

matrix_app = typer.Typer(
    name="matrix",
    help="Validate, expand and rehearse build/test matrices (matrices/*.yaml) for GitHub Actions.",
    no_args_is_help=True,
)
app.add_typer(matrix_app, name="matrix")

FileArgument = Annotated[
    Path, typer.Argument(help="A matrix file, e.g. matrices/nightly.yaml.", show_default=False)
]
FilterOption = Annotated[
    list[str] | None,
    typer.Option(
        "--filter",
        "-f",
        metavar="KEY=VALUE",
        help="Keep legs whose KEY matches VALUE (globs; commas mean any of). Repeatable; "
        "keys: name, backend, backend_version, target, family, device, python, suite, "
        "runner, build, container, variant, torch_channel, torch_ref.",
        show_default=False,
    ),
]
AllowEmptyOption = Annotated[
    bool, typer.Option("--allow-empty", help="Exit 0 even when no leg is left.")
]


def _legs(file: Path, filters: list[str] | None, allow_empty: bool) -> tuple[MatrixEntry, ...]:
    from accelkit.matrix import load_legs

    legs = load_legs(str(file), filters or [])
    if not legs and not allow_empty:
        shown = " ".join(f"--filter {f}" for f in filters or [])
        raise BadInput(
            f"no legs in {file} match {shown or 'the file'}; pass --allow-empty if that is fine"
        )
    return legs


@matrix_app.command("validate")
def validate(file: FileArgument) -> None:
    """Check a matrix file: schema, values, runner labels, unique legs."""
    from accelkit.matrix import expand, load_matrix

    matrix = load_matrix(str(file))
    legs = expand(matrix)
    backends = sorted({leg.backend for leg in legs})
    typer.echo(f"{file}: ok, {len(legs)} legs ({', '.join(backends)})")


@matrix_app.command("expand")
def expand_command(
    file: FileArgument,
    filters: FilterOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the legs as a JSON list instead of a table.")
    ] = False,
    allow_empty: AllowEmptyOption = False,
) -> None:
    """Show every leg the matrix expands to (after --filter)."""
    legs = _legs(file, filters, allow_empty)
    if as_json:
        sys.stdout.write(json.dumps([leg.to_dict() for leg in legs], indent=2) + "\n")
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{file}: {len(legs)} legs", title_justify="left")
    table.add_column("name", no_wrap=True)
    for column in ("torch", "suites", "runner", "image"):
        table.add_column(column, overflow="fold")
    table.add_column("build")
    table.add_column("timeout", justify="right")
    for leg in legs:
        image = (leg.image or leg.base_image or "-") if leg.container else "(no container)"
        table.add_row(
            leg.name,
            leg.torch.label(),
            ",".join(leg.suites),
            " ".join(leg.runner),
            image,
            "yes" if leg.build else "no",
            f"{leg.timeout_minutes}m",
        )
    Console(soft_wrap=False).print(table)


@matrix_app.command("github")
def github(
    file: FileArgument,
    filters: FilterOption = None,
    allow_empty: AllowEmptyOption = False,
) -> None:
    """Print the compact {"include": [...]} for a workflow's strategy.matrix."""
    from accelkit.matrix import github_matrix

    legs = _legs(file, filters, allow_empty)
    sys.stdout.write(json.dumps(github_matrix(legs), separators=(",", ":")) + "\n")


@matrix_app.command("run")
def run_command(
    file: FileArgument,
    filters: FilterOption = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the plan per leg; start nothing.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the plan (and outcomes) as JSON.")
    ] = False,
    output: Annotated[
        Path,
        typer.Option(
            "--output", "-o", help="Each leg's results land in DIR/<leg name>/, as in CI."
        ),
    ] = Path("leg-results"),
    base_image: Annotated[
        str | None,
        typer.Option(
            "--base-image",
            help="Base image for every setup (upstream images are never pulled), "
            "e.g. accelkit-base:bookworm.",
        ),
    ] = None,
    torch_wheel: Annotated[
        Path | None,
        typer.Option("--torch-wheel", help="The torch wheel every setup installs."),
    ] = None,
    skip_build: Annotated[
        bool,
        typer.Option(
            "--skip-build",
            help="Rehearse build legs without building torch (setup installs --torch-wheel).",
        ),
    ] = False,
    keyword: Annotated[
        str | None,
        typer.Option("-k", help="Rehearsal-only narrowing: pass -k EXPR to each leg's test."),
    ] = None,
    test_args: Annotated[
        list[str] | None,
        typer.Option(
            "--test-arg",
            metavar="ARG",
            help="Rehearsal-only: append ARG to each leg's `accelkit test` options "
            "(repeatable; write --test-arg=--workers --test-arg=0).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Rehearse legs locally the way the nightly workflow runs them (those this machine can).

    Exit 0 when every runnable leg passed, 1 when one failed, 2 for bad input, 3 when no
    selected leg can run here.
    """
    from rich.console import Console

    from accelkit.errors import ExitCode
    from accelkit.matrix import DockerHost, RehearsalOptions, plan_rehearsal, rehearse

    legs = _legs(file, filters, allow_empty=False)
    extra = [*(["-k", keyword] if keyword is not None else []), *(test_args or [])]
    options = RehearsalOptions(
        output=output,
        base_image=base_image,
        torch_wheel=torch_wheel,
        skip_build=skip_build,
        test_args=tuple(extra),
    )
    host = DockerHost()
    try:
        plan = plan_rehearsal(legs, options, host)
        out = Console(soft_wrap=False, highlight=False)
        log = Console(stderr=True, highlight=False) if as_json else out
        if dry_run:
            if as_json:
                sys.stdout.write(json.dumps({"plan": plan.to_dict()}, indent=2) + "\n")
            else:
                _render_plan(out, file, plan)
            raise typer.Exit(0 if plan.runnable else int(ExitCode.UNAVAILABLE))
        if not as_json:
            _render_plan(out, file, plan)
        outcome = rehearse(plan, host, _progress(log))
    finally:
        host.close()
    if as_json:
        data = {"plan": plan.to_dict(), "outcome": outcome.to_dict()}
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    else:
        _render_outcome(out, outcome)
    raise typer.Exit(int(outcome.exit_code))


def _render_plan(console: Any, file: Path, plan: Any) -> None:
    from rich.table import Table

    runnable = len(plan.runnable)
    table = Table(
        title=f"{file}: {runnable} of {len(plan.legs)} legs can run here",
        title_justify="left",
        show_lines=True,
    )
    table.add_column("leg", no_wrap=True)
    table.add_column("here", overflow="fold")
    table.add_column("steps", overflow="fold")
    for leg in plan.legs:
        steps = []
        if leg.build is not None:
            skipped = f"  (skipped: {leg.build.skipped})" if leg.build.skipped else ""
            steps.append(" ".join(leg.build.argv) + skipped)
        if leg.setup is not None:
            steps.append(" ".join(leg.setup.argv))
        steps.append(" ".join(leg.test.argv))
        here = "[green]runs[/]" if leg.runnable else f"[yellow]skipped:[/] {escape(leg.reason)}"
        table.add_row(leg.leg.name, here, escape("\n".join(steps)))
    console.print(table)


def _render_outcome(console: Any, outcome: Any) -> None:
    from rich.table import Table

    styles = {"passed": "green", "failed": "bold red", "error": "bold red", "skipped": "dim"}
    statuses = ("passed", "failed", "skipped", "error", "crashed", "timeout")
    table = Table(title="rehearsal", title_justify="left")
    table.add_column("leg", no_wrap=True)
    table.add_column("status")
    table.add_column("exit", justify="right")
    for status in statuses:
        table.add_column(status, justify="right")
    table.add_column("detail", overflow="fold")
    for leg in outcome.legs:
        counts = [str(leg.counts.get(s, "")) if leg.counts else "" for s in statuses]
        detail = str(leg.results) if leg.results is not None else leg.message
        table.add_row(
            leg.name,
            f"[{styles.get(leg.status, '')}]{leg.status}[/]",
            "" if leg.status == "skipped" else str(leg.exit_code),
            *counts,
            escape(detail),
        )
    console.print(table)


def _progress(console: Any) -> Callable[[str, dict[str, Any]], None]:
    """One plain line per step and per finished case (CI-log friendly)."""

    def on_event(name: str, event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind == "leg-start":
            console.print(f"[bold]{escape(name)}[/]: starting")
        elif kind == "setup-line":
            console.print(f"  | {event['line']}", markup=False, style="dim", soft_wrap=True)
        elif kind == "setup-done":
            how = "cached" if event.get("cached") else "built"
            console.print(f"{name}: image {event['image']} ({how})", markup=False)
        elif kind == "case":
            case = event["case"]
            console.print(f"  {case['status'].upper():8} {case['id']}", markup=False)
        elif kind == "leg-done":
            done = event["outcome"]
            console.print(f"{name}: {done['status']} (exit {done['exit_code']})", markup=False)

    return on_event
