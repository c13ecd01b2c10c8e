"""`accelkit report RESULTS...`: several results files side by side (tables, plots)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from accelkit import options
from accelkit.cli.app import app
from accelkit.options import Opt

REPORT_OPTIONS: tuple[Opt, ...] = (
    Opt(
        "inputs",
        (),
        Path,
        None,
        "Results files, or directories searched recursively for them "
        "(e.g. one folder per nightly leg, or a history of nightlies).",
        optional=True,
        show_default=False,
        metavar="RESULTS",
        multiple=True,
    ),
    Opt(
        "history",
        ("--history",),
        Path,
        None,
        "A results history (the nightly's `results` branch: index.json and "
        "nights/): trends per metric and leg, and the nights where a verdict changed.",
        optional=True,
        metavar="DIR",
    ),
    Opt(
        "nights",
        ("--nights",),
        int,
        None,
        "With --history: the last N nights only.",
        optional=True,
        metavar="N",
    ),
    Opt(
        "html",
        ("--html",),
        Path,
        None,
        "Write a self-contained HTML report.",
        optional=True,
        metavar="PATH",
    ),
    Opt(
        "markdown",
        ("--markdown",),
        Path,
        None,
        "Write a Markdown summary (for $GITHUB_STEP_SUMMARY), under 1 MiB.",
        optional=True,
        metavar="PATH",
    ),
    Opt(
        "as_json",
        ("--json",),
        bool,
        False,
        "Print the report's data as JSON on stdout (with `compared`: each run's "
        "comparison against its baseline).",
    ),
)


def report_command(
    inputs: list[Path] | None,
    history: Path | None,
    nights: int | None,
    html: Path | None,
    markdown: Path | None,
    as_json: bool,
) -> None:
    """Show several runs side by side: status counts, every metric, plots (HTML), each run
    compared with the first run of the same device (verdict, confidence interval, the
    canaries and whether they moved); or, with --history, every metric's trend per leg over
    the nights, with the verdict changes."""
    # Lazy imports: pydantic and matplotlib are heavy, and `accelkit --help` must stay fast.
    from accelkit.cli.console import make_console
    from accelkit.errors import BadInput
    from accelkit.results.io import atomic_write_text, check_output_path
    from accelkit.results.render.html import report_html_with_plots
    from accelkit.results.render.markdown import history_markdown, report_markdown
    from accelkit.results.render.terminal import print_report
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
        from accelkit.results.report.trends import load_history

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
            text = report_markdown(report, comparisons=comparisons)
        else:
            text = history_markdown(trends)
        atomic_write_text(markdown, text)
    if html is not None:
        page, note = report_html_with_plots(report, trends, comparisons)
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
        print_report(make_console(), report, html, markdown)


app.command("report")(options.command(REPORT_OPTIONS, report_command))
