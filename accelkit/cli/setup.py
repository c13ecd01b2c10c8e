"""`accelkit setup <backend>`: build (or find) the backend's test image and verify it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from accelkit.cli import app


@app.command(
    help="Build the backend's test image (torch under test + accelkit), cached by content, "
    "and verify it by running `accelkit doctor --json` inside it."
)
def setup(
    backend: Annotated[str, typer.Argument(help="cpu, cuda, rocm or xpu.")],
    arch: Annotated[
        str | None,
        typer.Option("--arch", help="GPU target the image is set up for (sm_107, gfx942, pvc)."),
    ] = None,
    torch_wheel: Annotated[
        Path | None,
        typer.Option(
            "--torch-wheel",
            help="Install torch from this wheel file (or the one torch wheel in this folder).",
        ),
    ] = None,
    torch_index: Annotated[
        str | None, typer.Option("--torch-index", help="Install torch from this index URL.")
    ] = None,
    base_image: Annotated[
        str | None,
        typer.Option("--base-image", help="Base image (default: the backend's upstream image)."),
    ] = None,
    accelkit_source: Annotated[
        Path | None,
        typer.Option("--accelkit-source", help="accelkit's source tree (default: this one)."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the plan; build nothing.")
    ] = False,
    as_json: Annotated[
        bool,
        typer.Option("--json", help='Print {"image": TAG, "cached": ..., "verified": ...}.'),
    ] = False,
) -> None:
    from rich.console import Console

    from accelkit.setup.image import SetupRequest, plan_setup

    plan = plan_setup(
        SetupRequest(
            backend=backend,
            arch=arch,
            torch_wheel=torch_wheel,
            torch_index=torch_index,
            base_image=base_image,
            accelkit_source=accelkit_source,
        )
    )
    out = Console(highlight=False)
    err = Console(stderr=True, highlight=False)
    if dry_run:
        if as_json:
            typer.echo(json.dumps({"plan": plan.to_dict()}, indent=2))
        else:
            for line in plan.render():
                out.print(line, markup=False)
        return

    from accelkit.containers.engine import connect
    from accelkit.setup.image import setup as run_setup

    client = connect()
    try:
        log = err if as_json else out
        with log.status(f"setting up the {plan.backend} test image", spinner="dots") as status:

            def on_line(line: str) -> None:
                log.print(f"| {line}", markup=False, style="dim", soft_wrap=True)
                status.update(f"setting up the {plan.backend} test image")

            result = run_setup(plan, client, on_line=on_line)
    finally:
        client.close()
    if as_json:
        sys.stdout.write(json.dumps(result.to_dict()) + "\n")
        return
    how = "cached" if result.cached else f"built in {result.build_s:.1f} s"
    out.print(f"image {result.image} ({how}), verified in {result.verify_s:.1f} s")
    torch = result.verified.get("torch", {})
    out.print(f"  torch {torch.get('version')}  accelkit {result.verified.get('accelkit')}")
