"""The interface every backend module implements, and the records it is described with.

A backend module (cpu.py, cuda.py, ...) holds every fact about its accelerator: its torch
device type, targets and GPU families, how its toolkit version is spelled and which toolkit
each target needs, its collective backend, graph-capture API, dtypes, required capabilities,
container options and test image. The registry (`accelkit/backends/__init__.py`) is an
explicit mapping of the modules' instances; this module imports none of them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol

from accelkit.backends.peaks import DevicePeak
from accelkit.containers.run import RunOptions
from accelkit.errors import BadInput
from accelkit.options import Opt


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
class VersionRule:
    """How a backend's toolkit version is spelled (`backend_version` in a matrix, `--rocm-version`
    or `--cuda-version` of `accelkit build`): one rule, used by every command that takes it."""

    pattern: re.Pattern[str]
    example: str
    what: str
    """What the version is of, for messages: "ROCm SDK version"."""
    expected: str = ""
    """The accepted spellings, for messages: "X.Y or X.Y.Z"."""

    def problem(self, value: str) -> str | None:
        """None when `value` is spelled right, else what was expected."""
        if self.pattern.fullmatch(value):
            return None
        spelled = f" ({self.expected})" if self.expected else ""
        return f"expected a {self.what} like {self.example!r}{spelled}"

    def check(self, value: str, *, flag: str) -> str:
        """`value` unchanged, or BadInput naming `flag` and the accepted spellings."""
        problem = self.problem(value)
        if problem is not None:
            raise BadInput(f"{flag}: malformed {self.what} {value!r}: {problem}")
        return value


@dataclass(frozen=True)
class TargetFlag:
    """How `accelkit build` takes a backend's GPU targets: one option, comma separated
    (`--gfx gfx942,gfx950`). Backends may share one (`--arch`: CUDA and XPU); the option's
    help then names each ("CUDA or XPU targets, comma separated (sm_107; pvc,bmg).")."""

    flag: str
    owner: str
    """Who names targets with it, in its help and messages: "ROCm"."""
    example: str
    """Targets as the option takes them: "gfx942,gfx950"."""
    noun: str = "targets"
    """What the values are, in its help: "GPU targets"."""

    @property
    def name(self) -> str:
        """The option's name (and its key in `BuildRequest.target_options`): "gfx"."""
        return self.flag.removeprefix("--").replace("-", "_")


@dataclass(frozen=True)
class BuildFlags:
    """The options of `accelkit build` a backend declares. `accelkit.wheels.request` assembles
    the command's options from every backend's, and its `BuildRequest` carries their values
    as data (`toolkit`, `target_options`), so a new toolkit or target flag is a change to the
    backend module alone."""

    toolkit: Opt | None = None
    """The option that names its toolkit version (--rocm-version); a build takes one at most."""
    targets: TargetFlag | None = None
    """The option that names its GPU targets (--gfx, --arch)."""
    family: Opt | None = None
    """An option that names a family of targets (--family: a legacy per-family index)."""


#: Where a backend's capability shows among the probe's (doctor's rows, the results file's
#: table): with the graph-capture checks, the Inductor targets, the GEMM backends, the c10d
#: backends, or last (a feature of the device itself).
CHECK_SECTIONS = ("graph", "target", "gemm", "collective", "device")


@dataclass(frozen=True)
class CapabilityCheck:
    """A capability only this backend's devices have (cuda_graph, gfx_in_arch_list), and its
    check, which `accelkit.probe.capabilities` registers in its `section` (`CHECK_SECTIONS`).

    A check named after one of the backend's targets (sm_107) says whether torch knows the
    target; the probe adds whether triton can compile for it here. A "collective" check named
    after one of the backend's `collective_backends` replaces the probe's plain c10d check of
    that name (nccl2's whole registration). The check runs only where torch imports.
    """

    name: str
    section: str
    check: Callable[[], Availability]

    def __post_init__(self) -> None:
        if self.section not in CHECK_SECTIONS:
            raise ValueError(f"capability {self.name}: unknown section {self.section!r}")


