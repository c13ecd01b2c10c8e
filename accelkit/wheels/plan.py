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
from dataclasses import dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from accelkit.incontainer.steps import EnvVar, Step, substitute

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
class CodeObjects:
    """GPU code objects the wheel's native libraries must carry, one per target: read from the
    clang offload bundles in their `.hip_fatbin` sections (accelkit/wheels/offload.py)."""

    targets: tuple[str, ...]
    bundle_prefix: str  # the bundle entry id before the target: hipv4-amdgcn-amd-amdhsa--
    elf_machine: int  # e_machine of each code object (EM_AMDGPU)
    elf_mach: Mapping[str, int] = field(default_factory=dict, hash=False)  # target -> mach

    def __post_init__(self) -> None:
        object.__setattr__(self, "elf_mach", MappingProxyType(dict(self.elf_mach)))


@dataclass(frozen=True)
class InitModule:
    """A generated module that preloads the SDK's libraries at import (ROCm's
    torch/_rocm_init.py): the names it must preload, and the version it must check."""

    path: str
    preload: tuple[str, ...]
    check_version: str  # may name plan variables: @{rocm_version}
    known_variable: str  # the plan variable holding the SDK's library names, comma separated


@dataclass(frozen=True)
class WheelExpectation:
    """What every wheel of the build must satisfy (accelkit/wheels/wheel.py checks it).

    Strings may name plan variables (`@{rocm_version}`): `resolved` fills them in with the
    values the builder reported once the build has run.
    """

    distribution: str = "torch"
    version: str = ""  # the full version, local part included: 2.14.1+rocm@{rocm_version}
    requires: tuple[str, ...] = ()  # Requires-Dist entries that must be there, normalised
    platform_specific: bool = False  # a platform tag, never py3-none-any
    files: tuple[str, ...] = ()  # paths that must be in the wheel
    forbidden_library_prefixes: tuple[str, ...] = ()  # bundled libraries that must not be
    init_module: InitModule | None = None
    code_objects: CodeObjects | None = None
    values: Mapping[str, str] = field(default_factory=dict, hash=False)  # the plan variables

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", MappingProxyType(dict(self.values)))

    def resolved(self, values: Mapping[str, str]) -> WheelExpectation:
        """This expectation with the plan variables in `values` filled in (UnsetVariable
        for one it names that the build never set)."""
        init = self.init_module
        if init is not None:
            init = replace(init, check_version=substitute(init.check_version, values))
        return replace(
            self,
            version=substitute(self.version, values),
            requires=tuple(substitute(list(self.requires), values)),
            init_module=init,
            values=dict(values),
        )


@dataclass(frozen=True)
class SmokeCheck:
    """What the smoke test checks after installing the wheel in a clean container: the
    module imports, the named modules do not warn, every library is loaded afterwards."""

    module: str = "torch"
    warnings_as_errors: tuple[str, ...] = ()
    libraries: Mapping[str, str] = field(default_factory=dict, hash=False)  # name -> pattern

    def __post_init__(self) -> None:
        object.__setattr__(self, "libraries", MappingProxyType(dict(self.libraries)))


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
    variables: Mapping[str, str] = field(default_factory=dict)  # name -> what sets it
    smoke: SmokeCheck = field(default_factory=SmokeCheck)
    reference: str = ""  # the upstream recipe the steps follow

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", MappingProxyType(dict(self.inputs)))
        object.__setattr__(self, "variables", MappingProxyType(dict(self.variables)))

    def to_dict(self) -> dict[str, Any]:
        return dict(_plain(self))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False)

    def render(self) -> list[str]:
        """The plan as text lines, for --dry-run."""
        lines = [f"accelkit build {self.backend}"]
        if self.reference:
            lines.append(f"  follows: {self.reference}")
        lines.append(f"  builder image: {self.builder.repository}:{self.builder.tag}")
        lines.append(f"    from {self.builder.dockerfile} on {self.builder.base_image}")
        for name, value in sorted(self.builder.build_args.items()):
            lines.append(f"    --build-arg {name}={value}")
        if self.requirement:
            lines.append(f"  SDK requirement: {self.requirement}")
        if self.index_url:
            lines.append(f"  index: {self.index_url}")
        if self.variables:
            lines.append("  set in the builder:")
            lines.extend(f"    @{{{name}}}: {what}" for name, what in self.variables.items())
        lines.append("  environment:")
        lines.extend(f"    {var.render()}" for var in self.env)
        lines.append("  steps:")
        for number, step in enumerate(self.steps, 1):
            lines.append(f"    {number}. {step.name}: {step.description}")
            lines.append(f"       {step.render()}")
            if step.reference:
                lines.append(f"       reference: {step.reference}")
            if step.note:
                lines.append(f"       differs: {step.note}")
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
