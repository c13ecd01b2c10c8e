"""NVIDIA CUDA. ROCm builds also answer torch.cuda, so this backend requires hip unset."""

from __future__ import annotations

from typing import Any

from accelkit.backends._tools import tool_output
from accelkit.backends.base import Availability, DeviceInfo, register
from accelkit.probe import torch_import_error, torch_or_none


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


class CudaBackend:
    name = "cuda"
    torch_device_type = "cuda"
    description = "NVIDIA GPUs through CUDA"
    # Compute capabilities as Inductor/nvcc name them; sm_107 is Rubin (CUDA >= 13.4).
    targets: tuple[str, ...] = (
        "sm_75",
        "sm_80",
        "sm_86",
        "sm_89",
        "sm_90",
        "sm_100",
        "sm_103",
        "sm_107",
        "sm_110",
        "sm_120",
        "sm_121",
    )

    def availability(self) -> Availability:
        torch = torch_or_none()
        if torch is None:
            return Availability(False, torch_import_error())
        if getattr(torch.version, "hip", None):
            return Availability(False, "torch is a ROCm build (use --device rocm)")
        if not getattr(torch.version, "cuda", None):
            return Availability(False, "torch built without CUDA")
        try:
            if not torch.cuda.is_available():
                return Availability(
                    False, f"no CUDA device (torch built for CUDA {torch.version.cuda})"
                )
        except Exception as exc:
            return Availability(False, f"CUDA initialisation failed: {exc}")
        return Availability(True, "")

    def devices(self) -> list[DeviceInfo]:
        torch = torch_or_none()
        if torch is None or not self.availability().available:
            return []
        devices = cuda_devices(torch, rocm=False)
        driver = tool_output(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
        if driver:
            drivers = driver.splitlines()
            devices = [
                DeviceInfo(
                    index=d.index,
                    name=d.name,
                    memory_bytes=d.memory_bytes,
                    arch=d.arch,
                    driver=drivers[min(d.index, len(drivers) - 1)].strip(),
                    extra=d.extra,
                )
                for d in devices
            ]
        return devices

    def versions(self) -> dict[str, str | None]:
        torch = torch_or_none()
        if torch is None:
            return {}
        cudnn = None
        try:
            if torch.backends.cudnn.is_available():
                cudnn = str(torch.backends.cudnn.version())
        except Exception:
            cudnn = None
        arch_list = None
        try:
            arch_list = " ".join(torch.cuda.get_arch_list()) or None
        except Exception:
            arch_list = None
        return {
            "cuda": getattr(torch.version, "cuda", None),
            "cudnn": cudnn,
            "cuda_arch_list": arch_list,
        }


register(CudaBackend())
