"""`accelkit compare BASE.json NEW.json`: what got faster, slower, or started failing."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from accelkit import options
from accelkit.cli.app import app
from accelkit.options import Opt

COMPARE_OPTIONS: tuple[Opt, ...] = (
    # Lower-case metavars: what typer shows for an argument that names none (docs/cli.md).
    Opt("base", (), Path, ..., "Baseline results file (accelkit test --json).", metavar="base"),
    Opt("new", (), Path, ..., "Results file to judge against the baseline.", metavar="new"),
    Opt("as_json", ("--json",), bool, False, "Print the comparison as JSON on stdout."),
    Opt(
        "markdown",
        ("--markdown",),
        Path,
        None,
        "Also write a Markdown summary (for $GITHUB_STEP_SUMMARY), under 1 MiB.",
        optional=True,
        metavar="PATH",
    ),
    Opt(
        "threshold",
        ("--threshold",),
        float,
        0.03,
        "Minimum relative change that counts as a regression or improvement.",
    ),
)


def compare_command(
    base: Path, new: Path, as_json: bool, markdown: Path | None, threshold: float
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


app.command("compare")(options.command(COMPARE_OPTIONS, compare_command))
