"""`accelkit matrix`: validate, expand and export matrix files (matrices/*.yaml).

The core lives in `accelkit.matrix`; it is imported inside each command so that the
CLI's start-up never pays for PyYAML (or anything heavier).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from accelkit.cli import app
from accelkit.errors import BadInput

if TYPE_CHECKING:
    from accelkit.matrix import MatrixEntry

matrix_app = typer.Typer(
    name="matrix",
    help="Validate and expand build/test matrices (matrices/*.yaml) for GitHub Actions.",
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
