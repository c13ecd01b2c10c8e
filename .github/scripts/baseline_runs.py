"""Pick the previous nightly from `gh run list --json` output: the baseline's candidates.

    gh run list ... --status completed --json databaseId,number,createdAt,conclusion,status,url \
        > runs.json
    python .github/scripts/baseline_runs.py runs.json "$GITHUB_RUN_ID" > candidates
    python .github/scripts/baseline_runs.py runs.json "$GITHUB_RUN_ID" --show RUN_ID > run.json

The first form prints the ids of the completed runs other than the current one, newest
first, one per line, at most MAX_CANDIDATES: the workflow downloads the first one whose
`nightly-results` artifact is still there. A completed run counts whatever its conclusion:
a red night is still the night before. The second form prints that run's object (JSON),
which `accelkit matrix compare --baseline-run` names in the summary.

Anything but a JSON list of run objects with integer ids is rejected (exit 2), so a change
in gh's output fails the step instead of picking a wrong baseline.
"""

from __future__ import annotations

import json
import sys
from typing import Any

#: Older runs than this are not worth their download: their legs' baselines would be stale.
MAX_CANDIDATES = 5


def candidates(runs: Any, current: int) -> list[dict[str, Any]]:
    if not isinstance(runs, list):
        raise ValueError(f"expected a JSON list of runs, got {type(runs).__name__}")
    for index, run in enumerate(runs):
        if not isinstance(run, dict) or type(run.get("databaseId")) is not int:
            raise ValueError(f"run {index} has no integer databaseId: {run!r}")
        if not isinstance(run.get("createdAt"), str) or not isinstance(run.get("status"), str):
            raise ValueError(f"run {index} lacks createdAt or status (ask gh for them)")
    completed = [r for r in runs if r["status"] == "completed" and r["databaseId"] != current]
    return sorted(completed, key=lambda run: run["createdAt"], reverse=True)


def main(argv: list[str]) -> int:
    if len(argv) not in (3, 5) or (len(argv) == 5 and argv[3] != "--show"):
        print("usage: baseline_runs.py RUNS_JSON CURRENT_RUN_ID [--show RUN_ID]", file=sys.stderr)
        return 2
    try:
        with open(argv[1], encoding="utf-8") as handle:
            runs = json.load(handle)
        current = int(argv[2])
        picked = candidates(runs, current)
        if len(argv) == 5:
            wanted = int(argv[4])
            run = next((r for r in picked if r["databaseId"] == wanted), None)
            if run is None:
                raise ValueError(f"run {wanted} is not a candidate")
            print(json.dumps(run, sort_keys=True))
            return 0
    except (OSError, ValueError) as error:
        print(f"baseline_runs.py: {error}", file=sys.stderr)
        return 2
    for run in picked[:MAX_CANDIDATES]:
        print(run["databaseId"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
