"""all_reduce bus bandwidth across message sizes, with 2 ranks.

Timing happens inside the rank processes; each sample is the slowest rank's time. With
several measurement passes the rank processes and their process group are started once
per run and every pass measures inside them (`run_ranks_for_run`). Bus
bandwidth follows nccl-tests: busbw = 2 x (n - 1) / n x bytes / time, comparable across
rank counts. CPU: gloo over loopback (2 processes on one host). Accelerators: the
device's collective backend, when at least 2 devices are visible. Host ranks share one
CPU while they measure (`collectives.shared_cpu`: on a VM, a message between two CPUs
waits for the other one to wake), recorded as the metrics' `rank_cpus`. In an interleaved
A/B pass the ranks take the side's turns, sample by sample (`lockstep.relay`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest

from accelkit.suite.distributed.ranks import run_ranks_for_run
from accelkit.suite.perf.collectives import (
    SAMPLES_PER_MIN_SAMPLE,
    all_reduce_rank,
    shared_cpu,
)
from accelkit.suite.perf.harness import PerfContext
from accelkit.suite.perf.timing import Measurement
from accelkit.suite.session import lockstep

WORLD_SIZE = 2


def _size_label(nbytes: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale}{unit}"
    return f"{nbytes}B"


def test_all_reduce(
    perf: PerfContext,
    capability_table: dict[str, dict[str, Any]],
    record_metric: Callable[..., None],
) -> None:
    # The process-group backend is also the name of the capability that says it works here.
    backend = perf.spec.collective_backend
    if backend is None:
        pytest.skip(f"torch has no collective backend for {perf.backend} devices")
    entry = capability_table.get(backend, {})
    if not entry.get("available"):
        pytest.skip(f"{backend}: {entry.get('reason') or 'unavailable'}")
    if not perf.spec.host_memory:
        import torch

        count = torch.accelerator.device_count()
        if count < WORLD_SIZE:
            pytest.skip(f"all_reduce across devices needs {WORLD_SIZE} devices, found {count}")
    sizes = perf.tier.all_reduce_bytes
    cpu = shared_cpu() if perf.spec.host_memory else None
    with lockstep.relay() as turns:  # the ranks take this side's turns (--ab)
        rank_fn = functools.partial(
            all_reduce_rank,
            backend=perf.backend,
            sizes=sizes,
            samples=SAMPLES_PER_MIN_SAMPLE * perf.tier.timing.min_samples,
            threads=perf.threads,
            turns=turns,
            cpu=cpu,
        )
        per_rank = run_ranks_for_run(
            rank_fn, world_size=WORLD_SIZE, backend=backend, timeout_s=240.0
        )
    factor = 2.0 * (WORLD_SIZE - 1) / WORLD_SIZE
    for nbytes, samples in per_rank[0].items():
        measurement = Measurement(
            samples=tuple(samples),
            number_per_sample=1,
            timer="perf_counter" if perf.spec.host_memory else f"{perf.device_type} events",
        )
        label = _size_label(nbytes)
        params: dict[str, Any] = {"bytes": nbytes, "ranks": WORLD_SIZE, "process_group": backend}
        if cpu is not None:
            params["rank_cpus"] = 1  # both ranks on one CPU (collectives.shared_cpu)
        perf.record_bandwidth(
            record_metric,
            f"bus_bandwidth/{label}",
            measurement,
            factor * nbytes,
            against_memory_peak=False,
            **params,
        )
        perf.record_latency(record_metric, f"latency/{label}", measurement, **params)
