"""One module per accelerator, and the registry that finds them.

The registry is this explicit mapping: adding a backend is adding its module (implementing
`base.Backend`) and one line here (two, with its place in `BUILDS`, if `accelkit build` builds
torch for it; docs/design.md, "Backends", lists every step). Modules import `base`, the
record modules (`peaks`, `checks`) and the private helpers, never each other and never this
package, so there is no import cycle. Nothing outside
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
from accelkit.backends.peaks import Ceilings, DevicePeak, lookup
from accelkit.backends.peaks import table_ceilings as _table_ceilings
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

#: Every backend's device peaks, in the registry's order: one table, the first match winning.
PEAK_TABLE: tuple[DevicePeak, ...] = tuple(row for b in REGISTRY.values() for row in b.peaks)


def device_peak(device_name: str) -> DevicePeak | None:
    """The first row of `PEAK_TABLE` whose pattern matches `device_name` (as torch reports
    it), or None."""
    return lookup(device_name, PEAK_TABLE)


def table_ceilings(device_name: str) -> Ceilings:
    """The published ceilings of `device_name` (empty when no backend lists the device)."""
    return _table_ceilings(device_name, PEAK_TABLE)


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
    "PEAK_TABLE",
    "REGISTRY",
    "Availability",
    "Backend",
    "BuildFlags",
    "Ceilings",
    "DeviceInfo",
    "DevicePeak",
    "TargetFlag",
    "VersionRule",
    "all_backends",
    "device_peak",
    "get",
    "names",
    "table_ceilings",
]
