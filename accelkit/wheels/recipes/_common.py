"""Pieces every recipe shares: the builder image, the checkout, the wheel step."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import fields
from pathlib import Path
from typing import Any

from accelkit import resources
from accelkit.errors import BadInput
from accelkit.inputs import check_git_ref, check_python, check_torch_version
from accelkit.wheels.plan import (
    CONTAINER_CCACHE,
    CONTAINER_DIST,
    CONTAINER_SOURCE,
    CONTAINER_TREE,
    BuilderImage,
    EnvVar,
    Step,
    builder_tag,
)
from accelkit.wheels.request import BUILD_OPTIONS, BuildRequest

#: PyTorch's own manylinux builder base (TheRock's too); pin by digest in production.
MANYLINUX_BASE_IMAGE = "quay.io/pypa/manylinux_2_28_x86_64"
PYTORCH_REPO = "https://github.com/pytorch/pytorch.git"
DEFAULT_TORCH_REF = "release/2.14"
DEFAULT_TORCH_VERSION = "2.14.0"

#: The builder's Python (a venv on PATH in every builder image).
PYTHON = "python"

_RELEASE_REF = re.compile(r"v?(\d+\.\d+\.\d+)")
_BRANCH_REF = re.compile(r"release/(\d+\.\d+)")


#: Flags every recipe takes; the others are named by the recipes that take them.
COMMON_FLAGS = frozenset(
    {
        "--python",
        "--torch-ref",
        "--torch-version",
        "--source",
        "--output",
        "--ccache",
        "--builder-base-image",
        "--smoke",
        "--smoke-image",
    }
)


def accept(request: BuildRequest, *flags: str) -> None:
    """BadInput for a flag given to `accelkit build <backend>` that its recipe does not take
    (the common flags, plus `flags`)."""
    taken = COMMON_FLAGS | set(flags)
    for opt in BUILD_OPTIONS:
        if opt.positional:
            continue
        value = getattr(request, opt.name)
        if value != opt.default and opt.flag not in taken:
            spelled = opt.negative if opt.type is bool and not value and opt.negative else opt.flag
            also = f" (it takes {', '.join(sorted(set(flags)))})" if flags else ""
            raise BadInput(f"{spelled} does not apply to accelkit build {request.backend}{also}")


def builder_image(
    backend: str, dockerfile: str, request: BuildRequest, default_base: str
) -> BuilderImage:
    base = request.builder_base_image or default_base
    args = {"PYTHON_VERSION": check_python(request.python)}
    from accelkit.containers.build_inputs import fetch_script

    text = resources.dockerfile(dockerfile).read_text(encoding="utf-8")
    # The fetch script the Dockerfile COPYs is part of what the image is made of.
    text += "\0" + fetch_script().read_text(encoding="utf-8")
    return BuilderImage(
        repository=f"accelkit-builder-{backend}",
        dockerfile=dockerfile,
        base_image=base,
        build_args=args,
        tag=builder_tag(text, base, args),
    )


def torch_version(request: BuildRequest) -> str:
    """The version the wheel gets: --torch-version, else from the ref or the source tree."""
    if request.torch_version is not None:
        return check_torch_version(request.torch_version)
    if request.source is not None:
        version_file = Path(request.source, "version.txt")
        if version_file.is_file():
            text = version_file.read_text(encoding="utf-8").strip()
            # PyTorch's version.txt says 2.14.0a0 on main: keep the release part.
            release = re.match(r"\d+\.\d+\.\d+", text)
            if release:
                return release.group(0)
    if request.torch_ref is not None:
        match = _RELEASE_REF.fullmatch(request.torch_ref)
        if match:
            return match.group(1)
        match = _BRANCH_REF.fullmatch(request.torch_ref)
        if match:
            return f"{match.group(1)}.0"
    return DEFAULT_TORCH_VERSION


def checkout_step(request: BuildRequest) -> Step:
    if request.source is not None and request.torch_ref is not None:
        raise BadInput("--source and --torch-ref are alternatives: give one")
    if request.source is not None:
        return Step(
            name="checkout",
            description=f"copy the source tree {request.source} (mounted read-only)",
            action="copy-tree",
            args={"source": CONTAINER_SOURCE, "target": CONTAINER_TREE},
        )
    ref = check_git_ref(request.torch_ref or DEFAULT_TORCH_REF)
    clone = ("git", "clone", "--depth", "1", "--branch", ref)
    submodules = ("--recurse-submodules", "--shallow-submodules")
    return Step(
        name="checkout",
        description=f"clone PyTorch at {ref} with its submodules",
        argv=(*clone, *submodules, "--", PYTORCH_REPO, CONTAINER_TREE),
    )


def requirements_step() -> Step:
    return Step(
        name="build-requirements",
        description="install torch's build requirements",
        argv=(PYTHON, "-m", "pip", "install", "-r", "requirements.txt"),
        cwd=CONTAINER_TREE,
    )


def wheel_step() -> Step:
    pip_wheel = (PYTHON, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation")
    return Step(
        name="wheel",
        description="build the torch wheel (no build isolation: the SDK is in this env)",
        argv=(*pip_wheel, "--wheel-dir", CONTAINER_DIST, "."),
        cwd=CONTAINER_TREE,
    )


def common_env(request: BuildRequest, version: str) -> list[EnvVar]:
    env = [
        EnvVar("PYTORCH_BUILD_VERSION", version),
        EnvVar("PYTORCH_BUILD_NUMBER", str(request.build_number)),
    ]
    if request.ccache is not None:
        env += [
            EnvVar("CCACHE_DIR", CONTAINER_CCACHE),
            EnvVar("CMAKE_C_COMPILER_LAUNCHER", "ccache"),
            EnvVar("CMAKE_CXX_COMPILER_LAUNCHER", "ccache"),
        ]
    return env


def inputs(request: BuildRequest, **extra: Any) -> dict[str, Any]:
    """The request as plain data, for the plan and the manifest."""
    data: dict[str, Any] = {}
    for f in fields(BuildRequest):
        value = getattr(request, f.name)
        data[f.name] = str(value) if isinstance(value, Path) else value
    data.update(extra)
    return data


def semicolons(items: Iterable[str]) -> str:
    return ";".join(items)
