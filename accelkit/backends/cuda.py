"""NVIDIA CUDA. ROCm builds also answer torch.cuda, so this backend requires hip unset.

Every fact about NVIDIA GPUs: targets and toolkits, cross-compilation, containers and test
images, device peaks and the capabilities only NVIDIA GPUs have (graph conditional nodes,
sm_107, NVGEMM, nccl2).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import logging
import os
import re
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from accelkit.backends import _elf, _ptxas
from accelkit.backends._containers import (
    any_exists,
    capability_problem,
    compile_only,
    passthrough,
    section,
    suite_smoke,
    torch_problems,
)
from accelkit.backends._cudalike import CUDA_GRAPH, cuda_devices
from accelkit.backends._defaults import BackendDefaults
from accelkit.backends._tools import tool_output
from accelkit.backends.base import (
    Availability,
    BuildFlags,
    CapabilityCheck,
    CrossTarget,
    DeviceInfo,
    FakeDevice,
    GraphCapture,
    IsaCheck,
    TargetFlag,
    TestImageSpec,
    Toolchain,
    VersionRule,
    release_tuple,
)
from accelkit.backends.checks import (
    c10d_backend,
    cuda_devices_needed,
    distributed,
    has_module,
    torch_module,
    torch_version,
)
from accelkit.backends.peaks import TB_S, DevicePeak, P, T, dense_rates
from accelkit.containers.run import DeviceRequest, RunOptions
from accelkit.options import Opt
from accelkit.torch_import import torch_import_error, torch_or_none

#: The CUDA toolkit a test image gets by default: the first whose ptxas accepts sm_107a.
DEFAULT_CUDA_VERSION = "13.4"
CUDA_BASE_IMAGE = f"nvidia/cuda:{DEFAULT_CUDA_VERSION}.0-devel-ubuntu24.04"
#: Where a test image for a target keeps the ptxas triton compiles with (a link into the
#: nvidia-cuda-nvcc wheel, whose path depends on the image's Python).
IMAGE_PTXAS = "/opt/venv/bin/ptxas"

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


#: The CUTLASS DSL (CuTeDSL) distribution NVGEMM needs: an image with it must autotune with
#: NVGEMM (`required_capabilities`).
CUTLASS_DSL = "nvidia-cutlass-dsl"

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


#: ELF machine number of a cubin, and the ELF ABI version from which ptxas (CUDA 13) keeps
#: the SM number in e_flags bits 8..15 instead of the low byte (LLVM's BinaryFormat/ELF.h:
#: EF_CUDA_SM / EF_CUDA_SM_MASK, EF_CUDA_SM_OFFSET = 8).
EM_CUDA = 190
CUDA_ELF_ABI_V2 = 8

#: What proves each check in PTX, by target family (measured with triton 3.8 and ptxas
#: 13.5: a bf16 `tl.dot` on sm_90 is `wgmma.mma_async`, on sm_100/103/107/110
#: `tcgen05.mma`, on sm_80/86/89/120/121 `mma.sync`; fp8 takes `e4m3` operands or
#: tcgen05's `kind::f8f6f4`). sm_75 is missing on purpose: triton 3.8 emits FMA for it.
_MMA = {
    "mma_sync": IsaCheck(r"\bmma\.sync\.aligned\.", "mma.sync (warp-level tensor-core MMA)"),
    "wgmma": IsaCheck(r"\bwgmma\.mma_async\.", "wgmma.mma_async (Hopper warpgroup MMA)"),
    "tcgen05": IsaCheck(r"\btcgen05\.mma\.", "tcgen05.mma (5th-generation tensor cores)"),
}
_MMA_FP8 = {
    "mma_sync": IsaCheck(r"\bmma\.sync\.aligned\.\S*\.e4m3\.", "mma.sync on e4m3 operands"),
    "wgmma": IsaCheck(r"\bwgmma\.mma_async\.\S*\.e4m3\.", "wgmma.mma_async on e4m3 operands"),
    "tcgen05": IsaCheck(r"\btcgen05\.mma\.\S*kind::f8f6f4", "tcgen05.mma kind::f8f6f4"),
}
_MMA_FAMILY = {
    **dict.fromkeys(("sm_80", "sm_86", "sm_89", "sm_120", "sm_121"), "mma_sync"),
    "sm_90": "wgmma",
    **dict.fromkeys(("sm_100", "sm_103", "sm_107", "sm_110"), "tcgen05"),
}
#: Tensor memory access (TMA) and warp specialization: sm_90 and newer.
_TMA = IsaCheck(r"\bcp\.async\.bulk\.tensor\.", "cp.async.bulk.tensor (TMA copies)")
_WARP_SPECIALIZE = IsaCheck(r"\bsetmaxnreg\.", "setmaxnreg (registers split between warp groups)")
#: triton takes fp8e4nv (OCP e4m3) operands from sm_89 on.
FP8_FROM = 89
TMA_FROM = 90


def capability_number(target: str) -> int:
    """sm_107 -> 107."""
    return int(target.removeprefix("sm_"))


def triton_gpu_name(target: str) -> str:
    """The name triton hands ptxas: sm_90 and newer compile as the arch-specific variant
    (sm_107a), older ones as they are (triton's `sm_arch_from_capability`)."""
    return target + ("a" if capability_number(target) >= 90 else "")


def fake_properties(target: str) -> dict[str, Any]:
    """What torch.cuda.get_device_properties would say about a GPU of `target` that Inductor
    reads when it generates kernels: the capability, the warp, and an SM count and register
    file of a large part of that generation (they steer block sizes, not correctness)."""
    major, minor = divmod(capability_number(target), 10)
    return {
        "name": f"accelkit's stand-in for an {target} GPU (no device here)",
        "major": major,
        "minor": minor,
        "multi_processor_count": 132 if major >= 9 else 108,
        "warp_size": 32,
        "regs_per_multiprocessor": 65536,
        "max_threads_per_multi_processor": 2048 if major >= 8 else 1024,
        "max_threads_per_block": 1024,
        "shared_memory_per_block_optin": 232448 if major >= 9 else 166912,
        "total_memory": 80 << 30,
        "L2_cache_size": 50 << 20,
        "gcnArchName": "",
        "is_integrated": False,
    }


def arch_coverage_problem(arch_list: list[str], target: str) -> str | None:
    """None when a torch built for `arch_list` (torch.cuda.get_arch_list(): sm_90,
    compute_90, ...) can run kernels on a `target` GPU; else why not.

    CUDA's compatibility rules: a cubin for sm_XY runs on sm_XZ for Z >= Y (same major, not
    an arch-specific `a` build); PTX for compute_N is JIT-compiled by the driver for any GPU
    of capability >= N."""
    wanted = capability_number(target)
    major, minor = divmod(wanted, 10)
    for entry in arch_list:
        match = re.fullmatch(r"(sm|compute)_(\d+)([af]?)", entry.strip())
        if match is None:
            continue
        kind, number, suffix = match.group(1), int(match.group(2)), match.group(3)
        if kind == "compute" and number <= wanted and suffix != "a":
            return None
        same_family = kind == "sm" and number // 10 == major and number % 10 <= minor
        if same_family and (suffix != "a" or number == wanted):
            return None
    shown = " ".join(arch_list) or "nothing"
    return (
        f"torch cannot run {target} code: it carries SASS and PTX for {shown}, and none "
        f"of it runs on compute capability {major}.{minor} (no sm_{major}x cubin with x <= "
        f"{minor}, no PTX at or below compute_{wanted} for the driver to JIT-compile)"
    )


#: Published ceilings of NVIDIA's devices (`accelkit.backends.peaks`: conventions and
#: units). Order matters: the first matching row wins, so specific names precede general
#: ones ("H100 NVL" and "H100 PCIe" before the SXM row that matches any "H100").
PEAKS: tuple[DevicePeak, ...] = (
    # NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100/, "H100 NVL"
    # column): TF32 835, BF16/FP16 1,671, FP8 3,341 TFLOPS with sparsity; FP32 60 TFLOPS;
    # 94 GB HBM3 at 3.9 TB/s.
    DevicePeak(
        name="NVIDIA H100 NVL",
        pattern=r"H100.*NVL",
        flops=dense_rates(60 * T, 417.5 * T, 835.5 * T, 1670.5 * T),
        memory_bandwidth=3.9 * TB_S,
        source="NVIDIA H100 datasheet (H100 NVL column), sparse figures halved",
    ),
    # Same datasheet, "H100 PCIe" column: FP32 51 TFLOPS; TF32 756, BF16/FP16 1,513,
    # FP8 3,026 TFLOPS with sparsity; 80 GB HBM2e at 2 TB/s.
    DevicePeak(
        name="NVIDIA H100 PCIe",
        pattern=r"H100.*PCIe",
        flops=dense_rates(51 * T, 378 * T, 756.5 * T, 1513 * T),
        memory_bandwidth=2.0 * TB_S,
        source="NVIDIA H100 datasheet (H100 PCIe column), sparse figures halved",
    ),
    # Same datasheet, "H100 SXM" column: FP32 67 TFLOPS; TF32 989, BF16/FP16 1,979,
    # FP8 3,958 TFLOPS with sparsity; 80 GB HBM3 at 3.35 TB/s. The H100 whitepaper's
    # dense figures are 494.7 / 989.4 / 1,978.9 TFLOPS.
    DevicePeak(
        name="NVIDIA H100 SXM",
        pattern=r"H100",
        flops=dense_rates(66.9 * T, 494.7 * T, 989.4 * T, 1978.9 * T),
        memory_bandwidth=3.35 * TB_S,
        source="NVIDIA H100 datasheet (H100 SXM column) / Hopper whitepaper dense rates",
    ),
    # NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200/), "H200
    # NVL" column: FP32 60 TFLOPS; TF32 835, BF16/FP16 1,671, FP8 3,341 TFLOPS with
    # sparsity; 141 GB HBM3e at 4.8 TB/s.
    DevicePeak(
        name="NVIDIA H200 NVL",
        pattern=r"H200.*NVL",
        flops=dense_rates(60 * T, 417.5 * T, 835.5 * T, 1670.5 * T),
        memory_bandwidth=4.8 * TB_S,
        source="NVIDIA H200 datasheet (H200 NVL column), sparse figures halved",
    ),
    # Same datasheet, "H200 SXM" column: the H100 SXM compute (same GH100 die and clocks)
    # with 141 GB HBM3e at 4.8 TB/s.
    DevicePeak(
        name="NVIDIA H200 SXM",
        pattern=r"H200",
        flops=dense_rates(66.9 * T, 494.7 * T, 989.4 * T, 1978.9 * T),
        memory_bandwidth=4.8 * TB_S,
        source="NVIDIA H200 datasheet (H200 SXM column), sparse figures halved",
    ),
    # NVIDIA HGX B200 / DGX B200 datasheets (nvidia.com/en-us/data-center/hgx/): per GPU
    # FP32 75 TFLOPS; TF32 2.2, FP16/BF16 4.5, FP8 9 PFLOPS with sparsity; 180 GB HBM3e,
    # 64 TB/s per 8-GPU system = 8 TB/s per GPU.
    DevicePeak(
        name="NVIDIA B200",
        pattern=r"\bB200\b",
        flops=dense_rates(75 * T, 1.1 * P, 2.25 * P, 4.5 * P),
        memory_bandwidth=8.0 * TB_S,
        source="NVIDIA HGX/DGX B200 datasheet, per GPU, sparse figures halved",
    ),
    # NVIDIA Vera Rubin announcements (GTC 2025 keynote, CES 2026 press release): Rubin GPU
    # with 288 GB HBM4 at up to 22 TB/s, 50 PFLOPS NVFP4 inference. No dense BF16/FP8
    # figure is published yet, so no FLOP/s entry; revisit with the final datasheet.
    DevicePeak(
        name="NVIDIA Rubin",
        pattern=r"Rubin|\bR200\b|VR200",
        flops={},
        memory_bandwidth=22.0 * TB_S,
        source="NVIDIA Vera Rubin announcement (CES 2026): HBM4 up to 22 TB/s",
        preliminary=True,
        note="preliminary: announced figures; no dense BF16/FP8 rate published",
    ),
)


# --------------------------------------------------------------------------------------
# Capabilities only NVIDIA GPUs have (registered by accelkit.probe.capabilities)


def _cuda_graph_while_loop() -> Availability:
    torch = torch_module()
    graph = getattr(torch.cuda, "CUDAGraph", None)
    if graph is None or not hasattr(graph, "begin_capture_to_while_node"):
        return Availability(
            False,
            f"torch {torch_version(torch)} has no torch.cuda.CUDAGraph.begin_capture_to_while_node",
        )
    # torch binds the conditional-node methods on every build, but compiles their bodies
    # only for CUDA >= 12.4 (aten/src/ATen/cuda/CUDAGraph.cu: `!defined(USE_ROCM) &&
    # CUDA_VERSION >= 12040`); elsewhere capture raises "not allowed".
    if getattr(torch.version, "hip", None):
        return Availability(
            False, "HIP graphs have no conditional nodes in torch (CUDA >= 12.4 builds only)"
        )
    built = getattr(torch.version, "cuda", None)
    if built and release_tuple(built) < (12, 4):
        return Availability(
            False, f"torch built with CUDA {built}: conditional nodes need CUDA >= 12.4"
        )
    return cuda_devices_needed(torch, 1)


_ARCH_LOCK = threading.Lock()
_SM_107_FLAGS = (
    "-gencode=arch=compute_107,code=sm_107",
    "-gencode=arch=compute_107,code=compute_107",
)


@contextlib.contextmanager
def _quiet_logger(name: str) -> Iterator[None]:
    logger = logging.getLogger(name)
    previous = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(previous)


@contextlib.contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    previous = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = previous


def _sm_107() -> Availability:
    """torch generates code for sm_107 (the probe adds whether triton's ptxas knows it)."""
    torch = torch_module()
    # Importing cpp_extension looks for a CUDA toolkit and warns when no runtime is found;
    # that warning says nothing about arch-flag generation.
    with _quiet_logger("torch.utils.cpp_extension"):
        cpp_extension = importlib.import_module("torch.utils.cpp_extension")
    arch_flags = getattr(cpp_extension, "_get_cuda_arch_flags", None)
    version = torch_version(torch)
    if arch_flags is None:
        return Availability(
            False, f"torch {version} has no torch.utils.cpp_extension._get_cuda_arch_flags"
        )
    # The environment is process-wide: hold a lock so two probes cannot interleave.
    with _ARCH_LOCK, _env("TORCH_CUDA_ARCH_LIST", "Rubin"):
        try:
            flags = list(arch_flags())
        except ValueError as exc:
            return Availability(
                False, f"torch {version} does not know TORCH_CUDA_ARCH_LIST=Rubin: {exc}"
            )
    missing = [flag for flag in _SM_107_FLAGS if flag not in flags]
    if missing:
        return Availability(
            False,
            f"torch {version}: TORCH_CUDA_ARCH_LIST=Rubin gives "
            f"{' '.join(flags) or 'no flags'}, not {' '.join(missing)}",
        )
    return Availability(True, f"torch {version}: TORCH_CUDA_ARCH_LIST=Rubin gives compute_107")


def _nvgemm() -> Availability:
    torch = torch_module()
    if getattr(torch.version, "hip", None):
        return Availability(False, "NVGEMM needs an NVIDIA GPU (torch is a ROCm build)")
    devices = cuda_devices_needed(torch, 1)
    if not devices.available:
        return devices
    config = importlib.import_module("torch._inductor.config")
    version = torch_version(torch)
    # Inductor takes any name in max_autotune_gemm_backends; a torch knows NVGEMM when it
    # has the knobs and the code generator for it.
    if not hasattr(config, "nvgemm_max_profiling_configs") or not has_module(
        "torch._inductor.codegen.nv_universal_gemm"
    ):
        return Availability(False, f"torch {version} has no NVGEMM Inductor backend")
    utils = importlib.import_module("torch._inductor.utils")
    for helper, what in (
        ("ensure_cute_available", "the CUTLASS DSL (CuTeDSL) Python package 'cutlass'"),
        ("ensure_nv_universal_gemm_available", "the 'cutlass.operators' Python modules"),
    ):
        probe = getattr(utils, helper, None)
        if probe is None:
            return Availability(False, f"torch {version} has no torch._inductor.utils.{helper}")
        if not probe():
            return Availability(False, f"{what} not installed")
    return Availability(True, f"torch {version} has the NVGEMM Inductor backend; {devices.reason}")


def _nccl2() -> Availability:
    """The whole registration of 2.14's nccl2 backend, the one check of it: what a case
    could assert without GPUs is what this probe says (the collective cases, which need
    the GPUs, test that it works)."""
    found = c10d_backend("nccl2")
    if not found.available:
        return found
    torch = torch_module()
    dist = distributed(torch)
    version = torch_version(torch)
    if "nccl2" not in getattr(dist.Backend, "backend_list", ()):
        return Availability(False, f"torch {version}: nccl2 is not in Backend.backend_list")
    if not hasattr(dist, "ProcessGroupNCCL2"):
        return Availability(False, f"torch {version} has no torch.distributed.ProcessGroupNCCL2")
    try:
        named = dist.Backend("nccl2")
    except Exception as exc:
        return Availability(False, f"torch.distributed.Backend('nccl2') failed: {exc}")
    if named != "nccl2":
        return Availability(False, f"torch.distributed.Backend('nccl2') is {named!r}")
    return Availability(
        True, f"torch {version}: nccl2 registered (Backend.backend_list, ProcessGroupNCCL2)"
    )


CAPABILITY_CHECKS: tuple[CapabilityCheck, ...] = (
    CUDA_GRAPH,
    CapabilityCheck("cuda_graph_while_loop", "graph", _cuda_graph_while_loop),
    CapabilityCheck("sm_107", "target", _sm_107),
    CapabilityCheck("nvgemm", "gemm", _nvgemm),
    CapabilityCheck("nccl2", "collective", _nccl2),
)


class CudaBackend(BackendDefaults):
    name = "cuda"
    torch_device_type = "cuda"
    description = "NVIDIA GPUs through CUDA"
    peaks = PEAKS
    torch_build: str | None = "cuda"
    capability_checks = CAPABILITY_CHECKS
    version_rule = CUDA_VERSION
    build_flags = BuildFlags(
        toolkit=Opt(
            "cuda_version", ("--cuda-version",), str, None, "CUDA toolkit version (13.4).", True
        ),
        targets=TargetFlag("--arch", "CUDA", "sm_107"),
    )
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
        count = torch.cuda.device_count()
        return Availability(
            True, f"torch {torch.__version__} (CUDA {torch.version.cuda}): {count} device(s)"
        )

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

    def required_capabilities(self, target: str | None) -> tuple[str, ...]:
        required = super().required_capabilities(target)
        # An image that carries the CUTLASS DSL is there to autotune GEMMs with NVGEMM.
        if _installed(CUTLASS_DSL):
            required = (*required, "nvgemm")
        return required

    def cross_target(self, target: str) -> CrossTarget | None:
        self.check_target(target, flag="--target", families=False)
        number = capability_number(target)
        family = _MMA_FAMILY.get(target)
        isa: dict[str, IsaCheck] = {}
        lacks: dict[str, str] = {}
        if family is not None:
            isa["mma"] = _MMA[family]
            if number >= FP8_FROM:
                isa["mma_fp8"] = _MMA_FP8[family]
        if number < FP8_FROM:
            lacks["fp8"] = f"{target} has no fp8 tensor-core MMA (triton takes fp8 from sm_89)"
        if number >= TMA_FROM:
            isa["tma"] = _TMA
            isa["warp_specialize"] = _WARP_SPECIALIZE
        else:
            why = f"{target} has no TMA unit (sm_90 and newer)"
            lacks["tma"] = why
            lacks["warp_specialize"] = f"{why}; triton warp-specializes TMA pipelines only"
        return CrossTarget(
            target=target,
            triton_backend="cuda",
            triton_arch=number,
            warp_size=32,
            assembly="ptx",
            binary="cubin",
            assembly_target=rf"(?m)^\s*\.target\s+{triton_gpu_name(target)}\b",
            isa=isa,
            fp8_type="fp8e4nv" if number >= FP8_FROM else None,
            lacks=lacks,
            fake_device=FakeDevice("cuda", "cuda", fake_properties(target)),
        )

    def cross_toolchain(self, cross: CrossTarget, environ: Mapping[str, str]) -> Toolchain:
        number = capability_number(cross.target)
        wanted = triton_gpu_name(cross.target)
        variable = _ptxas.variable_for(number)
        bundled = _ptxas.bundled(number)
        chosen = environ.get(variable)
        candidates: list[str] = []
        note = ""
        if chosen:
            if _ptxas.Ptxas.ask(chosen) is None:
                # triton falls back to its own copy without a word: say so.
                note = f"; {variable}={chosen} is not a working ptxas, so triton uses its own"
                candidates = [str(bundled)] if bundled else []
            else:
                candidates = [chosen]
        else:
            candidates = [str(p) for p in _ptxas.installed(environ)]
            candidates += [str(bundled)] if bundled else []
        found = [tool for tool in map(_ptxas.Ptxas.ask, candidates) if tool is not None]
        if not found:
            missing = f"no ptxas found for {cross.target} (is triton installed?){note}"
            return Toolchain("ptxas", "unknown", chosen or "", wanted, (), {}, missing)
        able = [tool for tool in found if wanted in tool.knows]
        if able and not chosen:
            tool = able[0]
            # Both variables, as triton's choice between them depends on the capability;
            # one the user set is left as it is.
            environment = {
                name: tool.path
                for name in (_ptxas.VARIABLE, _ptxas.BLACKWELL_VARIABLE)
                if not environ.get(name)
            }
            return Toolchain("ptxas", tool.version, tool.path, wanted, tool.knows, environment)
        # The user's choice (or triton's own copy when none here knows the target).
        tool = found[0] if chosen else found[-1]
        problem: str | None = None
        if wanted not in tool.knows:
            tried = [f"{t.version} ({t.path})" for t in found if t is not tool]
            also = f"; also found ptxas {', '.join(tried)}" if tried else ""
            problem = (
                f"ptxas {tool.version} ({tool.path}) does not know {wanted}; it knows "
                f"{', '.join(tool.knows) or 'nothing'}{note}{also}. Point {variable} at a "
                "ptxas that does (CUDA >= "
                f"{'.'.join(map(str, MIN_CUDA.get(cross.target, (12, 0))))}: "
                "pip install nvidia-cuda-nvcc)"
            )
        return Toolchain("ptxas", tool.version, tool.path, wanted, tool.knows, {}, problem)

    def binary_target(self, binary: bytes) -> str | None:
        header = _elf.read_header(binary)
        if header is None or header.machine != EM_CUDA:
            return None
        if header.abi_version >= CUDA_ELF_ABI_V2:
            return f"sm_{(header.flags >> 8) & 0xFF}"
        return f"sm_{header.flags & 0xFF}"

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
        requirements: tuple[str, ...] = ()
        links: dict[str, str] = {}
        checks: dict[str, tuple[str, ...]] = {}
        smoke = suite_smoke(self.name, *(("--target", arch) if arch else ()))
        if arch is not None:
            self.check_target(arch, DEFAULT_CUDA_VERSION, flag="--arch")
            args["TORCH_CUDA_ARCH_LIST"] = arch_list_entry(arch)
            args["INDUCTOR_CUDA_ARCH"] = arch.removeprefix("sm_")
            # triton bundles ptxas 13.3, which does not know sm_107: the image carries the
            # toolkit's wheel, and the Dockerfile points both of triton's variables at it.
            requirements = (f"nvidia-cuda-nvcc>={DEFAULT_CUDA_VERSION}",)
            links = {IMAGE_PTXAS: "nvidia/cu*/bin/ptxas"}
            args["TRITON_PTXAS"] = IMAGE_PTXAS
            checks = {f"compile-only {arch}": compile_only(self.name, arch)}
        return TestImageSpec(
            dockerfile="cuda.Dockerfile",
            default_base_image=CUDA_BASE_IMAGE,
            build_args=args,
            arch=arch,
            probes=probes,
            requirements=requirements,
            links=links,
            checks=checks,
            device_checks={"graph capture": smoke},
        )

    def host_has_device(self, host_root: Path = Path("/")) -> bool:
        # The driver's control node: the NVIDIA container runtime maps GPUs from it.
        return any_exists(host_root, ("/dev/nvidiactl", "/dev/nvidia[0-9]*"))

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
        env = section(doctor, "env", "env")
        wanted = spec.build_args.get("TORCH_CUDA_ARCH_LIST")
        got = env.get("TORCH_CUDA_ARCH_LIST")
        if got != wanted:
            problems.append(f"TORCH_CUDA_ARCH_LIST is {got!r} in the image, not {wanted!r}")
        for variable in (_ptxas.VARIABLE, _ptxas.BLACKWELL_VARIABLE):
            if env.get(variable) != IMAGE_PTXAS:
                said = env.get(variable)
                problems.append(f"{variable} is {said!r} in the image, not {IMAGE_PTXAS!r}")
        if spec.arch == "sm_107":
            flags = capability_problem(doctor, "sm_107")
            if flags is not None:
                problems.append(flags)
        if torch.get("cuda"):
            versions = section(doctor, "env", "backends", self.name, "versions")
            arch_list = str(versions.get("cuda_arch_list") or "").split()
            coverage = arch_coverage_problem(arch_list, spec.arch)
            if coverage is not None:
                problems.append(f"torch {torch.get('version')}: {coverage}")
        codes = probes.get("gpu_codes", "").split()
        if spec.arch not in codes and f"{spec.arch}a" not in codes:
            first = probes.get("gpu_codes", "").strip().splitlines()[:1]
            said = f" (it said: {first[0][:200]})" if first else ""
            problems.append(f"the image's CUDA toolkit (ptxas) cannot target {spec.arch}{said}")
        return problems


BACKEND = CudaBackend()


def _installed(distribution: str) -> bool:
    """Whether a distribution is installed, read from its metadata (importing the CUTLASS
    DSL loads its compiler: seconds, for a yes or no). importlib.metadata is imported here:
    it costs `accelkit --help`, which builds `build`'s options from the backends, 20 ms."""
    import importlib.metadata

    try:
        importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True
