"""`accelkit matrix`: validate, expand and export matrix files (matrices/*.yaml).

The core lives in `accelkit.matrix`; it is imported inside each command so that the
CLI's start-up never pays for PyYAML (or anything heavier).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from accelkit import options
from accelkit.cli.app import app
from accelkit.errors import BadInput
from accelkit.options import Opt

if TYPE_CHECKING:
    from accelkit.matrix import MatrixEntry

matrix_app = typer.Typer(
    name="matrix",
    help="Validate, expand and rehearse build/test matrices (matrices/*.yaml) for GitHub Actions.",
    no_args_is_help=True,
)
app.add_typer(matrix_app, name="matrix")

FILE = Opt("file", (), Path, ..., "A matrix file, e.g. matrices/nightly.yaml.", show_default=False)
FILTERS = Opt(
    "filters",
    ("--filter", "-f"),
    str,
    None,
    "Keep legs whose KEY matches VALUE (globs; commas mean any of). Repeatable; keys: name, "
    "backend, backend_version, target, family, device, python, suite, runner, build, "
    "container, variant, torch_channel, torch_ref.",
    optional=True,
    metavar="KEY=VALUE",
    show_default=False,
    multiple=True,
)
ALLOW_EMPTY = Opt(
    "allow_empty", ("--allow-empty",), bool, False, "Exit 0 even when no leg is left."
)
RESULTS = Opt(
    "results",
    ("--results",),
    Path,
    ...,
    "Tonight's results: DIR/<leg>/results.json.",
    metavar="DIR",
)


def _legs(file: Path, filters: list[str] | None, allow_empty: bool) -> tuple[MatrixEntry, ...]:
    from accelkit.matrix import load_legs

    legs = load_legs(str(file), filters or [])
    if not legs and not allow_empty:
        shown = " ".join(f"--filter {f}" for f in filters or [])
        raise BadInput(
            f"no legs in {file} match {shown or 'the file'}; pass --allow-empty if that is fine"
        )
    return legs


def validate(file: Path) -> None:
    """Check a matrix file: schema, values, runner labels, unique legs."""
    from accelkit.matrix import expand, load_matrix

    matrix = load_matrix(str(file))
    legs = expand(matrix)
    backends = sorted({leg.backend for leg in legs})
    typer.echo(f"{file}: ok, {len(legs)} legs ({', '.join(backends)})")


matrix_app.command("validate")(options.command((FILE,), validate))

EXPAND_OPTIONS = (
    FILE,
    FILTERS,
    Opt("as_json", ("--json",), bool, False, "Print the legs as a JSON list instead of a table."),
    ALLOW_EMPTY,
)


def expand_command(file: Path, filters: list[str] | None, as_json: bool, allow_empty: bool) -> None:
    """Show every leg the matrix expands to (after --filter), with its number of GitHub
    jobs (one per shard or node of a scaled-out leg)."""
    legs = _legs(file, filters, allow_empty)
    if as_json:
        sys.stdout.write(json.dumps([leg.to_dict() for leg in legs], indent=2) + "\n")
        return
    from rich.table import Table

    from accelkit.cli.console import make_console

    table = Table(title=f"{file}: {len(legs)} legs", title_justify="left")
    table.add_column("name", overflow="fold")
    for column in ("torch", "suites", "runner", "image"):
        table.add_column(column, overflow="fold")
    table.add_column("build")
    table.add_column("timeout", justify="right")
    table.add_column("jobs", justify="right")
    for leg in legs:
        image = (leg.image or leg.base_image or "-") if leg.container else "(no container)"
        jobs = f"{leg.nodes} nodes" if leg.nodes > 1 else f"{leg.shards} shards"
        jobs = jobs if leg.nodes > 1 or leg.shards > 1 else "1"
        table.add_row(
            leg.name,
            leg.torch.label(),
            ",".join(leg.suites)
            + (f" (explore {leg.explore_seeds} seeds)" if leg.explore_seeds else ""),
            " | ".join(" ".join(labels) for labels in leg.node_runners or (leg.runner,)),
            image,
            "yes" if leg.build else "no",
            f"{leg.timeout_minutes}m",
            jobs,
        )
    make_console().print(table)


matrix_app.command("expand")(options.command(EXPAND_OPTIONS, expand_command))


def github(file: Path, filters: list[str] | None, allow_empty: bool) -> None:
    """Print the compact {"include": [...]} for a workflow's strategy.matrix."""
    from accelkit.matrix import github_matrix

    legs = _legs(file, filters, allow_empty)
    sys.stdout.write(json.dumps(github_matrix(legs), separators=(",", ":")) + "\n")


