"""What a value in a matrix file may look like.

Every free-form string (labels, images, refs, arguments, names) is held to an allow-list
pattern, so a matrix value can be placed on any command line (or in a workflow's `run:`
step) without quoting surprises: no whitespace, quotes, `$`, backticks, `;`, `|`, `&`,
redirections or globs, and no leading `-` where a value could be read as an option.

Patterns for values other commands also take (Python versions, images, git refs) are
accelkit.inputs's, so `matrix validate` accepts exactly what `build`, `setup` and `test`
accept; a backend's targets, families, toolkit-version spelling and minimum toolkit per
target are the backend's (`accelkit.backends`).
"""

from __future__ import annotations

import re

from accelkit import inputs

SUITES: tuple[str, ...] = ("conformance", "perf")
TORCH_CHANNELS = inputs.TORCH_CHANNELS

PYTHON = inputs.PYTHON
IMAGE = inputs.IMAGE
GIT_REF = inputs.GIT_REF
RUNNER_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
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
