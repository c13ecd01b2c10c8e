"""Wall time of the whole shipped perf suite on the CPU, against its budget.

    python benchmarks/bench_perf_suite.py [--runs N] [--passes P] [--keep DIR]

Runs `accelkit test --device cpu --suite perf --measure-ceilings` (the run that
tests/unit/suite/perf/test_perf_cases.py checks for correctness) N times and prints each run's wall
time, its case counts and its slowest cases. Target: the whole perf suite, with the
default measurement passes, within 3 minutes on the development machine's CPU. A shared
machine adds whatever the other jobs cost: compare runs taken side by side, and read the
slowest cases rather than the total when they disagree.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BUDGET_S = 180.0
SLOWEST = 8


def _run(results: Path, passes: int | None) -> tuple[float, dict[str, Any]]:
    argv = [sys.executable, "-m", "accelkit", "test", "--device", "cpu", "--suite", "perf"]
    argv += ["--measure-ceilings", "--json", str(results)]
    if passes is not None:
        argv += ["--passes", str(passes)]
    started = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"accelkit test failed ({proc.returncode}):\n{proc.stdout[-3000:]}")
    data: dict[str, Any] = json.loads(results.read_text(encoding="utf-8"))
    return wall, data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--passes", type=int, default=None, help="default: accelkit's own")
    parser.add_argument("--keep", type=Path, default=None, help="keep results files here")
    args = parser.parse_args()
    walls: list[float] = []
    with tempfile.TemporaryDirectory(prefix="accelkit-bench-perf-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for index in range(args.runs):
            wall, data = _run(work / f"perf-{index}.json", args.passes)
            walls.append(wall)
            cases = data["cases"]
            summary = data["summary"]
            print(
                f"run {index}: {wall:.1f} s wall, {len(cases)} cases "
                f"({summary['passed']} passed, {summary['skipped']} skipped), "
                f"{data['run'].get('passes')} passes",
                flush=True,
            )
            for case in sorted(cases, key=lambda c: -c["duration_s"])[:SLOWEST]:
                print(f"    {case['duration_s']:7.1f} s  {case['id']}")
    median = statistics.median(walls)
    verdict = "met" if median <= BUDGET_S else "NOT met"
    print(
        f"perf suite wall time: median {median:.1f} s of {len(walls)} runs "
        f"(budget {BUDGET_S:.0f} s): {verdict}"
    )


if __name__ == "__main__":
    main()
