"""`accelkit diff A.json B.json`: how far apart two environments' answers are, per case."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from accelkit import options
from accelkit.cli.app import app
from accelkit.options import Opt

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
    even where both passed against the reference; a case one run failed is judged by the peer
    rule with the other run as its peer."""
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
        from accelkit.cli.console import make_console
        from accelkit.results.render.terminal import print_differential

        print_differential(make_console(), result, top, out)
    if result.summary.beyond_tolerance:
        raise typer.Exit(code=1)


app.command("diff")(options.command(DIFF_OPTIONS, diff_command))
