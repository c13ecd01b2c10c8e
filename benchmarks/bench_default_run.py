"""Wall time of the default everyday run, `accelkit test --device cpu`, split by area.

    python benchmarks/bench_default_run.py [--runs N] [--keep DIR] [-- EXTRA ACCELKIT ARGS]

Runs `accelkit test --device cpu --json FILE` (conformance, then the perf cases in the
default number of passes) N times and prints one table per run: the wall time, the load
average before and after (a number taken while the 1-minute load is above the core count
is not a valid timing), and the seconds spent per area, from the results file's per-case
durations (a perf case's duration is the sum over its passes). `other (wall - cases)` is
what no case accounts for: interpreter and pytest start-up, collection, the passes' own
processes, and writing results. Target (issue 17 item 5): at most 180 s on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TARGET_S = 180.0
SLOWEST = 10

# (label, case-id prefix), first match wins; the rest is "conformance (other)"/"perf (other)".
AREAS: tuple[tuple[str, str], ...] = (
    ("perf compile latency", "perf/compile/latency"),
    ("perf compile speedup", "perf/compile/speedup"),
    ("perf collectives", "perf/collectives/"),
    ("perf canaries", "perf/canary/"),
    ("conformance opinfo", "conformance/opinfo/"),
)


def _area(case_id: str) -> str:
    for label, prefix in AREAS:
        if case_id.startswith(prefix):
            return label
    return f"{case_id.split('/')[0]} (other)"


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.2f}/{five:.2f}"


def _run(results: Path, extra: list[str]) -> tuple[float, str, str, dict[str, Any]]:
    argv = [sys.executable, "-m", "accelkit", "test", "--device", "cpu"]
    argv += ["--json", str(results), *extra]
    before = _load()
    started = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    after = _load()
    if not results.exists():
        raise SystemExit(
            f"accelkit test wrote no results ({proc.returncode}):\n{proc.stdout[-3000:]}"
        )
    data: dict[str, Any] = json.loads(results.read_text(encoding="utf-8"))
    if proc.returncode != 0:
        print(f"note: accelkit test exited {proc.returncode}", flush=True)
    return wall, before, after, data


def _table(index: int, wall: float, before: str, after: str, data: dict[str, Any]) -> None:
    cases = data["cases"]
    summary = data["summary"]
    per_area: dict[str, float] = {}
    counts: dict[str, int] = {}
    for case in cases:
        area = _area(case["id"])
        per_area[area] = per_area.get(area, 0.0) + float(case.get("duration_s") or 0.0)
        counts[area] = counts.get(area, 0) + 1
    covered = sum(per_area.values())
    print(
        f"run {index}: {wall:.1f} s wall, load (1/5 min) {before} before, {after} after; "
        f"{len(cases)} cases ({summary['passed']} passed, {summary['failed']} failed, "
        f"{summary['skipped']} skipped), {data['run'].get('passes')} passes",
        flush=True,
    )
    print(f"    {'area':<28} {'cases':>6} {'seconds':>8}")
    for area in sorted(per_area, key=lambda a: -per_area[a]):
        print(f"    {area:<28} {counts[area]:>6} {per_area[area]:>8.1f}")
    print(f"    {'other (wall - cases)':<28} {'':>6} {wall - covered:>8.1f}")
    print(f"    {'total':<28} {len(cases):>6} {wall:>8.1f}")
    print("  slowest cases:")
    for case in sorted(cases, key=lambda c: -float(c.get("duration_s") or 0.0))[:SLOWEST]:
        print(f"    {float(case.get('duration_s') or 0.0):7.1f} s  {case['id']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--keep", type=Path, default=None, help="keep results files here")
    parser.add_argument("extra", nargs="*", help="more accelkit test arguments, after --")
    args = parser.parse_args()
    walls: list[float] = []
    with tempfile.TemporaryDirectory(prefix="accelkit-bench-default-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for index in range(args.runs):
            wall, before, after, data = _run(work / f"default-{index}.json", args.extra)
            walls.append(wall)
            _table(index, wall, before, after, data)
    median = statistics.median(walls)
    verdict = "met" if median <= TARGET_S else "NOT met"
    print(
        f"default run wall time: median {median:.1f} s of {len(walls)} runs on "
        f"{os.cpu_count()} cores (target {TARGET_S:.0f} s): {verdict}"
    )


if __name__ == "__main__":
    main()
