"""`accelkit repro CASE --from results.json`: write a standalone reproducer and run it once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from accelkit.cli.app import app


@app.command("repro")
def repro_command(
    case: Annotated[
        str,
        typer.Argument(
            help="The case id, as in the results file (conformance/opinfo/exp/float32).",
            metavar="CASE",
            show_default=False,
        ),
    ],
    source: Annotated[
        Path,
        typer.Option(
            "--from",
            metavar="RESULTS",
            help="The results file the case failed (or, for a perf case, ran) in.",
            show_default=False,
        ),
    ],
    out: Annotated[
        Path,
        typer.Option("--out", metavar="DIR", help="Write the reproducer into this folder."),
    ] = Path("."),
    run: Annotated[
        bool,
        typer.Option("--run/--no-run", help="Run the reproducer once after writing it."),
    ] = True,
    python: Annotated[
        str | None,
        typer.Option(
            "--python",
            metavar="PATH",
            help="Run it with this Python (one with torch); default: the one running accelkit.",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print where it was written and how it ran, as JSON.")
    ] = False,
) -> None:
    """Write one Python file that rebuilds a failed case from its seed and needs only torch;
    run it (exit 1 when it fails, as the case did; 3 when it cannot run here). For a perf
    case it times the case alone with the suite's timer and prints the measured median beside
    the recorded one (exit 0 once measured)."""
    from accelkit.errors import BadInput
    from accelkit.triage.repro import plan_repro, run_repro, write_repro

    if not out.is_dir():
        raise BadInput(f"--out {out}: not a directory")
    plan = plan_repro(source, case)
    path = write_repro(plan, out)
    data = {**plan.to_json_dict(), "script": str(path), "command": f"python {path}"}
    if not run:
        typer.echo(json.dumps(data, indent=2) if as_json else f"wrote {path}")
        return
    if not as_json:
        typer.echo(f"wrote {path}; running it:\n", err=True)
    proc = run_repro(path, python=[python] if python else ())
    data.update(exit=proc.returncode, output=proc.stdout + proc.stderr)
    if as_json:
        typer.echo(json.dumps(data, indent=2))
    else:
        typer.echo((proc.stdout + proc.stderr).rstrip())
    # The reproducer's own statuses: 0 passes, 1 fails (as the case did), 2 cannot run.
    raise typer.Exit({0: 0, 1: 1, 2: 3}.get(proc.returncode, 1))
