"""What a value in a matrix file may look like.

Every free-form string (labels, images, refs, arguments, names) is held to an allow-list
pattern, so a matrix value can be placed on any command line (or in a workflow's `run:`
step) without quoting surprises: no whitespace, quotes, `$`, backticks, `;`, `|`, `&`,
redirections or globs, and no leading `-` where a value could be read as an option.

Which targets a backend has comes from the backend module itself (`targets`, and for ROCm
`GFX_FAMILIES`); how its toolkit versions are spelled lives here, in `BACKEND_VERSIONS`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SUITES: tuple[str, ...] = ("conformance", "perf")
TORCH_CHANNELS: tuple[str, ...] = ("nightly", "test", "release")

# torch 2.14 supports CPython 3.10 and newer; `t` marks a free-threaded build.
PYTHON = re.compile(r"3\.(1[0-9]|[2-9][0-9])t?")
RUNNER_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
# A container image reference: [registry[:port]/]repo[:tag][@sha256:digest].
IMAGE = re.compile(
    r"[a-z0-9][a-z0-9._/:-]{0,199}(:[A-Za-z0-9_][A-Za-z0-9._-]{0,127})?(@sha256:[0-9a-f]{64})?"
)
# A git ref or commit, as `git check-ref-format` allows it, minus anything a shell reads.
GIT_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/+-]{0,199}")
# One argv token: flags and values like `--gfx=gfx942` or `--index-url https://host/x/`.
ARG = re.compile(r"[A-Za-z0-9_@%+=:,./-]{1,500}")
# Placeholders an argument may use; filled in per leg at expansion.
PLACEHOLDER = re.compile(r"\{([A-Za-z_]+)\}")
PLACEHOLDERS: tuple[str, ...] = (
    "backend_version",
    "family",
    "name",
    "python",
    "target",
    "torch_channel",
    "torch_ref",
)
SLUG = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")

MAX_TIMEOUT_MINUTES = 72 * 60  # GitHub's limit for a job on a self-hosted runner is 5 days


@dataclass(frozen=True)
class VersionRule:
    pattern: re.Pattern[str]
    example: str
    what: str


# How each backend's toolkit version is spelled. A backend not listed has no version
# (cpu, mps): a matrix entry for it must not name one.
BACKEND_VERSIONS: dict[str, VersionRule] = {
    # TheRock's versions: X.Y, X.Y.Z, prerelease X.Y.ZrcN, nightly X.Y.ZaYYYYMMDD.
    "rocm": VersionRule(
        re.compile(r"[1-9][0-9]?\.[0-9]{1,2}(\.[0-9]{1,2}((a|rc)[0-9]{1,8})?)?"),
        "7.14",
        "ROCm version",
    ),
    "cuda": VersionRule(re.compile(r"1[1-9]\.[0-9]{1,2}(\.[0-9]{1,2})?"), "13.4", "CUDA version"),
    # Intel's oneAPI / Deep Learning Essentials release, e.g. 2025.3.
    "xpu": VersionRule(
        re.compile(r"20[2-9][0-9]\.[0-9]{1,2}(\.[0-9]{1,2})?"), "2025.3", "XPU toolchain version"
    ),
}

# The first toolkit release that can build for a target (CUDA) (see containers-and-ci.md: sm_100/120
# from 12.8, sm_103/121 from 12.9, sm_110 from 13.0, Rubin sm_107 from 13.4).
TARGET_MINIMUM_VERSION: dict[str, tuple[int, int]] = {
    "sm_100": (12, 8),
    "sm_101": (12, 8),
    "sm_120": (12, 8),
    "sm_103": (12, 9),
    "sm_121": (12, 9),
    "sm_110": (13, 0),
    "sm_107": (13, 4),
}

_EXPLAINED = {
    " ": "a space",
    "\t": "a tab",
    "\n": "a newline",
    "$": "'$'",
    "`": "'`'",
    ";": "';'",
    "|": "'|'",
    "&": "'&'",
    "<": "'<'",
    ">": "'>'",
    "'": "a quote",
    '"': "a quote",
    "\\": "a backslash",
    "*": "a glob '*'",
    "?": "a glob '?'",
    "(": "'('",
    ")": "')'",
}


def version_tuple(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def first_bad_char(value: str, pattern: re.Pattern[str]) -> str | None:
    """A description of the first character that keeps `value` from matching, if any."""
    dash_ok = pattern.fullmatch("-a") is not None
    for index, char in enumerate(value):
        if char in _EXPLAINED:
            return _EXPLAINED[char]
        if not char.isascii() or not char.isprintable():
            return f"the character {char!r}"
        if index == 0 and char == "-" and not dash_ok:
            return "a leading '-'"
    return None


def check_pattern(value: str, pattern: re.Pattern[str], what: str, allowed: str) -> str | None:
    """None when `value` fully matches, else a one-line reason naming the offending part."""
    if pattern.fullmatch(value):
        return None
    bad = first_bad_char(value, pattern)
    if bad is not None:
        return (
            f"{what} {value!r} contains {bad}; matrix values never reach a shell, so only "
            f"{allowed} are allowed"
        )
    return f"{what} {value!r} is not valid ({allowed})"
