"""A build as data: what `accelkit build` will do, before it does anything.

A `BuildRequest` (accelkit/wheels/request.py) holds the checked flags; a recipe
(accelkit/wheels/recipes/) turns it into a `BuildPlan`: the builder image and its content-hash
tag, the pip requirement of the SDK, the environment, the ordered steps (argument lists, never
shell strings) and the outputs.
The plan prints for `--dry-run`, serialises to JSON for `--json` and for the builder
container (accelkit/incontainer/build_steps.py executes it there), and is recorded in the
manifest.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from accelkit.incontainer.steps import EnvVar, Step

__all__ = ["EnvVar", "Step"]  # the step records are defined where the builder reads them

#: Where things are inside the builder container.
CONTAINER_SOURCE = "/src"  # a --source tree, mounted read-only
CONTAINER_WORK = "/work"
CONTAINER_TREE = "/work/pytorch"  # the tree that is hipified and built (a copy or a clone)
CONTAINER_DIST = "/work/dist"  # wheels land here and are copied out after the build
CONTAINER_CCACHE = "/ccache"
CONTAINER_ACCELKIT = "/opt/accelkit-run"  # accelkit's own package, mounted read-only
CONTAINER_PLAN = "/opt/accelkit-plan/plan.json"


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
    """What every wheel of the build must satisfy (accelkit/wheels/wheel.py checks it)."""

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
