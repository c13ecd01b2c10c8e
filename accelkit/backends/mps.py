"""Apple Silicon GPUs through Metal Performance Shaders (macOS only)."""

from __future__ import annotations

import platform
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from accelkit.backends._defaults import BackendDefaults
from accelkit.backends.base import Availability, CapabilityCheck, DeviceInfo, TestImageSpec
from accelkit.backends.peaks import GB_S, DevicePeak, T
from accelkit.containers.run import RunOptions
from accelkit.errors import BadInput
from accelkit.torch_import import torch_import_error, torch_or_none

#: Published ceilings of Apple's devices (`accelkit.backends.peaks`: conventions and
#: units). Order matters: the first matching row wins, so specific names precede general
#: ones.
PEAKS: tuple[DevicePeak, ...] = (
    # Apple newsroom launch posts and tech specs pages. Apple prints GPU FP32 TFLOPS for
    # M1/M2 chips only; for M3/M4 only the unified memory bandwidth. Apple GPUs run FP16
    # at the FP32 rate (no separate matrix units before M5), but only FP32 is printed.
    DevicePeak(
        name="Apple M1 Ultra",
        pattern=r"M1 Ultra",
        flops={"float32": 21 * T},
        memory_bandwidth=800 * GB_S,
        source="Apple newsroom, 'Apple unveils M1 Ultra' (2022-03)",
    ),
    DevicePeak(
        name="Apple M1 Max",
        pattern=r"M1 Max",
        flops={"float32": 10.4 * T},
        memory_bandwidth=400 * GB_S,
        source="Apple newsroom, 'Introducing M1 Pro and M1 Max' (2021-10)",
    ),
    DevicePeak(
        name="Apple M1 Pro",
        pattern=r"M1 Pro",
        flops={"float32": 5.2 * T},
        memory_bandwidth=200 * GB_S,
        source="Apple newsroom, 'Introducing M1 Pro and M1 Max' (2021-10)",
    ),
    DevicePeak(
        name="Apple M1",
        pattern=r"\bM1\b",
        flops={"float32": 2.6 * T},
        memory_bandwidth=68.25 * GB_S,
        source="Apple M1 announcement (2020-11): 2.6 TFLOPS; LPDDR4X-4266 128-bit",
    ),
    DevicePeak(
        name="Apple M2 Ultra",
        pattern=r"M2 Ultra",
        flops={"float32": 27.2 * T},
        memory_bandwidth=800 * GB_S,
        source="Apple newsroom, 'Apple introduces M2 Ultra' (2023-06)",
    ),
    DevicePeak(
        name="Apple M2 Max",
        pattern=r"M2 Max",
        flops={"float32": 13.6 * T},
        memory_bandwidth=400 * GB_S,
        source="Apple newsroom, 'Apple unveils M2 Pro and M2 Max' (2023-01)",
    ),
    DevicePeak(
        name="Apple M2 Pro",
        pattern=r"M2 Pro",
        flops={"float32": 6.8 * T},
        memory_bandwidth=200 * GB_S,
        source="Apple newsroom, 'Apple unveils M2 Pro and M2 Max' (2023-01)",
    ),
    DevicePeak(
        name="Apple M2",
        pattern=r"\bM2\b",
        flops={"float32": 3.6 * T},
        memory_bandwidth=100 * GB_S,
        source="Apple newsroom, 'Apple unveils M2' (2022-06)",
    ),
    DevicePeak(
        name="Apple M3 Ultra",
        pattern=r"M3 Ultra",
        flops={},
        memory_bandwidth=819 * GB_S,
        source="Apple Mac Studio (2025) tech specs",
    ),
    DevicePeak(
        name="Apple M3 Max",
        pattern=r"M3 Max",
        flops={},
        memory_bandwidth=400 * GB_S,
        source="Apple MacBook Pro (Nov 2023) tech specs (40-core GPU; 300 GB/s binned)",
    ),
    DevicePeak(
        name="Apple M3 Pro",
        pattern=r"M3 Pro",
        flops={},
        memory_bandwidth=150 * GB_S,
        source="Apple MacBook Pro (Nov 2023) tech specs",
    ),
    DevicePeak(
        name="Apple M3",
        pattern=r"\bM3\b",
        flops={},
        memory_bandwidth=100 * GB_S,
        source="Apple MacBook Pro (Nov 2023) tech specs",
    ),
    DevicePeak(
        name="Apple M4 Max",
        pattern=r"M4 Max",
        flops={},
        memory_bandwidth=546 * GB_S,
        source="Apple newsroom, M4 Pro and M4 Max (2024-10) (40-core GPU; 410 GB/s binned)",
    ),
    DevicePeak(
        name="Apple M4 Pro",
        pattern=r"M4 Pro",
        flops={},
        memory_bandwidth=273 * GB_S,
        source="Apple newsroom, M4 Pro and M4 Max (2024-10)",
    ),
    DevicePeak(
        name="Apple M4",
        pattern=r"\bM4\b",
        flops={},
        memory_bandwidth=120 * GB_S,
        source="Apple newsroom, iMac/Mac mini with M4 (2024-10)",
    ),
)


def _mps_linalg() -> Availability:
    # The Jacobi-based linalg kernels are native Metal code with no Python surface:
    # they are there whenever MPS is.
    return BACKEND.availability()


class MpsBackend(BackendDefaults):
    name = "mps"
    torch_device_type = "mps"
    description = "Apple Silicon GPUs through Metal (macOS)"
    peaks = PEAKS
    capability_checks: tuple[CapabilityCheck, ...] = (
        CapabilityCheck("mps_linalg", "device", _mps_linalg),
    )
    # PyTorch's cpu index carries the macOS arm64 wheels (with MPS) on every channel.
    torch_wheel_variant = "cpu"
    unsupported_dtypes = MappingProxyType(
        {"float64": "MPS has no float64 (Metal has no double precision)"}
    )

    def availability(self) -> Availability:
        torch = torch_or_none()
        if torch is None:
            return Availability(False, torch_import_error())
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_built():
            return Availability(False, "torch built without MPS (MPS is macOS-only)")
        if not mps.is_available():
            return Availability(False, f"no MPS device (macOS {platform.mac_ver()[0] or '?'})")
        return Availability(
            True, f"torch.backends.mps.is_available() on macOS {platform.mac_ver()[0]}"
        )

    def devices(self) -> list[DeviceInfo]:
        if not self.availability().available:
            return []
        return [DeviceInfo(index=0, name=f"Apple {platform.machine()} GPU")]

    def versions(self) -> dict[str, str | None]:
        return {"macos": platform.mac_ver()[0] or None}

    passthrough_env: tuple[str, ...] = ()

    def container_options(
        self, env: Mapping[str, str] | None = None, *, host_root: Path = Path("/")
    ) -> RunOptions:
        # Containers on macOS run in a Linux VM that cannot reach Metal: nothing to pass.
        return RunOptions()

    def suite_environment(self) -> dict[str, str]:
        return {}

    def rank_device(self, rank: int) -> str:
        # A Mac has one GPU; torch names it "mps" without an index.
        return "mps"

    def test_image(self, arch: str | None = None) -> TestImageSpec:
        raise BadInput("mps runs on the macOS host, without a container: there is no test image")

    def verify_test_image(
        self, doctor: Mapping[str, Any], probes: Mapping[str, str], spec: TestImageSpec
    ) -> list[str]:
        return []


BACKEND = MpsBackend()
