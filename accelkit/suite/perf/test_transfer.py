"""Host-device transfer bandwidth (B/s): host-to-device from pinned and pageable memory,
device-to-host into pinned memory. No peak fraction: the link's ceiling (PCIe, NVLink-C2C)
depends on the host, not the device.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from accelkit.suite.perf.fixtures import tier_of
from accelkit.suite.perf.harness import PerfContext

DIRECTIONS = ("h2d/pinned", "h2d/pageable", "d2h/pinned")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "direction" not in metafunc.fixturenames:
        return
    size = tier_of(metafunc.config).transfer_bytes
    metafunc.parametrize("direction", list(DIRECTIONS), ids=[f"{d}/{size}" for d in DIRECTIONS])


def test_transfer(direction: str, perf: PerfContext, record_metric: Callable[..., None]) -> None:
    if perf.spec.host_memory:
        pytest.skip(
            f"no host-device transfer on the {perf.backend} device: its tensors are in host memory"
        )
    import torch

    size = perf.tier.transfer_bytes
    pinned = direction.endswith("pinned")
    try:
        host = torch.empty(size, dtype=torch.uint8, pin_memory=pinned)
    except RuntimeError as exc:
        pytest.skip(f"pinned host memory unavailable for {perf.device_type}: {exc}")
    host.fill_(1)
    device_buffer = torch.empty(size, dtype=torch.uint8, device=perf.device_type)
    if direction.startswith("h2d"):

        def copy() -> None:
            device_buffer.copy_(host, non_blocking=pinned)
    else:

        def copy() -> None:
            host.copy_(device_buffer, non_blocking=True)

    measurement = perf.measure(copy)
    perf.record_bandwidth(
        record_metric, "bandwidth", measurement, size, against_memory_peak=False, bytes=size
    )
    perf.record_latency(record_metric, "latency", measurement, bytes=size)
