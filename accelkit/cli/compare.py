"""`accelkit compare BASE.json NEW.json`: what got faster, slower, or started failing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from accelkit.cli.app import app

if TYPE_CHECKING:
    from accelkit.results.compare import Comparison

_VERDICT_STYLE = {
    "regressed": "bold red",
    "improved": "green",
    "environment-shifted": "cyan",
    "noisy": "yellow",
    "missing": "magenta",
    "unchanged": "dim",
}


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
    from accelkit.errors import BadInput
    from accelkit.results.compare import compare, render_markdown
    from accelkit.results.io import atomic_write_text, check_output_path, load_results

    if not 0.0 < threshold < 1.0:
        raise BadInput(f"--threshold {threshold}: must be between 0 and 1 (e.g. 0.03 for 3%)")
    if markdown is not None:
        check_output_path(markdown, flag="--markdown")
    base_results = load_results(base)
    new_results = load_results(new)
    comparison = compare(base_results, new_results, threshold=threshold)
    if markdown is not None:
        text = render_markdown(
            comparison, base_label=str(base), new_label=str(new), new_source=str(new)
        )
        atomic_write_text(markdown, text)
    if as_json:
        typer.echo(json.dumps(comparison.to_json_dict(), indent=2))
    else:
        _print_table(comparison)
    if comparison.fails:
        raise typer.Exit(code=1)


def _print_table(comparison: Comparison) -> None:
    from rich.padding import Padding
    from rich.text import Text

    from accelkit.cli.console import fits, make_console, table
    from accelkit.results.compare import (
        canary_summary,
        format_ci,
        format_ratio,
        metrics_by_severity,
    )
    from accelkit.results.units import format_value

    console = make_console()
    if comparison.environment:
        differ = table(
            "The runs differ in their environment (verdicts compare different setups)",
            ("what", "base", "new"),
        )
        differ.title_style = "bold yellow"
        for d in comparison.environment:
            differ.add_row(d.label, Text(d.base or "not recorded"), Text(d.new or "not recorded"))
        console.print(differ)
    if comparison.metrics:
        metrics = table(
            "Metrics (new vs base)",
            ("verdict", "case", "metric", "base", "new", "ratio", "CI", "why"),
            right=("base", "new"),
        )
        ordered = metrics_by_severity(comparison)
        for m in ordered:
            style = _VERDICT_STYLE[m.verdict]
            # Text, not markup: case ids such as "mm[cpu-float32]" hold brackets.
            cells = (
                m.case,
                m.metric,
                format_value(m.base_median, m.unit),
                format_value(m.new_median, m.unit),
                format_ratio(m),
                format_ci(m),
                m.reason,
            )
            metrics.add_row(
                Text(m.verdict, style=style),
                *(Text(cell) for cell in cells),
                style="dim" if m.verdict == "unchanged" else None,
            )
        if fits(console, metrics):
            console.print(metrics)
        else:  # a narrow terminal: one metric a line, its reason below, wrapped at words
            console.print(Text("Metrics (new vs base)", style="italic"))
            for m in ordered:
                head = Text(m.verdict, style=_VERDICT_STYLE[m.verdict])
                head.append(
                    f" {m.case} {m.metric}: {format_value(m.base_median, m.unit)} -> "
                    f"{format_value(m.new_median, m.unit)}, {format_ratio(m)} {format_ci(m)}"
                )
                console.print(head)
                console.print(Padding(Text(m.reason, style="dim"), (0, 0, 0, 4)))
    if comparison.cases:
        order = {"newly_failing": 0, "still_failing": 2, "missing_in_new": 3}
        lost = set(comparison.skipped_after_passing)
        changes = sorted(comparison.cases, key=lambda c: 1 if c in lost else order.get(c.kind, 4))
        status = table("Status changes", ("change", "case", "was", "now", "message"))
        for c in changes:
            style = "bold red" if c.kind == "newly_failing" else "yellow" if c in lost else ""
            kind = "skipped_after_passing" if c in lost else c.kind
            status.add_row(
                Text(kind, style=style),
                Text(c.case),
                c.base_status or "-",
                c.new_status or "-",
                Text(c.message.splitlines()[0] if c.message else ""),
            )
        console.print(status)
    s = comparison.summary()
    line = (
        f"{s['regressed']} regressed, {s['newly_failing']} newly failing, "
        f"{s['improved']} improved, {s['environment-shifted']} environment-shifted, "
        f"{s['unchanged']} unchanged, {s['noisy']} noisy, "
        f"{s['missing']} missing metrics; {s['newly_passing']} newly passing, "
        f"{s['newly_skipped']} newly skipped ({s['skipped_after_passing']} passed before), "
        f"{s['missing_in_new']} cases missing in new"
    )
    if comparison.environment:
        line += "; the environments differ: " + ", ".join(d.label for d in comparison.environment)
    console.print(Text(line, style="bold red" if comparison.fails else ""))
    canaries = canary_summary(comparison)
    if canaries is not None:
        console.print(Text(canaries))
