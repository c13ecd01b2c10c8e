"""Pieces backends share when they say what their containers need: device nodes that exist,
group ids read on the host, pass-through variables, and the verification of test images."""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

#: Plain test images start from Ubuntu 24.04, as TheRock's and PyTorch's CI test images do.
UBUNTU_BASE_IMAGE = "ubuntu:24.04"

#: Requirements of a GPU build of torch that a CPU-only image does not install.
GPU_RUNTIME_REQUIREMENTS = ("nvidia-*", "cuda-*", "triton", "triton-*", "rocm", "rocm-*")


def host_path(host_root: Path, path: str) -> Path:
    """`path` (absolute, as on a real host) under `host_root`."""
    return Path(host_root, path.lstrip("/"))


def existing_devices(host_root: Path, paths: Iterable[str]) -> tuple[str, ...]:
    """`--device` entries for the device nodes (or node folders) among `paths` that exist.

    A missing node is left out: the engine refuses to create a container naming one, and a
    machine without the hardware should still get a container (whose test then says the
    device is absent, exit 3) rather than a failure to start.
    """
    out: list[str] = []
    for path in paths:
        source = host_path(host_root, path)
        if source.exists():
            out.append(f"{source}:{path}:rwm")
    return tuple(out)


def group_id(host_root: Path, name: str) -> int | None:
    """The numeric id of group `name` in the host's /etc/group, or None."""
    try:
        text = host_path(host_root, "/etc/group").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        fields = line.split(":")
        if len(fields) >= 3 and fields[0] == name and fields[2].isdigit():
            return int(fields[2])
    return None


def device_group_ids(host_root: Path, pattern: str) -> list[int]:
    """Group ids owning the device nodes matching `pattern` (e.g. /dev/dri/renderD*)."""
    gids: list[int] = []
    for node in sorted(glob.glob(str(host_path(host_root, pattern)))):
        try:
            gid = os.stat(node).st_gid
        except OSError:
            continue
        if gid not in gids:
            gids.append(gid)
    return gids


def gpu_groups(host_root: Path) -> tuple[str, ...]:
    """The video and render groups by numeric id, as the host has them.

    By number, not by name: the render group often does not exist inside the image, and its
    id differs from host to host. The owners of the render nodes win over /etc/group.
    """
    gids: list[int] = device_group_ids(host_root, "/dev/dri/renderD*")
    for name in ("video", "render"):
        gid = group_id(host_root, name)
        if gid is not None and gid not in gids:
            gids.append(gid)
    return tuple(str(gid) for gid in gids if gid != 0)


def passthrough(env: Mapping[str, str] | None, names: Iterable[str]) -> dict[str, str]:
    """The variables among `names` that are set in `env`."""
    if env is None:
        return {}
    return {name: env[name] for name in names if name in env}


def any_exists(host_root: Path, patterns: Iterable[str]) -> bool:
    """Whether a path matching one of `patterns` (globs, absolute as on a real host)
    exists under `host_root`."""
    return any(glob.glob(str(host_path(host_root, pattern))) for pattern in patterns)


def suite_smoke(device: str, *extra: str) -> tuple[str, ...]:
    """`accelkit test` of the suite's graph-capture cases on `device`: with the run's
    required capabilities, a capture that does not work fails it."""
    return (
        *("accelkit", "test", "--device", device, "--suite", "conformance"),
        *("-k", "graph_capture", "--workers", "0", *extra),
    )


def compile_only(device: str, target: str) -> tuple[str, ...]:
    """`accelkit test --compile-only` for `target`: the image's triton compiles the suite's
    kernels for it with no device."""
    return ("accelkit", "test", "--device", device, "--target", target, "--compile-only")


def section(data: Mapping[str, Any], *keys: str) -> Mapping[str, Any]:
    """data[keys[0]][keys[1]]... as a mapping, or {} when any level is missing."""
    current: Any = data
    for key in keys:
        current = current.get(key) if isinstance(current, Mapping) else None
    return current if isinstance(current, Mapping) else {}


def torch_problems(doctor: Mapping[str, Any]) -> list[str]:
    """What is wrong with torch itself in an image, from its `accelkit doctor --json`."""
    torch = section(doctor, "env", "torch")
    if not torch.get("version"):
        return [f"torch does not import: {torch.get('error') or 'unknown error'}"]
    return []


def capability_problem(doctor: Mapping[str, Any], name: str) -> str | None:
    """None when capability `name` is available, else what doctor said about it."""
    cap = section(doctor, "capabilities", name)
    if cap.get("available") is True:
        return None
    return f"{name}: {cap.get('reason') or 'not reported'}"
