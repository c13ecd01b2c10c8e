"""What this torch on this machine can do: one named check per backend and per 2.14 feature.

Each check returns an `Availability` whose reason says what was checked, with which version
of what: precisely why not, and for a capability that is there, what showed it (doctor
prints both). Checks are registered with `@capability_check("name")`;
`capability(name)` runs one and caches the answer (the suite's skip markers call it for
every case in every pytest worker), `capabilities()` runs them all in a stable order.

Rules every check follows:
- never import more than the answer needs, and never initialise a GPU context on a machine
  without a GPU (`torch.cuda.is_available()` asks the driver, it creates no context);
- verify private names with `hasattr`/`importlib` against the installed torch (see
  ../shared/notes/torch-2.14-api.md): several 2.14 features are underscore APIs;
- check the torch build first where that is cheap, then the device, then expensive imports,
  so a worker asking for one capability on a CPU machine pays little.

Longer than 600 lines because it is one registry of checks with one job:
every capability the suite and doctor ask for, each a short function beside the others.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import logging
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from accelkit.backends import Availability, all_backends
from accelkit.backends.base import release_tuple
from accelkit.probe.inductor_defaults import MISSING, inductor_cxx_search, inductor_default
from accelkit.probe.registry import (
    CheckFn,
    capabilities,
    capability,
    capability_check,
    isolated_registry,
    names,
    override,
    reset,
)
from accelkit.torch_import import torch_or_none

__all__ = [
    "CheckFn",
    "capabilities",
    "capability",
    "capability_check",
    "isolated_registry",
    "names",
    "override",
    "reset",
]

# --------------------------------------------------------------------------------------
# Helpers shared by the checks


def _torch() -> Any:
    # `needs_torch` checks only run when this is not None.
    return torch_or_none()


def _version(torch: Any) -> str:
    return str(getattr(torch, "__version__", "?"))


def _has_module(name: str) -> bool:
    """Whether `name` can be imported, without importing it (parents are imported)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _import(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _cuda_devices(torch: Any) -> tuple[int, str]:
    """How many torch `cuda` devices there are (AMD ones on ROCm builds), and why none."""
    if not getattr(torch.version, "cuda", None) and not getattr(torch.version, "hip", None):
        return 0, "torch built without CUDA"
    kind = "ROCm" if getattr(torch.version, "hip", None) else "CUDA"
    if not torch.cuda.is_available():
        return 0, f"no {kind} device"
    return int(torch.cuda.device_count()), ""


def _needs_cuda_devices(torch: Any, wanted: int) -> Availability:
    count, why = _cuda_devices(torch)
    if count >= wanted:
        names = ", ".join(str(torch.cuda.get_device_name(i)) for i in range(count))
        return Availability(True, f"{count} device(s) (torch.cuda.device_count()): {names}")
    if wanted == 1:
        return Availability(False, why)
    return Availability(False, f"needs {wanted} CUDA devices, found {count}")


def _distributed(torch: Any) -> Any:
    """torch.distributed, or None when torch was built without it."""
    dist = _import("torch.distributed")
    if dist is None or not dist.is_available():
        return None
    return dist


def _backend_available(dist: Any, name: str) -> bool:
    try:
        return bool(dist.is_backend_available(name))
    except Exception:
        return False


_NO_DIST = "torch built without distributed support (torch.distributed.is_available() is False)"


def _c10d_backend(name: str) -> Availability:
    torch = _torch()
    dist = _distributed(torch)
    if dist is None:
        return Availability(False, _NO_DIST)
    if not _backend_available(dist, name):
        return Availability(
            False, f"c10d backend {name!r} is not available in torch {_version(torch)}"
        )
    return Availability(
        True, f"torch {_version(torch)}: torch.distributed.is_backend_available({name!r})"
    )


def _inductor_config() -> Any:
    return importlib.import_module("torch._inductor.config")


# --------------------------------------------------------------------------------------
# Backends first, in the registry's display order (cpu, cuda, rocm, xpu, mps).


def _register_backends() -> None:
    for backend in all_backends():
        # Backends report a missing torch themselves, with the same reason.
        capability_check(backend.name, needs_torch=False)(backend.availability)


_register_backends()


def _backend(name: str) -> Availability:
    return capability(name)


# --------------------------------------------------------------------------------------
# Control flow and dynamic shapes (all run on the CPU)


@capability_check("switch")
def _switch() -> Availability:
    torch = _torch()
    hops = _import("torch._higher_order_ops")
    if hops is None or not callable(getattr(hops, "switch", None)):
        return Availability(False, f"torch {_version(torch)} has no torch._higher_order_ops.switch")
    return Availability(True, f"torch {_version(torch)} has torch._higher_order_ops.switch")


@capability_check("cond")
def _cond() -> Availability:
    torch = _torch()
    if not callable(getattr(torch, "cond", None)):
        return Availability(False, f"torch {_version(torch)} has no torch.cond")
    return Availability(True, f"torch {_version(torch)} has torch.cond")


@capability_check("while_loop")
def _while_loop() -> Availability:
    torch = _torch()
    if not callable(getattr(torch, "while_loop", None)):
        return Availability(False, f"torch {_version(torch)} has no torch.while_loop")
    return Availability(True, f"torch {_version(torch)} has torch.while_loop")


_DYNAMIC_SPEC_NAMES = ("dynamic_spec", "TensorSpec", "ShapeVar", "IntVar", "STATIC", "ShapesSpec")


@capability_check("dynamic_spec")
def _dynamic_spec() -> Availability:
    torch = _torch()
    module_name = "torch.fx.experimental.dynamic_spec"
    if not _has_module(module_name):
        return Availability(False, f"torch {_version(torch)} has no {module_name}")
    module = importlib.import_module(module_name)
    missing = [name for name in _DYNAMIC_SPEC_NAMES if not hasattr(module, name)]
    if missing:
        return Availability(
            False, f"torch {_version(torch)}: {module_name} lacks {', '.join(missing)}"
        )
    return Availability(
        True, f"torch {_version(torch)}: {module_name} has {', '.join(_DYNAMIC_SPEC_NAMES)}"
    )


@capability_check("complex_compile")
def _complex_compile() -> Availability:
    torch = _torch()
    config = _import("torch._functorch.config")
    if config is None or not hasattr(config, "enable_complex_wrapper"):
        return Availability(
            False, f"torch {_version(torch)} has no torch._functorch.config.enable_complex_wrapper"
        )
    if not _has_module("torch._subclasses.complex_tensor"):
        return Availability(
            False, f"torch {_version(torch)} has no torch._subclasses.complex_tensor"
        )
    return Availability(
        True,
        f"torch {_version(torch)} has torch._functorch.config.enable_complex_wrapper and "
        "torch._subclasses.complex_tensor",
    )


# --------------------------------------------------------------------------------------
# Compilers and the OpInfo corpus


@capability_check("inductor")
def _inductor() -> Availability:
    torch = _torch()
    if not callable(getattr(torch, "compile", None)):
        return Availability(False, f"torch {_version(torch)} has no torch.compile")
    if sys.platform == "win32":
        candidates = [os.environ.get("CXX", "cl")]
    else:
        # Inductor searches config.cpp.cxx in order; None means "install g++ from conda",
        # which a probe must never do (torch only does it with TORCH_INDUCTOR_INSTALL_GXX).
        candidates = [str(c) for c in inductor_cxx_search() if c]
    for candidate in candidates:
        path = shutil.which(candidate)
        if path is None:
            continue
        try:
            proc = subprocess.run([path, "--version"], capture_output=True, timeout=10, check=False)
        except (OSError, subprocess.SubprocessError):
            continue
        if proc.returncode == 0:
            return _inductor_headers(path, torch)
    tried = ", ".join(candidates) or "nothing"
    return Availability(
        False, f"no C++ compiler for Inductor's CPU backend (tried {tried}; set CXX)"
    )


INDUCTOR_HEADER = "ATen/NumericUtils.h"  # included by Inductor's CPU kernels (cpp_prefix.h)


def _inductor_headers(compiler: str, torch: ModuleType) -> Availability:
    """Whether `compiler` finds torch's C++ headers as Inductor compiles: torch's include
    folder, then its own paths (Debian keeps them in libtorch-dev, apart from python3-torch)."""
    if sys.platform == "win32":
        return Availability(True, f"{compiler} answers (its flags for torch's headers not checked)")
    include = os.path.join(os.path.dirname(str(torch.__file__)), "include")
    argv = [compiler, "-E", "-x", "c++", "-std=c++17", f"-I{include}", "-o", os.devnull, "-"]
    source = f"#include <{INDUCTOR_HEADER}>\n".encode()
    try:
        proc = subprocess.run(argv, input=source, capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return Availability(False, f"{compiler} could not preprocess torch's headers: {exc}")
    if proc.returncode == 0:
        return Availability(
            True, f"torch {_version(torch)} has torch.compile; {compiler} finds <{INDUCTOR_HEADER}>"
        )
    errors = [ln for ln in proc.stderr.decode(errors="replace").splitlines() if "error" in ln]
    why = errors[0].strip() if errors else f"exit code {proc.returncode}"
    return Availability(
        False,
        f"{compiler} does not find torch's C++ headers, which Inductor's CPU kernels include "
        f"({why}); install them (Debian: libtorch-dev)",
    )


@capability_check("opinfo")
def _opinfo() -> Availability:
    torch = _torch()
    # Only look: importing op_db itself takes seconds and builds ~700 OpInfos.
    if not _has_module("expecttest"):
        return Availability(
            False, "expecttest is not installed (torch's OpInfo database imports it)"
        )
    module_name = "torch.testing._internal.common_methods_invocations"
    if not _has_module(module_name):
        return Availability(False, f"torch {_version(torch)} has no {module_name}")
    return Availability(True, f"torch {_version(torch)} has {module_name}; expecttest installed")


# --------------------------------------------------------------------------------------
# Graph capture


@capability_check("cuda_graph")
def _cuda_graph() -> Availability:
    torch = _torch()
    if not hasattr(torch.cuda, "CUDAGraph"):
        return Availability(False, f"torch {_version(torch)} has no torch.cuda.CUDAGraph")
    return _needs_cuda_devices(torch, 1)


@capability_check("cuda_graph_while_loop")
def _cuda_graph_while_loop() -> Availability:
    torch = _torch()
    graph = getattr(torch.cuda, "CUDAGraph", None)
    if graph is None or not hasattr(graph, "begin_capture_to_while_node"):
        return Availability(
            False,
            f"torch {_version(torch)} has no torch.cuda.CUDAGraph.begin_capture_to_while_node",
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
    return _needs_cuda_devices(torch, 1)


@capability_check("xpu_graph")
def _xpu_graph() -> Availability:
    torch = _torch()
    xpu = getattr(torch, "xpu", None)
    if xpu is None or not hasattr(xpu, "XPUGraph"):
        return Availability(False, f"torch {_version(torch)} has no torch.xpu.XPUGraph")
    # On a build without XPU, XPUGraph is a dummy that raises when constructed.
    return _backend("xpu")


@capability_check("accelerator_graph")
def _accelerator_graph() -> Availability:
    torch = _torch()
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is None or not hasattr(accelerator, "Graph"):
        return Availability(False, f"torch {_version(torch)} has no torch.accelerator.Graph")
    if not accelerator.is_available():
        return Availability(
            False, "no accelerator device (torch.accelerator.is_available() is False)"
        )
    return Availability(
        True,
        f"torch {_version(torch)} has torch.accelerator.Graph; "
        f"accelerator {accelerator.current_accelerator()}",
    )


# --------------------------------------------------------------------------------------
# Inductor targets and GEMM backends

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


@capability_check("sm_107")
def _sm_107() -> Availability:
    torch = _torch()
    # Importing cpp_extension looks for a CUDA toolkit and warns when no runtime is found;
    # that warning says nothing about arch-flag generation.
    with _quiet_logger("torch.utils.cpp_extension"):
        cpp_extension = importlib.import_module("torch.utils.cpp_extension")
    arch_flags = getattr(cpp_extension, "_get_cuda_arch_flags", None)
    if arch_flags is None:
        return Availability(
            False, f"torch {_version(torch)} has no torch.utils.cpp_extension._get_cuda_arch_flags"
        )
    # The environment is process-wide: hold a lock so two probes cannot interleave.
    with _ARCH_LOCK, _env("TORCH_CUDA_ARCH_LIST", "Rubin"):
        try:
            flags = list(arch_flags())
        except ValueError as exc:
            return Availability(
                False, f"torch {_version(torch)} does not know TORCH_CUDA_ARCH_LIST=Rubin: {exc}"
            )
    missing = [flag for flag in _SM_107_FLAGS if flag not in flags]
    if missing:
        return Availability(
            False,
            f"torch {_version(torch)}: TORCH_CUDA_ARCH_LIST=Rubin gives "
            f"{' '.join(flags) or 'no flags'}, not {' '.join(missing)}",
        )
    # Then what `accelkit test --device cuda --target sm_107 --compile-only` checks first:
    # triton's toolchain knows the target. So a ✓ means the target compiles here.
    from accelkit.backends import get as get_backend
    from accelkit.suite.crosscompile.compiling import target_toolchain

    backend = get_backend("cuda")
    cross = backend.cross_target("sm_107")
    if cross is None:  # pragma: no cover - the CUDA backend answers for its targets
        return Availability(False, "the cuda backend cannot compile for sm_107")
    toolchain = target_toolchain(backend, cross, os.environ)
    if toolchain.problem is not None:
        return Availability(False, toolchain.problem)
    return Availability(
        True,
        f"torch {_version(torch)}: TORCH_CUDA_ARCH_LIST=Rubin gives compute_107; "
        f"{toolchain.describe()} knows {toolchain.target_name}",
    )


@capability_check("gfx_in_arch_list")
def _gfx_in_arch_list() -> Availability:
    torch = _torch()
    if not getattr(torch.version, "hip", None):
        return Availability(False, f"torch {_version(torch)} is not a ROCm build")
    devices = _needs_cuda_devices(torch, 1)
    if not devices.available:
        return devices
    # gcnArchName carries target features after a colon (gfx942:sramecc+:xnack-).
    arch = str(torch.cuda.get_device_properties(0).gcnArchName).split(":")[0]
    arch_list = [entry.split(":")[0] for entry in torch.cuda.get_arch_list()]
    if arch not in arch_list:
        return Availability(
            False,
            f"device 0 is {arch}, and torch {_version(torch)} has kernels for "
            f"{' '.join(arch_list) or 'no GPU'} only (PYTORCH_ROCM_ARCH of its build)",
        )
    return Availability(True, f"device 0 is {arch}, in torch {_version(torch)}'s arch list")


@capability_check("nvgemm")
def _nvgemm() -> Availability:
    torch = _torch()
    if getattr(torch.version, "hip", None):
        return Availability(False, "NVGEMM needs an NVIDIA GPU (torch is a ROCm build)")
    devices = _needs_cuda_devices(torch, 1)
    if not devices.available:
        return devices
    config = _inductor_config()
    # Inductor takes any name in max_autotune_gemm_backends; a torch knows NVGEMM when it
    # has the knobs and the code generator for it.
    if not hasattr(config, "nvgemm_max_profiling_configs") or not _has_module(
        "torch._inductor.codegen.nv_universal_gemm"
    ):
        return Availability(False, f"torch {_version(torch)} has no NVGEMM Inductor backend")
    utils = importlib.import_module("torch._inductor.utils")
    for helper, what in (
        ("ensure_cute_available", "the CUTLASS DSL (CuTeDSL) Python package 'cutlass'"),
        ("ensure_nv_universal_gemm_available", "the 'cutlass.operators' Python modules"),
    ):
        probe = getattr(utils, helper, None)
        if probe is None:
            return Availability(
                False, f"torch {_version(torch)} has no torch._inductor.utils.{helper}"
            )
        if not probe():
            return Availability(False, f"{what} not installed")
    return Availability(
        True, f"torch {_version(torch)} has the NVGEMM Inductor backend; {devices.reason}"
    )


# --------------------------------------------------------------------------------------
# Distributed (c10d)


@capability_check("gloo")
def _gloo() -> Availability:
    return _c10d_backend("gloo")


@capability_check("nccl")
def _nccl() -> Availability:
    return _c10d_backend("nccl")


@capability_check("nccl2")
def _nccl2() -> Availability:
    """The whole registration of 2.14's nccl2 backend, the one check of it: what a case
    could assert without GPUs is what this probe says (the collective cases, which need
    the GPUs, test that it works)."""
    found = _c10d_backend("nccl2")
    if not found.available:
        return found
    torch = _torch()
    dist = _distributed(torch)
    if "nccl2" not in getattr(dist.Backend, "backend_list", ()):
        return Availability(False, f"torch {_version(torch)}: nccl2 is not in Backend.backend_list")
    if not hasattr(dist, "ProcessGroupNCCL2"):
        return Availability(
            False, f"torch {_version(torch)} has no torch.distributed.ProcessGroupNCCL2"
        )
    try:
        named = dist.Backend("nccl2")
    except Exception as exc:
        return Availability(False, f"torch.distributed.Backend('nccl2') failed: {exc}")
    if named != "nccl2":
        return Availability(False, f"torch.distributed.Backend('nccl2') is {named!r}")
    return Availability(
        True,
        f"torch {_version(torch)}: nccl2 registered (Backend.backend_list, ProcessGroupNCCL2)",
    )


@capability_check("xccl")
def _xccl() -> Availability:
    return _c10d_backend("xccl")


@capability_check("c10d_reconfigure")
def _c10d_reconfigure() -> Availability:
    torch = _torch()
    dist = _distributed(torch)
    if dist is None:
        return Availability(False, _NO_DIST)
    if "enable_reconfigure" not in inspect.signature(dist.init_process_group).parameters:
        return Availability(
            False, f"torch {_version(torch)}: init_process_group has no enable_reconfigure"
        )
    missing = [n for n in ("_reconfigure", "_get_reconfigure_handle") if not hasattr(dist, n)]
    if missing:
        return Availability(False, f"torch {_version(torch)} has no torch.distributed.{missing[0]}")
    # gloo implements reconfigure, which is what lets it run on the CPU.
    if not _backend_available(dist, "gloo"):
        return Availability(
            False, "c10d backend 'gloo' (which implements reconfigure) not available"
        )
    return Availability(
        True,
        f"torch {_version(torch)}: init_process_group(enable_reconfigure=), "
        "torch.distributed._reconfigure and gloo",
    )


@capability_check("shrink_group")
def _shrink_group() -> Availability:
    torch = _torch()
    dist = _distributed(torch)
    if dist is None:
        return Availability(False, _NO_DIST)
    if not hasattr(dist, "shrink_group"):
        return Availability(False, f"torch {_version(torch)} has no torch.distributed.shrink_group")
    if not (_backend_available(dist, "nccl") or _backend_available(dist, "nccl2")):
        return Availability(False, "shrink_group needs the nccl or nccl2 c10d backend")
    return _needs_cuda_devices(torch, 2)


@capability_check("rma_window")
def _rma_window() -> Availability:
    torch = _torch()
    dist = _distributed(torch)
    if dist is None:
        return Availability(False, _NO_DIST)
    missing = [n for n in ("_supports_window", "_new_window") if not hasattr(dist, n)]
    if missing:
        return Availability(False, f"torch {_version(torch)} has no torch.distributed.{missing[0]}")
    if not _backend_available(dist, "nccl2"):
        return Availability(False, "RMA windows need the nccl2 c10d backend, not available")
    return _needs_cuda_devices(torch, 2)


@capability_check("flight_recorder")
def _flight_recorder() -> Availability:
    torch = _torch()
    if _distributed(torch) is None:
        return Availability(False, _NO_DIST)
    c10d = _import("torch._C._distributed_c10d")
    for name in ("FlightRecorderHook", "_dump_fr_trace_json"):
        if c10d is None or not hasattr(c10d, name):
            return Availability(
                False, f"torch {_version(torch)} has no torch._C._distributed_c10d.{name}"
            )
    return Availability(
        True,
        f"torch {_version(torch)} has torch._C._distributed_c10d.FlightRecorderHook "
        "and _dump_fr_trace_json",
    )


@capability_check("comm_overlap_default")
def _comm_overlap_default() -> Availability:
    torch = _torch()
    value = inductor_default(torch, "aten_distributed_optimizations", "enable_simple_overlap")
    if value is MISSING:
        return Availability(
            False,
            f"torch {_version(torch)} has no "
            "torch._inductor.config.aten_distributed_optimizations.enable_simple_overlap",
        )
    if value is not True:
        return Availability(
            False,
            "torch._inductor.config.aten_distributed_optimizations.enable_simple_overlap "
            f"is {value!r}",
        )
    return Availability(
        True,
        f"torch {_version(torch)}: torch._inductor.config.aten_distributed_optimizations."
        "enable_simple_overlap is True",
    )


# --------------------------------------------------------------------------------------
# Apple MPS


@capability_check("mps_linalg")
def _mps_linalg() -> Availability:
    # The Jacobi-based linalg kernels are native Metal code with no Python surface:
    # they are there whenever MPS is.
    return _backend("mps")
