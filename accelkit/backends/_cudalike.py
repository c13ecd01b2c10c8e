"""What the CUDA and ROCm backends share: both reach their devices through torch.cuda
(ROCm devices are `cuda` devices in torch, with torch.version.hip set)."""

from __future__ import annotations

from typing import Any

from accelkit.backends.base import Availability, CapabilityCheck, DeviceInfo
from accelkit.backends.checks import cuda_devices_needed, torch_module, torch_version


def cuda_devices(torch: Any, *, rocm: bool) -> list[DeviceInfo]:
    """Devices seen through torch.cuda (shared with the ROCm backend)."""
    out: list[DeviceInfo] = []
    try:
        count = int(torch.cuda.device_count())
    except Exception:
        return out
    for index in range(count):
        try:
            props = torch.cuda.get_device_properties(index)
        except Exception as exc:
            out.append(DeviceInfo(index=index, name=f"unknown ({exc})"))
            continue
        if rocm:
            arch = str(getattr(props, "gcnArchName", "") or "").split(":")[0] or None
        else:
            arch = f"sm_{props.major}{props.minor}"
        out.append(
            DeviceInfo(
                index=index,
                name=str(props.name),
                memory_bytes=int(props.total_memory),
                arch=arch,
                extra={
                    "compute_capability": f"{props.major}.{props.minor}",
                    "multi_processor_count": int(getattr(props, "multi_processor_count", 0)),
                },
            )
        )
    return out


def _cuda_graph() -> Availability:
    torch = torch_module()
    if not hasattr(torch.cuda, "CUDAGraph"):
        return Availability(False, f"torch {torch_version(torch)} has no torch.cuda.CUDAGraph")
    return cuda_devices_needed(torch, 1)


#: torch.cuda.CUDAGraph captures CUDA graphs, and HIP graphs on ROCm.
CUDA_GRAPH = CapabilityCheck("cuda_graph", "graph", _cuda_graph)
