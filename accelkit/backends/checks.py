"""What capability checks share, the probe's (`accelkit.probe.capabilities`) and the backends'
own (`Backend.capability_checks`): torch's version, whether a module is there, torch.distributed
and its c10d backends, and the devices torch.cuda sees.

Every helper imports no more than its answer needs and never raises for a missing piece: it
returns None, False, or an unavailable `Availability` whose reason says what was missing.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType
from typing import Any

from accelkit.backends.base import Availability
from accelkit.torch_import import torch_or_none

NO_DIST = "torch built without distributed support (torch.distributed.is_available() is False)"


def torch_module() -> Any:
    """torch, for a check: the registry runs one only where torch imports (`needs_torch`)."""
    return torch_or_none()


def torch_version(torch: Any) -> str:
    return str(getattr(torch, "__version__", "?"))


def has_module(name: str) -> bool:
    """Whether `name` can be imported, without importing it (parents are imported)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def import_or_none(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def cuda_device_count(torch: Any) -> tuple[int, str]:
    """How many torch `cuda` devices there are (AMD ones on ROCm builds), and why none."""
    if not getattr(torch.version, "cuda", None) and not getattr(torch.version, "hip", None):
        return 0, "torch built without CUDA"
    kind = "ROCm" if getattr(torch.version, "hip", None) else "CUDA"
    if not torch.cuda.is_available():
        return 0, f"no {kind} device"
    return int(torch.cuda.device_count()), ""


def cuda_devices_needed(torch: Any, wanted: int) -> Availability:
    """Available with the devices' names when torch.cuda sees `wanted` devices or more."""
    count, why = cuda_device_count(torch)
    if count >= wanted:
        names = ", ".join(str(torch.cuda.get_device_name(i)) for i in range(count))
        return Availability(True, f"{count} device(s) (torch.cuda.device_count()): {names}")
    if wanted == 1:
        return Availability(False, why)
    return Availability(False, f"needs {wanted} CUDA devices, found {count}")


def distributed(torch: Any) -> Any:
    """torch.distributed, or None when torch was built without it."""
    dist = import_or_none("torch.distributed")
    if dist is None or not dist.is_available():
        return None
    return dist


def c10d_available(dist: Any, name: str) -> bool:
    try:
        return bool(dist.is_backend_available(name))
    except Exception:
        return False


def c10d_backend(name: str) -> Availability:
    """Whether torch.distributed has the c10d backend `name` (gloo, nccl, xccl)."""
    torch = torch_or_none()
    dist = distributed(torch)
    if dist is None:
        return Availability(False, NO_DIST)
    if not c10d_available(dist, name):
        return Availability(
            False, f"c10d backend {name!r} is not available in torch {torch_version(torch)}"
        )
    return Availability(
        True, f"torch {torch_version(torch)}: torch.distributed.is_backend_available({name!r})"
    )
