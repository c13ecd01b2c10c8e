"""Compile latency, measured in a fresh process: `python -m accelkit.suite.perf.compile_worker
DEVICE COUNT ROWS [--threads N] [--turns HANDOFF]` prints one JSON line {"first_s": float,
"samples_s": [float, ...], "warm_s": [float, ...], "cold_cache_hits": int,
"warm_cache_hits": int}.

The process compiles COUNT + 1 graphs of one small function, each with a different static
shape (so each is a new graph with new kernels, and Dynamo's recompile limit is never
hit: `torch._dynamo.reset()` comes before each). The first graph also pays for loading
the compiler stack (imports, worker pools); it is reported apart (`first_s`) and the
others are the cold samples (`samples_s`): run it with a fresh, empty
TORCHINDUCTOR_CACHE_DIR. Then the same COUNT graphs are compiled again, `WARM_REPEATS`
times each (graph by graph), each after a reset: Dynamo traces again and Inductor finds
the graph in its caches, the warm samples (`warm_s`). The FX graph cache hits of each
phase come along, so the caller can check that cold was cold (0 hits) and warm was warm
(one per warm compile).

Warm used to be a second fresh process on the same cache directory; it is measured in the
same process now (one interpreter start, torch import and compiler-stack load less per
run). The difference: a fresh process also pays for loading each cached kernel's module,
a few milliseconds against the hundreds a warm compile takes.

`--threads N`: torch's intra-op threads, the perf cases' count (`accelkit test --threads`).
`--turns HANDOFF` (`lockstep.Handoff.encode`, from the case's `lockstep.relay()` in an
interleaved A/B pass): every compile, the first included, takes one of the side's turns
and runs pinned to the CPU both sides sample on (`lockstep.pinned`; with one thread the
compile and the C++ compiler it starts run there), so sample k of one side is taken right
after sample k of the other, not beside it. Measured before this, in a 10-pair A/A run,
the two sides compiled at the same time on different CPUs and read 0.77-0.83 s and
0.97-1.01 s for the same graphs.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys

from accelkit.suite.session import lockstep

WARM_REPEATS = 5
"""Warm compiles of each graph: a warm compile takes tens of milliseconds, and one sample
of it moves by 10-15% from one to the next."""


def _graph_fn(x: object) -> object:
    import torch

    assert isinstance(x, torch.Tensor)
    y = torch.sin(x) * 2.0 + torch.cos(x)
    return torch.relu(y).sum(dim=-1) + y.mean()


def _cache_hits() -> int:
    """FX graph cache hits of this process so far."""
    from torch._dynamo.utils import counters

    return int(counters["inductor"]["fxgraph_cache_hit"])


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m accelkit.suite.perf.compile_worker")
    parser.add_argument("device")
    parser.add_argument("count", type=int)
    parser.add_argument("rows", type=int)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--turns", type=lockstep.Handoff.decode, default=None)
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = _arguments(argv)
    device, count, rows = args.device, args.count, args.rows
    import torch

    from accelkit.suite.perf.timing import HostClockTimer, device_synchronize

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    # Host wall time including the device finishing the first call: what a user waits.
    timer = HostClockTimer(synchronize=device_synchronize(device))
    warm_shapes = [shape for shape in range(1, count + 1) for _ in range(WARM_REPEATS)]

    def compile_once(shape: int, enough: bool) -> float:
        torch._dynamo.reset()
        x = torch.randn(rows + shape, 64, device=device)
        compiled = torch.compile(_graph_fn, dynamic=False)

        def first_call() -> None:
            compiled(x)

        # A fixed count: enough once the last compile is next (lockstep.turn).
        lockstep.turn(enough=enough)
        with lockstep.pinned():
            return timer.time_block(first_call)

    with lockstep.taking_turns(args.turns):
        times = [
            compile_once(shape, not warm_shapes and shape == count) for shape in range(count + 1)
        ]
        cold_hits = _cache_hits()
        # Warm: the same graphs again in this process, after a reset, so Dynamo traces
        # again and Inductor finds each graph in its caches (FX graph / AOT autograd cache
        # hits).
        warm = [
            compile_once(shape, index == len(warm_shapes) - 1)
            for index, shape in enumerate(warm_shapes)
        ]
    result = {
        "first_s": times[0],
        "samples_s": times[1:],
        "warm_s": warm,
        "cold_cache_hits": cold_hits,
        "warm_cache_hits": _cache_hits() - cold_hits,
    }
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    # Nothing is left to do but exit: spare it the last collection over torch, Dynamo and
    # Inductor (torch_import.freeze_loaded).
    gc.freeze()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
