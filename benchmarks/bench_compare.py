"""Measure, for real on this machine, what `accelkit compare` says about real timings.

1. A/A: time the same CPU torch ops in several separate processes (each a "run" that
   writes a results file, as `accelkit test` would), compare consecutive runs, count the
   metrics flagged (regressed or improved). Target: at most 1%.
2. Planted slowdown: one more run where one kernel (matmul 256) also spins for ~12% of
   its own time inside the timed callable; it must be flagged, and nothing else.
3. Fidelity: accelkit's timing of one op against torch.utils.benchmark's
   `Timer.blocked_autorange` median, interleaved over a few rounds; on a CUDA device also
   against `triton.testing.do_bench` (bfloat16 GEMM 4096). Target: within 3%.

With --clustered, instead (no torch, a minute or two): synthetic samples in groups, as
`accelkit test --passes 5` records them (5 passes of 20-40 samples per side, within-pass
IQR/median 2%, each pass shifted by its own lognormal factor: the between-pass sigma), the
flagged fraction of A/A pairs and the detection rate of a planted 10% slowdown, with the
samples compared as independent ("by sample") and by group, including a load burst that
shifts one pass by +30%; then the time `compare` takes on a 50-metric file pair.

Usage: python benchmarks/bench_compare.py [--runs 4] [--slowdown 0.12] [--threads 1]
       python benchmarks/bench_compare.py --clustered [--trials 400]
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
    from accelkit.suite.perf.timing import Timer, measure_interleaved

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

    from accelkit.suite.perf.timing import Timer

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


def fidelity_cuda(rounds: int, size: int = 4096) -> None:
    """accelkit's CUDA-event timing vs `triton.testing.do_bench` (median) for a bfloat16
    GEMM large enough that do_bench's L2 flush between calls does not matter."""
    import torch

    if not torch.cuda.is_available():
        print("fidelity (cuda): skipped: no CUDA device")
        return
    try:
        from triton.testing import do_bench
    except ImportError as exc:
        print(f"fidelity (cuda): skipped: triton is not importable ({exc})")
        return

    from accelkit.suite.perf.timing import Timer

    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    ours, theirs = [], []
    for _ in range(rounds):
        ours.append(Timer(torch.mm, args=(a, b), device="cuda").blocked_autorange().median)
        theirs.append(do_bench(lambda: torch.mm(a, b), return_mode="median") / 1e3)  # ms
    ours_median, theirs_median = statistics.median(ours), statistics.median(theirs)
    difference = (ours_median / theirs_median - 1.0) * 100.0
    flops = 2 * size**3 / ours_median
    print(
        f"fidelity (cuda, bf16 mm {size}, {torch.cuda.get_device_name()}, {rounds} rounds): "
        f"accelkit {ours_median * 1e6:.1f} us ({flops / 1e12:.0f} TFLOP/s), triton do_bench "
        f"{theirs_median * 1e6:.1f} us, difference {difference:+.2f}% (target within 3%)"
    )


CLUSTERED_WITHIN = 0.02
"""IQR/median of the samples within one pass."""


def _clustered_side(
    rng: Any,
    *,
    between: float,
    shift: float = 1.0,
    burst: float = 0.0,
    passes: int = 5,
    sizes: tuple[int, int] = (20, 40),
) -> tuple[Any, Any]:
    """One side's samples and pass labels: every pass scaled by its own lognormal factor
    (sigma `between`), the first one also by 1 + `burst`."""
    import math

    import numpy as np

    sigma = math.asinh(CLUSTERED_WITHIN / 2.0) / 0.6744897501960817
    samples, labels = [], []
    for group in range(passes):
        n = int(rng.integers(sizes[0], sizes[1] + 1))
        offset = shift * rng.lognormal(0.0, between) * (1.0 + burst if group == 0 else 1.0)
        samples.append(offset * rng.lognormal(0.0, sigma, n))
        labels.append(np.full(n, group))
    return np.concatenate(samples), np.concatenate(labels)