def release_tuple(version: str) -> tuple[int, int]:
    """(major, minor) of a version that starts X.Y: 13.4.1 -> (13, 4), 7.14.0a2026 -> (7, 14)."""
    match = re.match(r"(\d+)\.(\d+)", version)
    if match is None:
        raise ValueError(f"not a version: {version!r}")
    return int(match.group(1)), int(match.group(2))


@dataclass(frozen=True)
class GraphCapture:
    """How a backend captures and replays work as a graph in torch."""

    capability: str
    """The capability that says whether it works here (cuda_graph, xpu_graph)."""
    graph_class: str
    """The graph class in torch.<device type> (CUDAGraph, XPUGraph); `torch.<type>.graph(g)`
    captures into it."""


@dataclass(frozen=True)
class TestImageSpec:
    """How a backend's test image is built and what `accelkit setup` checks in it.

    `dockerfile` names a file in the package's dockerfiles/ folder; `build_args` are its
    build arguments (besides BASE_IMAGE and the torch source); `skip_requirements` are
    requirement names of the torch wheel that are not installed with it (GPU runtimes a
    CPU image does not need); `env` is what the image sets for the backend; `probes` are
    named argument lists run inside the finished image, whose output the backend's
    `verify_test_image` reads next to `accelkit doctor --json`.

    `requirements` are installed into the image after torch (a CUDA toolkit wheel whose
    ptxas knows the target), and `links` make stable paths to files they bring
    (`/opt/venv/bin/ptxas` -> the glob `nvidia/cu*/bin/ptxas` under the venv's
    site-packages), so the Dockerfile can point triton at them. `checks` are commands that
    must succeed in the image with no device (the compile-only cases for `arch`);
    `device_checks` must succeed with the backend's container options, and run only on a
    host that has the device (the graph-capture smoke cases).

    `sdk_requirements` are distribution names of the torch wheel's requirements that only
    the backend SDK's own index serves (TheRock's `rocm`): a wheel requiring one is set up
    with its build's manifest beside it, which names that index (accelkit/wheels/manifest.py).
    """

    dockerfile: str
    default_base_image: str
    build_args: Mapping[str, str] = field(default_factory=dict, hash=False)
    skip_requirements: tuple[str, ...] = ()
    arch: str | None = None
    probes: Mapping[str, tuple[str, ...]] = field(default_factory=dict, hash=False)
    requirements: tuple[str, ...] = ()
    links: Mapping[str, str] = field(default_factory=dict, hash=False)
    checks: Mapping[str, tuple[str, ...]] = field(default_factory=dict, hash=False)
    device_checks: Mapping[str, tuple[str, ...]] = field(default_factory=dict, hash=False)
    sdk_requirements: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("build_args", "probes", "links", "checks", "device_checks"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))


@dataclass(frozen=True)
class IsaCheck:
    """Instructions a kernel's text assembly (PTX, AMDGCN) must hold on one target."""

    pattern: str
    """A regular expression searched in the assembly."""
    what: str
    """What the instructions are, for messages: "tcgen05.mma (5th-generation tensor cores)"."""


@dataclass(frozen=True)
class FakeDevice:
    """What Inductor is shown in place of a GPU that is not here, so that it generates the
    Triton kernels it would generate for the target (`accelkit.suite.crosscompile.inductor`).

    `torch_build` names the `torch.version` attribute a torch build that can generate for
    the device sets ("cuda"); `properties` are what `torch.<device_type>.get_device_
    properties` would answer on the GPU (name, major, minor, multi_processor_count, ...).
    """

    device_type: str
    torch_build: str
    properties: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "properties", MappingProxyType(dict(self.properties)))


