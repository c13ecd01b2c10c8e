"""The `strategy.matrix` object for GitHub Actions: `{"include": [...]}`, one item per leg.

Each item carries exactly what the workflow's jobs consume, under stable keys and in the
legs' order: the leg's Python, its torch source (channel and the index it resolves to, or
the ref a build starts from), its test image's base, and the complete argument lists of its
build, setup and test commands. Unset strings are `""` rather than null, so
`if: matrix.image != ''` and `env:` values behave the same for every leg. Values were
validated by `parse`, but the workflow must still pass them to commands through `env:`,
never by `${{ }}` in `run:`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from accelkit.matrix import rules
from accelkit.matrix.model import MatrixEntry

# The keys of every item, in order; workflows (and their tests) rely on this list.
GITHUB_FIELDS: tuple[str, ...] = (
    "name",
    "runner",
    "backend",
    "backend_version",
    "target",
    "family",
    "device",
    "python",
    "torch_channel",
    "torch_ref",
    "torch_index",
    "suites",
    "suite",
    "container",
    "image",
    "base_image",
    "setup_args",
    "build",
    "build_args",
    "test_args",
    "timeout_minutes",
)


def suite_option(suites: Sequence[str]) -> str:
    """The value for `accelkit test --suite`: one suite, or `all` for every suite."""
    return "all" if set(suites) == set(rules.SUITES) else suites[0]


def github_item(leg: MatrixEntry) -> dict[str, Any]:
    item: dict[str, Any] = {
        "name": leg.name,
        "runner": list(leg.runner),
        "backend": leg.backend,
        "backend_version": leg.backend_version or "",
        "target": leg.target or "",
        "family": leg.family or "",
        "device": leg.device,
        "python": leg.python,
        "torch_channel": leg.torch.channel or "",
        "torch_ref": leg.torch.ref or "",
        "torch_index": leg.torch_index or "",
        "suites": list(leg.suites),
        "suite": suite_option(leg.suites),
        "container": leg.container,
        "image": leg.image or "",
        "base_image": leg.base_image or "",
        "setup_args": list(leg.setup_args),
        "build": leg.build,
        "build_args": list(leg.build_args),
        "test_args": list(leg.test_args),
        "timeout_minutes": leg.timeout_minutes,
    }
    assert tuple(item) == GITHUB_FIELDS
    return item


def github_matrix(legs: Sequence[MatrixEntry]) -> dict[str, list[dict[str, Any]]]:
    return {"include": [github_item(leg) for leg in legs]}
