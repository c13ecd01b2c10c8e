"""The CPU: always there when torch imports."""

from __future__ import annotations

import os
import platform

from accelkit.backends.base import Availability, DeviceInfo, register
from accelkit.probe import torch_import_error, torch_or_none


class CpuBackend:
    name = "cpu"
    torch_device_type = "cpu"
    description = "the host CPU"
    targets: tuple[str, ...] = ()

    def availability(self) -> Availability:
        if torch_or_none() is None:
            return Availability(False, torch_import_error())
        return Availability(True, "")

    def devices(self) -> list[DeviceInfo]:
        return [DeviceInfo(index=0, name=_cpu_model(), extra={"logical_cpus": os.cpu_count()})]

    def versions(self) -> dict[str, str | None]:
        torch = torch_or_none()
        if torch is None:
            return {}
        config = getattr(torch.backends, "cpu", None)
        isa = None
        if config is not None and hasattr(config, "get_cpu_capability"):
            try:
                isa = str(config.get_cpu_capability())
            except Exception:
                isa = None
        return {"cpu_capability": isa}


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


register(CpuBackend())
