"""The `strategy.matrix` object for GitHub Actions: `{"include": [...]}`, one item per job:
one per leg, or one per shard of a `shards: N` leg and one per node of a `nodes: N` leg
(`accelkit.matrix.jobs`).

Each item carries exactly what the workflow's jobs consume, under stable keys and in the
legs' order: the leg's Python, its torch source (channel and the index it resolves to, or
the ref a build starts from), its test image's base, and the complete argument lists of its
build, setup and test commands (the test's with the job's `--shard` or `--nnodes` options);
`name` is the leg's, `job` the job's, `leg_dir` the job's folder under `leg-results/`,
`writes_results` false for the nodes that write no results (all but node 0), `explore_seeds`
N for an explore leg (0 otherwise: its test writes findings.json, not results.json and
junit.xml) and `artifact` the name the job uploads its folder as. Unset strings
are `""` rather than null, so `if: matrix.image != ''` and `env:` values behave the same for
every leg. Values were
validated by `parse`, but the workflow must still pass them to commands through `env:`,
never by `${{ }}` in `run:`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from accelkit.matrix import rules
from accelkit.matrix.jobs import LegJob, leg_jobs
from accelkit.matrix.model import MatrixEntry

# The keys of every item, in order; workflows (and their tests) rely on this list.
GITHUB_FIELDS: tuple[str, ...] = (
    "name",
    "job",
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
    "leg_dir",
    "writes_results",
    "shard",
    "nodes",
    "node_rank",
    "explore_seeds",
    "artifact",
)


def suite_option(suites: Sequence[str]) -> str:
    """The value for `accelkit test --suite`: one suite, or `all` for conformance and perf."""
    return "all" if set(suites) == set(rules.ALL_SUITES) else suites[0]


def github_item(job: LegJob) -> dict[str, Any]:
    leg = job.leg
    item: dict[str, Any] = {
        "name": leg.name,
        "job": job.name,
        "runner": list(job.runner),
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
        "test_args": list(job.test_args),
        "timeout_minutes": leg.timeout_minutes,
        "leg_dir": job.directory,
        "writes_results": job.writes_results,
        "shard": "" if job.shard is None else f"{job.shard[0]}/{job.shard[1]}",
        "nodes": leg.nodes,
        "node_rank": job.node_rank,
        "explore_seeds": leg.explore_seeds,
        "artifact": job.artifact,
    }
    assert tuple(item) == GITHUB_FIELDS
    return item


def github_matrix(legs: Sequence[MatrixEntry]) -> dict[str, list[dict[str, Any]]]:
    return {"include": [github_item(job) for leg in legs for job in leg_jobs(leg)]}
