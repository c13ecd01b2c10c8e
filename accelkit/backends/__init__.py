"""One module per accelerator, and the registry that finds them.

The registry is this explicit mapping: adding a backend is adding its module (implementing
`base.Backend`) and one line here. Modules import `base` and the private helpers, never
each other and never this package, so there is no import cycle. Nothing outside
`accelkit/backends/` branches on a backend's name: it asks the backend.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from types import MappingProxyType

from accelkit.backends import cpu, cuda, mps, rocm, xpu
from accelkit.backends.base import (
    Availability,
    Backend,
    BuildFlags,
    DeviceInfo,
    TargetFlag,
    VersionRule,
)
from accelkit.errors import BadInput

#: Every backend by name, in the order users see in tables and help texts.
REGISTRY: Mapping[str, Backend] = MappingProxyType(
    {
        backend.name: backend
        for backend in (cpu.BACKEND, cuda.BACKEND, rocm.BACKEND, xpu.BACKEND, mps.BACKEND)
    }
)

#: The backends `accelkit build` builds torch for, in the order its help lists them and their
#: options (`BuildFlags`): ROCm first, whose torch only a build makes; the CPU last.
BUILDS: tuple[Backend, ...] = (rocm.BACKEND, cuda.BACKEND, xpu.BACKEND, cpu.BACKEND)


def names() -> list[str]:
    return list(REGISTRY)


def all_backends() -> list[Backend]:
    return list(REGISTRY.values())


def get(name: str, *, flag: str = "--device") -> Backend:
    """The backend called `name`; unknown names are bad input with a hint."""
    try:
        return REGISTRY[name]
    except KeyError:
        close = difflib.get_close_matches(name, list(REGISTRY), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise BadInput(
            f"{flag}: unknown backend {name!r}{hint}; valid: {', '.join(REGISTRY)}"
        ) from None


__all__ = [
    "BUILDS",
    "REGISTRY",
    "Availability",
    "Backend",
    "BuildFlags",
    "DeviceInfo",
    "TargetFlag",
    "VersionRule",
    "all_backends",
    "get",
    "names",
]
