"""`accelkit build <backend>`: plan, build in a container, validate and record a torch wheel."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from accelkit.cli import app


@app.command(
    help="Build a PyTorch wheel for a backend in a builder container (ROCm: against "
    "TheRock's pip SDK), validate it and write manifest.json next to it."
)
def build(
    backend: Annotated[str, typer.Argument(help="rocm, cuda, xpu or cpu.")],
    rocm_version: Annotated[
        str | None, typer.Option("--rocm-version", help="ROCm SDK version (e.g. 7.14).")
    ] = None,
    cuda_version: Annotated[
        str | None, typer.Option("--cuda-version", help="CUDA toolkit version (default 13.4).")
    ] = None,
    gfx: Annotated[
        str | None, typer.Option("--gfx", help="ROCm GPU targets, comma separated (gfx942,gfx950).")
    ] = None,
    arch: Annotated[
        str | None,
        typer.Option("--arch", help="CUDA or XPU targets, comma separated (sm_107; pvc,bmg)."),
    ] = None,
    family: Annotated[
        str | None,
        typer.Option("--family", help="ROCm: a legacy per-family index (gfx94X-dcgpu)."),
    ] = None,
    index_url: Annotated[
        str | None, typer.Option("--index-url", help="ROCm: the SDK's package index.")
    ] = None,
    python: Annotated[str, typer.Option("--python", help="Python of the wheel.")] = "3.12",
    torch_ref: Annotated[
        str | None, typer.Option("--torch-ref", help="PyTorch git ref to build (v2.14.1).")
    ] = None,
    torch_version: Annotated[
        str | None,
        typer.Option("--torch-version", help="Version of the wheel (default: from the ref)."),
    ] = None,
    source: Annotated[
        Path | None, typer.Option("--source", help="Build this PyTorch source tree instead.")
    ] = None,
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Folder for wheels, log and manifest.json.")
    ] = Path("dist"),
    ccache: Annotated[
        Path | None, typer.Option("--ccache", help="ccache folder, mounted into the builder.")
    ] = None,
    builder_base_image: Annotated[
        str | None,
        typer.Option("--builder-base-image", help="Base of the builder image (default: upstream)."),
    ] = None,
    triton: Annotated[
        bool, typer.Option("--triton/--no-triton", help="ROCm: build triton first.")
    ] = True,
    smoke: Annotated[
        bool,
        typer.Option("--smoke", help="Install each wheel in a clean container and import it."),
    ] = False,
    smoke_image: Annotated[
        str | None,
        typer.Option("--smoke-image", help="Image for --smoke (default: the builder's base)."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the plan; run nothing.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the plan (--dry-run) or the outcome as JSON.")
    ] = False,
) -> None:
    # Nothing here imports torch or docker before the plan is printed (--dry-run).
    from accelkit.errors import BadInput
    from accelkit.wheels.inputs import (
        check_dir,
        check_image,
        check_output_dir,
        check_safe,
        check_targets,
    )
    from accelkit.wheels.plan import BuildRequest
    from accelkit.wheels.recipes import plan as make_plan

    check_safe("backend", backend)
    if gfx is not None and arch is not None:
        raise BadInput("--gfx (ROCm) and --arch (CUDA, XPU) are alternatives: give one")
    if rocm_version is not None and cuda_version is not None:
        raise BadInput("--rocm-version and --cuda-version are alternatives: give one")
    targets: tuple[str, ...] = ()
    if gfx is not None:
        targets = check_targets("--gfx", gfx)
    elif arch is not None:
        targets = check_targets("--arch", arch)
    for flag, value in (
        ("--rocm-version", rocm_version),
        ("--cuda-version", cuda_version),
        ("--family", family),
        ("--index-url", index_url),
        ("--python", python),
        ("--torch-ref", torch_ref),
        ("--torch-version", torch_version),
    ):
        if value is not None:
            check_safe(flag, value)
    request = BuildRequest(
        backend=backend,
        output=check_output_dir("--output", output),
        version=rocm_version or cuda_version,
        targets=targets,
        family=family,
        index_url=index_url,
        python=python,
        torch_ref=torch_ref,
        torch_version=torch_version,
        source=check_dir("--source", source) if source is not None else None,
        ccache=check_output_dir("--ccache", ccache) if ccache is not None else None,
        builder_base_image=(
            check_image("--builder-base-image", builder_base_image) if builder_base_image else None
        ),
        triton=triton,
        smoke=smoke,
    )
    if smoke_image is not None:
        check_image("--smoke-image", smoke_image)
    plan = make_plan(request)
    if dry_run:
        if as_json:
            typer.echo(plan.to_json())
        else:
            for line in plan.render():
                typer.echo(line)
        return

    from rich.console import Console

    from accelkit.containers.engine import connect
    from accelkit.wheels.execute import execute

    out = Console(highlight=False)
    err = Console(stderr=True, highlight=False)
    log = err if as_json else out
    client = connect()
    try:
        with _StepProgress(log, [step.name for step in plan.steps]) as progress:
            outcome = execute(
                plan, client, on_line=progress.on_line, on_step=progress.on_step,
                smoke_image=smoke_image,
            )  # fmt: skip
    finally:
        client.close()
    if as_json:
        sys.stdout.write(json.dumps(outcome.to_dict()) + "\n")
    else:
        for wheel in outcome.wheels:
            out.print(f"wheel: {wheel}")
        out.print(f"manifest: {outcome.manifest}")
        out.print(f"log: {outcome.log}")
    raise typer.Exit(0)


class _StepProgress:
    """Per-step progress (rich) above the build's live log lines."""

    def __init__(self, console: Any, steps: list[str]) -> None:
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.console = console
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self.tasks = {name: self.progress.add_task(f"{name}", total=1, start=False)
                      for name in ["builder-image", *steps]}  # fmt: skip

    def __enter__(self) -> _StepProgress:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(None, None, None)

    def on_line(self, line: str) -> None:
        self.progress.console.print(f"| {line}", markup=False, style="dim", soft_wrap=True)

    def on_step(self, name: str, state: str) -> None:
        task = self.tasks.get(name)
        if task is None:
            return
        if state == "start":
            self.progress.start_task(task)
        elif state in ("done", "cached", "skipped"):
            self.progress.update(task, completed=1, description=f"{name} [green]{state}[/]")
        elif state == "failed":
            self.progress.update(task, description=f"{name} [red]failed[/]")
