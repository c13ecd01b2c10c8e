"""The steps of a build plan as data: what the host writes (accelkit.wheels.plan) and the
builder container reads (accelkit.incontainer.build_steps). Standard library only.

Some values are known only inside the builder, once a step has run: the exact SDK version the
index gave for `--rocm-version 7.14`, the SDK's paths, the triton wheel's version. Steps set
them as *plan variables*, and environment values, argv items and step arguments name them as
`@{name}` (`rocm[libraries]==@{rocm_version}`, `-I@{rocm_root}/include/roctracer`). Before each
step the builder substitutes every variable set so far; naming one that no step has set yet
fails that step. `--dry-run` prints the references as they are.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

#: Step actions build_steps.py knows. "run" runs `argv`; the others are built in.
ACTIONS = (
    "run",
    "copy-tree",
    "resolve-sdk-version",
    "resolve-paths",
    "check-output",
    "check-sdk-libraries",
    "write-rocm-init",
    "triton",
    "install-build-requirements",
    "build-wheel",
)

#: `@{name}`: a reference to a plan variable.
VARIABLE_REFERENCE = re.compile(r"@\{([a-z_][a-z0-9_]*)\}")


class UnsetVariable(Exception):
    """A value names a plan variable that no step has set yet."""


def references(text: str) -> list[str]:
    """The plan variables `text` names, in order."""
    return VARIABLE_REFERENCE.findall(text)


def substitute(value: Any, variables: Mapping[str, str]) -> Any:
    """`value` (a string, or lists and mappings of them) with every `@{name}` replaced."""
    if isinstance(value, str):

        def one(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in variables:
                raise UnsetVariable(f"plan variable {name!r} is not set yet")
            return variables[name]

        return VARIABLE_REFERENCE.sub(one, value)
    if isinstance(value, Mapping):
        return {key: substitute(item, variables) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [substitute(item, variables) for item in value]
    return value


@dataclass(frozen=True)
class EnvVar:
    """One variable of the build environment.

    `value` may name plan variables (`@{rocm_root}/lib/llvm/amdgcn/bitcode`); the variable is
    set as soon as every one it names is known. With `prepend` the value goes in front of the
    variable's current value (PATH).
    """

    name: str
    value: str = ""
    prepend: bool = False

    @property
    def dynamic(self) -> bool:
        return bool(references(self.value))

    def render(self) -> str:
        value = f"{self.value}:${self.name}" if self.prepend else self.value
        return f"{self.name}={value}"


@dataclass(frozen=True)
class Step:
    """One step of the build, run in order inside the builder container.

    `env` holds variables for this step only (pip told to use the SDK index alone);
    `note` says where accelkit deliberately differs from the reference recipe, and why.
    """

    name: str
    description: str
    action: str = "run"
    argv: tuple[str, ...] = ()
    cwd: str | None = None
    args: Mapping[str, Any] = field(default_factory=dict, hash=False)
    env: Mapping[str, str] = field(default_factory=dict, hash=False)
    may_fail: bool = False  # a failure is logged, the build goes on (e.g. an empty cache)
    reference: str = ""  # the reference recipe's step this one follows
    note: str = ""

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"unknown step action {self.action!r}")
        if self.action == "run" and not self.argv:
            raise ValueError(f"step {self.name!r} runs nothing")
        object.__setattr__(self, "args", MappingProxyType(dict(self.args)))
        object.__setattr__(self, "env", MappingProxyType(dict(self.env)))

    def render(self) -> str:
        where = f"(in {self.cwd}) " if self.cwd else ""
        env = "".join(f"{shlex.quote(f'{k}={v}')} " for k, v in self.env.items())
        if self.action == "run":
            return where + env + shlex.join(self.argv)
        details = " ".join(f"{key}={value}" for key, value in self.args.items())
        return f"{where}{env}[{self.action}] {details}".rstrip()


def plan_from_dict(data: Mapping[str, Any]) -> tuple[tuple[EnvVar, ...], tuple[Step, ...]]:
    """The environment and steps of a plan's JSON (what the builder container needs)."""
    env = tuple(
        EnvVar(
            name=str(item["name"]),
            value=str(item.get("value", "")),
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
            env={str(k): str(v) for k, v in (item.get("env") or {}).items()},
            may_fail=bool(item.get("may_fail", False)),
            reference=str(item.get("reference", "")),
            note=str(item.get("note", "")),
        )
        for item in data["steps"]
    )
    return env, steps
