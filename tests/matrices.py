"""Matrix files for the tests of `accelkit matrix`: the shipped matrices, the text of a
matrix and of its legs, writing one, and finding a line in one."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.helpers import REPO

#: The matrices accelkit ships.
MATRICES = REPO / "matrices"


#: The top of a matrix file, up to its entries.
HEADER = """\
schema: 1
defaults:
  python: ["3.12"]
  torch: {channel: nightly}
  suites: [conformance]
  timeout_minutes: 60
entries:
"""


#: A ROCm entry. ROCm legs build torch from a ref (PyTorch publishes no wheels for
#: TheRock's SDK).
ROCM = """\
  - backend: rocm
    backend_version: "7.14"
    targets: [gfx942, gfx950]
    runner: [self-hosted, linux.rocm.gpu]
    torch: {ref: release/2.14}
    build: true
    build_args: ["--rocm-version={backend_version}", "--gfx={target}"]
"""


def rocm(*drop: str) -> str:
    """ROCM without the settings `drop` (a test sets them itself)."""
    lines = ROCM.splitlines(keepends=True)
    return "".join(ln for ln in lines if not any(ln.strip().startswith(f"{k}:") for k in drop))


def write_matrix(tmp_path: Path, body: str, header: str = HEADER) -> Path:
    """`header` and then `body` (dedented where it starts on a new line) as `tmp_path/m.yaml`."""
    path = tmp_path / "m.yaml"
    path.write_text(header + textwrap.dedent(body) if body.startswith("\n") else header + body)
    return path


def line_of(path: Path, needle: str) -> int:
    """The number of the first line of `path` that holds `needle`."""
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in {path}")


#: A YAML alias bomb: nine levels of nine aliases each (a billion "lol"s expanded).
BILLION_LAUGHS = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""