# (label, between-pass sigma, slowdown of new, burst side, burst size)
CLUSTERED_SCENARIOS: tuple[tuple[str, float, float, str | None], ...] = (
    ("A/A", 0.02, 1.0, None),
    ("A/A", 0.03, 1.0, None),
    ("A/A", 0.04, 1.0, None),
    ("A/A", 0.05, 1.0, None),
    ("A/A, burst in base", 0.02, 1.0, "base"),
    ("A/A, burst in new", 0.02, 1.0, "new"),
    ("A/A, burst in base", 0.04, 1.0, "base"),
    ("A/A, burst in new", 0.04, 1.0, "new"),
    ("10% slowdown", 0.01, 1.10, None),
    ("10% slowdown", 0.02, 1.10, None),
    ("10% slowdown", 0.04, 1.10, None),
    ("10% slowdown, burst in new", 0.02, 1.10, "new"),
    ("10% slowdown, burst in base", 0.02, 1.10, "base"),
)


def clustered(trials: int, seed: int) -> None:
    """Synthetic clustered scenarios: by sample vs by group."""
    import numpy as np

    from accelkit.results.stats import compare_samples

    print(
        f"clustered samples: 5 passes x 20-40 samples per side, within-pass IQR/median "
        f"{CLUSTERED_WITHIN:.0%}, burst = one pass +30%, {trials} trials per scenario"
    )
    print(f"{'scenario':30s} {'between':>7s}  {'by sample':>22s}  {'by group':>22s}")
    for index, (label, between, shift, burst_side) in enumerate(CLUSTERED_SCENARIOS):
        rng = np.random.default_rng(seed + index)
        slowdown = shift != 1.0
        counts = {"sample": 0, "group": 0}
        noisy = {"sample": 0, "group": 0}
        begin = time.perf_counter()
        for _ in range(trials):
            base, base_groups = _clustered_side(
                rng, between=between, burst=0.3 if burst_side == "base" else 0.0
            )
            new, new_groups = _clustered_side(
                rng, between=between, shift=shift, burst=0.3 if burst_side == "new" else 0.0
            )
            verdicts = {
                "sample": compare_samples(base, new, higher_is_better=False).verdict,
                "group": compare_samples(
                    base,
                    new,
                    higher_is_better=False,
                    base_groups=base_groups,
                    new_groups=new_groups,
                ).verdict,
            }
            for mode, verdict in verdicts.items():
                if slowdown:
                    counts[mode] += verdict == "regressed"
                else:
                    counts[mode] += verdict in ("regressed", "improved")
                noisy[mode] += verdict == "noisy"
        what = "detected" if slowdown else "flagged"
        cells = [
            f"{what} {counts[mode] / trials:6.1%} (noisy {noisy[mode] / trials:4.0%})"
            for mode in ("sample", "group")
        ]
        print(
            f"{label:30s} {between:7.0%}  {cells[0]:>22s}  {cells[1]:>22s}"
            f"  [{time.perf_counter() - begin:.1f} s]",
            flush=True,
        )
    _time_compare(seed)


PAIRED_SCENARIOS = (
    (0.0, 0.01),
    (0.10, 0.01),
    (0.10, 0.02),
    (0.30, 0.02),
    (0.10, 0.03),
    (0.10, 0.05),
    (0.10, 0.08),
)
"""(drift shared by a pass pair, each pass's own offset), lognormal sigmas."""


