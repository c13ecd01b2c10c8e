"""`accelkit bisect --case ID --good V --bad V --wheels DIR|--index URL|--envs DIR`: the first
torch build where a case broke or a metric regressed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from accelkit import options
from accelkit.cli.app import app
from accelkit.options import Opt
from accelkit.suite.run.request import AB_DEFAULT_PASSES

if TYPE_CHECKING:
    from accelkit.triage.bisect import Step

BISECT_OPTIONS = (
    Opt(
        "case",
        ("--case",),
        str,
        ...,
        "The case, as the results file names it (conformance/... or perf/...).",
        metavar="ID",
        show_default=False,
    ),
    Opt(
        "good",
        ("--good",),
        str,
        ...,
        "A build where the case is good: a version (2.13.0+cpu) or a nightly's date (2026-01-31).",
        metavar="VERSION",
        show_default=False,
    ),
    Opt(
        "bad",
        ("--bad",),
        str,
        ...,
        "A build where it is bad.",
        metavar="VERSION",
        show_default=False,
    ),
    Opt(
        "wheels",
        ("--wheels",),
        Path,
        None,
        "Take the builds from this folder.",
        optional=True,
        metavar="DIR",
    ),
    Opt(
        "index",
        ("--index",),
        str,
        None,
        "Take the builds from this pip index.",
        optional=True,
        metavar="URL",
    ),
    Opt(
        "envs",
        ("--envs",),
        Path,
        None,
        "Take the builds from this folder of prepared environments: one subfolder per build, "
        "named by its version, a venv or a site folder put first on PYTHONPATH.",
        optional=True,
        metavar="DIR",
    ),
    Opt(
        "images",
        ("--images",),
        bool,
        False,
        "With --wheels: make each build a test image with `accelkit setup DEVICE "
        "--torch-wheel` (cached by content: a build set up before is reused) and run the case "
        "in it (a perf case: --ab image:GOOD image:STEP).",
    ),
    Opt("device", ("--device", "-d"), str, "cpu", "Backend to test on."),
    Opt(
        "passes",
        ("--passes",),
        int,
        AB_DEFAULT_PASSES,
        "perf: interleaved passes per side of each step's run against the good build (doubled "
        "while the verdict is noisy, up to 4x; then the build is skipped). Compare pairs them "
        "from 8 on (its sign-flip test at 1%).",
    ),
    Opt(
        "threshold",
        ("--threshold",),
        float,
        0.03,
        "perf: the smallest change that counts (0.03 = 3%); raise it to bisect a large known "
        "slowdown through the machine's noise.",
    ),
    Opt(
        "metric",
        ("--metric",),
        str,
        None,
        "perf: judge this metric only (default: all of the case).",
        optional=True,
    ),
    Opt(
        "cache",
        ("--cache",),
        Path,
        None,
        "Keep installed builds here and reuse them (created if missing).",
        optional=True,
        metavar="DIR",
    ),
    Opt(
        "work",
        ("--work",),
        Path,
        None,
        "Keep each step's results file here (default: none).",
        optional=True,
        metavar="DIR",
    ),
    Opt("timeout", ("--timeout",), float, 1800.0, "Seconds one step (one build's run) may take."),
    Opt("dry_run", ("--dry-run",), bool, False, "List the builds in the range; install nothing."),
    Opt("as_json", ("--json",), bool, False, "Print the answer and every step as JSON."),
)


def bisect_command(*, dry_run: bool, as_json: bool, **params: Any) -> None:
    """Install torch builds one at a time (each into a throwaway site folder, or a test image
    with --images), run only the named case on each, and name the last good and first bad
    build with their git hashes and the commits between them. A perf case is measured
    interleaved against the good build (as `accelkit test --ab`) and judged by compare's
    verdict: regressed is bad. Builds that cannot be installed or run, or whose perf verdict
    stays noisy, are skipped."""
    from accelkit.triage.bisect import BisectRequest, find_builds, iter_lines
    from accelkit.triage.builds import run_bisect

    request = BisectRequest(**params)
    builds, reversed_order = find_builds(request)
    if dry_run:
        plan = [{"version": b.version, "source": b.source} for b in builds]
        if as_json:
            typer.echo(json.dumps({"builds": plan, "reversed_order": reversed_order}, indent=2))
        else:
            for entry in plan:
                typer.echo(f"{entry['version']}  {entry['source']}")
        return

    def started(count: int) -> None:
        typer.echo(f"bisecting {request.case} over {count} builds", err=True)

    def report(step: Step) -> None:
        git = (step.git_version or "?")[:12]
        typer.echo(
            f"  {step.build.version} (git {git}): {step.verdict.upper()}  {step.detail}", err=True
        )

    result = run_bisect(
        request, builds, reversed_order=reversed_order, on_start=started, on_step=report
    )
    if as_json:
        typer.echo(json.dumps({"case": request.case, **result.to_json_dict()}, indent=2))
        return
    for line in iter_lines(result):
        typer.echo(line)


app.command("bisect")(options.command(BISECT_OPTIONS, bisect_command))
