"""Finding the ptxas triton uses for an NVIDIA target, and asking it what it knows.

triton turns PTX into a cubin with `ptxas`. For compute capability 10.0 and newer it runs
the binary that `TRITON_PTXAS_BLACKWELL_PATH` names, otherwise `TRITON_PTXAS_PATH`; when
the variable is unset, or names something that is not a working ptxas, it silently falls
back to the copy it bundles (`triton/backends/nvidia/bin/ptxas-blackwell`, CUDA 13.3 in
triton 3.8, or `ptxas`, CUDA 12.9): see triton's `knobs.env_nvidia_tool`. Neither bundled
copy knows sm_107, so an image or a machine that does not point triton at a newer ptxas
cannot compile for Rubin; `pip install nvidia-cuda-nvcc==13.5.37` ships one that does
(`nvidia/cu13/bin/ptxas`). See ../shared/notes/targets-without-hardware.md.

Example: `Ptxas.ask("/opt/venv/.../nvidia/cu13/bin/ptxas")` runs `--version` and `--help`
and returns version "13.5" and the names after `--gpu-name`'s "Allowed values"
(sm_75 ... sm_107a ... sm_121f).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

BLACKWELL_VARIABLE = "TRITON_PTXAS_BLACKWELL_PATH"
VARIABLE = "TRITON_PTXAS_PATH"
#: triton picks the Blackwell ptxas from this compute capability on.
BLACKWELL_FROM = 100
_VERSION = re.compile(r"release (\d+\.\d+)")
_NAMES = re.compile(r"'(sm_\d+[a-z]?)'")


@dataclass(frozen=True)
class Ptxas:
    path: str
    version: str
    """The CUDA release ("13.5"); "unknown" when --version said none."""
    knows: tuple[str, ...]
    """The real GPU names `--gpu-name` accepts (sm_90a, sm_107, ...), sorted by number."""

    @staticmethod
    def ask(path: str) -> Ptxas | None:
        """What the ptxas at `path` says about itself; None when it is not a working one."""
        return _ask(str(Path(path).resolve()) if Path(path).exists() else path)


@functools.lru_cache(maxsize=32)
def _ask(path: str) -> Ptxas | None:
    version_text = _output([path, "--version"])
    if version_text is None or "ptxas" not in version_text.lower():
        return None
    match = _VERSION.search(version_text)
    help_text = _output([path, "--help"]) or ""
    start = help_text.find("--gpu-name")
    end = help_text.find("Default value", start)
    names = set(_NAMES.findall(help_text[start:end])) if start >= 0 else set()
    return Ptxas(path, match.group(1) if match else "unknown", tuple(sorted(names, key=_order)))


def _order(name: str) -> tuple[int, str]:
    digits = re.sub(r"\D", "", name)
    return int(digits or 0), name


def _output(argv: list[str]) -> str | None:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def variable_for(capability: int) -> str:
    """The variable triton reads for a target of this compute capability (107 -> the
    Blackwell one)."""
    return BLACKWELL_VARIABLE if capability >= BLACKWELL_FROM else VARIABLE


def bundled(capability: int) -> Path | None:
    """triton's own ptxas for the capability, found without importing triton."""
    spec = importlib.util.find_spec("triton")
    if spec is None or spec.origin is None:
        return None
    name = "ptxas-blackwell" if capability >= BLACKWELL_FROM else "ptxas"
    path = Path(spec.origin).parent / "backends" / "nvidia" / "bin" / name
    return path if path.exists() else None


def installed(environ: Mapping[str, str]) -> list[Path]:
    """ptxas binaries of CUDA toolkits here, newest source first: the nvidia-cuda-nvcc
    wheel (nvidia/cu*/bin/ptxas), $CUDA_HOME, /usr/local/cuda, then the PATH."""
    found: list[Path] = []
    spec = importlib.util.find_spec("nvidia")
    for root in list(spec.submodule_search_locations or []) if spec else []:
        found += sorted(Path(root).glob("cu*/bin/ptxas"), reverse=True)
        found += [p for p in [Path(root, "cuda_nvcc", "bin", "ptxas")] if p.exists()]
    for home in (environ.get("CUDA_HOME"), environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and Path(home, "bin", "ptxas").exists():
            found.append(Path(home, "bin", "ptxas"))
    on_path = shutil.which("ptxas", path=environ.get("PATH", os.defpath))
    if on_path:
        found.append(Path(on_path))
    unique: dict[str, Path] = {}
    for path in found:
        unique.setdefault(str(path.resolve()), path)
    return list(unique.values())
