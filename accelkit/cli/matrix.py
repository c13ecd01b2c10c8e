"""`accelkit matrix`: validate, expand and export matrix files (matrices/*.yaml).

The core lives in `accelkit.matrix`; it is imported inside each command so that the
CLI's start-up never pays for PyYAML (or anything heavier).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from accelkit.cli.app import app
from accelkit.errors import BadInput

if TYPE_CHECKING:
    from accelkit.matrix import MatrixEntry

matrix_app = typer.Typer(
    name="matrix",
    help="Validate, expand and rehearse build/test matrices (matrices/*.yaml) for GitHub Actions.",
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
            ",".join(leg.suites),
            " | ".join(" ".join(labels) for labels in leg.node_runners or (leg.runner,)),
            image,
            "yes" if leg.build else "no",
            f"{leg.timeout_minutes}m",
            jobs,
        )
    make_console().print(table)


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


@matrix_app.command("run")
def run_command(
    file: FileArgument,
    filters: FilterOption = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the plan per leg; start nothing.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the plan (and outcomes) as JSON.")
    ] = False,
    output: Annotated[
        Path,
        typer.Option(
            "--output", "-o", help="Each leg's results land in DIR/<leg name>/, as in CI."
        ),
    ] = Path("leg-results"),
    base_images: Annotated[
        list[str] | None,
        typer.Option(
            "--base-image",
            metavar="[PYTHON=]IMAGE",
            help="Base image for the setups (upstream images are never pulled): IMAGE for "
            "every leg, PYTHON=IMAGE for the legs of that Python; repeatable, e.g. "
            "--base-image 3.11=accelkit-base:bookworm --base-image 3.13=accelkit-base:trixie.",
            show_default=False,
        ),
    ] = None,
    torch_wheels: Annotated[
        list[Path] | None,
        typer.Option(
            "--torch-wheel",
            help="A torch wheel for the setups; each leg installs the one built for its "
            "Python (repeatable).",
            show_default=False,
        ),
    ] = None,
    torch_index: Annotated[
        str | None,
        typer.Option(
            "--torch-index",
            help="Legs no --torch-wheel fits install torch from this index instead (it must "
            "be reachable from here).",
        ),
    ] = None,
    torch_spec: Annotated[
        str | None,
        typer.Option("--torch-spec", help="The requirement installed from --torch-index."),
    ] = None,
    torch_from_base: Annotated[
        list[str] | None,
        typer.Option(
            "--torch-from-base",
            metavar="PYTHON",
            help="Legs of this Python test the torch their base image already has (setup "
            "--torch-from-base), e.g. --base-image 3.13=accelkit-base:trixie-torch "
            "--torch-from-base 3.13 (Debian trixie's python3-torch); repeatable.",
            show_default=False,
        ),
    ] = None,
    baseline: Annotated[
        Path | None,
        typer.Option(
            "--baseline",
            metavar="DIR",
            help="Last night's results (DIR/<leg>/results.json): compare each leg with it as "
            "the nightly does, and write OUTPUT/summary.md and OUTPUT/verdict.json.",
        ),
    ] = None,
    skip_build: Annotated[
        bool,
        typer.Option(
            "--skip-build",
            help="Rehearse build legs without building torch (setup installs --torch-wheel).",
        ),
    ] = False,
    keyword: Annotated[
        str | None,
        typer.Option("-k", help="Rehearsal-only narrowing: pass -k EXPR to each leg's test."),
    ] = None,
    test_args: Annotated[
        list[str] | None,
        typer.Option(
            "--test-arg",
            metavar="ARG",
            help="Rehearsal-only: append ARG to each leg's `accelkit test` options "
            "(repeatable; write --test-arg=--workers --test-arg=0).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Rehearse legs locally the way the nightly workflow runs them (those this machine can).

    Exit 0 when every runnable leg passed (and, with --baseline, no leg is red), 1 when one
    failed or is red, 2 for bad input, 3 when no selected leg can run here.
    """
    from accelkit.cli.console import make_console
    from accelkit.errors import ExitCode
    from accelkit.inputs import check_python
    from accelkit.matrix import DockerHost, RehearsalOptions, plan_rehearsal, rehearse

    legs = _legs(file, filters, allow_empty=False)
    extra = [*(["-k", keyword] if keyword is not None else []), *(test_args or [])]
    every, per_python = _base_images(base_images or [])
    if baseline is not None and not baseline.is_dir():
        raise BadInput(f"--baseline {baseline}: not a directory")
    options = RehearsalOptions(
        output=output,
        base_image=every,
        base_images=per_python,
        torch_wheels=tuple(torch_wheels or ()),
        torch_index=torch_index,
        torch_spec=torch_spec,
        torch_from_base=tuple(
            check_python(python, flag="--torch-from-base") for python in torch_from_base or ()
        ),
        skip_build=skip_build,
        test_args=tuple(extra),
    )
    host = DockerHost()
    try:
        plan = plan_rehearsal(legs, options, host)
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
    code = int(outcome.exit_code)
    data: dict[str, Any] = {"plan": plan.to_dict(), "outcome": outcome.to_dict()}
    if baseline is not None and code != int(ExitCode.UNAVAILABLE):
        ran = [leg.name for leg in outcome.legs if leg.status != "skipped"]
        verdict = _write_verdict(ran, output, baseline, None, output / "summary.md")
        (output / "verdict.json").write_text(json.dumps(verdict.to_json_dict(), indent=2) + "\n")
        data["verdict"] = verdict.to_json_dict()
        if verdict.red:
            code = max(code, int(ExitCode.FAILED))
    if as_json:
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    else:
        _render_outcome(out, outcome)
        if "verdict" in data:
            _render_verdict(out, data["verdict"], output / "summary.md")
    raise typer.Exit(code)


