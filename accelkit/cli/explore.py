"""`accelkit test --explore-seeds N`: the conformance suite at seeds nobody tuned against.

Each seed is one ordinary run (here or in --image), with its own results file; what
disagrees is a finding (`accelkit.results.findings`), listed with its reproducer and a
ready-to-file issue text, and the command exits 0: an exploration is not a gate. The runs
and the files are `accelkit.suite.run.explore`'s (a nightly explore leg runs the same); this
module prints them.
"""

from __future__ import annotations

from typing import Any

from accelkit.errors import ExitCode
from accelkit.suite.run.explore import (
    SEED_RANGE,
    exploration_seeds,
    output_paths,
    seed_results_path,
)
from accelkit.suite.run.request import RunRequest

__all__ = ["SEED_RANGE", "exploration_seeds", "explore", "output_paths", "seed_results_path"]


def explore(request: RunRequest, console: Any, display: Any) -> int:
    """Run every seed, write the findings, print them; the exit code."""
    from accelkit.suite.run.explore import run_exploration

    def say(line: str) -> None:
        console.print(line, markup=False, soft_wrap=True)

    with display:
        outcome = run_exploration(request, display.on_event)
    result = outcome.exploration
    if result is None:
        say(
            f"seed {outcome.stopped_at}: the run could not finish (exit {outcome.exit_code}); "
            f"its results: {outcome.stopped_results}"
        )
        return outcome.exit_code
    for run in result.runs:
        say(
            f"seed {run.seed}: {run.cases} cases, {run.passed} passed, "
            f"{run.findings} finding(s)  ({run.results_file})"
        )
    for finding in result.findings:
        say(f"FINDING  {finding.case_id} at seed {finding.seed}: {finding.repro}")
    say(
        f"{len(result.findings)} finding(s) over {len(outcome.seeds)} seed(s); not failures: "
        f"each has its reproducer and an issue text in {outcome.findings_md} "
        f"({outcome.findings_json})"
    )
    return int(ExitCode.OK)
