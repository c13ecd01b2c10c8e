"""A/A and planted-slowdown check of the real perf suite with `accelkit compare`.

Runs the perf suite (the shipped cases, plus one planted GEMM case) on the CPU three times
through `accelkit test --cases benchmarks/fixtures_perf --suite perf`:

    A1, A2   the same build, nothing changed       -> compare A1 A2: flagged fraction
    B        ACCELKIT_PLANT_SLOWDOWN=<fraction>     -> compare A2 B: is the planted case's
             (only benchmarks/fixtures_perf reads it)  metric flagged as regressed?

"Flagged" = verdict regressed or improved (what would turn a nightly red or claim a win).
Targets (issue 4): A/A at most 1% of metrics flagged; a slowdown of 10% or more on one
kernel flagged on that kernel's metric.

Noise control: one intra-op thread (`--threads 1`, accelkit's CPU default; with 2 threads
on a shared 2-core machine, every OpenMP barrier waits for whichever core another process
holds),
optionally pinned to one CPU (--pin). Each run is what a user gets from `accelkit test`:
its default measurement passes (--passes, five separate processes whose samples are pooled
as groups), so `accelkit compare` sees each run's process-to-process noise. Optionally,
interleaved rounds (--rounds R): each run is R sub-runs, executed A1 A2 B | A2 B A1 | ...,
pooled the same way (default 1: the runs are compared as a nightly compares them).

Usage: python benchmarks/bench_perf_aa.py [--slowdown 0.10] [--threads 1] [--pin CPU]
       [--rounds 1] [--passes 5] [-k EXPR] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CASES_DIR = Path(__file__).resolve().parent / "fixtures_perf"
PLANT_ENV = "ACCELKIT_PLANT_SLOWDOWN"
PLANTED_CASE = "perf/planted"


def _accelkit(
    *args: str, env: dict[str, str] | None = None, pin: int | None = None, timeout: float = 1800
) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "accelkit", *args]
    if pin is not None and shutil.which("taskset"):
        argv = ["taskset", "-c", str(pin), *argv]
    return subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        check=False,
    )


def _run_suite(
    out: Path,
    *,
    threads: int,
    slowdown: float,
    keyword: str | None,
    pin: int | None,
    passes: int,
) -> float:
    env = {PLANT_ENV: str(slowdown) if slowdown else ""}
    args = [
        "test",
        "--device",
        "cpu",
        "--suite",
        "perf",
        "--cases",
        str(CASES_DIR),
        "--json",
        str(out),
        "--passes",
        str(passes),
        "--threads",
        str(threads),
    ]
    if keyword:
        args += ["-k", keyword]
    started = time.monotonic()
    proc = _accelkit(*args, env=env, pin=pin)
    if proc.returncode != 0:
        raise SystemExit(f"accelkit test failed ({proc.returncode}):\n{proc.stdout[-3000:]}")
    return time.monotonic() - started


def _merge(parts: list[Path], out: Path) -> None:
    """One results file from the rounds of one run: accelkit's own pooling (the one
    `accelkit test --passes` uses), so each round's passes stay separate sample groups."""
    from accelkit.results.io import atomic_write_text, load_results
    from accelkit.results.merge import pool

    pooled = pool([load_results(part) for part in parts], [p.stem for p in parts])
    atomic_write_text(out, json.dumps(pooled.to_json_dict()))


def _compare(base: Path, new: Path) -> dict[str, Any]:
    proc = _accelkit("compare", str(base), str(new), "--json")
    if proc.returncode not in (0, 1):
        raise SystemExit(f"accelkit compare failed ({proc.returncode}): {proc.stderr}")
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def _flagged(metrics: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in metrics if m["verdict"] in ("regressed", "improved")]


def _describe(title: str, comparison: dict[str, Any], *, exclude: str | None = None) -> float:
    metrics = [m for m in comparison["metrics"] if m["verdict"] != "missing"]
    if exclude:
        metrics = [m for m in metrics if not m["case"].startswith(exclude)]
    flagged = _flagged(metrics)
    noisy = [m for m in metrics if m["verdict"] == "noisy"]
    fraction = len(flagged) / len(metrics) if metrics else 0.0
    print(
        f"{title}: {len(flagged)}/{len(metrics)} metrics flagged ({fraction:.1%}), "
        f"{len(noisy)} noisy (no verdict)"
    )
    for m in flagged:
        ci = m["ci"] or [float("nan"), float("nan")]
        print(
            f"    {m['verdict']:9} {m['case']} {m['metric']}: ratio {m['ratio']:.3f} "
            f"CI [{ci[0]:.3f}, {ci[1]:.3f}] p={m['p_value']:.2g}"
        )
    return fraction


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--slowdown",
        type=float,
        default=0.10,
        help="planted extra work as a fraction of the planted GEMM (steps of 5%%)",
    )
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--pin", type=int, default=None, help="pin each run to this CPU")
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="sub-runs per run, interleaved A1 A2 B | A2 B A1 | ...; pooled",
    )
    parser.add_argument(
        "--passes", type=int, default=5, help="accelkit test --passes for every run"
    )
    parser.add_argument("-k", dest="keyword", default=None, help="pytest -k selection")
    parser.add_argument("--keep", type=Path, default=None, help="keep results files here")
    options = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="accelkit-bench-aa-") as tmp:
        work = options.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        plan = (("A1", 0.0), ("A2", 0.0), ("B", options.slowdown))
        paths = {name: work / f"{name}.json" for name, _ in plan}
        parts: dict[str, list[Path]] = {name: [] for name, _ in plan}
        started = time.monotonic()
        for round_index in range(options.rounds):
            # Rotate the order each round, so no run always goes first (or last).
            shift = round_index % len(plan)
            for name, slowdown in plan[shift:] + plan[:shift]:
                part = work / f"{name}.round{round_index}.json"
                wall = _run_suite(
                    part,
                    threads=options.threads,
                    slowdown=slowdown,
                    keyword=options.keyword,
                    pin=options.pin,
                    passes=options.passes,
                )
                parts[name].append(part)
                print(
                    f"round {round_index} run {name}: {wall:.0f} s (slowdown {slowdown:g})",
                    flush=True,
                )
        for name, _ in plan:
            _merge(parts[name], paths[name])
        print(
            f"all runs: {time.monotonic() - started:.0f} s; threads={options.threads}, "
            f"pin={options.pin}, rounds={options.rounds}, passes={options.passes}"
        )

        aa = _compare(paths["A1"], paths["A2"])
        aa_fraction = _describe("A/A (A1 vs A2)", aa)
        planted = _compare(paths["A2"], paths["B"])
        rest_fraction = _describe(
            "planted run, other metrics (A2 vs B)", planted, exclude=PLANTED_CASE
        )
        hits = [m for m in planted["metrics"] if m["case"].startswith(PLANTED_CASE)]
        for m in hits:
            ci = m["ci"] or [float("nan"), float("nan")]
            print(
                f"planted {m['case']} {m['metric']}: verdict {m['verdict']}, ratio "
                f"{m['ratio']:.3f} CI [{ci[0]:.3f}, {ci[1]:.3f}]"
            )
        flagged = bool(hits) and all(m["verdict"] == "regressed" for m in hits)
        print(
            f"A/A flagged fraction: {aa_fraction:.1%} (target <= 1%): "
            f"{'met' if aa_fraction <= 0.01 else 'NOT met'}"
        )
        print(
            f"planted {options.slowdown:.1%} slowdown flagged as regressed: "
            f"{'yes' if flagged else 'NO'}; other metrics flagged in that run: "
            f"{rest_fraction:.1%}"
        )


if __name__ == "__main__":
    main()
