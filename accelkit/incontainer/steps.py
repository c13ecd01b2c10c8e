"""The steps of a build plan as data: what the host writes (accelkit.wheels.plan) and the
builder container reads (accelkit.incontainer.build_steps). Standard library only."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

#: Step actions build_steps.py knows. "run" runs `argv`; the others are built in.
ACTIONS = ("run", "copy-tree", "resolve-env", "check-output", "write-rocm-init", "build-triton")


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
