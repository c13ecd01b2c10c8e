"""Apple Silicon GPUs through Metal Performance Shaders (macOS only)."""

from __future__ import annotations

import platform
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from accelkit.backends._defaults import BackendDefaults
from accelkit.backends.base import Availability, DeviceInfo, TestImageSpec
from accelkit.containers.run import RunOptions
from accelkit.errors import BadInput
from accelkit.torch_import import torch_import_error, torch_or_none


class MpsBackend(BackendDefaults):
    name = "mps"
    torch_device_type = "mps"
    description = "Apple Silicon GPUs through Metal (macOS)"
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
