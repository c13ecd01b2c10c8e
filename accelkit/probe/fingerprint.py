"""A structured description of the environment, in the spirit of torch.utils.collect_env.

`fingerprint()` returns plain JSON-serialisable data (it goes into every results file and
`accelkit doctor --json`). It never raises: a section that cannot be read becomes
`{"error": "..."}`, and it works when torch is not installed.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import os
import platform
import re
import socket
import sys
import sysconfig
from collections.abc import Callable, Mapping
from typing import Any

from accelkit import __version__
from accelkit.incontainer.torch_source import read_record as read_torch_source
from accelkit.torch_import import torch_import_error, torch_or_none

# Environment variables that change what torch sees or builds. A fixed allow-list: the
# environment of a CI runner holds tokens, and a fingerprint is published.
RELEVANT_ENV_VARS: tuple[str, ...] = (
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "ZE_AFFINITY_MASK",
    "ONEAPI_DEVICE_SELECTOR",
    "TORCH_CUDA_ARCH_LIST",
    "PYTORCH_ROCM_ARCH",
    "TORCH_XPU_ARCH_LIST",
    # Switches of 2.14 features the suite tests.
    "TORCH_DIST_USE_NCCL2",
    "TORCH_NCCL_USE_COMM_NONBLOCKING",
    "TORCH_FR_BUFFER_SIZE",
    "TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_BACKENDS",
    # The ptxas triton compiles with (a test image for sm_107 points it at its own).
    "TRITON_PTXAS_PATH",
    "TRITON_PTXAS_BLACKWELL_PATH",
)

# Belt and braces for the allow-list above: never report anything that looks like a secret.
_SECRET_LOOKING = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|KEY|COOKIE|SESSION", re.I)

_DOCKER_TIMEOUT_S = 2.0

Json = dict[str, object]


def fingerprint(*, include_docker: bool = True) -> Json:
    """The environment as plain data; `include_docker=False` skips asking the Docker engine."""
    sections: dict[str, Callable[[], object]] = {
        "python": _python,
        "os": _os,
        "cpu": _cpu,
        "host": _host,
        "torch": _torch,
        "backends": _backends,
        "env": _env,
    }
    out: Json = {"accelkit": __version__}
    for key, section in sections.items():
        out[key] = _guarded(section)
    out["docker"] = _guarded(_docker) if include_docker else {"engine": None, "skipped": True}
    return out


def _guarded(section: Callable[[], object]) -> object:
    try:
        return _jsonable(section())
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


def _jsonable(value: object) -> object:
    """`value` with everything JSON cannot hold turned into strings."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _jsonable(dataclasses.asdict(value))
    return str(value)


def _python() -> Json:
    gil_enabled = getattr(sys, "_is_gil_enabled", None)
    return {
        "version": platform.python_version(),
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
        # The free-threaded build (3.13t): compiled without the GIL, and running without it.
        "free_threaded": bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
        "gil_enabled": bool(gil_enabled()) if gil_enabled is not None else True,
    }


def _os() -> Json:
    return {
        "system": platform.system(),
        "platform": platform.platform(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "distro": _distro(),
    }


def _distro() -> Json | None:
    try:
        release = platform.freedesktop_os_release()  # /etc/os-release, else /usr/lib/os-release
    except (OSError, AttributeError):
        return None
    return {
        "id": release.get("ID"),
        "version_id": release.get("VERSION_ID"),
        "name": release.get("PRETTY_NAME") or release.get("NAME"),
    }


def _cpu() -> Json:
    from accelkit.backends.cpu import cpu_model  # backends import accelkit.probe: late

    usable: int | None = None
    if hasattr(os, "sched_getaffinity"):
        try:
            usable = len(os.sched_getaffinity(0))
        except OSError:
            usable = None
    return {"model": cpu_model(), "logical_cpus": os.cpu_count(), "usable_cpus": usable}


def _host() -> Json:
    return {"name": socket.gethostname()}


def _torch() -> Json:
    installed = _spec_exists("torch")
    torch = torch_or_none()
    if torch is None:
        return {"installed": installed, "error": torch_import_error()}
    version = getattr(torch, "version", None)
    cxx11abi: bool | None = None
    compiled_with_abi = getattr(torch, "compiled_with_cxx11_abi", None)
    if compiled_with_abi is not None:
        try:
            cxx11abi = bool(compiled_with_abi())
        except Exception:
            cxx11abi = None
    return {
        "installed": True,
        "version": str(torch.__version__),
        "git_version": getattr(version, "git_version", None),
        "debug": getattr(version, "debug", None),
        # The toolkit each backend's torch build names (cuda, hip, xpu), None where not built.
        **{name: getattr(version, name, None) for name in _torch_builds()},
        "cxx11abi": cxx11abi,
        "path": os.path.dirname(str(getattr(torch, "__file__", "") or "")) or None,
        # Where it was installed from (channel, index or wheel) and the version pip resolved,
        # when accelkit installed it (test images; runners that record it).
        "source": read_torch_source(),
    }


def _torch_builds() -> list[str]:
    """The `torch.version` attributes of the backends' builds, in the registry's order."""
    from accelkit.backends import all_backends

    return list(dict.fromkeys(b.torch_build for b in all_backends() if b.torch_build))


def _spec_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _backends() -> Json:
    from accelkit.backends import all_backends

    out: Json = {}
    for backend in all_backends():
        out[backend.name] = _guarded(functools.partial(_backend, backend))
    return out


def _backend(backend: Any) -> Json:
    availability = backend.availability()
    return {
        "available": availability.available,
        "reason": availability.reason,
        "devices": [dataclasses.asdict(device) for device in backend.devices()],
        "versions": backend.versions(),
    }


def _env() -> dict[str, str]:
    return {
        name: os.environ[name]
        for name in RELEVANT_ENV_VARS
        if name in os.environ and not _SECRET_LOOKING.search(name)
    }


def _docker() -> Json:
    from accelkit.containers.engine import engine_version

    return {"engine": engine_version(timeout=_DOCKER_TIMEOUT_S)}
