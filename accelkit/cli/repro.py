"""`accelkit repro CASE --from results.json`: write a standalone reproducer and run it once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

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
        typer.Option(
            "--out", metavar="DIR", help="Write the reproducer into this folder (made if missing)."
        ),
    ] = Path("."),
    run: Annotated[
        bool,
        typer.Option(
            "--run/--no-run",
            help="Run the reproducer after writing it (once; --passes times with --baseline).",
        ),
    ] = True,
    python: Annotated[
        str | None,
        typer.Option(
            "--python",
            metavar="PATH",
            help="Run it with this Python (one with torch); default: the one running accelkit.",
        ),
    ] = None,
    baseline: Annotated[
        Path | None,
        typer.Option(
            "--baseline",
            metavar="RESULTS",
            help="perf: judge what it measures against this run's samples of the case "
            "(compare's verdict: regressed, improved, unchanged or noisy; exit 1 when "
            "regressed), beside the recorded run's own verdict against it.",
        ),
    ] = None,
    passes: Annotated[
        int,
        typer.Option(
            "--passes",
            help="perf with --baseline: run the reproducer this many times, each its own "
            "process (4 or more, against a baseline of 4 or more passes: grouped verdict).",
        ),
    ] = 1,
    threshold: Annotated[
        float,
        typer.Option("--threshold", help="perf with --baseline: the smallest change that counts."),
    ] = 0.03,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print where it was written and how it ran, as JSON.")
    ] = False,
) -> None:
    """Write one Python file that rebuilds a failed case from its seed and needs only torch;
    run it (exit 1 when it fails, as the case did; 3 when it cannot run here). For a perf
    case it times the case alone with the suite's timer and prints the measured median beside
    the recorded one (exit 0 once measured); with --baseline it also says whether the case is
    slower than in the baseline, and whether the recorded slowdown reproduces."""
    from accelkit.errors import BadInput
    from accelkit.triage.repro import plan_repro, run_repro, write_repro

    if out.exists() and not out.is_dir():
        raise BadInput(f"--out {out}: not a directory")
    if passes < 1:
        raise BadInput(f"--passes: must be >= 1, got {passes}")
    if not 0.0 < threshold < 1.0:
        raise BadInput(f"--threshold {threshold}: must be between 0 and 1 (e.g. 0.03 for 3%)")
    if baseline is not None:
        if not case.startswith("perf/"):
            raise BadInput("--baseline: judges perf cases only")
        if not run:
            raise BadInput("--baseline: needs the reproducer to run (drop --no-run)")
    elif passes != 1:
        raise BadInput("--passes: repeats a perf reproducer for --baseline; add --baseline")
    base_case = None
    if baseline is not None:
        from accelkit.results.io import load_results
        from accelkit.triage.perf_baseline import baseline_case

        base_case = baseline_case(load_results(baseline), case)
    plan = plan_repro(source, case)
    try:  # made only once the case is known to be reproducible: bad input leaves nothing
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise BadInput(f"--out {out}: cannot make the folder ({err.strerror})") from None
    path = write_repro(plan, out)
    data = {**plan.to_json_dict(), "script": str(path), "command": f"python {path}"}
    if not run:
        typer.echo(json.dumps(data, indent=2) if as_json else f"wrote {path}")
        return
    if not as_json:
        typer.echo(f"wrote {path}; running it:\n", err=True)
    proc = run_repro(path, python=[python] if python else ())
    data.update(exit=proc.returncode, output=proc.stdout + proc.stderr)
    if base_case is None or proc.returncode != 0:
        if as_json:
            typer.echo(json.dumps(data, indent=2))
        else:
            typer.echo((proc.stdout + proc.stderr).rstrip())
        # The reproducer's own statuses: 0 passes, 1 fails (as the case did), 2 cannot run.
        raise typer.Exit({0: 0, 1: 1, 2: 3}.get(proc.returncode, 1))
    _judge(path, python, proc, base_case, source, case, passes, threshold, data, as_json)


def _judge(
    path: Path,
    python: str | None,
    first: Any,
    base_case: Any,
    source: Path,
    case: str,
    passes: int,
    threshold: float,
    data: dict[str, Any],
    as_json: bool,
) -> None:
    """The perf reproducer run `passes` times, judged against the baseline's case."""
    from accelkit.errors import Failed
    from accelkit.results.io import load_results
    from accelkit.triage.perf_baseline import against_baseline, iter_lines, parse_measured
    from accelkit.triage.perf_replay import MEASURED_PREFIX
    from accelkit.triage.repro import run_repro

    if not as_json:  # the measurement's JSON line is for this function, not the reader
        shown = (first.stdout + first.stderr).splitlines()
        typer.echo("\n".join(ln for ln in shown if not ln.startswith(MEASURED_PREFIX)))
    runs = [parse_measured(first.stdout)]
    for number in range(2, passes + 1):
        if not as_json:
            typer.echo(f"\nrun {number} of {passes}", err=True)
        proc = run_repro(path, python=[python] if python else ())
        if proc.returncode != 0:
            raise Failed(f"run {number} of the reproducer exited {proc.returncode}")
        runs.append(parse_measured(proc.stdout))
    measured = [r for r in runs if r is not None]
    if len(measured) != len(runs):
        raise Failed("the reproducer printed no measurement to judge")
    recorded = next((c for c in load_results(source).cases if c.id == case), None)
    verdicts = against_baseline(base_case, recorded, measured, threshold=threshold)
    if not verdicts:
        raise Failed("no metric of the case is in both the baseline and the measurement")
    lines = list(iter_lines(verdicts, threshold))
    if as_json:
        data["baseline"] = {
            "threshold": threshold,
            "metrics": [v.to_json_dict() for v in verdicts],
            "conclusion": lines[-1],
        }
        typer.echo(json.dumps(data, indent=2))
    else:
        for line in lines:
            typer.echo(line)
    raise typer.Exit(1 if any(v.verdict == "regressed" for v in verdicts) else 0)
