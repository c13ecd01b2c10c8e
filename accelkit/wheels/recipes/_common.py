"""Pieces every recipe shares: the builder image, the checkout, the wheel step."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable
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
    values = request.params()
    for opt in BUILD_OPTIONS:
        if opt.positional:
            continue
        value = values[opt.name]
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


def _git(source: Path, *args: str) -> str | None:
    """`git -C source ARGS`'s output, None where git fails (or there is no git)."""
    try:
        proc = subprocess.run(
            ["git", "-C", str(source), *args], capture_output=True, text=True, check=False
        )
    except FileNotFoundError:
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def check_checkout_of(source: Path, ref: str) -> str:
    """The commit of `ref` that `source` is a clean checkout of (HEAD at it, no tracked file
    changed); BadInput otherwise. `--source DIR --torch-ref REF` builds a checkout made
    outside the builder (a CI job's own `git clone --branch REF`), recorded with its ref."""
    check_git_ref(ref)
    top = _git(source, "rev-parse", "--show-toplevel")
    head = _git(source, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    if top is None or head is None or Path(top).resolve() != Path(source).resolve():
        raise BadInput(
            f"--source {source} with --torch-ref {ref}: not a git checkout (give one of them, "
            f"or a clone of PyTorch at {ref})"
        )
    commit = _git(
        source, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"
    )
    if commit is None:
        raise BadInput(f"--source {source} has no ref {ref} (--torch-ref): clone it at {ref}")
    if commit != head:
        raise BadInput(
            f"--source {source} is at {head[:12]}, not at --torch-ref {ref} ({commit[:12]})"
        )
    changed = _git(source, "status", "--porcelain", "--untracked-files=no")
    if changed:
        first = changed.splitlines()[0].strip()
        raise BadInput(
            f"--source {source} is not a clean checkout of {ref}: tracked files changed "
            f"({first}, ...)"
        )
    return commit


def checkout_step(request: BuildRequest) -> Step:
    if request.source is not None:
        checkout = ""
        if request.torch_ref is not None:
            commit = check_checkout_of(request.source, request.torch_ref)
            checkout = f"; a checkout of {request.torch_ref} at {commit}"
        return Step(
            name="checkout",
            description=f"copy the source tree {request.source} (mounted read-only{checkout})",
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
    for name, value in request.values().items():
        data[name] = str(value) if isinstance(value, Path) else value
    data.update(extra)
    return data


def semicolons(items: Iterable[str]) -> str:
    return ";".join(items)
