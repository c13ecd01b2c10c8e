"""From a matrix YAML file to a validated `MatrixFile`; every failure is a located ConfigError.

The schema, in brief (docs in `matrices/README.md`):

    schema: 1
    name: nightly                       # optional slug
    description: ...                    # optional
    defaults: {<entry setting>: ...}    # merged under every entry
    entries:
      - backend: rocm                   # accelkit.backends.names()
        backend_version: "7.14"         # rocm, cuda, xpu; absent for cpu and mps
        targets: [gfx942, gfx950]       # from the backend's `targets` (and ROCm families)
        python: ["3.12"]
        <setting>: ...                  # overrides defaults
        include: [{target: gfx942, python: "3.13", <setting>: ...}]
        exclude: [{target: gfx950, python: "3.13"}]
    exclude: [{backend: cuda, target: sm_90}]   # over expanded legs

Settings: torch {channel | ref}, suites, runner (labels, {target: labels}, or one label list
per node), image, base_image, container, build, build_args, setup_args, test_args,
timeout_minutes, variant, require (capabilities the leg must have besides its backend's),
waive ({capability: why}), shards, nodes and rdzv_endpoint (`accelkit.matrix.scaleout`),
explore_seeds (an explore leg: `accelkit.matrix.explore`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from accelkit import inputs
from accelkit.backends import Backend, all_backends
from accelkit.errors import BadInput
from accelkit.matrix import rules
from accelkit.matrix.explore import explore_seeds
from accelkit.matrix.loader import LocatedList, LocatedMap, load_yaml
from accelkit.matrix.model import (
    EntrySpec,
    IncludeSpec,
    LegMatcher,
    LegSettings,
    Location,
    MatrixFile,
    RunnerSpec,
    TorchSource,
)
from accelkit.matrix.requirements import requirements
from accelkit.matrix.scaleout import scale_out
from accelkit.matrix.values import Scope, ValueChecker, hint_for, kind

SCHEMA_VERSION = 1

SETTING_KEYS: tuple[str, ...] = (
    *("torch", "suites", "runner", "image", "base_image", "container", "build", "build_args"),
    *("setup_args", "test_args", "timeout_minutes", "variant", "require", "waive"),
    *("shards", "nodes", "rdzv_endpoint", "explore_seeds"),
)
TOP_KEYS: tuple[str, ...] = ("schema", "name", "description", "defaults", "entries", "exclude")
DEFAULT_KEYS: tuple[str, ...] = ("python", *SETTING_KEYS)
ENTRY_KEYS: tuple[str, ...] = (
    "backend",
    "backend_version",
    "targets",
    "python",
    *SETTING_KEYS,
    "include",
    "exclude",
)
INCLUDE_KEYS: tuple[str, ...] = ("target", "python", *SETTING_KEYS)
ENTRY_EXCLUDE_KEYS: tuple[str, ...] = ("target", "python")
TOP_EXCLUDE_KEYS: tuple[str, ...] = (
    "name",
    "backend",
    "backend_version",
    "target",
    "family",
    "python",
    "variant",
)
TORCH_KEYS: tuple[str, ...] = ("channel", "ref")


def load_matrix(path: str | os.PathLike[str]) -> MatrixFile:
    """Load and validate a matrix file; raises ConfigError (exit 2) with file:line."""
    shown = os.fspath(path)
    return _Parser(shown).parse(load_yaml(path))


def backend_targets(backend: Backend) -> tuple[str, ...]:
    """Targets a leg of `backend` may name: its `targets`, plus any families it defines."""
    return (*backend.targets, *backend.families)


class _Parser(ValueChecker):
    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.backends = {backend.name: backend for backend in all_backends()}

    # --- the file ------------------------------------------------------------------------

    def parse(self, data: object) -> MatrixFile:
        if data is None:
            self.fail("the file is empty; expected a mapping with 'schema' and 'entries'", 1)
        top = self.mapping(data, getattr(data, "line", 1), "the top level of a matrix file")
        self.check_keys(top, TOP_KEYS, "the top level")
        if "schema" not in top:
            self.fail(f"missing 'schema: {SCHEMA_VERSION}' at the top level", top.line)
        schema = top["schema"]
        if isinstance(schema, bool) or schema != SCHEMA_VERSION:
            self.fail(
                f"unsupported schema {schema!r}; this accelkit reads schema {SCHEMA_VERSION}",
                top.line_of("schema"),
            )
        name = None
        if top.get("name") is not None:
            name = self.string(top["name"], top.line_of("name"), "name", rules.SLUG, "[a-z0-9._-]")
        description = top.get("description")
        if description is not None and not isinstance(description, str):
            self.fail(
                f"description must be a string, not {kind(description)}",
                top.line_of("description"),
            )
        defaults = None
        if top.get("defaults") is not None:
            defaults = self.mapping(top["defaults"], top.line_of("defaults"), "defaults")
            self.check_keys(defaults, DEFAULT_KEYS, "defaults")
        if "entries" not in top:
            self.fail("missing 'entries' (the list of backends to build and test)", top.line)
        entries_value = top["entries"]
        if not isinstance(entries_value, LocatedList) or not entries_value:
            self.fail(
                f"entries must be a non-empty list, not {kind(entries_value)}",
                top.line_of("entries"),
            )
        entries = tuple(
            self.entry(
                self.mapping(item, entries_value.line_of(index), f"entries[{index}]"),
                defaults,
                f"entries[{index}]",
            )
            for index, item in enumerate(entries_value)
        )
        excludes = self.matchers(top, TOP_EXCLUDE_KEYS, "exclude", backend=None)
        return MatrixFile(
            path=self.path,
            name=name,
            description=description,
            entries=entries,
            excludes=excludes,
        )

    def entry(self, raw: LocatedMap, defaults: LocatedMap | None, where: str) -> EntrySpec:
        self.check_keys(raw, ENTRY_KEYS, where)
        if "backend" not in raw:
            self.fail(f"{where}: missing 'backend' (one of {', '.join(self.backends)})", raw.line)
        backend_name = raw["backend"]
        line = raw.line_of("backend")
        if not isinstance(backend_name, str) or backend_name not in self.backends:
            shown = backend_name if isinstance(backend_name, str) else kind(backend_name)
            hint = hint_for(shown, self.backends) if isinstance(backend_name, str) else ""
            self.fail(f"unknown backend {shown!r}{hint}; known: {', '.join(self.backends)}", line)
        backend = self.backends[backend_name]
        version = self.backend_version(raw, backend)
        targets = self.targets(raw, backend, version)
        scope = Scope(raw, defaults)
        pythons = self.pythons(scope, where)
        settings = self.settings(scope, backend, where)
        includes = self.includes(raw, defaults, backend, version, pythons)
        excludes = self.matchers(raw, ENTRY_EXCLUDE_KEYS, f"{where} exclude", backend=backend)
        return EntrySpec(
            backend=backend.name,
            backend_version=version,
            targets=targets,
            pythons=pythons,
            settings=settings,
            includes=includes,
            excludes=excludes,
            location=Location(self.path, raw.line),
        )

    def backend_version(self, raw: LocatedMap, backend: Backend) -> str | None:
        rule = backend.version_rule
        value = raw.get("backend_version")
        line = raw.line_of("backend_version")
        if rule is None:
            if value is not None:
                self.fail(f"backend {backend.name!r} takes no backend_version", line)
            return None
        if value is None:
            self.fail(
                f"backend {backend.name!r} needs backend_version (a {rule.what} "
                f"like '{rule.example}')",
                line,
            )
        if isinstance(value, str) and rule.problem(value) is not None:
            self.fail(
                f"malformed backend_version {value!r} for {backend.name}: {rule.problem(value)}",
                line,
            )
        return self.string(value, line, "backend_version", rule.pattern, rule.expected)

    def target(self, value: object, line: int, backend: Backend, version: str | None) -> str:
        if not isinstance(value, str):
            self.fail(f"a {backend.name} target must be a string, not {kind(value)}", line)
        try:
            return backend.check_target(value, version, flag="")
        except BadInput as exc:
            self.fail(str(exc), line)

    def targets(
        self, raw: LocatedMap, backend: Backend, version: str | None
    ) -> tuple[str | None, ...]:
        line = raw.line_of("targets")
        if not backend_targets(backend):
            if raw.get("targets") is not None:
                self.fail(f"backend {backend.name!r} has no targets; remove 'targets'", line)
            return (None,)
        if raw.get("targets") is None:
            self.fail(f"backend {backend.name!r} needs 'targets' (e.g. {backend.targets[0]})", line)
        return self.string_list(
            raw["targets"],
            line,
            "targets",
            lambda value, at: self.target(value, at, backend, version),
        )

    def python(self, value: object, line: int) -> str:
        return self.string(value, line, "python version", rules.PYTHON, inputs.PYTHON_EXPECTED)

    def pythons(self, scope: Scope, where: str) -> tuple[str, ...]:
        found = scope.find("python")
        if found is None:
            self.fail(f"{where}: missing 'python' (set it here or in defaults)", scope.line)
        value, line = found
        return self.string_list(value, line, "python", self.python)

    def arg(self, value: object, line: int, what: str) -> str:
        if not isinstance(value, str):
            self.fail(f"{what} items must be strings, not {kind(value)}", line)
        for placeholder in rules.PLACEHOLDER.findall(value):
            if placeholder not in rules.PLACEHOLDERS:
                hint = hint_for(placeholder, rules.PLACEHOLDERS)
                self.fail(
                    f"unknown placeholder {{{placeholder}}} in {what}{hint}; "
                    f"known: {', '.join('{' + p + '}' for p in rules.PLACEHOLDERS)}",
                    line,
                )
        filled = rules.PLACEHOLDER.sub("x", value)
        problem = rules.check_pattern(
            filled, rules.ARG, f"{what} item", "letters, digits and _@%+=:,./- (one token each)"
        )
        if problem is not None:
            self.fail(problem, line)
        return value

    # --- settings --------------------------------------------------------------------------

    def settings(self, scope: Scope, backend: Backend, where: str) -> LegSettings:
        def optional(key: str) -> tuple[Any, int] | None:
            found = scope.find(key)
            return None if found is None or found[0] is None else found

        def required(key: str, example: str) -> tuple[Any, int]:
            found = optional(key)
            if found is None:
                self.fail(
                    f"{where}: missing {key!r} (set it here or in defaults, e.g. {example})",
                    scope.line,
                )
            return found

        torch = self.torch(*required("torch", "torch: {channel: nightly}"))
        suites_value, suites_line = required("suites", "suites: [conformance]")
        suites = self.string_list(
            suites_value,
            suites_line,
            "suites",
            lambda value, at: self.choice(value, at, "suite", rules.SUITES),
        )
        if "distributed" in suites and len(suites) > 1:
            self.fail(
                "suites: distributed (the distributed cases of conformance) is a leg's only "
                "suite when it is one",
                suites_line,
            )
        images: dict[str, str | None] = {}
        for key in ("image", "base_image"):
            found = optional(key)
            images[key] = (
                None
                if found is None
                else self.string(
                    found[0], found[1], key, rules.IMAGE, "a container image reference"
                )
            )
        container_found = optional("container")
        container = (
            True
            if container_found is None
            else self.boolean(container_found[0], container_found[1], "container")
        )
        if not container and (images["image"] or images["base_image"]):
            line = container_found[1] if container_found is not None else scope.line
            self.fail("container: false leaves no use for image or base_image", line)
        if images["image"] and images["base_image"]:
            at = (optional("base_image") or (None, scope.line))[1]
            self.fail("image (a prebuilt test image) leaves no use for base_image", at)
        scaled = scale_out(self, optional, suites=suites, container=container)
        seeds = explore_seeds(
            self, optional("explore_seeds"), suites=suites, shards=scaled.shards, nodes=scaled.nodes
        )
        runner = self.runner(optional("runner"), backend, scaled.nodes)
        build_found = optional("build")
        build = False if build_found is None else self.boolean(*build_found, "build")
        at = (build_found or required("torch", ""))[1]
        if (torch.ref is not None) != build:
            self.fail(
                f"build: true builds torch from a git ref, but torch is the {torch.channel} "
                "channel: give torch: {ref: ...}"
                if build
                else f"torch: {{ref: {torch.ref}}} is built from source: set build: true",
                at,
            )
        args: dict[str, tuple[str, ...]] = {}
        for key in ("build_args", "setup_args", "test_args"):
            found = optional(key)
            args[key] = (
                ()
                if found is None
                else self.string_list(
                    found[0],
                    found[1],
                    key,
                    lambda value, at, key=key: self.arg(value, at, key),
                    scalar_ok=False,
                    empty_ok=True,
                )
            )
        if args["build_args"] and not build:
            build_args_at = scope.find("build_args")
            self.fail(
                "build_args given but build is false",
                build_args_at[1] if build_args_at else scope.line,
            )
        timeout_value, timeout_line = required("timeout_minutes", "timeout_minutes: 120")
        if (
            isinstance(timeout_value, bool)
            or not isinstance(timeout_value, int)
            or not 1 <= timeout_value <= rules.MAX_TIMEOUT_MINUTES
        ):
            self.fail(
                f"timeout_minutes must be a whole number from 1 to {rules.MAX_TIMEOUT_MINUTES}, "
                f"not {kind(timeout_value)}",
                timeout_line,
            )
        variant_found = optional("variant")
        variant = (
            None
            if variant_found is None
            else self.string(*variant_found, "variant", rules.SLUG, "[a-z0-9._-]")
        )
        require, waive = requirements(self, optional("require"), optional("waive"))
        return LegSettings(
            torch=torch,
            suites=suites,
            runner=runner,
            image=images["image"],
            base_image=images["base_image"],
            container=container,
            build=build,
            build_args=args["build_args"],
            setup_args=args["setup_args"],
            test_args=args["test_args"],
            timeout_minutes=timeout_value,
            variant=variant,
            require=require,
            waive=waive,
            shards=scaled.shards,
            nodes=scaled.nodes,
            rdzv_endpoint=scaled.rdzv_endpoint,
            explore_seeds=seeds,
        )

    def torch(self, value: object, line: int) -> TorchSource:
        raw = self.mapping(value, line, "torch")
        self.check_keys(raw, TORCH_KEYS, "torch")
        given = [key for key in TORCH_KEYS if raw.get(key) is not None]
        if len(given) != 1:
            self.fail("torch needs exactly one of 'channel' or 'ref'", raw.line)
        if given[0] == "channel":
            channel = self.choice(
                raw["channel"], raw.line_of("channel"), "torch channel", rules.TORCH_CHANNELS
            )
            return TorchSource(channel=channel)
        ref = self.string(raw["ref"], raw.line_of("ref"), "torch ref", rules.GIT_REF, "a git ref")
        problem = inputs.git_ref_problem(ref)
        if problem is not None:
            self.fail(f"torch ref {ref!r} is not a valid git ref: {problem}", raw.line_of("ref"))
        return TorchSource(ref=ref)

    def runner(self, found: tuple[Any, int] | None, backend: Backend, nodes: int) -> RunnerSpec:
        if found is None:
            return RunnerSpec()
        value, line = found
        location = Location(self.path, line)

        def labels(item: object, at: int) -> tuple[str, ...]:
            return self.string_list(
                item,
                at,
                "runner labels",
                lambda label, where: self.string(
                    label, where, "runner label", rules.RUNNER_LABEL, "[A-Za-z0-9._-]"
                ),
            )

        per_node = isinstance(value, LocatedList) and any(
            isinstance(item, LocatedList) for item in value
        )
        if nodes > 1 or per_node:
            if not per_node or nodes != len(value):
                self.fail(
                    f"runner of a leg of nodes: {nodes} is one label list per node, node 0's "
                    f"first (e.g. [[self-hosted, pair0], [self-hosted, pair1]])"
                    if nodes > 1
                    else "runner: a list of label lists is one per node; set nodes",
                    line,
                )
            assert isinstance(value, LocatedList)
            return RunnerSpec(
                per_node=tuple(labels(item, value.line_of(i)) for i, item in enumerate(value)),
                location=location,
            )
        if not isinstance(value, LocatedMap):
            return RunnerSpec(labels=labels(value, line), location=location)
        valid = backend_targets(backend)
        per_target: list[tuple[str, tuple[str, ...]]] = []
        for target, item in value.items():
            at = value.line_of(target)
            if target not in valid:
                hint = hint_for(target, valid)
                self.fail(f"runner for {target!r}, which is not a {backend.name} target{hint}", at)
            per_target.append((target, labels(item, at)))
        return RunnerSpec(per_target=tuple(per_target), location=location)

    # --- include / exclude ---------------------------------------------------------------

    def includes(
        self,
        raw: LocatedMap,
        defaults: LocatedMap | None,
        backend: Backend,
        version: str | None,
        pythons: tuple[str, ...],
    ) -> tuple[IncludeSpec, ...]:
        value = raw.get("include")
        if value is None:
            return ()
        if not isinstance(value, LocatedList):
            self.fail(f"include must be a list, not {kind(value)}", raw.line_of("include"))
        out: list[IncludeSpec] = []
        for index, item in enumerate(value):
            where = f"include[{index}]"
            mapping = self.mapping(item, value.line_of(index), where)
            self.check_keys(mapping, INCLUDE_KEYS, where)
            target: str | None = None
            if backend_targets(backend):
                if mapping.get("target") is None:
                    self.fail(f"{where}: missing 'target' for a {backend.name} leg", mapping.line)
                target = self.target(mapping["target"], mapping.line_of("target"), backend, version)
            elif mapping.get("target") is not None:
                self.fail(
                    f"backend {backend.name!r} has no targets; remove 'target'",
                    mapping.line_of("target"),
                )
            include_pythons = pythons
            if mapping.get("python") is not None:
                include_pythons = self.string_list(
                    mapping["python"], mapping.line_of("python"), "python", self.python
                )
            scope = Scope(mapping, raw, defaults)
            out.append(
                IncludeSpec(
                    target=target,
                    pythons=include_pythons,
                    settings=self.settings(scope, backend, where),
                    location=Location(self.path, mapping.line),
                )
            )
        return tuple(out)

    def matchers(
        self, raw: LocatedMap, keys: Sequence[str], where: str, backend: Backend | None
    ) -> tuple[LegMatcher, ...]:
        value = raw.get("exclude")
        if value is None:
            return ()
        if not isinstance(value, LocatedList):
            self.fail(f"exclude must be a list, not {kind(value)}", raw.line_of("exclude"))
        out: list[LegMatcher] = []
        for index, item in enumerate(value):
            mapping = self.mapping(item, value.line_of(index), f"{where}[{index}]")
            self.check_keys(mapping, keys, f"{where}[{index}]")
            if not mapping:
                self.fail("an exclude item needs at least one key", mapping.line)
            criteria: list[tuple[str, str]] = []
            for key, criterion in mapping.items():
                at = mapping.line_of(key)
                if isinstance(criterion, float):
                    self.string(criterion, at, key, rules.SLUG, "")  # explains the quoting
                if not isinstance(criterion, str):
                    self.fail(f"exclude {key} must be a string, not {kind(criterion)}", at)
                if key == "target" and backend is not None:
                    self.target(criterion, at, backend, None)
                if key == "python":
                    self.python(criterion, at)
                criteria.append((key, criterion))
            out.append(LegMatcher(tuple(criteria), Location(self.path, mapping.line)))
        return tuple(out)
