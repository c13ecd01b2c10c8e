"""Measure, for real on this machine, what `accelkit compare` says about real timings.

1. A/A: time the same CPU torch ops in several separate processes (each a "run" that
   writes a results file, as `accelkit test` would), compare consecutive runs, count the
   metrics flagged (regressed or improved). Target: at most 1%.
2. Planted slowdown: one more run where one kernel (matmul 256) also spins for ~12% of
   its own time inside the timed callable; it must be flagged, and nothing else.
3. Fidelity: accelkit's timing of one op against torch.utils.benchmark's
   `Timer.blocked_autorange` median, interleaved over a few rounds. Target: within 3%.

Usage: python benchmarks/bench_compare.py [--runs 4] [--slowdown 0.12] [--threads 1]
The default of one intra-op thread keeps OpenMP spin-waiting out of the numbers on a small
shared machine; pass --threads 0 to keep torch's default.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

SLOWED_CASE = "perf/mm[float32-256]"


def _ops(torch: Any) -> dict[str, tuple[Callable[..., object], list[tuple[Any, ...]], str, float]]:
    """case id -> (callable, rotating argument sets, throughput unit, work per call)."""

    def sets(make: Callable[[], tuple[Any, ...]], count: int) -> list[tuple[Any, ...]]:
        return [make() for _ in range(count)]

    n = 256
    big = 1 << 20
    rows, cols = 512, 1024
    out = torch.empty(big)
    return {
        SLOWED_CASE: (
            torch.mm,
            sets(lambda: (torch.randn(n, n), torch.randn(n, n)), 4),
            "FLOP/s",
            2.0 * n**3,
        ),
        "perf/add[float32-1M]": (
            lambda x, y: torch.add(x, y, out=out),
            sets(lambda: (torch.randn(big), torch.randn(big)), 4),
            "B/s",
            3.0 * 4 * big,
        ),
        "perf/softmax[float32-512x1024]": (
            lambda x: torch.softmax(x, dim=-1),
            sets(lambda: (torch.randn(rows, cols),), 4),
            "B/s",
            2.0 * 4 * rows * cols,
        ),
        "perf/layer_norm[float32-512x1024]": (
            lambda x: torch.nn.functional.layer_norm(x, (cols,)),
            sets(lambda: (torch.randn(rows, cols),), 4),
            "B/s",
            2.0 * 4 * rows * cols,
        ),
        "perf/sum[float32-4M]": (
            torch.sum,
            sets(lambda: (torch.randn(4 * big),), 2),
            "B/s",
            4.0 * 4 * big,
        ),
        "perf/copy[float32-4M]": (
            lambda dst, src: dst.copy_(src),
            sets(lambda: (torch.empty(4 * big), torch.randn(4 * big)), 2),
            "B/s",
            2.0 * 4 * 4 * big,
        ),
        "perf/gelu[float32-1M]": (
            torch.nn.functional.gelu,
            sets(lambda: (torch.randn(big),), 4),
            "B/s",
            2.0 * 4 * big,
        ),
        "perf/mm[float32-64]": (
            torch.mm,
            sets(lambda: (torch.randn(64, 64), torch.randn(64, 64)), 4),
            "FLOP/s",
            2.0 * 64**3,
        ),
    }


def _spin(seconds: float) -> None:
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        pass


def child(out: Path, slowdown: float, threads: int, interleaved: bool) -> None:
    """One run: measure every op, write an accelkit results file."""
    import torch

    from accelkit.results.io import atomic_write_text
    from accelkit.results.model import Case, Results, RunInfo, Summary
    from accelkit.suite.timing import Timer, measure_interleaved

    if threads > 0:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    started = datetime.now(timezone.utc).isoformat()
    ops = _ops(torch)
    timers: dict[str, Timer] = {}
    for case_id, (fn, arg_sets, _unit, _work) in ops.items():
        timed = fn
        if slowdown > 0 and case_id == SLOWED_CASE:
            # Extra work inside the timed callable: spin for `slowdown` of its own time.
            own = Timer(fn, arg_sets=arg_sets).blocked_autorange().median
            delay = own * slowdown

            def timed(*args: Any, _fn: Callable[..., object] = fn, _d: float = delay) -> None:
                _fn(*args)
                _spin(_d)

        timers[case_id] = Timer(timed, arg_sets=arg_sets)
    begin = time.perf_counter()
    if interleaved:
        measurements = measure_interleaved(timers, rounds=20, samples_per_round=1)
    else:
        measurements = {name: timer.blocked_autorange() for name, timer in timers.items()}
    duration = (time.perf_counter() - begin) / len(ops)
    cases = []
    for case_id, measurement in measurements.items():
        _fn, _sets, unit, work = ops[case_id]
        metrics = {
            "latency": measurement.latency_metric(),
            "throughput": measurement.throughput_metric(work, unit),
        }
        cases.append(
            Case(
                id=case_id,
                suite="perf",
                status="passed",
                duration_s=duration,
                metrics=metrics,  # type: ignore[arg-type]  # pydantic validates the dicts
            )
        )
    results = Results(
        run=RunInfo(
            started=started,
            finished=datetime.now(timezone.utc).isoformat(),
            device="cpu",
            suites=["perf"],
            argv=sys.argv,
        ),
        env={"torch": torch.__version__, "threads": torch.get_num_threads()},
        cases=cases,
        summary=Summary.of(cases),
    )
    atomic_write_text(out, json.dumps(results.to_json_dict()))


def _run_child(out: Path, slowdown: float, threads: int, mode: str) -> None:
    command = [sys.executable, __file__, "--child", str(out), "--slowdown", str(slowdown)]
    command += ["--threads", str(threads), "--mode", mode]
    subprocess.run(command, check=True)


def _describe(label: str, comparison: Any) -> tuple[int, int]:
    flagged = [m for m in comparison.metrics if m.verdict in ("regressed", "improved")]
    noisy = [m for m in comparison.metrics if m.verdict == "noisy"]
    print(
        f"{label}: {len(flagged)} of {len(comparison.metrics)} metrics flagged, {len(noisy)} noisy"
    )
    for m in comparison.metrics:
        mark = "  <-- " + m.verdict if m.verdict != "unchanged" else ""
        ci = f"[{m.ci[0]:.3f}, {m.ci[1]:.3f}]" if m.ci else "-"
        ratio = f"{m.ratio:.3f}" if m.ratio is not None else "-"
        print(
            f"    {m.case:36s} {m.metric:10s} ratio {ratio} ci {ci:16s} "
            f"n={m.base_samples}/{m.new_samples}{mark}"
        )
    return len(flagged), len(comparison.metrics)


def fidelity(threads: int, rounds: int) -> None:
    """accelkit's timing vs torch.utils.benchmark for matmul 256, interleaved rounds."""
    import torch
    from torch.utils.benchmark import Timer as TorchTimer

    from accelkit.suite.timing import Timer

    if threads > 0:
        torch.set_num_threads(threads)
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    ours, theirs = [], []
    for _ in range(rounds):
        ours.append(Timer(torch.mm, args=(a, b)).blocked_autorange().median)
        reference = TorchTimer(
            "torch.mm(a, b)",
            globals={"torch": torch, "a": a, "b": b},
            num_threads=torch.get_num_threads(),  # torch's Timer defaults to 1 thread
        ).blocked_autorange(min_run_time=0.2)
        theirs.append(reference.median)
    ours_median, theirs_median = statistics.median(ours), statistics.median(theirs)
    difference = (ours_median / theirs_median - 1.0) * 100.0
    print(
        f"fidelity (mm 256, {torch.get_num_threads()} thread(s), {rounds} interleaved rounds): "
        f"accelkit {ours_median * 1e6:.2f} us, torch.utils.benchmark {theirs_median * 1e6:.2f} us, "
        f"difference {difference:+.2f}% (target within 3%)"
    )
    for i, (x, y) in enumerate(zip(ours, theirs, strict=True)):
        change = (x / y - 1) * 100
        print(f"    round {i}: accelkit {x * 1e6:.2f} us, torch {y * 1e6:.2f} us ({change:+.2f}%)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4, help="A/A runs (compared pairwise in order)")
    parser.add_argument("--slowdown", type=float, default=0.12, help="planted slowdown fraction")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch intra-op threads (0: default)"
    )
    parser.add_argument("--rounds", type=int, default=5, help="fidelity rounds")
    parser.add_argument(
        "--mode",
        choices=("interleaved", "sequential"),
        default="interleaved",
        help="measure the ops round by round (measure_interleaved) or one after another",
    )
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.slowdown, args.threads, args.mode == "interleaved")
        return

    from accelkit.results.compare import compare
    from accelkit.results.io import load_results

    with tempfile.TemporaryDirectory(prefix="accelkit-bench-compare-") as tmp:
        directory = Path(tmp)
        begin = time.perf_counter()
        paths = []
        for i in range(args.runs):
            path = directory / f"aa{i}.json"
            _run_child(path, 0.0, args.threads, args.mode)
            paths.append(path)
        slowed = directory / "slowed.json"
        _run_child(slowed, args.slowdown, args.threads, args.mode)
        print(f"{args.mode}: {args.runs + 1} runs took {time.perf_counter() - begin:.1f} s")

        runs = [load_results(p) for p in paths]
        flagged = total = 0
        for i in range(1, len(runs)):
            f, t = _describe(f"A/A run {i - 1} vs run {i}", compare(runs[i - 1], runs[i]))
            flagged += f
            total += t
        print(f"A/A total: {flagged} of {total} metrics flagged ({flagged / max(total, 1):.1%})")

        slow_comparison = compare(runs[-1], load_results(slowed))
        _describe(f"planted {args.slowdown:.0%} slowdown in {SLOWED_CASE}", slow_comparison)
        on_kernel = {m.metric: m.verdict for m in slow_comparison.metrics if m.case == SLOWED_CASE}
        others = [
            m
            for m in slow_comparison.metrics
            if m.case != SLOWED_CASE and m.verdict in ("regressed", "improved")
        ]
        print(
            f"slowdown: {SLOWED_CASE} latency {on_kernel.get('latency')}, throughput "
            f"{on_kernel.get('throughput')}; other metrics flagged: {len(others)}"
        )
    fidelity(args.threads, args.rounds)


if __name__ == "__main__":
    main()
