"""The one set of rules for values that several commands take: Python versions, torch
versions, git refs, URLs, image references, targets and paths. `accelkit build`, `setup`,
`test` and the matrix validator (`accelkit.matrix.rules`) all use these patterns, so a
matrix that validates is a matrix whose commands accept their values. What a backend's
toolkit version and targets look like is the backend's own rule
(`Backend.version_rule`, `Backend.check_target`).

Nothing accelkit runs goes through a shell, so these checks are a second line of defence:
a value with a shell metacharacter is rejected (exit 2) before anything runs, and never
reaches a command line, a Dockerfile build argument or the builder container.
"""

from __future__ import annotations

import re
from pathlib import Path

from accelkit.errors import BadInput

#: Characters a shell gives meaning to (plus whitespace and control characters).
SHELL_METACHARACTERS = frozenset(";&|$`<>(){}[]*?!#'\"\\~\n\r\t ")

#: CPython 3.10 and newer (torch 2.14's range); a `t` suffix names the free-threaded build.
PYTHON = re.compile(r"3\.(1[0-9]|[2-9][0-9])t?")
PYTHON_EXPECTED = "3.X or 3.Xt (free-threaded), 3.10 or newer, e.g. 3.12"
TORCH_VERSION = re.compile(r"\d+\.\d+(\.\d+)?((a|b|rc)\d+)?(\.dev\d+)?")
#: A git ref or commit, as `git check-ref-format` allows it, minus anything a shell reads.
GIT_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/+-]{0,199}")
URL = re.compile(r"(https?|file)://[A-Za-z0-9._~:/%@=+,-]+")
#: A container image reference: [registry[:port]/]repo[:tag][@sha256:digest].
IMAGE = re.compile(
    r"[a-z0-9][a-z0-9._/:-]{0,199}(:[A-Za-z0-9_][A-Za-z0-9._-]{0,127})?(@sha256:[0-9a-f]{64})?"
)
TARGET = re.compile(r"[A-Za-z0-9_.-]{1,40}")
#: PyTorch's published channels: nightly builds, release candidates (test), releases.
TORCH_CHANNELS: tuple[str, ...] = ("nightly", "test", "release")
#: Channels whose wheels are pre-releases (2.15.0.dev20261201, 2.15.0rc2): pip needs --pre.
PRERELEASE_CHANNELS: frozenset[str] = frozenset({"nightly", "test"})


def check_safe(flag: str, value: str) -> str:
    """`value` unchanged, or BadInput when it holds a shell metacharacter."""
    bad = sorted({ch for ch in value if ch in SHELL_METACHARACTERS or ord(ch) < 32})
    if bad:
        shown = " ".join(repr(ch) for ch in bad)
        raise BadInput(f"{flag}: refusing {value!r}: it contains shell metacharacters ({shown})")
    if not value:
        raise BadInput(f"{flag}: empty value")
    return value


def _check(flag: str, value: str, pattern: re.Pattern[str], expected: str) -> str:
    check_safe(flag, value)
    if not pattern.fullmatch(value):
        raise BadInput(f"{flag}: malformed value {value!r} (expected {expected})")
    return value


def check_python(value: str, flag: str = "--python") -> str:
    return _check(flag, value, PYTHON, PYTHON_EXPECTED)


def python_tuple(value: str) -> tuple[int, int]:
    """(3, 13) for 3.13 and 3.13t."""
    major, minor = value.rstrip("t").split(".")
    return int(major), int(minor)


def free_threaded(value: str) -> bool:
    """Whether a Python spelling names the free-threaded build (3.13t)."""
    return value.endswith("t")


def check_torch_channel(value: str, flag: str = "--torch-channel") -> str:
    if value not in TORCH_CHANNELS:
        raise BadInput(f"{flag}: unknown channel {value!r}; valid: {', '.join(TORCH_CHANNELS)}")
    return value


def python_problem(wanted: str, version: str, free_threaded: bool) -> str | None:
    """Why an interpreter of `version` (3.13.5) and build is not the Python `wanted` names
    (3.13, 3.13t), or None when it is."""
    parts = version.split(".")
    have = ".".join(parts[:2])
    want = wanted.rstrip("t")
    if have != want:
        return f"Python {version}, not {wanted}"
    if free_threaded != wanted.endswith("t"):
        build = "free-threaded" if free_threaded else "with the GIL"
        return f"Python {version} {build}, not {wanted}"
    return None


def check_torch_version(value: str, flag: str = "--torch-version") -> str:
    return _check(flag, value, TORCH_VERSION, "X.Y.Z, e.g. 2.14.1")


def git_ref_problem(value: str) -> str | None:
    """Why `value` is not a git ref accelkit accepts, or None."""
    if not GIT_REF.fullmatch(value):
        return "expected a branch, tag or commit, e.g. v2.14.1"
    if ".." in value or value.endswith((".", "/", ".lock")):
        return "git refs cannot hold '..' or end in '.', '/' or '.lock'"
    return None


def check_git_ref(value: str, flag: str = "--torch-ref") -> str:
    check_safe(flag, value)
    problem = git_ref_problem(value)
    if problem is not None:
        raise BadInput(f"{flag}: malformed git ref {value!r} ({problem})")
    return value


def check_url(flag: str, value: str) -> str:
    return _check(flag, value, URL, "an http(s):// or file:// URL")


def check_image(flag: str, value: str) -> str:
    return _check(flag, value, IMAGE, "an image reference such as ubuntu:24.04")


def check_targets(flag: str, value: str) -> tuple[str, ...]:
    """A comma-separated list of targets (gfx942,gfx950 or sm_107), each checked."""
    check_safe(flag, value)
    targets = tuple(part.strip() for part in value.split(",") if part.strip())
    if not targets:
        raise BadInput(f"{flag}: no target given")
    for target in targets:
        if not TARGET.fullmatch(target):
            raise BadInput(f"{flag}: malformed target {target!r}")
    if len(set(targets)) != len(targets):
        raise BadInput(f"{flag}: a target is named twice in {value!r}")
    return targets


def check_dir(flag: str, path: Path) -> Path:
    check_safe(flag, str(path))
    if not path.is_dir():
        raise BadInput(f"{flag}: {path} is not a directory")
    return path.resolve()


def check_file(flag: str, path: Path) -> Path:
    check_safe(flag, str(path))
    if not path.is_file():
        raise BadInput(f"{flag}: {path} does not exist or is not a file")
    return path.resolve()


def check_output_dir(flag: str, path: Path) -> Path:
    check_safe(flag, str(path))
    if path.exists() and not path.is_dir():
        raise BadInput(f"{flag}: {path} exists and is not a directory")
    return path.resolve()
