"""Apple Silicon GPUs through Metal Performance Shaders (macOS only)."""

from __future__ import annotations

import platform

from accelkit.backends.base import Availability, DeviceInfo, register
from accelkit.probe import torch_import_error, torch_or_none


class MpsBackend:
    name = "mps"
    torch_device_type = "mps"
    description = "Apple Silicon GPUs through Metal (macOS)"
    targets: tuple[str, ...] = ()

    def availability(self) -> Availability:
        torch = torch_or_none()
        if torch is None:
            return Availability(False, torch_import_error())
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_built():
            return Availability(False, "torch built without MPS (MPS is macOS-only)")
        if not mps.is_available():
            return Availability(False, f"no MPS device (macOS {platform.mac_ver()[0] or '?'})")
        return Availability(True, "")

    def devices(self) -> list[DeviceInfo]:
        if not self.availability().available:
            return []
        return [DeviceInfo(index=0, name=f"Apple {platform.machine()} GPU")]

    def versions(self) -> dict[str, str | None]:
        return {"macos": platform.mac_ver()[0] or None}


register(MpsBackend())