def paired(trials: int, seed: int, pairs: int) -> None:
    """Synthetic interleaved runs: `pairs` pass pairs of 20 samples, within-pass noise 2%."""
    import numpy as np

    from accelkit.results.stats import compare_samples

    def side(rng: Any, drift: Any, factor: float, own: float) -> tuple[Any, Any]:
        offsets = drift * rng.lognormal(0.0, own, drift.size) * factor
        samples = (offsets[:, None] * rng.lognormal(0.0, 0.02, (drift.size, 20))).reshape(-1)
        return samples, np.repeat(np.arange(drift.size), 20)

    print(f"paired: {pairs} pass pairs x 20 samples, within-pass noise 2%, {trials} trials a row")
    print(
        f"{'shared':>6} {'own':>4}  {'A/A flagged':>11}  {'half-width median (<=5%)':>24}  "
        f"{'10% found':>9}  {'grouped mode':>12}"
    )
    for index, (shared, own) in enumerate(PAIRED_SCENARIOS):
        rng = np.random.default_rng(seed + index)
        flagged = found = grouped = 0
        widths = []
        for _ in range(trials):
            drift = rng.lognormal(0.0, shared, pairs)
            base, groups = side(rng, drift, 1.0, own)
            same, _ = side(rng, drift, 1.0, own)
            slow, _ = side(rng, drift, 1.1, own)
            kwargs = {"higher_is_better": False, "base_groups": groups, "new_groups": groups}
            aa = compare_samples(base, same, paired=True, **kwargs)
            ab = compare_samples(base, slow, paired=True, **kwargs)
            flagged += aa.verdict in ("regressed", "improved")
            found += ab.verdict == "regressed"
            grouped += compare_samples(base, slow, **kwargs).verdict == "regressed"
            assert aa.ci is not None
            widths.append((aa.ci[1] - aa.ci[0]) / 2)
        within = sum(w <= 0.05 for w in widths) / trials
        print(
            f"{shared:6.0%} {own:4.0%}  {flagged / trials:11.1%}  "
            f"{float(np.median(widths)):>15.1%} ({within:4.0%})  {found / trials:9.0%}  "
            f"{grouped / trials:12.0%}",
            flush=True,
        )


def _time_compare(seed: int, metrics: int = 50) -> None:
    """`compare` of two results files of `metrics` metrics, 5 passes x 40 samples a side."""
    import numpy as np

    from accelkit.results.compare import compare
    from accelkit.results.model import Results

    rng = np.random.default_rng(seed)

    def run(grouped: bool) -> Results:
        cases = []
        for i in range(metrics):
            samples, groups = _clustered_side(rng, between=0.02, sizes=(40, 40))
            metric: dict[str, Any] = {
                "value": float(np.median(samples)),
                "unit": "s",
                "higher_is_better": False,
                "samples": samples.tolist(),
            }
            if grouped:
                metric["sample_groups"] = groups.tolist()
            cases.append(
                {"id": f"perf/k{i}", "suite": "perf", "status": "passed", "metrics": {"t": metric}}
            )
        run_info = {"started": "", "device": "cpu", "suites": ["perf"], "argv": []}
        return Results.model_validate({"run": run_info, "cases": cases})

    for grouped in (True, False):
        base, new = run(grouped), run(grouped)
        times = []
        for _ in range(3):
            begin = time.perf_counter()
            comparison = compare(base, new)
            times.append(time.perf_counter() - begin)
        mode = "by group" if grouped else "by sample"
        print(
            f"compare, {metrics} metrics x 5 passes x 40 samples per side, {mode}: "
            f"best {min(times):.3f} s, worst {max(times):.3f} s of 3 "
            f"({len(comparison.metrics_with('unchanged'))} unchanged)"
        )


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
    parser.add_argument(
        "--clustered",
        action="store_true",
        help="only the synthetic scenarios with samples in groups (passes), and compare's time",
    )
    parser.add_argument(
        "--paired",
        type=int,
        default=0,
        metavar="PAIRS",
        help="only the synthetic interleaved (paired) scenarios, with this many pass pairs",
    )
    parser.add_argument("--trials", type=int, default=400, help="trials per clustered scenario")
    parser.add_argument("--seed", type=int, default=1, help="seed of the clustered scenarios")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.slowdown, args.threads, args.mode == "interleaved")
        return
    if args.clustered:
        clustered(args.trials, args.seed)
        return
    if args.paired:
        paired(args.trials, args.seed, args.paired)
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
    fidelity_cuda(args.rounds)


if __name__ == "__main__":
    main()
