"""`accelkit diff A.json B.json`: how far apart two environments' answers are, per case."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from accelkit import options
from accelkit.cli.app import app
from accelkit.options import Opt

if TYPE_CHECKING:
    from accelkit.results.differential import Differential


DIFF_OPTIONS = (
    Opt(
        "first",
        (),
        Path,
        ...,
        "Results file of the first environment (accelkit test --record-outputs DIR).",
        metavar="A",
        show_default=False,
    ),
    Opt("second", (), Path, ..., "Results file of the second environment.", metavar="B"),
    Opt(
        "out",
        ("--out",),
        Path,
        None,
        "Write the differential file here (accelkit report shows it beside the runs).",
        optional=True,
        metavar="PATH",
    ),
    Opt("top", ("--top",), int, 30, "Cases to list in the table."),
    Opt("as_json", ("--json",), bool, False, "Print the differential as JSON on stdout."),
)


def diff_command(first: Path, second: Path, out: Path | None, top: int, as_json: bool) -> None:
    """Compare what two runs of the same seeded cases computed: per case the largest absolute
    and relative difference, and whether they disagree beyond the case's tolerance (exit 1),
    even where both passed against the reference."""
    from accelkit.errors import BadInput
    from accelkit.results.io import atomic_write_text, check_output_path
    from accelkit.triage.differential import differential

    if top < 0:
        raise BadInput(f"--top {top}: must be >= 0")
    if out is not None:
        check_output_path(out, flag="--out")
    result = differential(first, second)
    if out is not None:
        atomic_write_text(out, json.dumps(result.to_json_dict(), indent=1) + "\n")
    if as_json:
        typer.echo(json.dumps(result.to_json_dict(), indent=2))
    else:
        _print_table(result, top, out)
    if result.summary.beyond_tolerance:
        raise typer.Exit(code=1)


app.command("diff")(options.command(DIFF_OPTIONS, diff_command))


def _print_table(result: Differential, top: int, out: Path | None) -> None:
    from rich.table import Table
    from rich.text import Text

    from accelkit.cli.console import make_console

    console = make_console()
    console.print(f"A: {result.a.label}  (git {str(result.a.git)[:12]})")
    console.print(f"B: {result.b.label}  (git {str(result.b.git)[:12]})")
    shown = result.cases[:top]
    if shown:
        table = Table(title="Cases whose answers differ", title_justify="left")
        for column in ("case", "A", "B", "max |a-b|", "max rel", "beyond tol"):
            table.add_column(column, overflow="fold")
        for c in shown:
            style = "bold red" if c.beyond_tolerance else ""
            table.add_row(
                Text(c.id, style=style),
                c.status_a or "-",
                c.status_b or "-",
                f"{c.max_abs:.3g}" if c.max_abs is not None else "-",
                f"{c.max_rel:.3g}" if c.max_rel is not None else Text(_reason(c.note)),
                Text("YES" if c.beyond_tolerance else "", style=style),
            )
        console.print(table)
    s = result.summary
    console.print(
        f"{s.compared} cases compared: {s.identical} identical, {s.differ} differ, "
        f"{s.beyond_tolerance} beyond tolerance ({s.beyond_tolerance_both_passed} of them "
        f"passed in both runs), {s.not_comparable} not comparable"
        + (f"; {len(result.cases) - len(shown)} more listed in the file" if out else "")
    )
    if out is not None:
        console.print(f"differential: {out}")


def _reason(note: str) -> str:
    """The kind of a 'not comparable' note ("inputs differ", "shapes differ", ...)."""
    return note.split(":", 1)[0].split(";", 1)[0][:40] or "not comparable"
