"""Compile latency, measured in a fresh process: `python -m accelkit.suite.perf.compile_worker
DEVICE COUNT ROWS` prints one JSON line {"first_s": float, "samples_s": [float, ...]}.

The process compiles COUNT + 1 graphs of one small function, each with a different static
shape (so each is a new graph with new kernels, and Dynamo's recompile limit is never
hit: `torch._dynamo.reset()` comes before each). The first graph also pays for loading
the compiler stack (imports, worker pools); it is reported apart (`first_s`) and the
others are the samples. Run it with a fresh TORCHINDUCTOR_CACHE_DIR for cold compiles and
again with the same directory for warm ones (FX graph cache hits).
"""

from __future__ import annotations

import json
import sys
from typing import Any


def _graph_fn(x: object) -> object:
    import torch

    assert isinstance(x, torch.Tensor)
    y = torch.sin(x) * 2.0 + torch.cos(x)
    return torch.relu(y).sum(dim=-1) + y.mean()


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
    sys.stdout.write(json.dumps({"first_s": times[0], "samples_s": times[1:]}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
