"""Expansion: every entry becomes explicit legs, named, checked and in a stable order.

Order: entries as written; within an entry, targets then pythons as written, minus the
entry's `exclude`, followed by its `include` items; the file's `exclude` is applied last.
An `exclude` that matches no leg is an error: it is almost always a typo.

A leg's own keys become its commands' arguments here, so the leg tests what its name says:
`python` becomes `--python` of `accelkit setup` and `accelkit build`, `base_image` (or the
backend's default test-image base) `--base-image`, and `torch` either `--torch-channel` with
the backend's index for that channel and toolkit (`Backend.torch_index`) or, for a build,
`--torch-ref` and the built wheel. The matrix never writes those flags itself
(`rules.LEG_SET_FLAGS`); finally every leg's build, setup and test arguments are parsed and
checked by the real commands (`accelkit.matrix.commands`), so a matrix that validates is one
whose commands accept their arguments.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from accelkit.backends import Backend
from accelkit.backends import get as get_backend
from accelkit.backends import names as backend_names
from accelkit.errors import BadInput, ConfigError
from accelkit.matrix import rules
from accelkit.matrix.model import (
    LegMatcher,
    LegSettings,
    Location,
    MatrixEntry,
    MatrixFile,
)
from accelkit.matrix.values import hint_for

FILTER_KEYS: tuple[str, ...] = (
    "name",
    "backend",
    "backend_version",
    "target",
    "family",
    "device",
    "python",
    "suite",
    "runner",
    "build",
    "container",
    "variant",
    "torch_channel",
    "torch_ref",
)


def leg_name(
    backend: str, version: str | None, target: str | None, python: str, variant: str | None
) -> str:
    """`rocm7.14-gfx942-py3.12`, `cpu-py3.12`, `cuda13.4-sm_107-py3.12-<variant>`."""
    parts = [f"{backend}{version or ''}"]
    if target is not None:
        parts.append(target)
    parts.append(f"py{python}")
    if variant is not None:
        parts.append(variant)
    return "-".join(parts)


def expand(matrix: MatrixFile) -> tuple[MatrixEntry, ...]:
    """All legs of `matrix`, explicit and unique; ConfigError (with file:line) otherwise."""
    legs: list[MatrixEntry] = []
    for entry in matrix.entries:
        produced = [
            _leg(
                entry.backend,
                entry.backend_version,
                target,
                python,
                entry.settings,
                entry.location,
            )
            for target in entry.targets
            for python in entry.pythons
        ]
        produced = _apply_excludes(produced, entry.excludes, "of this entry")
        for include in entry.includes:
            produced.extend(
                _leg(
                    entry.backend,
                    entry.backend_version,
                    include.target,
                    python,
                    include.settings,
                    include.location,
                )
                for python in include.pythons
            )
        legs.extend(produced)
    legs = _apply_excludes(legs, matrix.excludes, "in the file")
    from accelkit.matrix.commands import check_leg_commands

    for leg in legs:
        check_leg_commands(leg)
    seen: dict[str, MatrixEntry] = {}
    for leg in legs:
        first = seen.get(leg.name)
        if first is not None:
            raise ConfigError(
                f"duplicate leg {leg.name!r} (also produced by line {first.location.line}); "
                "remove one or give it a 'variant'",
                path=leg.location.path,
                line=leg.location.line,
            )
        seen[leg.name] = leg
    _check_jobs(legs)
    return tuple(legs)


def _check_jobs(legs: Sequence[MatrixEntry]) -> None:
    """Job names (a leg's, or its shards' and nodes') are unique, and GitHub takes them all."""
    from accelkit.matrix.jobs import leg_jobs

    jobs: dict[str, MatrixEntry] = {}
    for leg in legs:
        for job in leg_jobs(leg):
            first = jobs.setdefault(job.name, leg)
            if first is not leg:
                raise ConfigError(
                    f"leg {leg.name!r} has a job named {job.name!r}, like a job of leg "
                    f"{first.name!r} (line {first.location.line}); rename one with 'variant'",
                    path=leg.location.path,
                    line=leg.location.line,
                )
    if len(jobs) > rules.MAX_JOBS:
        raise ConfigError(
            f"the matrix has {len(jobs)} jobs (legs times their shards or nodes); a GitHub "
            f"matrix takes at most {rules.MAX_JOBS}",
            path=legs[0].location.path,
            line=None,
        )


def _apply_excludes(
    legs: list[MatrixEntry], matchers: Iterable[LegMatcher], scope: str
) -> list[MatrixEntry]:
    for matcher in matchers:
        kept = [leg for leg in legs if not matcher.matches(leg)]
        if len(kept) == len(legs):
            shown = ", ".join(f"{key}={value}" for key, value in matcher.criteria)
            raise ConfigError(
                f"exclude {{{shown}}} matches no leg {scope}",
                path=matcher.location.path,
                line=matcher.location.line,
            )
        legs = kept
    return legs


def _leg(
    backend_name: str,
    version: str | None,
    target: str | None,
    python: str,
    settings: LegSettings,
    location: Location,
) -> MatrixEntry:
    backend = get_backend(backend_name)
    name = leg_name(backend_name, version, target, python, settings.variant)
    runner = settings.runner.for_target(target)
    if not runner:
        where = settings.runner.location or location
        detail = f" for target {target}" if settings.runner.per_target else ""
        raise ConfigError(
            f"leg {name!r} has no runner labels{detail}; set 'runner'",
            path=where.path,
            line=where.line,
        )
    family = backend.family_of(target) if target is not None else None
    values = {
        "backend_version": version,
        "family": family,
        "name": name,
        "python": python,
        "target": target,
        "torch_channel": settings.torch.channel,
        "torch_ref": settings.torch.ref,
    }

    def fill(args: tuple[str, ...], what: str) -> tuple[str, ...]:
        out: list[str] = []
        for arg in args:

            def value_of(match: re.Match[str], arg: str = arg) -> str:
                key = match.group(1)
                value = values.get(key)
                if value is None:
                    raise ConfigError(
                        f"{what} item {arg!r}: {{{key}}} has no value for leg {name!r}",
                        path=location.path,
                        line=location.line,
                    )
                return value

            filled = rules.PLACEHOLDER.sub(value_of, arg)
            problem = rules.check_pattern(filled, rules.ARG, f"{what} item", "one safe token")
            if problem is None:
                problem = rules.leg_set_flag_problem(what, filled)
            if problem is not None:
                raise ConfigError(problem, path=location.path, line=location.line)
            out.append(filled)
        return tuple(out)

    def fail(message: str) -> ConfigError:
        return ConfigError(f"leg {name!r}: {message}", path=location.path, line=location.line)

    torch_index = _torch_index(backend, version, settings, fail)
    base_image: str | None = None
    setup_extra: list[str] = []
    build_extra: list[str] = []
    if settings.build:
        build_extra = [f"--python={python}", f"--torch-ref={settings.torch.ref}"]
    if settings.container and settings.image is None:
        # The setup's own --arch (from setup_args) is checked with the rest of its arguments.
        base_image = settings.base_image or backend.test_base_image(version)
        setup_extra = [f"--python={python}", f"--base-image={base_image}"]
        if settings.build:
            setup_extra.append(f"--torch-wheel={rules.WHEELHOUSE}")
        else:
            channel = settings.torch.channel
            setup_extra += [f"--torch-channel={channel}", f"--torch-index={torch_index}"]

    return MatrixEntry(
        name=name,
        backend=backend_name,
        backend_version=version,
        target=target,
        family=family,
        device=backend.name,  # `accelkit test --device` takes accelkit's backend names
        python=python,
        torch=settings.torch,
        suites=settings.suites,
        runner=runner,
        image=settings.image,
        base_image=base_image,
        container=settings.container,
        build=settings.build,
        build_args=(*fill(settings.build_args, "build_args"), *build_extra),
        setup_args=(*fill(settings.setup_args, "setup_args"), *setup_extra),
        test_args=(
            *fill(settings.test_args, "test_args"),
            *requirement_args(settings),
            *([f"--explore-seeds={settings.explore_seeds}"] if settings.explore_seeds else []),
        ),
        timeout_minutes=settings.timeout_minutes,
        variant=settings.variant,
        location=location,
        torch_index=torch_index,
        require=settings.require,
        waive=settings.waive,
        shards=settings.shards,
        nodes=settings.nodes,
        rdzv_endpoint=settings.rdzv_endpoint,
        node_runners=settings.runner.per_node,
        explore_seeds=settings.explore_seeds,
    )


def requirement_args(settings: LegSettings) -> tuple[str, ...]:
    """`accelkit test` options for a leg's `require` and `waive` (the reasons stay in the
    matrix: they are text, and never reach a command line)."""
    args: list[str] = []
    if settings.require:
        args.append("--require=" + ",".join(settings.require))
    if settings.waive:
        args.append("--waive=" + ",".join(name for name, _ in settings.waive))
    return tuple(args)


def _torch_index(
    backend: Backend,
    version: str | None,
    settings: LegSettings,
    fail: Callable[[str], ConfigError],
) -> str | None:
    """The index a channel leg installs torch from; None for a leg that builds torch."""
    channel = settings.torch.channel
    if channel is None:
        return None
    index = backend.torch_index(channel, version)
    if index is None:
        toolkit = f" for {backend.name} {version}" if version else f" for {backend.name}"
        raise fail(
            f"PyTorch publishes no torch wheels{toolkit} on the {channel} channel; build it "
            "(torch: {ref: ...} with build: true)"
        )
    return index


@dataclass(frozen=True)
class LegFilter:
    """`--filter KEY=VALUE[,VALUE...]`: a leg passes when any value (a glob) matches."""

    key: str
    patterns: tuple[str, ...]

    def matches(self, leg: MatrixEntry) -> bool:
        if self.key == "suite":
            candidates: Sequence[str] = leg.suites
        elif self.key == "runner":
            candidates = (*leg.runner, *(label for node in leg.node_runners for label in node))
        else:
            value = leg.match_values().get(self.key)
            candidates = () if value is None else (value,)
        return any(
            fnmatch.fnmatchcase(candidate, pattern)
            for candidate in candidates
            for pattern in self.patterns
        )

    def __str__(self) -> str:
        return f"{self.key}={','.join(self.patterns)}"


def parse_filters(texts: Sequence[str]) -> tuple[LegFilter, ...]:
    """Filters from the command line; repeated keys are merged (any of their values)."""
    merged: dict[str, list[str]] = {}
    for text in texts:
        key, sep, value = text.partition("=")
        key = key.strip()
        if not sep or not key:
            raise BadInput(f"--filter {text!r}: expected KEY=VALUE, e.g. backend=rocm")
        if key not in FILTER_KEYS:
            hint = hint_for(key, FILTER_KEYS)
            raise BadInput(f"--filter: unknown key {key!r}{hint}; valid: {', '.join(FILTER_KEYS)}")
        patterns = [part.strip() for part in value.split(",") if part.strip()]
        if not patterns:
            raise BadInput(f"--filter {text!r}: no value after '='")
        _check_filter_values(key, patterns)
        merged.setdefault(key, []).extend(patterns)
    return tuple(LegFilter(key, tuple(patterns)) for key, patterns in merged.items())


def _check_filter_values(key: str, patterns: Sequence[str]) -> None:
    # Keys with a closed set of values get a hint; a typo would otherwise look like an
    # empty matrix.
    known: Sequence[str] = ()
    if key in ("backend", "device"):
        known = backend_names()
    elif key == "suite":
        known = rules.SUITES
    elif key in ("build", "container"):
        known = ("true", "false")
    for pattern in patterns:
        if known and not any(char in pattern for char in "*?[") and pattern not in known:
            hint = hint_for(pattern, known)
            raise BadInput(
                f"--filter {key}={pattern}: unknown {key}{hint}; valid: {', '.join(known)}"
            )


def apply_filters(
    legs: Sequence[MatrixEntry], filters: Sequence[LegFilter]
) -> tuple[MatrixEntry, ...]:
    """The legs that pass every filter, in their original order."""
    return tuple(leg for leg in legs if all(f.matches(leg) for f in filters))