matrix_app.command("github")(options.command((FILE, FILTERS, ALLOW_EMPTY), github))

RUN_OPTIONS = (
    FILE,
    FILTERS,
    Opt("dry_run", ("--dry-run",), bool, False, "Print the plan per leg; start nothing."),
    Opt("as_json", ("--json",), bool, False, "Print the plan (and outcomes) as JSON."),
    Opt(
        "output",
        ("--output", "-o"),
        Path,
        Path("leg-results"),
        "Each leg's results land in DIR/<leg name>/, as in CI.",
    ),
    Opt(
        "base_images",
        ("--base-image",),
        str,
        None,
        "Base image for the setups (upstream images are never pulled): IMAGE for every leg, "
        "PYTHON=IMAGE for the legs of that Python; repeatable, e.g. --base-image "
        "3.11=accelkit-base:bookworm --base-image 3.13=accelkit-base:trixie.",
        optional=True,
        metavar="[PYTHON=]IMAGE",
        show_default=False,
        multiple=True,
    ),
    Opt(
        "torch_wheels",
        ("--torch-wheel",),
        Path,
        None,
        "A torch wheel for the setups; each leg installs the one built for its Python "
        "(repeatable).",
        optional=True,
        show_default=False,
        multiple=True,
    ),
    Opt(
        "torch_index",
        ("--torch-index",),
        str,
        None,
        "Legs no --torch-wheel fits install torch from this index instead (it must be "
        "reachable from here).",
        optional=True,
    ),
    Opt(
        "torch_spec",
        ("--torch-spec",),
        str,
        None,
        "The requirement installed from --torch-index.",
        optional=True,
    ),
    Opt(
        "torch_from_base",
        ("--torch-from-base",),
        str,
        None,
        "Legs of this Python test the torch their base image already has (setup "
        "--torch-from-base), e.g. --base-image 3.13=accelkit-base:trixie-torch "
        "--torch-from-base 3.13 (Debian trixie's python3-torch); repeatable.",
        optional=True,
        metavar="PYTHON",
        show_default=False,
        multiple=True,
    ),
    Opt(
        "baseline",
        ("--baseline",),
        Path,
        None,
        "Last night's results (DIR/<leg>/results.json): compare each leg with it as the "
        "nightly does, and write OUTPUT/summary.md and OUTPUT/verdict.json.",
        optional=True,
        metavar="DIR",
    ),
    Opt(
        "skip_build",
        ("--skip-build",),
        bool,
        False,
        "Rehearse build legs without building torch (setup installs --torch-wheel).",
    ),
    Opt(
        "keyword",
        ("-k",),
        str,
        None,
        "Rehearsal-only narrowing: pass -k EXPR to each leg's test.",
        optional=True,
    ),
    Opt(
        "test_args",
        ("--test-arg",),
        str,
        None,
        "Rehearsal-only: append ARG to each leg's `accelkit test` options (repeatable; write "
        "--test-arg=--workers --test-arg=0).",
        optional=True,
        metavar="ARG",
        show_default=False,
        multiple=True,
    ),
)


