"""`accelkit repro CASE --from results.json`: write a standalone reproducer and run it once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from accelkit import options
from accelkit.cli.app import app
from accelkit.options import Opt

if TYPE_CHECKING:
    import subprocess

    from accelkit.triage.repro import ReproRequest, Written

REPRO_OPTIONS = (
    Opt(
        "case",
        (),
        str,
        ...,
        "The case id, as in the results file (conformance/opinfo/exp/float32).",
        metavar="CASE",
        show_default=False,
    ),
    Opt(
        "source",
        ("--from",),
        Path,
        ...,
        "The results file the case failed (or, for a perf case, ran) in.",
        metavar="RESULTS",
        show_default=False,
    ),
    Opt(
        "out",
        ("--out",),
        Path,
        Path("."),
        "Write the reproducer into this folder (made if missing).",
        metavar="DIR",
    ),
    Opt(
        "run",
        ("--run",),
        bool,
        True,
        "Run the reproducer after writing it (once; --passes times with --baseline).",
        negative="--no-run",
    ),
    Opt(
        "python",
        ("--python",),
        str,
        None,
        "Run it with this Python (one with torch); default: the one running accelkit.",
        optional=True,
        metavar="PATH",
    ),
    Opt(
        "baseline",
        ("--baseline",),
        Path,
        None,
        "perf: judge what it measures against this run's samples of the case (compare's "
        "verdict: regressed, improved, unchanged or noisy; exit 1 when regressed), beside the "
        "recorded run's own verdict against it.",
        optional=True,
        metavar="RESULTS",
    ),
    Opt(
        "passes",
        ("--passes",),
        int,
        1,
        "perf with --baseline: run the reproducer this many times, each its own process (4 or "
        "more, against a baseline of 4 or more passes: grouped verdict).",
    ),
    Opt(
        "threshold",
        ("--threshold",),
        float,
        0.03,
        "perf with --baseline: the smallest change that counts.",
    ),
    Opt(
        "as_json",
        ("--json",),
        bool,
        False,
        "Print where it was written and how it ran, as JSON.",
    ),
)


def repro_command(*, as_json: bool, **params: Any) -> None:
    """Write one Python file that rebuilds a failed case from its seed and needs only torch;
    run it (exit 1 when it fails, as the case did; 3 when it cannot run here). For a perf
    case it times the case alone with the suite's timer and prints the measured median beside
    the recorded one (exit 0 once measured); with --baseline it also says whether the case is
    slower than in the baseline, and whether the recorded slowdown reproduces."""
    from accelkit.triage.repro import ReproRequest, exit_code, run_repro, write_reproducer

    request = ReproRequest(**params)
    written = write_reproducer(request)
    path = written.path
    data = written.to_json_dict()
    if not request.run:
        typer.echo(json.dumps(data, indent=2) if as_json else f"wrote {path}")
        return
    if not as_json:
        typer.echo(f"wrote {path}; running it:\n", err=True)
    proc = run_repro(path, python=request.interpreter)
    data.update(exit=proc.returncode, output=proc.stdout + proc.stderr)
    if written.baseline_case is None or proc.returncode != 0:
        if as_json:
            typer.echo(json.dumps(data, indent=2))
        else:
            typer.echo((proc.stdout + proc.stderr).rstrip())
        raise typer.Exit(exit_code(proc.returncode))
    _judge(request, written, proc, data, as_json)


app.command("repro")(options.command(REPRO_OPTIONS, repro_command))


def _judge(
    request: ReproRequest,
    written: Written,
    first: subprocess.CompletedProcess[str],
    data: dict[str, Any],
    as_json: bool,
) -> None:
    """Render the perf reproducer's judgement against the baseline (`judge_reproducer`)."""
    from accelkit.triage.perf_baseline import without_measurement
    from accelkit.triage.repro import judge_reproducer

    if not as_json:  # the measurement's JSON line is for the judgement, not the reader
        typer.echo(without_measurement(first.stdout + first.stderr))

    def progress(number: int) -> None:
        if not as_json:
            typer.echo(f"\nrun {number} of {request.passes}", err=True)

    assert written.baseline_case is not None  # the caller judges only with --baseline
    judgement = judge_reproducer(
        written.path,
        first.stdout,
        baseline=written.baseline_case,
        source=request.source,
        case_id=request.case,
        passes=request.passes,
        threshold=request.threshold,
        python=request.interpreter,
        on_run=progress,
    )
    if as_json:
        data["baseline"] = judgement.to_json_dict()
        typer.echo(json.dumps(data, indent=2))
    else:
        for line in judgement.lines:
            typer.echo(line)
    raise typer.Exit(1 if judgement.regressed else 0)
