"""Timing fidelity: accelkit's timer against the reference timer, per perf op (issue 17, item 4).

    python benchmarks/bench_timing_fidelity.py [--rounds 5] [--threads N] [-k SUBSTRING]

For the perf suite's ops at the sizes of this device's tier (`accelkit.suite.perf.harness.
SIZE_TIERS`: GEMMs, gemv, STREAM copy/triad/sum, softmax, layer_norm, SDPA), the same
callable on the same operands is timed by:

- accelkit: `PerfContext.measure`, exactly as the perf cases call it (the tier's
  `TimingOptions`, `accelkit.suite.perf.timing.Timer.blocked_autorange`);
- CPU: `torch.utils.benchmark.Timer(num_threads=N)`: `blocked_autorange()` and
  `adaptive_autorange()` on their own, a torch A/A control, and torch's loop beside
  accelkit's at either tool's block length (`torch_benchmark_timers` says how each is
  taken), at the same intra-op thread count N (the perf cases' default,
  `DEFAULT_CPU_THREADS`, unless --threads);
- GPU (selected when `torch.cuda.is_available()`): `triton.testing.do_bench(...,
  return_mode="median")`. That path has NOT been run: the machine this was written on has
  no GPU. Note that do_bench clears the L2 cache before every call and times each call on
  its own, while accelkit times blocks of back-to-back calls; at the gpu tiers' sizes
  (operands of hundreds of MiB) the cache does not matter, at small sizes it would.

Both tools get one fixed operand set (the perf cases rotate several sets so caches cannot
serve them; that changes what is measured, not how it is timed, so it is left out here).
The two tools alternate, round by round (accelkit first in even rounds, the reference first
in odd ones), so a change in the machine's load hits both alike. Printed per case: the
median over rounds of each tool's median, their ratio (accelkit / reference), the spread of
the per-round ratios (the noise floor of this comparison on this machine) and whether the
ratio is within 3%. Nothing is asserted: on a shared machine the numbers are that
machine's; tests/unit/suite/test_timing_fidelity_bench.py checks the table logic only.

Measured on the shared 2-core machine, 5 or 9 rounds, after the torch A/A control and
autorange-pairs were added: how many of the 13 cases are within 3% of

| date, rounds (load) | blocked | adaptive | torch A/A (control) | sample-pairs | autorange-pairs |
|---|---|---|---|---|---|
| 2026-12-03, 5 (0.5-1.0) | 8 | 10 | 10 | 13 | 8 |
| 2026-12-03, 9 (0.5-1.0) | 7 | 5 | 9 | 13 | 9 |
| 2026-12-03 later, 5 (0.27-0.96) | 11 | 11 | 13 | 11 | 11 |
| 2026-12-04, 5 (1.06-1.28) | 13 | 12 | 13 | 11 | 11 |

torch's own blocked_autorange, taken twice in a row (the A/A control), has missed 3% on 0-4
of the 13: one measurement after another cannot always agree within 3% here, whichever tool
takes them.

The third row, on a quieter machine (nothing else running; the ops 10-60% faster than in
the first two): 9 of 13 cases within 3% of every judged reference. Outside: the bfloat16
128^3 GEMM against blocked (0.967); triad against all but the torch A/A, one of its 5
rounds reading 1.226 (9 rounds again: 0.978-1.007, within); and sample-pairs on the 1 MiB
copy (1.048) and the 1x1024x512 gemv (1.063, and 1.055 in 9 rounds again, while accelkit's
measurement is within 1.6% of both autoranges there).

The last row: every case within 3% of blocked_autorange (0.970-0.995, each case's per-round
ratios spread under 5%) and 12 of adaptive_autorange (the bfloat16 128^3 GEMM 0.969);
accelkit read 0.5-3% lower on all 13, the short blocks' median again (below). 9 of 13
within every judged reference; outside: sample-pairs on the 1x1024x512 gemv (1.072) and the
1 MiB copy (1.070), as before, and autorange-pairs on both bfloat16 GEMMs (0.954 at 128^3,
0.966 at 16x512x256).

Beside each other, at either block length, accelkit agrees within 3% on 13 (its block
size) and 8-9 (torch's) cases; the misses read 3-7% lower in accelkit (sum 0.931, softmax
0.939, SDPA 0.953-0.960) and one 7% higher (SDPA full, 1.072). The medians differ because
the blocks do: a 10-300 ms block always contains the machine's interruptions, and its
median is near the mean of accelkit's 0.1-0.5 ms blocks; the median of the short blocks
leaves the interrupted ones out (30 pairs, 2026-12-03: sum, accelkit median / torch
median 0.957, accelkit mean / torch median 0.991; the 128^3 GEMM 0.985 and 1.001).

Measured on the shared 2-core machine on 2026-12-02, quiet (load average 0.85-0.98), 5
rounds: within 3% of blocked_autorange 11 of 13 cases, of adaptive_autorange 11, of
same-blocks 8, of sample-pairs 13 (0.994-1.021). The two outside against the autoranges are
the 1 MiB copy and the 2^18-float sum, 5% faster in accelkit's 0.1 ms blocks than in torch's
blocks of 1,000-10,000 calls; beside each other, block for block, the two loops agree within
1.4% on both. Sequential measurements (same-blocks) missed on 5 cases by 3-6.4%: the machine's
drift between two measurements, which sample-pairs takes out.

Earlier, on 2026-12-01 (load average 2-5 from other jobs: no quiet window came), four
runs of 5 rounds: against "same-blocks" 5, 7, 1 and 5 of 13 cases
were within 3%, most of the rest within 3-12% in either direction (per-round ratios spread
0.4-1.5: sequential measurements of one op differ that much there). Against torch's
autoranges accelkit read more than 3% lower in 41 of 52 case-runs against blocked_autorange,
mostly by 10-45%, and more than 3% higher in 9 (by up to 26%). The cause is the block
length, not the timer: torch grows its blocks by 10x until the timer's overhead is under
0.01% of one (10-300 ms blocks here), and on a loaded machine nearly every block that long
absorbs other processes' time slices; the host tier times 0.1 ms blocks
(`SIZE_TIERS["host"]`, on purpose: see its comment), most of which run undisturbed. For
`torch.sum` of 2^18 floats: torch's own loop at 5, 10 and 100 calls per block read 17.5-18.4
us, accelkit 17.9-23 us, blocked_autorange (1,000-10,000 calls per block) 26-28 us. One
fault was accelkit's: its blocks called `fn(*args, **kwargs)` over `range`, ~40 ns a call
more than timeit's loop (92 against 53 ns for a no-op; 0.2% of the smallest perf case); now
`fn(*args)` over `itertools.repeat` (54 against 53 ns).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

TOLERANCE = 0.03
"""The issue's target: per-op latency within 3% of the reference timer."""


