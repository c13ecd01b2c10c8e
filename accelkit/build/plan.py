"""A build as data: what `accelkit build` will do, before it does anything.

A `BuildRequest` holds the checked flags; a recipe (accelkit/build/recipes/) turns it into a
`BuildPlan`: the builder image and its content-hash tag, the pip requirement of the SDK,
the environment, the ordered steps (argument lists, never shell strings) and the outputs.
The plan prints for `--dry-run`, serialises to JSON for `--json` and for the builder
container (accelkit/build/incontainer.py executes it there), and is recorded in the
manifest.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

#: Where things are inside the builder container.
CONTAINER_SOURCE = "/src"  # a --source tree, mounted read-only
CONTAINER_WORK = "/work"
CONTAINER_TREE = "/work/pytorch"  # the tree that is hipified and built (a copy or a clone)
CONTAINER_DIST = "/work/dist"  # wheels land here and are copied out after the build
CONTAINER_CCACHE = "/ccache"
CONTAINER_ACCELKIT = "/opt/accelkit-run"  # accelkit's own package, mounted read-only
CONTAINER_PLAN = "/opt/accelkit-plan/plan.json"

#: Step actions incontainer.py knows. "run" runs `argv`; the others are built in.
ACTIONS = ("run", "copy-tree", "resolve-env", "check-output", "write-rocm-init", "build-triton")


@dataclass(frozen=True)
class BuildRequest:
    """Checked flags of `accelkit build <backend>` (see accelkit/cli/build.py)."""

    backend: str
    output: Path
    version: str | None = None  # the SDK / toolkit version: ROCm 7.14, CUDA 13.4
    targets: tuple[str, ...] = ()  # gfx942,gfx950 / sm_107 / pvc,bmg
    family: str | None = None
    index_url: str | None = None
    python: str = "3.12"
    torch_ref: str | None = None
    torch_version: str | None = None
    source: Path | None = None
    ccache: Path | None = None
    builder_base_image: str | None = None
    triton: bool = True
    smoke: bool = False
    build_number: int = 1


@dataclass(frozen=True)
class EnvVar:
    """One variable of the build environment.

    A literal `value`, or the output of `command` (run in the builder once the SDK is
    installed) followed by `suffix`; with `prepend` the result goes in front of the
    variable's current value (PATH).
    """

    name: str
    value: str = ""
    command: tuple[str, ...] = ()
    suffix: str = ""
    prepend: bool = False

    @property
    def dynamic(self) -> bool:
        return bool(self.command)

    def render(self) -> str:
        value = f"$({shlex.join(self.command)}){self.suffix}" if self.command else self.value
        if self.prepend:
            value = f"{value}:${self.name}"
        return f"{self.name}={value}"


@dataclass(frozen=True)
class Step:
    """One step of the build, run in order inside the builder container."""

    name: str
    description: str
    action: str = "run"
    argv: tuple[str, ...] = ()
    cwd: str | None = None
    args: Mapping[str, Any] = field(default_factory=dict, hash=False)
    may_fail: bool = False  # a failure is logged, the build goes on (e.g. an empty cache)

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"unknown step action {self.action!r}")
        if self.action == "run" and not self.argv:
            raise ValueError(f"step {self.name!r} runs nothing")
        object.__setattr__(self, "args", MappingProxyType(dict(self.args)))

    def render(self) -> str:
        if self.action == "run":
            where = f"(in {self.cwd}) " if self.cwd else ""
            return where + shlex.join(self.argv)
        details = " ".join(f"{key}={value}" for key, value in self.args.items())
        return f"[{self.action}] {details}".rstrip()


@dataclass(frozen=True)
class BuilderImage:
    """The image the build runs in: a Dockerfile of the package, its args and a content tag."""

    repository: str
    dockerfile: str
    base_image: str
    build_args: Mapping[str, str] = field(default_factory=dict, hash=False)
    tag: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "build_args", MappingProxyType(dict(self.build_args)))


@dataclass(frozen=True)
class WheelExpectation:
    """What every wheel of the build must satisfy (accelkit/build/wheel.py checks it)."""

    distribution: str = "torch"
    version: str = ""  # the full version, local part included: 2.14.1+rocm7.14
    requires: tuple[str, ...] = ()  # Requires-Dist entries that must be there, normalised
    files: tuple[str, ...] = ()  # paths that must be in the wheel
    forbidden_library_prefixes: tuple[str, ...] = ()  # bundled libraries that must not be
    targets: tuple[str, ...] = ()  # GPU targets the wheel must record
    targets_file: str | None = None  # where it records them


@dataclass(frozen=True)
class BuildPlan:
    backend: str
    inputs: Mapping[str, Any]
    builder: BuilderImage
    requirement: str | None
    index_url: str | None
    env: tuple[EnvVar, ...]
    steps: tuple[Step, ...]
    outputs: tuple[str, ...]  # file name patterns of the artifacts, in CONTAINER_DIST
    expect: WheelExpectation
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", MappingProxyType(dict(self.inputs)))

    def to_dict(self) -> dict[str, Any]:
        return dict(_plain(self))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False)

    def render(self) -> list[str]:
        """The plan as text lines, for --dry-run."""
        lines = [f"accelkit build {self.backend}"]
        lines.append(f"  builder image: {self.builder.repository}:{self.builder.tag}")
        lines.append(f"    from {self.builder.dockerfile} on {self.builder.base_image}")
        for name, value in sorted(self.builder.build_args.items()):
            lines.append(f"    --build-arg {name}={value}")
        if self.requirement:
            lines.append(f"  SDK requirement: {self.requirement}")
        if self.index_url:
            lines.append(f"  index: {self.index_url}")
        lines.append("  environment:")
        lines.extend(f"    {var.render()}" for var in self.env)
        lines.append("  steps:")
        for number, step in enumerate(self.steps, 1):
            lines.append(f"    {number}. {step.name}: {step.description}")
            lines.append(f"       {step.render()}")
        lines.append("  outputs: " + ", ".join(self.outputs))
        lines.extend(f"  note: {note}" for note in self.notes)
        return lines


def builder_tag(dockerfile_text: str, base_image: str, build_args: Mapping[str, str]) -> str:
    """The builder image's content tag: sha256 over the Dockerfile, its base and its args.

    Computed without an engine, so that --dry-run shows it; an unchanged rebuild has the
    same tag, and finding that tag on the engine skips the image build.
    """
    digest = hashlib.sha256(b"accelkit-builder-v1\0")
    digest.update(dockerfile_text.encode())
    digest.update(b"\0base\0" + base_image.encode())
    for name, value in sorted(build_args.items()):
        digest.update(b"\0arg\0" + name.encode() + b"=" + value.encode())
    return digest.hexdigest()[:16]


def _plain(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def plan_from_dict(data: Mapping[str, Any]) -> tuple[tuple[EnvVar, ...], tuple[Step, ...]]:
    """The environment and steps of a plan's JSON (what the builder container needs)."""
    env = tuple(
        EnvVar(
            name=str(item["name"]),
            value=str(item.get("value", "")),
            command=tuple(item.get("command") or ()),
            suffix=str(item.get("suffix", "")),
            prepend=bool(item.get("prepend", False)),
        )
        for item in data["env"]
    )
    steps = tuple(
        Step(
            name=str(item["name"]),
            description=str(item.get("description", "")),
            action=str(item.get("action", "run")),
            argv=tuple(item.get("argv") or ()),
            cwd=item.get("cwd"),
            args=dict(item.get("args") or {}),
            may_fail=bool(item.get("may_fail", False)),
        )
        for item in data["steps"]
    )
    return env, steps
