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

SUITES: tuple[str, ...] = ("conformance", "perf", "distributed")
#: What `accelkit test --suite all` runs; `distributed` (the distributed cases of
#: conformance, what a `nodes: N` leg runs) is a leg's only suite when it is one.
ALL_SUITES: tuple[str, ...] = ("conformance", "perf")
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
# `rdzv_endpoint`: a host name or IPv4 address and a port.
ENDPOINT = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]{0,252}:[0-9]{1,5}")
SLUG = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")

MAX_TIMEOUT_MINUTES = 72 * 60  # GitHub's limit for a job on a self-hosted runner is 5 days
#: `shards: N`: each shard is a job of its own (GitHub allows 256 jobs per matrix).
MAX_SHARDS = 32
#: `nodes: N`: one job per node, all waiting at one rendezvous.
MAX_NODES = 8
#: Jobs in one GitHub matrix (a leg's, or one per shard or node): GitHub's own limit.
MAX_JOBS = 256


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


#: Where a build leg's `accelkit build --output` puts the wheel its setup then installs.
WHEELHOUSE = "wheelhouse"

#: Flags that a leg's own keys set (accelkit.matrix.expand): a matrix never writes them in
#: build_args, setup_args or test_args, so what a leg is named after is what it runs.
LEG_SET_FLAGS: dict[str, dict[str, str]] = {
    "build_args": {
        "--python": "the leg's python",
        "--torch-ref": "torch: {ref: ...}",
        "--source": "the workflow (its clone of PyTorch at torch: {ref: ...})",
        "--output": f"the workflow ({WHEELHOUSE}/)",
        "-o": f"the workflow ({WHEELHOUSE}/)",
    },
    "setup_args": {
        "--python": "the leg's python",
        "--base-image": "base_image (or the backend's default)",
        "--torch-channel": "torch: {channel: ...}",
        "--torch-index": "torch: {channel: ...} (the backend's index for it)",
        "--torch-wheel": "build: true (the wheel the build step writes)",
    },
    "test_args": {
        "--device": "the backend",
        "-d": "the backend",
        "--suite": "suites",
        "--image": "the leg's test image",
        "--json": "the workflow (leg-results/<leg>/)",
        "--junit": "the workflow (leg-results/<leg>/)",
        "--require": "require",
        "--waive": "waive (each capability with its reason)",
        "--shard": "shards (one job per shard)",
        "--nnodes": "nodes (one job per node)",
        "--node-rank": "nodes (one job per node)",
        "--rdzv-endpoint": "rdzv_endpoint",
        "--explore-seeds": "explore_seeds (an explore leg)",
    },
}


def leg_set_flag_problem(what: str, token: str) -> str | None:
    """Why `token` may not appear in a leg's `what` (build_args, ...), or None."""
    flag = token.split("=", 1)[0]
    source = LEG_SET_FLAGS.get(what, {}).get(flag)
    if source is None:
        return None
    return f"{what} item {token!r}: {flag} is set from {source}; remove it"