@dataclass(frozen=True)
class CrossTarget:
    """How triton compiles kernels for one GPU target on a machine without that GPU (and
    without its driver), and what the result must show (`accelkit test --compile-only`).

    `isa` maps the checks a kernel may ask for ("mma", "mma_fp8", "tma",
    "warp_specialize") to the instructions that prove them on this target; a check the
    target has no entry for is not made (sm_75: triton emits FMA, not MMA, for `tl.dot`).
    `lacks` maps corpus features ("fp8", "tma", "warp_specialize") to why the target has
    none: kernels needing them are skipped with that reason.
    """

    target: str
    """accelkit's name: sm_107, gfx942."""
    triton_backend: str
    """`triton.backends.compiler.GPUTarget`'s backend: cuda, hip."""
    triton_arch: int | str
    """`GPUTarget`'s arch: 107, "gfx942"."""
    warp_size: int
    assembly: str
    """The key of the text assembly in a compiled kernel's `.asm`: ptx, amdgcn."""
    binary: str
    """The key of the binary: cubin, hsaco."""
    assembly_target: str
    """A regular expression the assembly matches when it is for this target."""
    isa: Mapping[str, IsaCheck] = field(default_factory=dict, hash=False)
    fp8_type: str | None = None
    """triton's fp8 type that this target's matrix instructions take (fp8e4nv, fp8e4b8)."""
    lacks: Mapping[str, str] = field(default_factory=dict, hash=False)
    fake_device: FakeDevice | None = None
    """The device Inductor generates this target's kernels for here; None: it cannot (then
    `lacks["inductor"]` says why)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "isa", MappingProxyType(dict(self.isa)))
        object.__setattr__(self, "lacks", MappingProxyType(dict(self.lacks)))


@dataclass(frozen=True)
class Toolchain:
    """The compiler back end triton uses for a target, as found here (ptxas for NVIDIA):
    what a compile-only run checks first and records."""

    name: str
    version: str
    """Its release ("13.5"), or "unknown" when it could not be asked."""
    path: str
    target_name: str
    """The GPU name it must accept ("sm_107a": triton compiles sm_90 and newer as the
    arch-specific variant)."""
    knows: tuple[str, ...] | None
    """The GPU names it accepts, as it lists them; None when it has no list to ask (then only
    a compile tells)."""
    environment: Mapping[str, str] = field(default_factory=dict, hash=False)
    """Variables that point triton at it (to set in the suite's processes)."""
    problem: str | None = None
    """One line: why triton cannot compile for the target with it; None when it can."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "environment", MappingProxyType(dict(self.environment)))

    def describe(self) -> str:
        return f"{self.name} {self.version} ({self.path})"


class Backend(Protocol):
    name: str
    """accelkit's name: cpu, cuda, rocm, xpu, mps."""
    torch_device_type: str
    """torch's device type: ROCm devices are `cuda` devices in torch."""
    description: str
    targets: tuple[str, ...]
    """GPU targets a build or a matrix leg may name (sm_90, gfx942, pvc); empty for none."""
    build_flags: BuildFlags
    """The options of `accelkit build` that name its toolkit version and its targets."""
    peaks: tuple[DevicePeak, ...]
    """Published FLOP/s and bandwidth of its devices, the first match winning (the perf
    suite's ceilings: `accelkit.backends.table_ceilings`); empty for none."""
    torch_build: str | None
    """The `torch.version` attribute a torch built for it sets ("cuda", "hip", "xpu"); None:
    every torch runs on it (the fingerprint records each)."""
    capability_checks: tuple[CapabilityCheck, ...]
    """The capabilities only its devices have, with their checks (doctor, the suite's
    `requires` markers and `required_capabilities` name them)."""

    @property
    def families(self) -> Mapping[str, tuple[str, ...]]:
        """GPU families a leg may name instead of one target, with the targets each holds
        (TheRock's per-family indexes: gfx94X-dcgpu -> gfx942); empty for most backends."""
        ...

    @property
    def version_rule(self) -> VersionRule | None:
        """How the backend's toolkit version is spelled; None: it takes no version (cpu, mps)."""
        ...

    @property
    def collective_backends(self) -> tuple[str, ...]:
        """The torch.distributed backends that serve this device's tensors, the default
        first (cuda: nccl, nccl2); empty when none does."""
        ...

    @property
    def collective_backend(self) -> str | None:
        """The default of `collective_backends` (gloo, nccl, xccl); None: none."""
        ...

    @property
    def graph_capture(self) -> GraphCapture | None:
        """How work is captured and replayed as a graph on this device; None: torch has no
        graph replay for it."""
        ...

    @property
    def host_memory(self) -> bool:
        """Its tensors live in host memory: nothing to synchronise, no host-device copies,
        and every rank of a distributed job shares the one device."""
        ...

    @property
    def tf32(self) -> bool:
        """float32 matmuls and convolutions may run in TF32 on it (torch's allow_tf32 knobs
        apply), so float32 cases must switch TF32 off or use TF32 tolerances."""
        ...

    @property
    def unsupported_dtypes(self) -> Mapping[str, str]:
        """dtype name (as torch spells it: float64) -> why the device cannot run it."""
        ...

    def family_of(self, target: str) -> str | None:
        """The narrowest family holding `target`, or `target` itself when it names a family;
        None for a backend without families."""
        ...

    def check_target(
        self, target: str, version: str | None = None, *, flag: str, families: bool = True
    ) -> str:
        """`target` unchanged, or BadInput (prefixed `flag: ` when `flag` is given): not one
        of `targets` (or of `families`, unless `families` is False), or `version` (the
        toolkit) is too old to compile for it."""
        ...

    def test_base_image(self, version: str | None = None) -> str:
        """The default base of this backend's test image for toolkit `version` (None: its
        default toolkit): a leg's image tests the toolkit its name says."""
        ...

    def torch_index(self, channel: str, version: str | None = None) -> str | None:
        """PyTorch's wheel index serving this backend's torch on `channel` (nightly, test,
        release) for toolkit `version` (None: the one its test image has); None when PyTorch
        publishes no wheels for it there (torch is built from source, or comes as a wheel)."""
        ...

    def required_capabilities(self, target: str | None) -> tuple[str, ...]:
        """Capabilities a leg on this backend (and `target`) must have: on that device a case
        needing one that is missing fails instead of skipping."""
        ...

    def rank_device(self, rank: int) -> str:
        """The torch device a distributed rank uses (cpu; cuda:1): one device per rank."""
        ...

    def cross_target(self, target: str) -> CrossTarget | None:
        """How triton compiles for `target` with no device here; None when this backend has
        no such compiler. BadInput for a target it does not have."""
        ...

    def cross_toolchain(self, cross: CrossTarget, environ: Mapping[str, str]) -> Toolchain:
        """The toolchain triton would use for `cross` in a process with `environ`, choosing
        one that knows the target where the user pointed triton at none; never raises."""
        ...

    def binary_target(self, binary: bytes) -> str | None:
        """The target a compiled kernel (cubin, hsaco) is built for, read from its ELF
        header and notes; None when it is not a binary of this backend."""
        ...

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
        environment (`accelkit.suite.run.runner.suite_environment`), also inside a test image;
        a value the user set in their own environment wins. Never raises."""
        ...

    def test_image(self, arch: str | None = None) -> TestImageSpec:
        """The recipe of this backend's test image; BadInput for an arch it does not know."""
        ...

    def host_has_device(self, host_root: Path = Path("/")) -> bool:
        """Whether this host has the backend's device nodes, so that its containers can
        reach a device (`setup` then verifies with the device); never raises."""
        ...

    def verify_test_image(
        self, doctor: Mapping[str, Any], probes: Mapping[str, str], spec: TestImageSpec
    ) -> list[str]:
        """What is missing in a test image, from `accelkit doctor --json` run inside it and
        the output of `spec.probes`; empty when everything set up is really there."""
        ...