@dataclass(frozen=True)
class OpCase:
    """One op of the perf suite: a name (as its case id reads), a callable and its args."""

    name: str
    fn: Callable[..., object]
    args: tuple[Any, ...]


@dataclass(frozen=True)
class Row:
    case: str
    accelkit: float
    """Seconds per call: median over rounds of accelkit's medians."""
    references: tuple[float, ...]
    """Seconds per call: median over rounds of each reference method's medians."""
    ratios: tuple[float, ...]
    """accelkit / reference, per reference method."""
    spread: tuple[float, float]
    """Lowest and highest per-round ratio against the first reference."""
    judged: tuple[bool, ...] = ()
    """Per reference: whether it counts for `within` (controls do not); all when empty."""

    @property
    def within(self) -> bool:
        """Within the tolerance of every judged reference."""
        judged = self.judged or (True,) * len(self.ratios)
        return all(abs(r - 1.0) <= TOLERANCE for r, j in zip(self.ratios, judged, strict=True) if j)


def build_row(
    case: str,
    accelkit: Sequence[float],
    references: Sequence[Sequence[float]],
    own: Sequence[Sequence[float] | None] | None = None,
    judged: Sequence[bool] = (),
) -> Row:
    """A table row from per-round medians: `accelkit[i]` and `references[m][i]` of round i.
    `own[m]`, where given, is the other side of reference m measured beside it (accelkit's
    blocks in the pairs references, torch's second measurement in the control): that
    reference's ratio is median(own[m]) / median(references[m]). `judged[m]`: whether
    reference m counts for `Row.within` (all when empty)."""
    if judged and len(judged) != len(references):
        raise ValueError("judged needs one flag per reference")
    own = list(own) if own is not None else [None] * len(references)
    if not accelkit or not references or any(len(r) != len(accelkit) for r in references):
        raise ValueError("every timer needs one median per round")
    if len(own) != len(references) or any(o is not None and len(o) != len(accelkit) for o in own):
        raise ValueError("every timer needs one median per round")
    if min(accelkit) <= 0 or min(min(r) for r in [*references, *(o for o in own if o)]) <= 0:
        raise ValueError("medians must be positive")
    ours = statistics.median(accelkit)
    theirs = tuple(statistics.median(r) for r in references)
    per_round = [a / b for a, b in zip(accelkit, references[0], strict=True)]
    return Row(
        case=case,
        accelkit=ours,
        references=theirs,
        ratios=tuple(
            (statistics.median(o) if o else ours) / t for o, t in zip(own, theirs, strict=True)
        ),
        spread=(min(per_round), max(per_round)),
        judged=tuple(judged),
    )


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:10.2f}"


