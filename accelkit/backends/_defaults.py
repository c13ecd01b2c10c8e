"""What most backends answer the same way: a base class the backend classes inherit, so each
module states only the facts that are its own (`min_toolkit`, `requirements`, ...)."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from accelkit.backends.base import (
    BuildFlags,
    CapabilityCheck,
    CrossTarget,
    GraphCapture,
    TestImageSpec,
    Toolchain,
    VersionRule,
    release_tuple,
)
from accelkit.backends.peaks import DevicePeak
from accelkit.errors import BadInput

#: PyTorch's wheel indexes: https://download.pytorch.org/whl/[nightly/|test/]<variant>.
PYTORCH_WHEEL_INDEX = "https://download.pytorch.org/whl/"
#: Where each channel lives under it: release builds at the top, the others in a folder.
CHANNEL_FOLDERS: Mapping[str, str] = MappingProxyType(
    {"release": "", "test": "test/", "nightly": "nightly/"}
)

_EMPTY: Mapping[str, tuple[str, ...]] = MappingProxyType({})


class BackendDefaults:
    name: str
    torch_device_type: str
    targets: tuple[str, ...] = ()
    build_flags = BuildFlags()
    peaks: tuple[DevicePeak, ...] = ()
    capability_checks: tuple[CapabilityCheck, ...] = ()
    torch_build: str | None = None
    families: Mapping[str, tuple[str, ...]] = _EMPTY
    version_rule: VersionRule | None = None
    collective_backends: tuple[str, ...] = ()
    graph_capture: GraphCapture | None = None
    host_memory = False
    tf32 = False
    unsupported_dtypes: Mapping[str, str] = MappingProxyType({})
    min_toolkit: Mapping[str, tuple[int, int]] = MappingProxyType({})
    """target -> the first toolkit release (major, minor) that can compile for it."""
    requirements: Mapping[str | None, tuple[str, ...]] = MappingProxyType({})
    """target (None: every leg) -> capabilities a leg on it must have."""
    torch_wheel_variant: str | None = None
    """The folder of PyTorch's indexes with this backend's wheels (cpu, xpu); None: none."""

    @property
    def collective_backend(self) -> str | None:
        return self.collective_backends[0] if self.collective_backends else None

    def family_of(self, target: str) -> str | None:
        if not self.families:
            return None
        if target in self.families:
            return target
        holding = [name for name, members in self.families.items() if target in members]
        return min(holding, key=lambda name: len(self.families[name])) if holding else None

    def check_target(
        self, target: str, version: str | None = None, *, flag: str, families: bool = True
    ) -> str:
        prefix = f"{flag}: " if flag else ""
        valid = tuple(dict.fromkeys((*self.targets, *(self.families if families else ()))))
        if not valid:
            raise BadInput(f"{prefix}the {self.name} backend has no GPU targets (got {target!r})")
        if target not in valid:
            close = difflib.get_close_matches(target, valid, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise BadInput(
                f"{prefix}{target!r} is not a {self.name} target{hint}; valid: {', '.join(valid)}"
            )
        needed = self.min_toolkit.get(target)
        if needed is not None and version is not None and release_tuple(version) < needed:
            what = self.version_rule.what if self.version_rule else "toolkit"
            raise BadInput(
                f"{prefix}target {target} needs {what} >= {needed[0]}.{needed[1]}, got {version}"
            )
        return target

    def test_image(self, arch: str | None = None) -> TestImageSpec:
        raise NotImplementedError

    def test_base_image(self, version: str | None = None) -> str:
        return self.test_image().default_base_image

    def wheel_variant(self, version: str | None) -> str | None:
        """The index folder for toolkit `version`; most backends have one for every version."""
        return self.torch_wheel_variant

    def torch_index(self, channel: str, version: str | None = None) -> str | None:
        if channel not in CHANNEL_FOLDERS:
            raise BadInput(
                f"unknown torch channel {channel!r}; valid: {', '.join(CHANNEL_FOLDERS)}"
            )
        variant = self.wheel_variant(version)
        if variant is None:
            return None
        return f"{PYTORCH_WHEEL_INDEX}{CHANNEL_FOLDERS[channel]}{variant}"

    def required_capabilities(self, target: str | None) -> tuple[str, ...]:
        every = self.requirements.get(None, ())
        own = self.requirements.get(target, ()) if target is not None else ()
        return tuple(dict.fromkeys((*every, *own)))

    def rank_device(self, rank: int) -> str:
        return f"{self.torch_device_type}:{rank}"

    def cross_target(self, target: str) -> CrossTarget | None:
        self.check_target(target, flag="--target", families=False)
        return None

    def cross_toolchain(self, cross: CrossTarget, environ: Mapping[str, str]) -> Toolchain:
        problem = f"the {self.name} backend has no compiler for {cross.target} without a device"
        return Toolchain("none", "unknown", "", cross.target, (), {}, problem)

    def binary_target(self, binary: bytes) -> str | None:
        return None

    def host_has_device(self, host_root: Path = Path("/")) -> bool:
        return False