def run_command(
    file: Path,
    filters: list[str] | None,
    dry_run: bool,
    as_json: bool,
    output: Path,
    base_images: list[str] | None,
    torch_wheels: list[Path] | None,
    torch_index: str | None,
    torch_spec: str | None,
    torch_from_base: list[str] | None,
    baseline: Path | None,
    skip_build: bool,
    keyword: str | None,
    test_args: list[str] | None,
) -> None:
    """Rehearse legs locally the way the nightly workflow runs them (those this machine can).

    Exit 0 when every runnable leg passed (and, with --baseline, no leg is red), 1 when one
    failed or is red, 2 for bad input, 3 when no selected leg can run here.
    """
    from accelkit.cli.console import make_console
    from accelkit.errors import ExitCode
    from accelkit.matrix import (
        DockerHost,
        judge_outcome,
        plan_rehearsal,
        rehearsal_options,
        rehearse,
    )

    legs = _legs(file, filters, allow_empty=False)
    settings = rehearsal_options(
        output=output,
        base_images=base_images or (),
        torch_wheels=torch_wheels or (),
        torch_index=torch_index,
        torch_spec=torch_spec,
        torch_from_base=torch_from_base or (),
        skip_build=skip_build,
        keyword=keyword,
        test_args=test_args or (),
        baseline=baseline,
    )
    host = DockerHost()
    try:
        plan = plan_rehearsal(legs, settings, host)
        out = make_console()
        log = make_console(stderr=True) if as_json else out
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
    run = judge_outcome(plan, outcome, output, baseline)
    if as_json:
        sys.stdout.write(json.dumps(run.to_dict(), indent=2) + "\n")
    else:
        _render_outcome(out, outcome)
        if run.verdict is not None:
            _render_verdict(out, run.verdict.to_json_dict(), output / "summary.md")
    raise typer.Exit(run.exit_code)


matrix_app.command("run")(options.command(RUN_OPTIONS, run_command))


def _render_verdict(console: Any, verdict: dict[str, Any], summary: Path) -> None:
    from accelkit.results.render.terminal import print_nightly

    print_nightly(console, verdict, summary)


COMPARE_OPTIONS = (
    FILE,
    RESULTS,
    FILTERS,
    Opt(
        "baseline",
        ("--baseline",),
        Path,
        None,
        "The previous completed nightly's results (DIR/<leg>/results.json); absent or empty: "
        "no baseline for any leg.",
        optional=True,
        metavar="DIR",
    ),
    Opt(
        "baseline_run",
        ("--baseline-run",),
        Path,
        None,
        "The run the baseline came from, one object of `gh run list --json` (named in the "
        "summary).",
        optional=True,
        metavar="JSON",
    ),
    Opt(
        "max_age",
        ("--max-baseline-age",),
        float,
        48.0,
        "Name legs whose baseline is older than this.",
        metavar="HOURS",
    ),
    Opt(
        "threshold",
        ("--threshold",),
        float,
        0.03,
        "Minimum relative change that counts as a regression.",
    ),
    Opt(
        "markdown",
        ("--markdown",),
        Path,
        None,
        "Write the summary (Markdown).",
        optional=True,
        metavar="PATH",
    ),
    Opt(
        "findings",
        ("--findings",),
        Path,
        None,
        "Tonight's explore legs' findings (DIR/<leg>/findings.json; default: --results). An "
        "explore leg is red only when it has none; its findings are counted, never failures.",
        optional=True,
        metavar="DIR",
    ),
    Opt("as_json", ("--json",), bool, False, "Print every leg's verdict as JSON on stdout."),
)


def compare_command(
    file: Path,
    results: Path,
    filters: list[str] | None,
    baseline: Path | None,
    baseline_run: Path | None,
    max_age: float,
    threshold: float,
    markdown: Path | None,
    findings: Path | None,
    as_json: bool,
) -> None:
    """Judge tonight's legs against the previous nightly: exit 1 when a leg is red.

    Red: a leg produced no results, a case failed that the backend's expectations do not
    list, a metric regressed, or a case is newly skipped. Legs without a baseline, or with
    one older than --max-baseline-age, are named in the summary. An explore leg
    (explore_seeds) is red only when its exploration wrote no findings; the summary counts
    its findings and names its findings.md.
    """
    from accelkit.matrix.verdict import (
        check_compare_options,
        judge_night,
        load_baseline_run,
        present_baseline,
    )

    check_compare_options(
        results,
        baseline,
        max_age_hours=max_age,
        threshold=threshold,
        markdown=markdown,
        findings=findings,
    )
    run = load_baseline_run(baseline_run) if baseline_run is not None else None
    expected = _legs(file, filters, allow_empty=False)
    verdict = judge_night(
        [leg.name for leg in expected if not leg.explore_seeds],
        results,
        present_baseline(baseline),
        run,
        markdown,
        max_age_hours=max_age,
        threshold=threshold,
        explore=[leg.name for leg in expected if leg.explore_seeds],
        findings=findings,
    )
    if as_json:
        sys.stdout.write(json.dumps(verdict.to_json_dict(), indent=2) + "\n")
    else:
        from accelkit.cli.console import make_console

        console = make_console()
        _render_verdict(console, verdict.to_json_dict(), markdown or Path("-"))
    if verdict.red:
        raise typer.Exit(1)


