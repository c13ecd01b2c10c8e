"""Compile latency, measured in a fresh process: `python -m accelkit.suite.perf.compile_worker
DEVICE COUNT ROWS` prints one JSON line {"first_s": float, "samples_s": [float, ...],
"warm_s": [float, ...], "cold_cache_hits": int, "warm_cache_hits": int}.

The process compiles COUNT + 1 graphs of one small function, each with a different static
shape (so each is a new graph with new kernels, and Dynamo's recompile limit is never
hit: `torch._dynamo.reset()` comes before each). The first graph also pays for loading
the compiler stack (imports, worker pools); it is reported apart (`first_s`) and the
others are the cold samples (`samples_s`): run it with a fresh, empty
TORCHINDUCTOR_CACHE_DIR. Then the same COUNT graphs are compiled again, each after a
reset: Dynamo traces again and Inductor finds the graph in its caches, the warm samples
(`warm_s`). The FX graph cache hits of each phase come along, so the caller can check
that cold was cold (0 hits) and warm was warm (one per graph).

Warm used to be a second fresh process on the same cache directory; it is measured in the
same process now (one interpreter start, torch import and compiler-stack load less per
run). The difference: a fresh process also pays for loading each cached kernel's module,
a few milliseconds against the hundreds a warm compile takes.
"""

from __future__ import annotations

import gc
import json
import sys
from typing import Any


def _graph_fn(x: object) -> object:
    import torch

    assert isinstance(x, torch.Tensor)
    y = torch.sin(x) * 2.0 + torch.cos(x)
    return torch.relu(y).sum(dim=-1) + y.mean()


def _cache_hits() -> int:
    """FX graph cache hits of this process so far."""
    from torch._dynamo.utils import counters

    return int(counters["inductor"]["fxgraph_cache_hit"])


def main(argv: list[str]) -> int:
    device, count, rows = argv[0], int(argv[1]), int(argv[2])
    import torch

    from accelkit.suite.timing import HostClockTimer, device_synchronize

    # Host wall time including the device finishing the first call: what a user waits.
    timer = HostClockTimer(synchronize=device_synchronize(device))
    times: list[float] = []
    for index in range(count + 1):
        torch._dynamo.reset()
        x = torch.randn(rows + index, 64, device=device)
        compiled = torch.compile(_graph_fn, dynamic=False)

        def first_call(compiled: Any = compiled, x: Any = x) -> None:
            compiled(x)

        times.append(timer.time_block(first_call))
    cold_hits = _cache_hits()
    # Warm: the same graphs again in this process, after a reset, so Dynamo traces again
    # and Inductor finds each graph in its caches (FX graph / AOT autograd cache hits).
    warm: list[float] = []
    for index in range(1, count + 1):
        torch._dynamo.reset()
        x = torch.randn(rows + index, 64, device=device)
        compiled = torch.compile(_graph_fn, dynamic=False)

        def warm_call(compiled: Any = compiled, x: Any = x) -> None:
            compiled(x)

        warm.append(timer.time_block(warm_call))
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
