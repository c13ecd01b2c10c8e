"""Canaries: a small fixed calibration set measured in every perf pass, first.

They measure the machine, not the build: `accelkit compare` judges the other metrics
against them (`accelkit.results.canary`; the method and its calibration are in
`accelkit.results.stats`'s docstring), so a machine that got slower between two runs is not
reported as a build that got slower.

- `host/copy`: a 1 MiB float32 copy (numpy `copyto`), B/s: the host's memory system; its
  buffers rotate through 4x the last-level cache, as the memory cases' do
  (`accelkit.suite.perf.rotation`), so it reads memory, not a cache;
- `host/gemm`: a 128^3 float32 matrix product (numpy `matmul` into a preallocated output),
  FLOP/s: the host's cores;
- on a device outside host memory (the backend's `host_memory` fact), `device/copy` and
  `device/gemm`: the same two on the device, at the size tier's stream size and square GEMM
  size (at most 4096), through torch.

The host canaries run through numpy, not torch: a change in the torch build under test
cannot move them. The device canaries can only reach the device through torch; a build
that changes its copy or float32 GEMM kernels moves them too (compare then calls that
kind's metrics environment-shifted, never regressed: interleave the builds with
`accelkit test --ab` to judge them). Sizes are fixed per device tier; all four are timed by
`PerfContext.measure`, the timing code of every case. Each metric carries `canary` (the
kind it calibrates: "memory" or "compute") and `scope` ("host" or "device"); the other
cases' throughput metrics carry `bound` and `scope` (`PerfContext.record_*`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from accelkit.suite.perf.fixtures import backend_of
from accelkit.suite.perf.harness import SIZE_TIERS, PerfContext
from accelkit.suite.perf.rotation import memory_rotation_count, rotating_sets

HOST_COPY_ELEMENTS = 1 << 18
HOST_GEMM_N = 128
DEVICE_GEMM_MAX_N = 4096
HOST_CANARIES = ("host/copy", "host/gemm")
DEVICE_CANARIES = ("device/copy", "device/gemm")
CANARY_PREFIX = "perf/canary/"
"""Case ids of the canaries start with this (`accelkit.suite.session.caseid`)."""


def canaries_for(host_memory: bool) -> tuple[str, ...]:
    """The canaries of a device: the host's, plus the device's where it has its own memory."""
    return HOST_CANARIES if host_memory else HOST_CANARIES + DEVICE_CANARIES


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "canary" not in metafunc.fixturenames:
        return
    from accelkit import backends

    host_memory = backends.get(backend_of(metafunc.config)).host_memory
    names = list(canaries_for(host_memory))
    metafunc.parametrize("canary", names, ids=names)


def _host_timing() -> dict[str, Any]:
    options = SIZE_TIERS["host"].timing
    return {
        "min_samples": options.min_samples,
        "max_samples": options.max_samples,
        "min_run_time": options.min_run_time,
        "max_run_time": options.max_run_time,
        "min_block_time": options.min_block_time,
    }


def test_canary(canary: str, perf: PerfContext, record_metric: Callable[..., None]) -> None:
    scope, kind = canary.split("/")
    if scope == "host":
        import numpy as np

        rng = np.random.default_rng(0)
        if kind == "copy":
            n = HOST_COPY_ELEMENTS
            first = (np.empty(n, np.float32), rng.standard_normal(n, dtype=np.float32))
            sets = rotating_sets(first, memory_rotation_count(2 * 4 * n, SIZE_TIERS["host"]))
            measurement = perf.measure(np.copyto, arg_sets=sets, on_host=True, **_host_timing())
            bytes_moved = 2 * 4 * n
        else:
            n = HOST_GEMM_N
            a, b = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
            out = np.empty((n, n), np.float32)

            def product() -> None:
                np.matmul(a, b, out=out)

            measurement = perf.measure(product, on_host=True, **_host_timing())
    else:
        import torch

        device = perf.device_type
        if kind == "copy":
            n = perf.tier.stream_elements
            src = torch.randn(n, device=device)
            dst = torch.empty_like(src)
            measurement = perf.measure(dst.copy_, args=(src,))
            bytes_moved = 2 * 4 * n
        else:
            n = min(perf.tier.gemm_square[0], DEVICE_GEMM_MAX_N)
            x = torch.randn(n, n, device=device)
            y = torch.randn(n, n, device=device)
            measurement = perf.measure(torch.mm, args=(x, y))
    memory = kind == "copy"
    value_name = "bandwidth" if memory else "flops"
    metric = (
        measurement.bandwidth_metric(bytes_moved)
        if memory
        else measurement.flops_metric(2.0 * n**3)
    )
    perf.emit(
        record_metric,
        value_name,
        metric,
        measurement,
        canary="memory" if memory else "compute",
        scope=scope,
        size=n,
    )