def _base_images(values: list[str]) -> tuple[str | None, tuple[tuple[str, str], ...]]:
    """--base-image values: (the image for every leg, (python, image) pairs)."""
    from accelkit.inputs import check_image, check_python

    every: str | None = None
    per_python: dict[str, str] = {}
    for value in values:
        python, sep, image = value.partition("=")
        if not sep:
            if every is not None:
                raise BadInput("--base-image: one IMAGE for every leg; PYTHON=IMAGE for more")
            every = check_image("--base-image", value)
            continue
        check_python(python, flag="--base-image")
        if python in per_python:
            raise BadInput(f"--base-image: Python {python} given twice")
        per_python[python] = check_image("--base-image", image)
    return every, tuple(per_python.items())


def _write_verdict(
    legs: list[str],
    results: Path,
    baseline: Path | None,
    baseline_run: dict[str, Any] | None,
    markdown: Path | None,
    *,
    max_age_hours: float | None = None,
    threshold: float = 0.03,
) -> Any:
    from accelkit.results.io import atomic_write_text
    from accelkit.results.nightly import DEFAULT_MAX_AGE_HOURS, judge_nightly
    from accelkit.results.render.markdown import nightly_markdown

    verdict = judge_nightly(
        legs,
        results,
        baseline,
        max_age_hours=DEFAULT_MAX_AGE_HOURS if max_age_hours is None else max_age_hours,
        threshold=threshold,
        baseline_run=baseline_run,
    )
    if markdown is not None:
        atomic_write_text(markdown, nightly_markdown(verdict))
    return verdict


def _render_verdict(console: Any, verdict: dict[str, Any], summary: Path) -> None:
    from accelkit.results.render.terminal import print_nightly

    print_nightly(console, verdict, summary)


