"""Intel GPUs through XPU (SYCL / Level Zero)."""

from __future__ import annotations

from accelkit.backends.base import Availability, DeviceInfo, register
from accelkit.probe import torch_import_error, torch_or_none


class XpuBackend:
    name = "xpu"
    torch_device_type = "xpu"
    description = "Intel GPUs through XPU (SYCL, Level Zero)"
    # AOT targets as TORCH_XPU_ARCH_LIST names them: Data Center GPU Max (pvc), Arc B-series
    # (bmg), Lunar Lake (lnl-m), Arrow Lake H (arl-h), Meteor Lake (mtl-h), Arc A-series (dg2).
    targets: tuple[str, ...] = ("pvc", "bmg", "lnl-m", "arl-h", "mtl-h", "dg2")

    def availability(self) -> Availability:
        torch = torch_or_none()
        if torch is None:
            return Availability(False, torch_import_error())
        xpu = getattr(torch, "xpu", None)
        if xpu is None:
            return Availability(False, f"torch {torch.__version__} has no torch.xpu")
        compiled = getattr(xpu, "_is_compiled", None)
        try:
            built = bool(compiled()) if compiled is not None else bool(torch.version.xpu)
        except Exception:
            built = False
        if not built:
            return Availability(False, "torch built without XPU support")
        try:
            if not xpu.is_available():
                return Availability(False, "no XPU device (torch built with XPU support)")
        except Exception as exc:
            return Availability(False, f"XPU initialisation failed: {exc}")
        return Availability(True, "")

    def devices(self) -> list[DeviceInfo]:
        torch = torch_or_none()
        if torch is None or not self.availability().available:
            return []
        out: list[DeviceInfo] = []
        for index in range(int(torch.xpu.device_count())):
            try:
                props = torch.xpu.get_device_properties(index)
            except Exception as exc:
                out.append(DeviceInfo(index=index, name=f"unknown ({exc})"))
                continue
            out.append(
                DeviceInfo(
                    index=index,
                    name=str(props.name),
                    memory_bytes=int(getattr(props, "total_memory", 0)) or None,
                    arch=str(getattr(props, "device_id", "")) or None,
                    driver=str(getattr(props, "driver_version", "")) or None,
                )
            )
        return out

    def versions(self) -> dict[str, str | None]:
        torch = torch_or_none()
        if torch is None:
            return {}
        return {"xpu": getattr(torch.version, "xpu", None)}


register(XpuBackend())
