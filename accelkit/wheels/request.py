"""`accelkit build` as data: its options (declared once, `BUILD_OPTIONS`), the checked, frozen
`BuildRequest` they become, and the argv it turns back into.

Each backend's recipe (accelkit/wheels/recipes/) says which of the flags apply to it and asks
the backend for the rules of their values (toolkit version spelling, targets, families,
minimum toolkit per target); the checks here are the ones every build shares.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from accelkit import options
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

BUILD_OPTIONS: tuple[Opt, ...] = (
    Opt("backend", (), str, ..., "rocm, cuda, xpu or cpu.", show_default=False),
    Opt("rocm_version", ("--rocm-version",), str, None, "ROCm SDK version (e.g. 7.14).", True),
    Opt("cuda_version", ("--cuda-version",), str, None, "CUDA toolkit version (13.4).", True),
    Opt(
        "oneapi_version",
        ("--oneapi-version",),
        str,
        None,
        "XPU: oneAPI Deep Learning Essentials version (2025.3).",
        True,
    ),
    Opt("gfx", ("--gfx",), str, None, "ROCm GPU targets, comma separated (gfx942,gfx950).", True),
    Opt(
        "arch",
        ("--arch",),
        str,
        None,
        "CUDA or XPU targets, comma separated (sm_107; pvc,bmg).",
        True,
    ),
    Opt(
        "family", ("--family",), str, None, "ROCm: a legacy per-family index (gfx94X-dcgpu).", True
    ),
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

#: The toolkit-version flags: a build takes at most one, the one its recipe names.
VERSION_FLAGS = (
    ("rocm_version", "--rocm-version"),
    ("cuda_version", "--cuda-version"),
    ("oneapi_version", "--oneapi-version"),
)


@dataclass(frozen=True)
class BuildRequest:
    """The checked flags of `accelkit build <backend>`: every field is one of `BUILD_OPTIONS`
    (same name) except `build_number`."""

    backend: str
    rocm_version: str | None = None
    cuda_version: str | None = None
    oneapi_version: str | None = None
    gfx: str | None = None
    arch: str | None = None
    family: str | None = None
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

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> BuildRequest:
        """The request of parsed option values, checked: BadInput (exit 2) for anything a
        shell would read, malformed targets, alternatives given together, missing folders."""
        values = {**options.defaults(BUILD_OPTIONS), **params}
        unknown = sorted(set(values) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"not options of accelkit build: {', '.join(unknown)}")
        check_safe("backend", values["backend"])
        for opt in BUILD_OPTIONS:
            value = values.get(opt.name)
            if opt.type is str and opt.flags and value is not None:
                check_safe(opt.flag, value)
        given = [flag for name, flag in VERSION_FLAGS if values[name] is not None]
        if len(given) > 1:
            raise BadInput(f"{' and '.join(given)} are alternatives: give one")
        if values["gfx"] is not None and values["arch"] is not None:
            raise BadInput("--gfx (ROCm) and --arch (CUDA, XPU) are alternatives: give one")
        for flag in ("gfx", "arch"):
            if values[flag] is not None:
                check_targets(f"--{flag}", values[flag])
        check_python(values["python"])
        if values["source"] is not None:
            values["source"] = check_dir("--source", values["source"])
        values["output"] = check_output_dir("--output", values["output"])
        if values["ccache"] is not None:
            values["ccache"] = check_output_dir("--ccache", values["ccache"])
        for name in ("builder_base_image", "smoke_image"):
            if values[name] is not None:
                check_image(f"--{name.replace('_', '-')}", values[name])
        return cls(**values)

    @classmethod
    def from_argv(cls, argv: Sequence[str]) -> BuildRequest:
        """`accelkit build ARGV` parsed by the command's own parser (nothing runs)."""
        return cls.from_params(options.parse(BUILD_OPTIONS, argv, "accelkit build"))

    def params(self) -> dict[str, Any]:
        values = asdict(self)
        values.pop("build_number")
        return values

    def to_argv(self) -> list[str]:
        return options.to_argv(BUILD_OPTIONS, self.params())

    @property
    def version(self) -> str | None:
        """The toolkit version, whichever flag gave it."""
        return self.rocm_version or self.cuda_version or self.oneapi_version

    @property
    def version_flag(self) -> str | None:
        for name, flag in VERSION_FLAGS:
            if getattr(self, name) is not None:
                return flag
        return None

    @property
    def targets(self) -> tuple[str, ...]:
        """The GPU targets, whichever flag gave them (--gfx or --arch)."""
        text = self.gfx if self.gfx is not None else self.arch
        return tuple(part.strip() for part in (text or "").split(",") if part.strip())

    @property
    def targets_flag(self) -> str:
        return "--gfx" if self.gfx is not None else "--arch"
