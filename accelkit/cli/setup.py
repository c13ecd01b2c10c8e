"""`accelkit setup <backend>`: build (or find) the backend's test image and verify it."""

from __future__ import annotations

import json
import sys
from typing import Any

import typer

from accelkit import options
from accelkit.cli.app import app
from accelkit.options import Opt
from accelkit.setup.request import SETUP_OPTIONS

#: Options of the command itself (how to present it), not of the setup it asks for.
_PRESENTATION = (
    Opt("dry_run", ("--dry-run",), bool, False, "Print the plan; build nothing."),
    Opt(
        "as_json",
        ("--json",),
        bool,
        False,
        'Print {"image": TAG, "cached": ..., "verified": ...}; verified.checks says what '
        "ran with the device, what without, and what could not run here.",
    ),
)


def setup(*, dry_run: bool, as_json: bool, **params: Any) -> None:
    from accelkit.cli.console import activity, make_console
    from accelkit.setup.image import plan_setup
    from accelkit.setup.request import SetupRequest

    plan = plan_setup(SetupRequest.from_params(params))
    out = make_console()
    err = make_console(stderr=True)
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
        with activity(log, f"setting up the {plan.backend} test image"):

            def on_line(line: str) -> None:
                log.print(f"| {line}", markup=False, style="dim", soft_wrap=True)

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
    for name, how in result.verified.get("checks", {}).items():
        out.print(f"  verified {name}: {how}", markup=False)


app.command(
    name="setup",
    help="Build the backend's test image (torch under test + accelkit), cached by content, "
    "and verify it by running `accelkit doctor --json` inside it; for a CUDA or ROCm "
    "--arch also the compile-only cases and torch's arch list, and on a host with the device the "
    "graph-capture cases with it.",
)(options.command((*SETUP_OPTIONS, *_PRESENTATION), setup))
