"""Checks on every value a user hands to `accelkit build` and `accelkit setup`.

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

_PYTHON = re.compile(r"3\.\d{1,2}")
_TORCH_VERSION = re.compile(r"\d+\.\d+(\.\d+)?((a|b|rc)\d+)?(\.dev\d+)?")
_CUDA_VERSION = re.compile(r"\d{2}\.\d{1,2}")
_GIT_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,199}")
_URL = re.compile(r"(https?|file)://[A-Za-z0-9._~:/%@=+,-]+")
_IMAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@-]{0,255}")
_TARGET = re.compile(r"[A-Za-z0-9_.-]{1,40}")


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


def check_python(value: str) -> str:
    return _check("--python", value, _PYTHON, "3.X, e.g. 3.12")


def check_torch_version(value: str, flag: str = "--torch-version") -> str:
    return _check(flag, value, _TORCH_VERSION, "X.Y.Z, e.g. 2.14.1")


def check_cuda_version(value: str) -> tuple[int, int]:
    _check("--cuda-version", value, _CUDA_VERSION, "X.Y, e.g. 13.4")
    major, minor = value.split(".")
    return int(major), int(minor)


def check_git_ref(value: str) -> str:
    _check("--torch-ref", value, _GIT_REF, "a branch, tag or commit, e.g. v2.14.1")
    if ".." in value or value.endswith((".", "/", ".lock")):
        raise BadInput(f"--torch-ref: malformed git ref {value!r}")
    return value


def check_url(flag: str, value: str) -> str:
    return _check(flag, value, _URL, "an http(s):// or file:// URL")


def check_image(flag: str, value: str) -> str:
    return _check(flag, value, _IMAGE, "an image name such as ubuntu:24.04")


def check_targets(flag: str, value: str) -> tuple[str, ...]:
    """A comma-separated list of targets (gfx942,gfx950 or sm_107), each checked."""
    check_safe(flag, value)
    targets = tuple(part.strip() for part in value.split(",") if part.strip())
    if not targets:
        raise BadInput(f"{flag}: no target given")
    for target in targets:
        if not _TARGET.fullmatch(target):
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