matrix_app.command("compare")(options.command(COMPARE_OPTIONS, compare_command))


def _render_plan(console: Any, file: Path, plan: Any) -> None:
    from rich.table import Table

    runnable = len(plan.runnable)
    table = Table(
        title=f"{file}: {runnable} of {len(plan.legs)} legs can run here",
        title_justify="left",
        show_lines=True,
    )
    table.add_column("leg", overflow="fold")
    table.add_column("here", overflow="fold")
    table.add_column("steps", overflow="fold")
    for leg in plan.legs:
        steps = []
        if leg.build is not None:
            skipped = f"  (skipped: {leg.build.skipped})" if leg.build.skipped else ""
            steps.append(" ".join(leg.build.argv) + skipped)
        if leg.setup is not None:
            steps.append(" ".join(leg.setup.argv))
        if leg.shards:
            steps += [" ".join(step.argv) for step in leg.shards]
            steps.append(" ".join(leg.merge or ()))
        else:
            steps.append(" ".join(leg.test.argv))
        here = "[green]runs[/]" if leg.runnable else f"[yellow]skipped:[/] {escape(leg.reason)}"
        table.add_row(leg.leg.name, here, escape("\n".join(steps)))
    console.print(table)


def _render_outcome(console: Any, outcome: Any) -> None:
    from rich.table import Table

    styles = {"passed": "green", "failed": "bold red", "error": "bold red", "skipped": "dim"}
    statuses = ("passed", "failed", "skipped", "error", "crashed", "timeout")
    table = Table(title="rehearsal", title_justify="left")
    table.add_column("leg", overflow="fold")
    table.add_column("status")
    table.add_column("exit", justify="right")
    for status in statuses:
        table.add_column(status, justify="right")
    table.add_column("detail", overflow="fold")
    for leg in outcome.legs:
        counts = [str(leg.counts.get(s, "")) if leg.counts else "" for s in statuses]
        detail = str(leg.results) if leg.results is not None else leg.message
        if "findings" in leg.counts:  # an explore leg: its findings count and findings.md
            detail = leg.message
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
        elif kind == "shard-start":
            console.print(f"{name}: shard {event['shard']}", markup=False)
        elif kind == "case":
            case = event["case"]
            console.print(f"  {case['status'].upper():8} {case['id']}", markup=False)
        elif kind == "leg-done":
            done = event["outcome"]
            console.print(f"{name}: {done['status']} (exit {done['exit_code']})", markup=False)

    return on_event


RECORD_OPTIONS = (
    Opt(
        "store",
        (),
        Path,
        ...,
        "The history folder (the `results` branch's checkout): index.json and "
        "nights/<night>/<leg>/results.json.",
        show_default=False,
    ),
    RESULTS,
    Opt(
        "verdict",
        ("--verdict",),
        Path,
        None,
        "Tonight's verdict (`accelkit matrix compare --json`), kept per leg.",
        optional=True,
        metavar="JSON",
    ),
    Opt("run_id", ("--run-id",), int, None, "The workflow run's id.", optional=True),
    Opt("run_number", ("--run-number",), int, None, "The workflow run's number.", optional=True),
    Opt("sha", ("--sha",), str, None, "The commit the night tested.", optional=True),
)


def record_command(
    store: Path,
    results: Path,
    verdict: Path | None,
    run_id: int | None,
    run_number: int | None,
    sha: str | None,
) -> None:
    """Add a night to a results history (what the nightly keeps in its `results` branch);
    `accelkit report --history STORE` draws its trends."""
    from accelkit.inputs import check_safe
    from accelkit.matrix.verdict import load_verdict
    from accelkit.results.history_store import record_night

    data = load_verdict(verdict) if verdict is not None else None
    if sha is not None:
        check_safe("--sha", sha)
    night = record_night(
        store, results, verdict=data, run_id=run_id, run_number=run_number, sha=sha
    )
    typer.echo(f"{store}: recorded night {night.night} ({len(night.legs)} legs)")


matrix_app.command("record")(options.command(RECORD_OPTIONS, record_command))
