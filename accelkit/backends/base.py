"""The interface every backend module implements, and the registry that finds them.

Adding a backend means adding one module in this package that calls `register`; nothing
outside `accelkit/backends/` branches on a backend's name.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol

from accelkit.containers.run import RunOptions
from accelkit.errors import BadInput


@dataclass(frozen=True)
class Availability:
    available: bool
    reason: str = ""


@dataclass(frozen=True)
class DeviceInfo:
    """One visible device, as far as torch and the vendor tools can tell."""

    index: int
    name: str
    memory_bytes: int | None = None
    arch: str | None = None  # "sm_90", "gfx942", "pvc", ...
    driver: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TestImageSpec:
    """How a backend's test image is built and what `accelkit setup` checks in it.

    `dockerfile` names a file in the package's dockerfiles/ folder; `build_args` are its
    build arguments (besides BASE_IMAGE and the torch source); `skip_requirements` are
    requirement names of the torch wheel that are not installed with it (GPU runtimes a
    CPU image does not need); `env` is what the image sets for the backend; `probes` are
    named argument lists run inside the finished image, whose output the backend's
    `verify_test_image` reads next to `accelkit doctor --json`.
    """

    dockerfile: str
    default_base_image: str
    build_args: Mapping[str, str] = field(default_factory=dict, hash=False)
    skip_requirements: tuple[str, ...] = ()
    arch: str | None = None
    probes: Mapping[str, tuple[str, ...]] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "build_args", MappingProxyType(dict(self.build_args)))
        object.__setattr__(self, "probes", MappingProxyType(dict(self.probes)))


class Backend(Protocol):
    name: str
    """accelkit's name: cpu, cuda, rocm, xpu, mps."""
    torch_device_type: str
    """torch's device type: ROCm devices are `cuda` devices in torch."""
    description: str
    targets: tuple[str, ...]
    """GPU targets a build or a matrix leg may name (sm_90, gfx942, pvc); empty for none."""

    def availability(self) -> Availability:
        """Whether torch here can run on this backend; never raises."""
        ...

    def devices(self) -> list[DeviceInfo]:
        """The visible devices (empty when unavailable); never raises."""
        ...

    def versions(self) -> dict[str, str | None]:
        """Toolkit/runtime versions compiled into torch and driver versions; never raises."""
        ...

    passthrough_env: tuple[str, ...]
    """Device-selection variables handed to the backend's containers when they are set."""

    def container_options(
        self, env: Mapping[str, str] | None = None, *, host_root: Path = Path("/")
    ) -> RunOptions:
        """What a container needs to reach this backend's devices (never --privileged).

        Reads device nodes and group ids under `host_root` (tests point it at a fake
        tree); device nodes that do not exist are left out, so building the options never
        fails on a machine without the hardware. `env` (default: none) supplies the values of
        `passthrough_env`.
        """
        ...

    def suite_environment(self) -> dict[str, str]:
        """Environment variables the suite's pytest process (and its workers) needs on this
        backend; empty for most. They must be set before the process starts: torch's test
        utilities read some at import time (`PYTORCH_TEST_WITH_ROCM` in
        `torch.testing._internal.common_utils` selects OpInfo's `dtypesIfROCM` tables and ROCm
        skips, as PyTorch's own ROCm CI sets it). The runner adds them to the child's
        environment (`accelkit.suite.runner.suite_environment`), also inside a test image;
        a value the user set in their own environment wins. Never raises."""
        ...

    def test_image(self, arch: str | None = None) -> TestImageSpec:
        """The recipe of this backend's test image; BadInput for an arch it does not know."""
        ...

    def verify_test_image(
        self, doctor: Mapping[str, Any], probes: Mapping[str, str], spec: TestImageSpec
    ) -> list[str]:
        """What is missing in a test image, from `accelkit doctor --json` run inside it and
        the output of `spec.probes`; empty when everything set up is really there."""
        ...


_REGISTRY: dict[str, Backend] = {}


def register(backend: Backend) -> Backend:
    if backend.name in _REGISTRY:
        raise ValueError(f"backend {backend.name!r} registered twice")
    _REGISTRY[backend.name] = backend
    return backend


# The order users see in tables and help texts; backends not listed come after.
_DISPLAY_ORDER = ("cpu", "cuda", "rocm", "xpu", "mps")


def names() -> list[str]:
    return [backend.name for backend in all_backends()]


def all_backends() -> list[Backend]:
    _load_all()

    def rank(backend: Backend) -> int:
        order = _DISPLAY_ORDER
        return order.index(backend.name) if backend.name in order else len(order)

    return sorted(_REGISTRY.values(), key=rank)


def get(name: str, *, flag: str = "--device") -> Backend:
    """The backend called `name`; unknown names are bad input with a hint."""
    _load_all()
    try:
        return _REGISTRY[name]
    except KeyError:
        close = difflib.get_close_matches(name, list(_REGISTRY), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        valid = ", ".join(names())
        raise BadInput(f"{flag}: unknown backend {name!r}{hint}; valid: {valid}") from None


def _load_all() -> None:
    # Importing the modules registers them.
    from accelkit.backends import cpu, cuda, mps, rocm, xpu  # noqa: F401