@matrix_app.command("compare")
def compare_command(
    file: FileArgument,
    results: Annotated[
        Path,
        typer.Option("--results", metavar="DIR", help="Tonight's results: DIR/<leg>/results.json."),
    ],
    filters: FilterOption = None,
    baseline: Annotated[
        Path | None,
        typer.Option(
            "--baseline",
            metavar="DIR",
            help="The previous completed nightly's results (DIR/<leg>/results.json); absent "
            "or empty: no baseline for any leg.",
        ),
    ] = None,
    baseline_run: Annotated[
        Path | None,
        typer.Option(
            "--baseline-run",
            metavar="JSON",
            help="The run the baseline came from, one object of `gh run list --json` "
            "(named in the summary).",
        ),
    ] = None,
    max_age: Annotated[
        float,
        typer.Option(
            "--max-baseline-age",
            metavar="HOURS",
            help="Name legs whose baseline is older than this.",
        ),
    ] = 48.0,
    threshold: Annotated[
        float,
        typer.Option("--threshold", help="Minimum relative change that counts as a regression."),
    ] = 0.03,
    markdown: Annotated[
        Path | None,
        typer.Option("--markdown", metavar="PATH", help="Write the summary (Markdown)."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print every leg's verdict as JSON on stdout.")
    ] = False,
) -> None:
    """Judge tonight's legs against the previous nightly: exit 1 when a leg is red.

    Red: a leg produced no results, a case failed that the backend's expectations do not
    list, a metric regressed, or a case is newly skipped. Legs without a baseline, or with
    one older than --max-baseline-age, are named in the summary.
    """
    from accelkit.results.io import check_output_path

    if not results.is_dir():
        raise BadInput(f"--results {results}: not a directory")
    if baseline is not None and baseline.exists() and not baseline.is_dir():
        raise BadInput(f"--baseline {baseline}: not a directory")
    if not 0.0 < threshold < 1.0:
        raise BadInput(f"--threshold {threshold}: must be between 0 and 1 (e.g. 0.03 for 3%)")
    if max_age <= 0:
        raise BadInput(f"--max-baseline-age {max_age:g}: must be more than 0 hours")
    if markdown is not None:
        check_output_path(markdown, flag="--markdown")
    run: dict[str, Any] | None = None
    if baseline_run is not None:
        run = _baseline_run(baseline_run)
    legs = [leg.name for leg in _legs(file, filters, allow_empty=False)]
    # An empty folder is what the workflow leaves when no previous nightly had results.
    present = baseline if baseline is not None and baseline.is_dir() else None
    if present is not None and not any(present.iterdir()):
        present = None
    verdict = _write_verdict(
        legs, results, present, run, markdown, max_age_hours=max_age, threshold=threshold
    )
    if as_json:
        sys.stdout.write(json.dumps(verdict.to_json_dict(), indent=2) + "\n")
    else:
        from accelkit.cli.console import make_console

        console = make_console()
        _render_verdict(console, verdict.to_json_dict(), markdown or Path("-"))
    if verdict.red:
        raise typer.Exit(1)


def _baseline_run(path: Path) -> dict[str, Any] | None:
    """The run object the workflow's baseline step wrote (`{}` or `null`: none)."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BadInput(f"--baseline-run {path}: {exc}") from None
    if value in (None, {}):
        return None
    if not isinstance(value, dict):
        raise BadInput(f"--baseline-run {path}: expected one run object of gh run list --json")
    return value


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


@matrix_app.command("record")
def record_command(
    store: Annotated[
        Path,
        typer.Argument(
            help="The history folder (the `results` branch's checkout): index.json and "
            "nights/<night>/<leg>/results.json.",
            show_default=False,
        ),
    ],
    results: Annotated[
        Path,
        typer.Option("--results", metavar="DIR", help="Tonight's results: DIR/<leg>/results.json."),
    ],
    verdict: Annotated[
        Path | None,
        typer.Option(
            "--verdict",
            metavar="JSON",
            help="Tonight's verdict (`accelkit matrix compare --json`), kept per leg.",
        ),
    ] = None,
    run_id: Annotated[int | None, typer.Option("--run-id", help="The workflow run's id.")] = None,
    run_number: Annotated[
        int | None, typer.Option("--run-number", help="The workflow run's number.")
    ] = None,
    sha: Annotated[str | None, typer.Option("--sha", help="The commit the night tested.")] = None,
) -> None:
    """Add a night to a results history (what the nightly keeps in its `results` branch);
    `accelkit report --history STORE` draws its trends."""
    from accelkit.inputs import check_safe
    from accelkit.results.history_store import record_night

    data: dict[str, Any] | None = None
    if verdict is not None:
        try:
            data = json.loads(verdict.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise BadInput(f"--verdict {verdict}: {exc}") from None
        if not isinstance(data, dict):
            raise BadInput(f"--verdict {verdict}: not the JSON of accelkit matrix compare --json")
    if sha is not None:
        check_safe("--sha", sha)
    night = record_night(
        store, results, verdict=data, run_id=run_id, run_number=run_number, sha=sha
    )
    typer.echo(f"{store}: recorded night {night.night} ({len(night.legs)} legs)")
