"""AMD ROCm. In torch, ROCm devices are `cuda` devices and `torch.version.hip` is set."""

from __future__ import annotations

from accelkit.backends._tools import tool_output
from accelkit.backends.base import Availability, DeviceInfo, register
from accelkit.backends.cuda import cuda_devices
from accelkit.probe import torch_import_error, torch_or_none

# TheRock's GPU families (the legacy per-family wheel indexes are named after them) and
# the gfx targets each covers. See ../shared/notes/therock.md.
GFX_FAMILIES: dict[str, tuple[str, ...]] = {
    "gfx90a": ("gfx90a",),
    "gfx94X-dcgpu": ("gfx942",),
    "gfx950-dcgpu": ("gfx950",),
    "gfx101X-dgpu": ("gfx1010", "gfx1011", "gfx1012"),
    "gfx103X-all": ("gfx1030", "gfx1031", "gfx1032", "gfx1034", "gfx1035", "gfx1036"),
    "gfx110X-all": ("gfx1100", "gfx1101", "gfx1102", "gfx1103"),
    "gfx115X-all": ("gfx1150", "gfx1151", "gfx1152", "gfx1153"),
    "gfx1151": ("gfx1151",),
    "gfx120X-all": ("gfx1200", "gfx1201"),
}


def family_of(gfx: str) -> str | None:
    """The narrowest TheRock family that contains `gfx`."""
    matches = [name for name, members in GFX_FAMILIES.items() if gfx in members]
    return min(matches, key=lambda name: len(GFX_FAMILIES[name])) if matches else None


class RocmBackend:
    name = "rocm"
    torch_device_type = "cuda"
    description = "AMD GPUs through ROCm (HIP)"
    targets: tuple[str, ...] = tuple(
        sorted({gfx for members in GFX_FAMILIES.values() for gfx in members})
    )

    def availability(self) -> Availability:
        torch = torch_or_none()
        if torch is None:
            return Availability(False, torch_import_error())
        hip = getattr(torch.version, "hip", None)
        if not hip:
            return Availability(False, "torch built without ROCm (HIP)")
        try:
            if not torch.cuda.is_available():
                return Availability(False, f"no ROCm device (torch built for HIP {hip})")
        except Exception as exc:
            return Availability(False, f"HIP initialisation failed: {exc}")
        return Availability(True, "")

    def devices(self) -> list[DeviceInfo]:
        torch = torch_or_none()
        if torch is None or not self.availability().available:
            return []
        devices = cuda_devices(torch, rocm=True)
        driver = tool_output(["rocm-smi", "--showdriverversion", "--csv"])
        if driver:
            version = driver.splitlines()[-1].split(",")[-1].strip()
            devices = [
                DeviceInfo(
                    index=d.index,
                    name=d.name,
                    memory_bytes=d.memory_bytes,
                    arch=d.arch,
                    driver=version,
                    extra=d.extra,
                )
                for d in devices
            ]
        return devices

    def versions(self) -> dict[str, str | None]:
        torch = torch_or_none()
        if torch is None:
            return {}
        return {"hip": getattr(torch.version, "hip", None), "rocm_sdk": _rocm_sdk_version()}


def _rocm_sdk_version() -> str | None:
    # TheRock's pip SDK ships a `rocm_sdk` module; older ROCm installs do not.
    try:
        import rocm_sdk
    except Exception:
        return None
    version = getattr(rocm_sdk, "__version__", None)
    return str(version) if version else None


register(RocmBackend())
