"""`accelkit build` as data: its options (declared once, `BUILD_OPTIONS`), the checked, frozen
`BuildRequest` they become, and the argv it turns back into.

The options that name a toolkit version and GPU targets are the backends' own
(`Backend.build_flags`: `--rocm-version`, `--gfx` and `--family` live in backends/rocm.py);
this module assembles them, in the order of `accelkit.backends.BUILDS`, between the backend
and the options every build shares, and the request carries their values as data
(`toolkit`, `target_options`). Each backend's recipe (accelkit/wheels/recipes/) says which of
the flags apply to it and asks the backend for the rules of their values (toolkit version
spelling, targets, families, minimum toolkit per target); the checks here are the ones
every build shares.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any

from accelkit import backends, options
from accelkit.backends import TargetFlag
from accelkit.errors import BadInput
from accelkit.inputs import (
    check_dir,
    check_image,
    check_output_dir,
    check_python,
    check_safe,
    check_targets,
)
from accelkit.options import Opt

DEFAULT_PYTHON = "3.12"


def _unique(opts: Sequence[Opt]) -> tuple[Opt, ...]:
    """`opts` with repeats of one option left out; ValueError for two options of one name."""
    out: dict[str, Opt] = {}
    for opt in opts:
        if out.setdefault(opt.name, opt) != opt:
            raise ValueError(f"two backends declare different build options {opt.name!r}")
    return tuple(out.values())


def _target_options() -> tuple[tuple[Opt, ...], Mapping[str, tuple[str, ...]]]:
    """The target options, one per flag, each with the help of every backend that shares it;
    and who names targets with each (name -> owners)."""
    shared: dict[str, list[TargetFlag]] = {}
    for backend in backends.BUILDS:
        if backend.build_flags.targets is not None:
            flag = backend.build_flags.targets
            shared.setdefault(flag.name, []).append(flag)
    opts: list[Opt] = []
    for name, flags in shared.items():
        nouns = {flag.noun for flag in flags}
        if len(nouns) > 1:
            raise ValueError(f"backends sharing --{name} call its values {sorted(nouns)}")
        owners = " or ".join(flag.owner for flag in flags)
        examples = "; ".join(flag.example for flag in flags)
        text = f"{owners} {nouns.pop()}, comma separated ({examples})."
        opts.append(Opt(name, (flags[0].flag,), str, None, text, True))
    return tuple(opts), {name: tuple(f.owner for f in flags) for name, flags in shared.items()}


def _listed(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


#: The toolkit-version options (--rocm-version, --cuda-version, --oneapi-version): a build
#: takes at most one, the one its recipe names.
TOOLKIT_OPTIONS: tuple[Opt, ...] = _unique(
    [b.build_flags.toolkit for b in backends.BUILDS if b.build_flags.toolkit is not None]
)
_TARGETS, _TARGET_OWNERS = _target_options()
#: The options that name GPU targets (--gfx, --arch), then families of them (--family).
TARGET_OPTIONS: tuple[Opt, ...] = _TARGETS + _unique(
    [b.build_flags.family for b in backends.BUILDS if b.build_flags.family is not None]
)
_FAMILY_NAMES = frozenset(opt.name for opt in TARGET_OPTIONS) - set(_TARGET_OWNERS)

BUILD_OPTIONS: tuple[Opt, ...] = (
    Opt(
        "backend",
        (),
        str,
        ...,
        f"{_listed([b.name for b in backends.BUILDS])}.",
        show_default=False,
    ),
    *TOOLKIT_OPTIONS,
    *TARGET_OPTIONS,
    Opt(
        "index_url",
        ("--index-url",),
        str,
        None,
        "ROCm: the SDK's package index (with --family: that family's index).",
        True,
    ),
    Opt(
        "pre",
        ("--pre",),
        bool,
        False,
        "ROCm: let --rocm-version X.Y pick pre-releases (nightlies, release candidates).",
    ),
    Opt(
        "python", ("--python",), str, DEFAULT_PYTHON, "Python of the wheel (3.13t: free-threaded)."
    ),
    Opt("torch_ref", ("--torch-ref",), str, None, "PyTorch git ref to build (v2.14.1).", True),
    Opt(
        "torch_version",
        ("--torch-version",),
        str,
        None,
        "Version of the wheel (default: from the ref).",
        True,
    ),
    Opt("source", ("--source",), Path, None, "Build this PyTorch source tree instead.", True),
    Opt(
        "output",
        ("--output", "-o"),
        Path,
        Path("dist"),
        "Folder for wheels, log and manifest.json.",
    ),
    Opt("ccache", ("--ccache",), Path, None, "ccache folder, mounted into the builder.", True),
    Opt(
        "builder_base_image",
        ("--builder-base-image",),
        str,
        None,
        "Base of the builder image (default: upstream).",
        True,
    ),
    Opt("triton", ("--triton",), bool, True, "ROCm: build triton first.", negative="--no-triton"),
    Opt(
        "smoke",
        ("--smoke",),
        bool,
        True,
        "Install the wheel in a clean container and import it (ROCm: warnings of rocm_sdk "
        "fail it, every preload must be loaded).",
        negative="--no-smoke",
    ),
    Opt(
        "smoke_image",
        ("--smoke-image",),
        str,
        None,
        "Image for the smoke test, with python3 (default: a fresh builder container).",
        True,
    ),
)

#: The request's fields that carry backend-declared options, by name.
_DECLARED = {"toolkit": TOOLKIT_OPTIONS, "target_options": TARGET_OPTIONS}


@dataclass(frozen=True)
class BuildRequest:
    """The checked flags of `accelkit build <backend>`: every field is one of `BUILD_OPTIONS`
    (same name) except `build_number` and the two that carry the backends' options by name,
    only those given: `toolkit` ({"rocm_version": "7.14"}) and `target_options`
    ({"gfx": "gfx942,gfx950", "family": "gfx94X-dcgpu"})."""

    backend: str
    toolkit: Mapping[str, str] = field(default_factory=dict, hash=False)
    target_options: Mapping[str, str] = field(default_factory=dict, hash=False)
    index_url: str | None = None
    python: str = DEFAULT_PYTHON
    torch_ref: str | None = None
    torch_version: str | None = None
    source: Path | None = None
    output: Path = Path("dist")
    ccache: Path | None = None
    builder_base_image: str | None = None
    pre: bool = False
    triton: bool = True
    smoke: bool = True
    smoke_image: str | None = None
    build_number: int = 1

    def __post_init__(self) -> None:
        for name, declared in _DECLARED.items():
            given = dict(getattr(self, name))
            unknown = sorted(set(given) - {opt.name for opt in declared})
            if unknown:
                raise ValueError(f"{name}: not options of accelkit build: {', '.join(unknown)}")
            object.__setattr__(self, name, MappingProxyType(given))

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> BuildRequest:
        """The request of parsed option values (by option name), checked: BadInput (exit 2)
        for anything a shell would read, malformed targets, alternatives given together,
        missing folders."""
        values = {**options.defaults(BUILD_OPTIONS), **params}
        unknown = sorted(set(values) - {opt.name for opt in BUILD_OPTIONS} - {"build_number"})
        if unknown:
            raise ValueError(f"not options of accelkit build: {', '.join(unknown)}")
        check_safe("backend", values["backend"])
        for opt in BUILD_OPTIONS:
            value = values.get(opt.name)
            if opt.type is str and opt.flags and value is not None:
                check_safe(opt.flag, value)
        given = [opt.flag for opt in TOOLKIT_OPTIONS if values[opt.name] is not None]
        if len(given) > 1:
            raise BadInput(f"{' and '.join(given)} are alternatives: give one")
        lists = [opt for opt in TARGET_OPTIONS if opt.name in _TARGET_OWNERS]
        named = [opt for opt in lists if values[opt.name] is not None]
        if len(named) > 1:
            spelled = [f"{opt.flag} ({', '.join(_TARGET_OWNERS[opt.name])})" for opt in named]
            raise BadInput(f"{' and '.join(spelled)} are alternatives: give one")
        for opt in named:
            check_targets(opt.flag, values[opt.name])
        check_python(values["python"])
        if values["source"] is not None:
            values["source"] = check_dir("--source", values["source"])
        values["output"] = check_output_dir("--output", values["output"])
        if values["ccache"] is not None:
            values["ccache"] = check_output_dir("--ccache", values["ccache"])
        for name in ("builder_base_image", "smoke_image"):
            if values[name] is not None:
                check_image(f"--{name.replace('_', '-')}", values[name])
        for name, declared in _DECLARED.items():
            values[name] = {
                opt.name: value for opt in declared if (value := values.pop(opt.name)) is not None
            }
        return cls(**values)

    @classmethod
    def from_argv(cls, argv: Sequence[str]) -> BuildRequest:
        """`accelkit build ARGV` parsed by the command's own parser (nothing runs)."""
        return cls.from_params(options.parse(BUILD_OPTIONS, argv, "accelkit build"))

    def values(self) -> dict[str, Any]:
        """Every option's value by name (None for a backend's option not given), in the
        order of the fields, and `build_number`: the request as plain data."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in _DECLARED:
                out.update({opt.name: value.get(opt.name) for opt in _DECLARED[f.name]})
            else:
                out[f.name] = value
        return out

    def params(self) -> dict[str, Any]:
        """The option values `from_params` takes back."""
        values = self.values()
        values.pop("build_number")
        return values

    def to_argv(self) -> list[str]:
        return options.to_argv(BUILD_OPTIONS, self.params())

    @property
    def version(self) -> str | None:
        """The toolkit version, whichever flag gave it."""
        return next(iter(self.toolkit.values()), None)

    @property
    def version_flag(self) -> str | None:
        return next((o.flag for o in TOOLKIT_OPTIONS if o.name in self.toolkit), None)

    @property
    def targets(self) -> tuple[str, ...]:
        """The GPU targets, whichever flag gave them (--gfx or --arch)."""
        text = next((v for k, v in self.target_options.items() if k in _TARGET_OWNERS), "")
        return tuple(part.strip() for part in text.split(",") if part.strip())

    @property
    def targets_flag(self) -> str | None:
        """The flag that gave the targets; None when none did."""
        named = [o.flag for o in TARGET_OPTIONS if o.name in _TARGET_OWNERS]
        return next((f for f in named if f.removeprefix("--") in self.target_options), None)

    @property
    def family(self) -> str | None:
        """The family of targets named instead of (or beside) them (--family)."""
        return next((v for k, v in self.target_options.items() if k in _FAMILY_NAMES), None)
