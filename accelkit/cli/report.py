"""`accelkit report RESULTS...`: several results files side by side (tables, plots)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from accelkit.cli.app import app

if TYPE_CHECKING:
    from accelkit.results.report.model import Report


@app.command("report")
def report_command(
    inputs: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Results files, or directories searched recursively for them "
            "(e.g. one folder per nightly leg, or a history of nightlies).",
            show_default=False,
            metavar="RESULTS",
        ),
    ] = None,
    history: Annotated[
        Path | None,
        typer.Option(
            "--history",
            metavar="DIR",
            help="A results history (the nightly's `results` branch: index.json and "
            "nights/): trends per metric and leg, and the nights where a verdict changed.",
        ),
    ] = None,
    nights: Annotated[
        int | None,
        typer.Option("--nights", metavar="N", help="With --history: the last N nights only."),
    ] = None,
    html: Annotated[
        Path | None,
        typer.Option("--html", metavar="PATH", help="Write a self-contained HTML report."),
    ] = None,
    markdown: Annotated[
        Path | None,
        typer.Option(
            "--markdown",
            metavar="PATH",
            help="Write a Markdown summary (for $GITHUB_STEP_SUMMARY), under 1 MiB.",
        ),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print the report's data as JSON on stdout (with `compared`: each run's "
            "comparison against its baseline).",
        ),
    ] = False,
) -> None:
    """Show several runs side by side: status counts, every metric, plots (HTML), each run
    compared with the first run of the same device (verdict, confidence interval, the
    canaries and whether they moved); or, with --history, every metric's trend per leg over
    the nights, with the verdict changes."""
    # Lazy imports: pydantic and matplotlib are heavy, and `accelkit --help` must stay fast.
    from accelkit.errors import BadInput
    from accelkit.results.io import atomic_write_text, check_output_path
    from accelkit.results.report.html import render_html_with_plots
    from accelkit.results.report.markdown import render_markdown
    from accelkit.results.report.model import load_report

    if history is not None and inputs:
        raise BadInput("--history DIR takes no RESULTS: give one or the other")
    if history is None and not inputs:
        raise BadInput("no results given: name RESULTS files or folders, or --history DIR")
    if nights is not None and history is None:
        raise BadInput("--nights applies to --history only")
    outputs = [(flag, path) for flag, path in (("--html", html), ("--markdown", markdown)) if path]
    for flag, path in outputs:
        check_output_path(path, flag=flag)
    if html is not None and markdown is not None and html.resolve() == markdown.resolve():
        raise BadInput("--html and --markdown must name different files")
    trends = None
    if history is not None:
        from accelkit.results.report.history import load_history, render_history_markdown

        trends = load_history(history, nights)
        report = trends.report
    else:
        report = load_report(inputs or [])
    comparisons = None
    if trends is None and (markdown is not None or html is not None or as_json):
        from accelkit.results.report.verdicts import compare_runs

        comparisons = compare_runs(report)
    if markdown is not None:
        if trends is None:
            text = render_markdown(report, comparisons=comparisons)
        else:
            text = render_history_markdown(trends)
        atomic_write_text(markdown, text)
    if html is not None:
        page, note = render_html_with_plots(report, trends, comparisons)
        atomic_write_text(html, page)
        if note:
            typer.echo(f"accelkit: warning: {note}", err=True)
    if as_json:
        data = report.to_json_dict()
        if comparisons is not None:
            data["compared"] = [
                {
                    "run": report.runs[c.run].label,
                    "baseline": report.runs[c.baseline].label,
                    **c.comparison.to_json_dict(),
                }
                for c in comparisons
                if c is not None
            ]
        typer.echo(json.dumps(data, indent=2))
    else:
        _print_summary(report, html, markdown)


def _print_summary(report: Report, html: Path | None, markdown: Path | None) -> None:
    from rich.table import Table
    from rich.text import Text

    from accelkit.cli.console import make_console
    from accelkit.results.model import SUITES
    from accelkit.results.report.model import status_summary

    console = make_console()
    table = Table(title="Runs", title_justify="left")
    for column in ("run", "device", "torch", *SUITES):
        table.add_column(column, overflow="fold")
    for run, counts in zip(report.runs, report.counts, strict=True):
        if run.missing:
            table.add_row(
                Text(run.label),
                Text("produced no results", style="bold red"),
                "",
                *("missing" for _ in SUITES),
            )
            continue
        table.add_row(
            Text(run.label),
            Text(run.device_name or run.device),
            run.torch_version or "?",
            *(status_summary(counts[s]) if s in counts else "-" for s in SUITES),
        )
    console.print(table)
    console.print(
        f"{len(report.metrics)} metrics across {len(report.runs)} runs"
        + (
            f"; {len(report.skipped_inputs)} non-results JSON files skipped"
            if report.skipped_inputs
            else ""
        )
    )
    for label, path in (("HTML", html), ("Markdown", markdown)):
        if path is not None:
            console.print(f"{label}: {path}")
