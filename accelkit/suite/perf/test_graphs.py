"""Graph replay vs eager launches: a chain of tiny in-place kernels, launched one by one
(eager) and replayed from a captured CUDA/XPU graph, timed interleaved. The difference is
launch overhead; the speedup's samples are per-round ratios.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from accelkit.suite.perf.harness import PerfContext
from accelkit.suite.perf.timing import measure_interleaved


def test_replay_overhead(
    perf: PerfContext,
    capability_table: dict[str, dict[str, Any]],
    record_metric: Callable[..., None],
) -> None:
    api = perf.spec.graph_capture
    if api is None:
        pytest.skip(f"the {perf.backend} device has no graph replay in torch")
    entry = capability_table.get(api.capability, {})
    if not entry.get("available"):
        pytest.skip(f"{api.capability}: {entry.get('reason') or 'unavailable'}")
    import torch

    module = getattr(torch, perf.device_type)
    ops, elements = perf.tier.graph_chain
    buffer = torch.zeros(elements, device=perf.device_type)

    def chain() -> None:
        for _ in range(ops):
            buffer.add_(1.0)

    # Warm up on a side stream before capture, as torch.cuda.graph's documentation asks.
    side = module.Stream()
    side.wait_stream(module.current_stream())
    with module.stream(side):
        chain()
    module.current_stream().wait_stream(side)
    graph = getattr(module, api.graph_class)()
    with module.graph(graph):
        chain()
    timers = {"eager": perf.timer(chain), "replay": perf.timer(graph.replay)}
    rounds = max(perf.tier.timing.min_samples, perf.tier.timing.interleaved_rounds)
    measured = measure_interleaved(
        timers, rounds=rounds, min_block_time=perf.tier.timing.min_block_time
    )
    for name, measurement in measured.items():
        perf.record_latency(record_metric, name, measurement, kernels=ops)
    perf.record_ratio(record_metric, "speedup", measured["eager"], measured["replay"], kernels=ops)
