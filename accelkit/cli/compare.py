"""`accelkit compare BASE.json NEW.json`: what got faster, slower, or started failing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from accelkit.cli.app import app


@app.command("compare")
def compare_command(
    base: Annotated[Path, typer.Argument(help="Baseline results file (accelkit test --json).")],
    new: Annotated[Path, typer.Argument(help="Results file to judge against the baseline.")],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the comparison as JSON on stdout.")
    ] = False,
    markdown: Annotated[
        Path | None,
        typer.Option(
            "--markdown",
            metavar="PATH",
            help="Also write a Markdown summary (for $GITHUB_STEP_SUMMARY), under 1 MiB.",
        ),
    ] = None,
    threshold: Annotated[
        float,
        typer.Option(
            "--threshold",
            help="Minimum relative change that counts as a regression or improvement.",
        ),
    ] = 0.03,
) -> None:
    """Compare two results files; exit 1 when a metric regressed or a case newly fails."""
    # Lazy imports: numpy and pydantic are heavy, and `accelkit --help` must stay fast.
    from accelkit.cli.console import make_console
    from accelkit.errors import BadInput
    from accelkit.results.compare import compare
    from accelkit.results.io import atomic_write_text, check_output_path, load_results
    from accelkit.results.render.markdown import comparison_markdown
    from accelkit.results.render.terminal import print_comparison

    if not 0.0 < threshold < 1.0:
        raise BadInput(f"--threshold {threshold}: must be between 0 and 1 (e.g. 0.03 for 3%)")
    if markdown is not None:
        check_output_path(markdown, flag="--markdown")
    base_results = load_results(base)
    new_results = load_results(new)
    comparison = compare(base_results, new_results, threshold=threshold)
    if markdown is not None:
        text = comparison_markdown(
            comparison, base_label=str(base), new_label=str(new), new_source=str(new)
        )
        atomic_write_text(markdown, text)
    if as_json:
        typer.echo(json.dumps(comparison.to_json_dict(), indent=2))
    else:
        print_comparison(make_console(), comparison)
    if comparison.fails:
        raise typer.Exit(code=1)
