"""What this torch on this machine can do: one named check per backend and per 2.14 feature.

The checks of features any device may have are here; a capability only one backend's devices
have (cuda_graph, sm_107, gfx_in_arch_list, xpu_graph, nccl2, mps_linalg) is checked in its
backend's module (`Backend.capability_checks`), and registered here in its section, so the
order (doctor's rows, the results file's table) stays: backends, control flow, compilers,
graph capture, Inductor targets, GEMM backends, c10d backends and features, device features.
A c10d backend a device uses (`collective_backends`: gloo, nccl, xccl) gets a check of its
own.

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
The helpers the probe's and the backends' checks share are `accelkit.backends.checks`.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import os
import shutil
import subprocess
import sys
from types import ModuleType
from typing import Any

from accelkit.backends import Availability, Backend, all_backends
from accelkit.backends.base import CapabilityCheck
from accelkit.backends.checks import (
    NO_DIST,
    c10d_available,
    c10d_backend,
    cuda_devices_needed,
    distributed,
    has_module,
    import_or_none,
)
from accelkit.backends.checks import torch_version as _version
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


# --------------------------------------------------------------------------------------
# Backends first, in the registry's display order (cpu, cuda, rocm, xpu, mps).


def _register_backends() -> None:
    for backend in all_backends():
        # Backends report a missing torch themselves, with the same reason.
        capability_check(backend.name, needs_torch=False)(backend.availability)


_register_backends()


def _register_backend_checks(section: str) -> None:
    """Register the backends' own checks of `section` (`CapabilityCheck`), in the registry's
    order; one that two backends share (cuda_graph: CUDA and ROCm) once."""
    seen: dict[str, CapabilityCheck] = {}
    for backend in all_backends():
        for declared in backend.capability_checks:
            if declared.section != section or seen.setdefault(declared.name, declared) != declared:
                continue
            if declared.name in names():
                continue
            check = declared.check
            if section == "target" and declared.name in backend.targets:
                check = _target_check(backend, declared)
            capability_check(declared.name)(check)


def _target_check(backend: Backend, declared: CapabilityCheck) -> CheckFn:
    """A target's capability (sm_107): the backend's check that torch knows the target, then
    what `accelkit test --target T --compile-only` checks first: triton's toolchain knows
    it. So a ✓ means the target compiles here."""

    def check() -> Availability:
        found = declared.check()
        if not found.available:
            return found
        from accelkit.suite.crosscompile.compiling import target_toolchain

        cross = backend.cross_target(declared.name)
        if cross is None:  # pragma: no cover - a backend answers for its targets
            return Availability(False, f"the {backend.name} backend cannot compile for {cross}")
        toolchain = target_toolchain(backend, cross, os.environ)
        if toolchain.problem is not None:
            return Availability(False, toolchain.problem)
        return Availability(
            True, f"{found.reason}; {toolchain.describe()} knows {toolchain.target_name}"
        )

    return check


def _register_collectives() -> None:
    """A check per c10d backend a device uses (`collective_backends`: gloo, nccl, xccl), in
    the registry's order; a backend's own "collective" check of that name (nccl2's whole
    registration) replaces the plain one."""
    own = {
        declared.name: declared.check
        for backend in all_backends()
        for declared in backend.capability_checks
        if declared.section == "collective"
    }
    for backend in all_backends():
        for name in backend.collective_backends:
            if name not in names():
                capability_check(name)(own.get(name, functools.partial(c10d_backend, name)))


# --------------------------------------------------------------------------------------
# Control flow and dynamic shapes (all run on the CPU)


@capability_check("switch")
def _switch() -> Availability:
    torch = _torch()
    hops = import_or_none("torch._higher_order_ops")
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
    if not has_module(module_name):
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
    config = import_or_none("torch._functorch.config")
    if config is None or not hasattr(config, "enable_complex_wrapper"):
        return Availability(
            False,
            f"torch {_version(torch)} has no torch._functorch.config.enable_complex_wrapper",
        )
    if not has_module("torch._subclasses.complex_tensor"):
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
            True,
            f"torch {_version(torch)} has torch.compile; {compiler} finds <{INDUCTOR_HEADER}>",
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
    if not has_module("expecttest"):
        return Availability(
            False, "expecttest is not installed (torch's OpInfo database imports it)"
        )
    module_name = "torch.testing._internal.common_methods_invocations"
    if not has_module(module_name):
        return Availability(False, f"torch {_version(torch)} has no {module_name}")
    return Availability(True, f"torch {_version(torch)} has {module_name}; expecttest installed")


# --------------------------------------------------------------------------------------
# Graph capture: the backends' own (cuda_graph, xpu_graph, ...), then the device-generic one

_register_backend_checks("graph")


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
# Inductor targets and GEMM backends: the backends' own (sm_107, gfx_in_arch_list, nvgemm)

_register_backend_checks("target")
_register_backend_checks("gemm")


# --------------------------------------------------------------------------------------
# Distributed (c10d): a check per backend's collective, then the features


_register_collectives()


@capability_check("c10d_reconfigure")
def _c10d_reconfigure() -> Availability:
    torch = _torch()
    dist = distributed(torch)
    if dist is None:
        return Availability(False, NO_DIST)
    if "enable_reconfigure" not in inspect.signature(dist.init_process_group).parameters:
        return Availability(
            False, f"torch {_version(torch)}: init_process_group has no enable_reconfigure"
        )
    missing = [n for n in ("_reconfigure", "_get_reconfigure_handle") if not hasattr(dist, n)]
    if missing:
        return Availability(False, f"torch {_version(torch)} has no torch.distributed.{missing[0]}")
    # gloo implements reconfigure, which is what lets it run on the CPU.
    if not c10d_available(dist, "gloo"):
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
    dist = distributed(torch)
    if dist is None:
        return Availability(False, NO_DIST)
    if not hasattr(dist, "shrink_group"):
        return Availability(False, f"torch {_version(torch)} has no torch.distributed.shrink_group")
    if not (c10d_available(dist, "nccl") or c10d_available(dist, "nccl2")):
        return Availability(False, "shrink_group needs the nccl or nccl2 c10d backend")
    return cuda_devices_needed(torch, 2)


@capability_check("rma_window")
def _rma_window() -> Availability:
    torch = _torch()
    dist = distributed(torch)
    if dist is None:
        return Availability(False, NO_DIST)
    missing = [n for n in ("_supports_window", "_new_window") if not hasattr(dist, n)]
    if missing:
        return Availability(False, f"torch {_version(torch)} has no torch.distributed.{missing[0]}")
    if not c10d_available(dist, "nccl2"):
        return Availability(False, "RMA windows need the nccl2 c10d backend, not available")
    return cuda_devices_needed(torch, 2)


@capability_check("flight_recorder")
def _flight_recorder() -> Availability:
    torch = _torch()
    if distributed(torch) is None:
        return Availability(False, NO_DIST)
    c10d = import_or_none("torch._C._distributed_c10d")
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
# Features of one device itself (mps_linalg), last

_register_backend_checks("device")
