"""`accelkit setup` as data: its options (declared once, `SETUP_OPTIONS`) and the frozen
`SetupRequest` they become. The CLI builds its command from `SETUP_OPTIONS`; the matrix
rehearsal parses a leg's `setup_args` with `SetupRequest.from_argv`, the same click parser.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from accelkit import options
from accelkit.options import Opt

SETUP_OPTIONS: tuple[Opt, ...] = (
    Opt("backend", (), str, ..., "cpu, cuda, rocm or xpu.", show_default=False),
    Opt(
        "arch",
        ("--arch",),
        str,
        None,
        "GPU target the image is set up for (sm_107, gfx942, pvc); CUDA and ROCm images "
        "prove it: its compile-only cases run inside, and torch's arch list must cover it.",
        True,
    ),
    Opt(
        "torch_wheel",
        ("--torch-wheel",),
        Path,
        None,
        "Install torch from this wheel file (or the one torch wheel in this folder).",
        True,
    ),
    Opt(
        "python",
        ("--python",),
        str,
        None,
        "Python of the image (3.13; 3.13t: free-threaded), installed from the base image's "
        "packages and verified (default: the base image's python3).",
        True,
    ),
    Opt("torch_index", ("--torch-index",), str, None, "Install torch from this index URL.", True),
    Opt(
        "torch_channel",
        ("--torch-channel",),
        str,
        None,
        "Install torch from PyTorch's nightly, test or release channel (pre-releases for "
        "nightly and test); --torch-index overrides its index URL.",
        True,
    ),
    Opt(
        "torch_spec",
        ("--torch-spec",),
        str,
        "torch",
        "The requirement installed from --torch-index (torch==2.14.1, torch>=2.15.0.dev0).",
    ),
    Opt(
        "torch_from_base",
        ("--torch-from-base",),
        bool,
        False,
        "Test the torch the --base-image already has (NGC's PyTorch images, a "
        "distribution's python3-torch): the venv sees the base's site-packages and no "
        "torch is installed.",
    ),
    Opt(
        "base_image",
        ("--base-image",),
        str,
        None,
        "Base image (default: the backend's upstream image).",
        True,
    ),
    Opt(
        "accelkit_source",
        ("--accelkit-source",),
        Path,
        None,
        "accelkit's source tree (default: this one).",
        True,
    ),
)


@dataclass(frozen=True)
class SetupRequest:
    """One `accelkit setup`: every field is one of `SETUP_OPTIONS` (same name)."""

    backend: str
    arch: str | None = None
    torch_wheel: Path | None = None
    python: str | None = None
    torch_index: str | None = None
    torch_channel: str | None = None
    torch_spec: str = "torch"
    torch_from_base: bool = False
    base_image: str | None = None
    accelkit_source: Path | None = None

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> SetupRequest:
        values = {**options.defaults(SETUP_OPTIONS), **params}
        unknown = sorted(set(values) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"not options of accelkit setup: {', '.join(unknown)}")
        return cls(**values)

    @classmethod
    def from_argv(cls, argv: Sequence[str]) -> SetupRequest:
        """`accelkit setup ARGV` parsed by the command's own parser (nothing runs)."""
        return cls.from_params(options.parse(SETUP_OPTIONS, argv, "accelkit setup"))

    def params(self) -> dict[str, Any]:
        return asdict(self)

    def to_argv(self) -> list[str]:
        """`accelkit setup`'s arguments that make this request (defaults left out)."""
        return options.to_argv(SETUP_OPTIONS, self.params())
