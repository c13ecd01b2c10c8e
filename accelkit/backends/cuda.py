"""NVIDIA CUDA. ROCm builds also answer torch.cuda, so this backend requires hip unset."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from accelkit.backends._containers import (
    capability_problem,
    passthrough,
    section,
    torch_problems,
)
from accelkit.backends._cudalike import cuda_devices
from accelkit.backends._defaults import BackendDefaults
from accelkit.backends._tools import tool_output
from accelkit.backends.base import (
    Availability,
    DeviceInfo,
    GraphCapture,
    TestImageSpec,
    VersionRule,
    release_tuple,
)
from accelkit.containers.run import DeviceRequest, RunOptions
from accelkit.torch_import import torch_import_error, torch_or_none

#: The CUDA toolkit a test image gets by default: the first whose ptxas accepts sm_107a.
DEFAULT_CUDA_VERSION = "13.4"
CUDA_BASE_IMAGE = f"nvidia/cuda:{DEFAULT_CUDA_VERSION}.0-devel-ubuntu24.04"

#: The first CUDA release that can compile for each target (older targets: any 12.x).
#: sm_100/101/120 came with 12.8, sm_103/121 with 12.9, sm_110 (the renamed sm_101) with
#: 13.0, Rubin's sm_107 with 13.4. See ../shared/notes/containers-and-ci.md.
MIN_CUDA: dict[str, tuple[int, int]] = {
    "sm_100": (12, 8),
    "sm_103": (12, 9),
    "sm_107": (13, 4),
    "sm_110": (13, 0),
    "sm_120": (12, 8),
    "sm_121": (12, 9),
}

#: Device-selection variables that pass through to CUDA containers.
CUDA_PASSTHROUGH = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")


def arch_list_entry(arch: str) -> str:
    """TORCH_CUDA_ARCH_LIST's spelling of a target: sm_107 -> 10.7, sm_90 -> 9.0."""
    digits = arch.removeprefix("sm_")
    return f"{digits[:-1]}.{digits[-1]}"


#: CUDA toolkit releases as NVIDIA numbers them: 13.4, or 13.4.1 for an update release.
CUDA_VERSION = VersionRule(
    re.compile(r"1[1-9]\.[0-9]{1,2}(\.[0-9]{1,2})?"), "13.4", "CUDA version", "X.Y or X.Y.Z"
)


#: The CUDA releases PyTorch publishes wheels for (cu126 ... cu130). A wheel runs on any
#: later toolkit of the same major release (CUDA's minor-version compatibility): a CUDA
#: 13.4 image takes the cu130 wheels.
TORCH_CUDA_WHEELS: tuple[tuple[int, int], ...] = ((12, 6), (12, 8), (12, 9), (13, 0))


def wheel_variant_for(version: str) -> str | None:
    """PyTorch's index folder for a CUDA toolkit: 13.4 -> cu130, 12.8.1 -> cu128; None when
    no published wheel runs on it (older than every wheel of its major release)."""
    major, minor = release_tuple(version)
    fitting = [w for w in TORCH_CUDA_WHEELS if w[0] == major and w <= (major, minor)]
    if not fitting:
        return None
    best = max(fitting)
    return f"cu{best[0]}{best[1]}"


def image_version(version: str) -> str:
    """The nvidia/cuda image tag's version: 13.4 -> 13.4.0, 13.4.1 unchanged."""
    return version if version.count(".") == 2 else f"{version}.0"


class CudaBackend(BackendDefaults):
    name = "cuda"
    torch_device_type = "cuda"
    description = "NVIDIA GPUs through CUDA"
    version_rule = CUDA_VERSION
    min_toolkit = MappingProxyType(MIN_CUDA)
    collective_backends = ("nccl", "nccl2")
    graph_capture = GraphCapture("cuda_graph", "CUDAGraph")
    # Ampere and newer run float32 matmuls/convolutions in TF32 where torch allows it.
    tf32 = True
    # Every CUDA leg captures graphs; Rubin legs also need their Inductor target and the
    # conditional nodes that make while_loop capturable.
    requirements = MappingProxyType(
        {None: ("cuda_graph",), "sm_107": ("sm_107", "cuda_graph_while_loop")}
    )
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

    def wheel_variant(self, version: str | None) -> str | None:
        return wheel_variant_for(version or DEFAULT_CUDA_VERSION)

    def test_base_image(self, version: str | None = None) -> str:
        # The devel image of the leg's toolkit: its ptxas is what sm_107 needs.
        return f"nvidia/cuda:{image_version(version or DEFAULT_CUDA_VERSION)}-devel-ubuntu24.04"

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
                dataclasses.replace(d, driver=drivers[min(d.index, len(drivers) - 1)].strip())
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

    passthrough_env: tuple[str, ...] = CUDA_PASSTHROUGH

    def container_options(
        self, env: Mapping[str, str] | None = None, *, host_root: Path = Path("/")
    ) -> RunOptions:
        # The NVIDIA container runtime maps GPUs in through a device request (docker run
        # --gpus all); a large shm serves DataLoader workers and NCCL's shared memory.
        return RunOptions(
            env=passthrough(env, self.passthrough_env),
            device_requests=(DeviceRequest(count=-1, capabilities=(("gpu",),)),),
            shm_size="8g",
        )

    def suite_environment(self) -> dict[str, str]:
        return {}

    def test_image(self, arch: str | None = None) -> TestImageSpec:
        args: dict[str, str] = {}
        # nvcc lists the real architectures its ptxas can assemble for (sm_107, sm_107a).
        probes: dict[str, tuple[str, ...]] = {"gpu_codes": ("nvcc", "--list-gpu-code")}
        if arch is not None:
            self.check_target(arch, DEFAULT_CUDA_VERSION, flag="--arch")
            args["TORCH_CUDA_ARCH_LIST"] = arch_list_entry(arch)
            args["INDUCTOR_CUDA_ARCH"] = arch.removeprefix("sm_")
        return TestImageSpec(
            dockerfile="cuda.Dockerfile",
            default_base_image=CUDA_BASE_IMAGE,
            build_args=args,
            arch=arch,
            probes=probes,
        )

    def verify_test_image(
        self, doctor: Mapping[str, Any], probes: Mapping[str, str], spec: TestImageSpec
    ) -> list[str]:
        problems = torch_problems(doctor)
        if problems:
            return problems
        torch = section(doctor, "env", "torch")
        if not torch.get("cuda"):
            problems.append(f"torch {torch.get('version')} is not a CUDA build")
        if spec.arch is None:
            return problems
        wanted = spec.build_args.get("TORCH_CUDA_ARCH_LIST")
        got = section(doctor, "env", "env").get("TORCH_CUDA_ARCH_LIST")
        if got != wanted:
            problems.append(f"TORCH_CUDA_ARCH_LIST is {got!r} in the image, not {wanted!r}")
        if spec.arch == "sm_107":
            flags = capability_problem(doctor, "sm_107")
            if flags is not None:
                problems.append(flags)
        codes = probes.get("gpu_codes", "").split()
        if spec.arch not in codes and f"{spec.arch}a" not in codes:
            first = probes.get("gpu_codes", "").strip().splitlines()[:1]
            said = f" (it said: {first[0][:200]})" if first else ""
            problems.append(f"the image's CUDA toolkit (ptxas) cannot target {spec.arch}{said}")
        return problems


BACKEND = CudaBackend()