def format_table(rows: Sequence[Row], reference_names: Sequence[str]) -> str:
    """The printed table: one line per case, then how many are within the tolerance."""
    head = f"{'case':34} {'accelkit us':>11}"
    for name in reference_names:
        head += f" {name + ' us':>16} {'ratio':>6}"
    head += f" {'round ratios':>13}  within {TOLERANCE:.0%}?"
    flags = (rows[0].judged or (True,) * len(reference_names)) if rows else ()
    controls = [name for name, j in zip(reference_names, flags, strict=bool(rows)) if not j]
    lines = [head, "-" * len(head)]
    for row in rows:
        line = f"{row.case[:34]:34} {_us(row.accelkit):>11}"
        for reference, ratio in zip(row.references, row.ratios, strict=True):
            line += f" {_us(reference):>16} {ratio:6.3f}"
        low, high = row.spread
        line += f" {low:5.3f}-{high:5.3f}  {'yes' if row.within else 'NO'}"
        lines.append(line)
    per_reference = ", ".join(
        f"{name} {sum(abs(row.ratios[i] - 1.0) <= TOLERANCE for row in rows)}"
        for i, name in enumerate(reference_names)
    )
    lines.append(f"within {TOLERANCE:.0%} of each reference: {per_reference} of {len(rows)}")
    within = sum(row.within for row in rows)
    judged = "every judged reference" + (f" (not {', '.join(controls)})" if controls else "")
    lines.append(f"{within} of {len(rows)} cases within {TOLERANCE:.0%} of {judged}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# The ops, from the perf suite's sizes


def op_cases(device: str, tier: Any) -> list[OpCase]:
    """The perf cases' ops at `tier`'s sizes, one operand set each."""
    import torch
    import torch.nn.functional as F

    from accelkit.suite.perf.harness import gemm_function, gemm_operands, torch_dtype

    cases: list[OpCase] = []
    shapes = [(n, n, n) for n in tier.gemm_square] + list(tier.gemm_llm)
    for dtype in ("float32", tier.activation_dtype, "bfloat16"):
        for m, n, k in shapes:
            name = f"gemm/{dtype}/{m}x{n}x{k}"
            if any(c.name == name for c in cases):
                continue
            (operands,) = gemm_operands(dtype, m, n, k, device, 1)
            cases.append(OpCase(name, gemm_function(dtype), tuple(operands)))
    act = torch_dtype(tier.activation_dtype)
    for n, k in tier.gemv:
        x = torch.randn(1, k, device=device, dtype=act)
        w = torch.randn(n, k, device=device, dtype=act)
        cases.append(OpCase(f"gemv/{tier.activation_dtype}/1x{n}x{k}", F.linear, (x, w)))
    n = tier.stream_elements
    a, b, c = (torch.randn(n, device=device) for _ in range(3))
    cases.append(OpCase(f"copy/float32/{n}", lambda dst, src: dst.copy_(src), (a, b)))
    cases.append(
        OpCase(f"triad/float32/{n}", lambda x, y, z: torch.add(y, z, alpha=3.0, out=x), (a, b, c))
    )
    cases.append(OpCase(f"sum/float32/{n}", torch.sum, (b,)))
    rows, cols = tier.rows_cols
    x = torch.randn(rows, cols, device=device, dtype=act)
    weight = torch.randn(cols, device=device, dtype=act)
    bias = torch.randn(cols, device=device, dtype=act)
    shape = f"{tier.activation_dtype}/{rows}x{cols}"
    cases.append(OpCase(f"softmax/{shape}", lambda t: torch.softmax(t, dim=-1), (x,)))
    cases.append(
        OpCase(f"layer_norm/{shape}", lambda t: F.layer_norm(t, (cols,), weight, bias), (x,))
    )
    bb, h, s, d = tier.sdpa
    q, kk, v = (torch.randn(bb, h, s, d, device=device, dtype=act) for _ in range(3))
    for causal in (False, True):
        mask = "causal" if causal else "full"

        def attention(q: Any, k: Any, v: Any, causal: bool = causal) -> object:
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        cases.append(
            OpCase(f"sdpa/{tier.activation_dtype}/b{bb}h{h}s{s}d{d}/{mask}", attention, (q, kk, v))
        )
    return cases


# ---------------------------------------------------------------------------------------
# The timers

Reference = Callable[[OpCase, Any], float | tuple[float, float]]
"""Median seconds per call of a case; the second argument is accelkit's latest
`Measurement` of the case (for the reference that reuses its block size)."""


def torch_benchmark_timers(threads: int) -> dict[str, Reference]:
    """torch.utils.benchmark at `threads` intra-op threads, median seconds per call:

    - "blocked": `blocked_autorange()` as torch ships it (min_run_time 0.2 s), measured on
      its own, before or after accelkit;
    - "adaptive": `adaptive_autorange()` (threshold 0.1, max_run_time bounded to 2 s here
      instead of 10, so a noisy machine cannot stretch the run), likewise;
    - "torch A/A" (a control, not judged): `blocked_autorange()` twice in a row, the second
      over the first: how far two measurements of one op by one tool, one after the other,
      differ on this machine; the floor under the two rows above;
    - "sample-pairs": torch's own loop (`Timer.timeit(number)`) at the block size and
      sample count accelkit chose, block by block beside accelkit's own block loop
      (`accelkit.suite.perf.timing.Timer.timeit`, what `blocked_autorange` times each sample
      with), alternating which goes first: both read the same seconds of the machine, so
      the ratio is the loops' and clocks' difference, not the machine's drift;
    - "autorange-pairs": each tool at its own block length, beside the other: torch's
      blocks of the `number_per_run` its `blocked_autorange()` chose (10-300 ms: its timer
      overhead under 0.01% of a block), alternating with as many seconds of accelkit's
      blocks at the block size its measurement chose (0.1 ms on the host tier); each tool's
      median over its own blocks. What differs is everything but the machine's drift.

    The beside references return (accelkit's median, torch's median); the control returns
    (torch's second, torch's first)."""
    from torch.utils import benchmark

    from accelkit.suite.perf.timing import Timer as AccelkitTimer

    def timer(case: OpCase) -> Any:
        return benchmark.Timer(
            stmt="fn(*args)", globals={"fn": case.fn, "args": case.args}, num_threads=threads
        )

    def blocked(case: OpCase, _: Any) -> float:
        return float(timer(case).blocked_autorange().median)

    def torch_aa(case: OpCase, _: Any) -> tuple[float, float]:
        first = blocked(case, None)
        return blocked(case, None), first

    def sample_pairs(case: OpCase, ours: Any) -> tuple[float, float]:
        t, mine = timer(case), AccelkitTimer(case.fn, args=case.args)
        number = ours.number_per_sample
        a: list[float] = []
        b: list[float] = []
        for index in range(len(ours.samples)):
            if index % 2:
                b.append(t.timeit(number).median)
            a.append(mine.timeit(number) / number)
            if not index % 2:
                b.append(t.timeit(number).median)
        return statistics.median(a), statistics.median(b)

    def autorange_pairs(case: OpCase, ours: Any) -> tuple[float, float]:
        t, mine = timer(case), AccelkitTimer(case.fn, args=case.args)
        theirs = t.blocked_autorange()
        number, blocks = theirs.number_per_run, max(AUTORANGE_PAIR_BLOCKS, len(theirs.times))
        own_number = ours.number_per_sample
        a: list[float] = []
        b: list[float] = []

        def torch_block() -> float:
            elapsed = t.timeit(number).median * number
            b.append(elapsed / number)
            return elapsed

        def accelkit_blocks(seconds: float) -> None:
            spent = 0.0
            while spent < seconds:
                elapsed = mine.timeit(own_number)
                a.append(elapsed / own_number)
                spent += elapsed

        for index in range(blocks):
            if index % 2:
                accelkit_blocks(b[-1] * number if b else theirs.median * number)
                torch_block()
            else:
                accelkit_blocks(torch_block())
        return statistics.median(a), statistics.median(b)

    return {
        "blocked": blocked,
        "adaptive": lambda case, _: float(timer(case).adaptive_autorange(max_run_time=2.0).median),
        "torch A/A": torch_aa,
        "sample-pairs": sample_pairs,
        "autorange-pairs": autorange_pairs,
    }


CONTROLS = frozenset({"torch A/A"})
"""References that measure the machine, not accelkit: shown, not judged."""

AUTORANGE_PAIR_BLOCKS = 10
"""At least this many of torch's blocks in an autorange-pairs reference (its
blocked_autorange takes 2-20 in 0.2 s)."""


def do_bench_timers() -> dict[str, Reference]:
    """triton.testing.do_bench (GPU): median seconds per call. Not run on a machine without
    a GPU (see the module docstring)."""
    from triton.testing import do_bench

    def median(case: OpCase, _: Any) -> float:
        return float(do_bench(lambda: case.fn(*case.args), return_mode="median")) / 1e3

    return {"do_bench": median}


def measure_case(
    case: OpCase,
    accelkit: Callable[[OpCase], Any],
    references: dict[str, Reference],
    rounds: int,
) -> Row:
    """`rounds` alternating rounds: accelkit first in even rounds, last in odd ones (the
    same-blocks reference of an odd round takes the block size of the round before)."""
    ours: list[Any] = []
    theirs: dict[str, list[float]] = {name: [] for name in references}
    own: dict[str, list[float]] = {}
    for index in range(rounds):
        if index % 2 == 0:
            ours.append(accelkit(case))
        for name, reference in references.items():
            value = reference(case, ours[-1])
            if isinstance(value, tuple):  # (the other side, the reference)
                own.setdefault(name, []).append(value[0])
                value = value[1]
            theirs[name].append(value)
        if index % 2 == 1:
            ours.append(accelkit(case))
    medians = [m.median for m in ours]
    return build_row(
        case.name,
        medians,
        list(theirs.values()),
        [own.get(name) for name in references],
        [name not in CONTROLS for name in references],
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per case")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="intra-op threads (default: the perf cases' default for the device)",
    )
    parser.add_argument("-k", dest="keyword", default="", help="only cases containing this")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.threads is not None and args.threads < 1:
        parser.error("--threads must be at least 1")

    import torch

    from accelkit.suite.perf.harness import PerfContext
    from accelkit.suite.run.environment import PERF_THREADS_ENV

    if args.threads is not None:
        os.environ[PERF_THREADS_ENV] = str(args.threads)
    gpu = torch.cuda.is_available()
    backend = ("rocm" if torch.version.hip else "cuda") if gpu else "cpu"
    ctx = PerfContext(backend, measure_ceilings=False)
    threads = torch.get_num_threads()  # what PerfContext set: the perf cases' count
    references = do_bench_timers() if gpu else torch_benchmark_timers(threads)
    cases = [c for c in op_cases(ctx.device_type, ctx.tier) if args.keyword in c.name]
    if not cases:
        parser.error(f"no case contains {args.keyword!r}")

    load = os.getloadavg()

    def accelkit(case: OpCase) -> Any:
        return ctx.measure(case.fn, args=case.args)

    print(
        f"device {ctx.device_name} ({ctx.tier.name} tier), torch {torch.__version__}, "
        f"{threads} intra-op threads, {args.rounds} rounds per case; reference: "
        + ("triton.testing.do_bench" if gpu else "torch.utils.benchmark.Timer"),
        flush=True,
    )
    rows = []
    for case in cases:
        rows.append(measure_case(case, accelkit, references, args.rounds))
        print(f"  measured {case.name}", file=sys.stderr, flush=True)
    print(format_table(rows, list(references)))
    print(f"load average at start {load[0]:.2f}, at end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
