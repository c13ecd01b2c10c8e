"""`accelkit bisect --case ID --good V --bad V --wheels DIR|--index URL|--envs DIR`: the first
torch build where a case broke or a metric regressed."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from accelkit.cli.app import app
from accelkit.suite.run.request import AB_DEFAULT_PASSES

if TYPE_CHECKING:
    from accelkit.triage.bisect import Step


@app.command("bisect")
def bisect_command(
    case: Annotated[
        str,
        typer.Option(
            "--case",
            metavar="ID",
            help="The case, as the results file names it (conformance/... or perf/...).",
            show_default=False,
        ),
    ],
    good: Annotated[
        str,
        typer.Option(
            "--good",
            metavar="VERSION",
            help="A build where the case is good: a version (2.13.0+cpu) or a nightly's date "
            "(2026-01-31).",
            show_default=False,
        ),
    ],
    bad: Annotated[
        str,
        typer.Option(
            "--bad", metavar="VERSION", help="A build where it is bad.", show_default=False
        ),
    ],
    wheels: Annotated[
        Path | None,
        typer.Option("--wheels", metavar="DIR", help="Take the builds from this folder."),
    ] = None,
    index: Annotated[
        str | None,
        typer.Option("--index", metavar="URL", help="Take the builds from this pip index."),
    ] = None,
    envs: Annotated[
        Path | None,
        typer.Option(
            "--envs",
            metavar="DIR",
            help="Take the builds from this folder of prepared environments: one subfolder "
            "per build, named by its version, a venv or a site folder put first on PYTHONPATH.",
        ),
    ] = None,
    images: Annotated[
        bool,
        typer.Option(
            "--images",
            help="With --wheels: make each build a test image with `accelkit setup DEVICE "
            "--torch-wheel` (cached by content: a build set up before is reused) and run the "
            "case in it (a perf case: --ab image:GOOD image:STEP).",
        ),
    ] = False,
    device: Annotated[str, typer.Option("--device", "-d", help="Backend to test on.")] = "cpu",
    passes: Annotated[
        int,
        typer.Option(
            "--passes",
            help="perf: interleaved passes per side of each step's run against the good build "
            "(doubled while the verdict is noisy, up to 4x; then the build is skipped). Compare "
            "pairs them from 8 on (its sign-flip test at 1%).",
        ),
    ] = AB_DEFAULT_PASSES,
    threshold: Annotated[
        float,
        typer.Option(
            "--threshold",
            help="perf: the smallest change that counts (0.03 = 3%); raise it to bisect a "
            "large known slowdown through the machine's noise.",
        ),
    ] = 0.03,
    metric: Annotated[
        str | None,
        typer.Option("--metric", help="perf: judge this metric only (default: all of the case)."),
    ] = None,
    cache: Annotated[
        Path | None,
        typer.Option(
            "--cache",
            metavar="DIR",
            help="Keep installed builds here and reuse them (created if missing).",
        ),
    ] = None,
    work: Annotated[
        Path | None,
        typer.Option(
            "--work", metavar="DIR", help="Keep each step's results file here (default: none)."
        ),
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds one step (one build's run) may take.")
    ] = 1800.0,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List the builds in the range; install nothing.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the answer and every step as JSON.")
    ] = False,
) -> None:
    """Install torch builds one at a time (each into a throwaway site folder, or a test image
    with --images), run only the named case on each, and name the last good and first bad
    build with their git hashes and the commits between them. A perf case is measured
    interleaved against the good build (as `accelkit test --ab`) and judged by compare's
    verdict: regressed is bad. Builds that cannot be installed or run, or whose perf verdict
    stays noisy, are skipped."""
    from accelkit import backends
    from accelkit.errors import BadInput
    from accelkit.triage.bisect import (
        Installer,
        bisect,
        builds_in_envs,
        builds_in_folder,
        builds_on_index,
        select,
    )
    from accelkit.triage.builds import CaseJudge, EnvInstaller, ImageInstaller, SiteInstaller

    if sum(source is not None for source in (wheels, index, envs)) != 1:
        raise BadInput("name where the builds come from: --wheels DIR, --index URL or --envs DIR")
    if case.split("/", 1)[0] not in ("conformance", "perf"):
        raise BadInput(f"--case {case}: a case id starts with conformance/ or perf/")
    if images and wheels is None:
        raise BadInput("--images: makes test images of wheels; add --wheels DIR")
    if index is not None:
        from accelkit.inputs import check_url

        check_url("--index", index)
    backends.get(device)
    if passes < 1:
        raise BadInput(f"--passes: must be >= 1, got {passes}")
    if not 0.0 < threshold < 1.0:
        raise BadInput(f"--threshold {threshold}: must be between 0 and 1 (e.g. 0.03 for 3%)")
    for flag, folder in (("--cache", cache), ("--work", work)):
        if folder is not None and folder.exists() and not folder.is_dir():
            raise BadInput(f"{flag} {folder}: not a directory")
    if envs is not None:
        found = builds_in_envs(envs)
    elif wheels is not None:
        found = builds_in_folder(wheels)
    else:
        found = builds_on_index(str(index))
    if not found:
        raise BadInput(f"no torch build for this Python and platform in {wheels or index or envs}")
    builds, reversed_order = select(found, good, bad)
    for folder in (cache, work):
        if folder is not None and not dry_run:
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise BadInput(f"{folder}: cannot create it ({exc.strerror})") from None
    if dry_run:
        plan = [{"version": b.version, "source": b.source} for b in builds]
        if as_json:
            typer.echo(json.dumps({"builds": plan, "reversed_order": reversed_order}, indent=2))
        else:
            for entry in plan:
                typer.echo(f"{entry['version']}  {entry['source']}")
        return

    def report(step: Step) -> None:
        git = (step.git_version or "?")[:12]
        typer.echo(
            f"  {step.build.version} (git {git}): {step.verdict.upper()}  {step.detail}", err=True
        )

    with tempfile.TemporaryDirectory(prefix="accelkit-bisect-") as tmp:
        judge = CaseJudge(
            case,
            device=device,
            work=work or Path(tmp),
            passes=passes,
            metric=metric,
            timeout_s=timeout,
            max_passes=4 * passes,
            threshold=threshold,
        )
        # A perf step measures against the good build: it stays installed throughout.
        keep = cache or (Path(tmp) / "builds" if case.startswith("perf/") else None)
        if keep is not None:
            keep.mkdir(exist_ok=True)
        installer: Installer
        if envs is not None:
            installer = EnvInstaller()
        elif images:
            installer = ImageInstaller(device, timeout_s=max(timeout, 7200.0))
        else:
            installer = SiteInstaller(cache=keep)
        typer.echo(f"bisecting {case} over {len(builds)} builds", err=True)
        result = bisect(
            builds,
            installer,
            judge,
            on_step=report,
            reversed_order=reversed_order,
        )
    if as_json:
        typer.echo(json.dumps({"case": case, **result.to_json_dict()}, indent=2))
        return
    from accelkit.triage.bisect import iter_lines

    for line in iter_lines(result):
        typer.echo(line)
