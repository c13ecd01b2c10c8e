"""The jobs a leg runs as: one, or one per shard (`shards: N`), or one per node (`nodes: N`).

Each job runs the leg's build, setup and test steps with the leg's test arguments and its
own scale-out options, and keeps its files in its own folder under the workflow's
`leg-results/`, so that the artifacts of a leg's jobs never collide:

- a plain leg: one job named as the leg (`cpu-py3.11`), files in `cpu-py3.11/`;
- `shards: 3`: jobs `cpu-py3.11-shard-2-of-3` (test options `--shard=2/3`), files in
  `cpu-py3.11/shard-2-of-3/`;
- `nodes: 2`: jobs `<leg>-node-1` (`--nnodes=2 --node-rank=1 --rdzv-endpoint=HOST:PORT`),
  node 0's files in `<leg>/`, node 1's in `<leg>/node-1/`.

The nightly's report job (and `accelkit matrix run`) merges a leg's shards into the leg's
own `results.json` (`accelkit merge`) before anything compares it; node 0 alone writes a
multi-node leg's results.

Each job uploads its folder as one artifact: `results-<job>`, or `findings-<job>` for an
explore leg (`explore_seeds: N`, one job writing `findings.json` and `findings.md`), which
the report job downloads apart, so a findings file is never read as a results file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from accelkit.matrix.model import MatrixEntry

#: A shard job's folder under its leg's, and the pattern that finds them.
SHARD_DIR = "shard-{index}-of-{count}"
SHARD_DIR_PATTERN = re.compile(r"shard-([0-9]+)-of-([0-9]+)")
#: A job's artifact is `<kind>-<job>`: a leg's results, or an explore leg's findings.
RESULTS_ARTIFACT = "results"
FINDINGS_ARTIFACT = "findings"


@dataclass(frozen=True)
class LegJob:
    """One GitHub job of a leg."""

    leg: MatrixEntry
    name: str
    runner: tuple[str, ...]
    test_args: tuple[str, ...]
    """The leg's test arguments, then this job's --shard or --nnodes options."""
    directory: str
    """This job's folder under leg-results/ (its results.json, junit.xml, setup.json...)."""
    shard: tuple[int, int] | None = None
    """(index, count) for a shard job."""
    node_rank: int = 0
    writes_results: bool = True
    """False for the nodes other than 0 of a multi-node leg (node 0 writes the results)."""

    @property
    def artifact(self) -> str:
        """The artifact this job's folder is uploaded as (unique: job names are)."""
        kind = FINDINGS_ARTIFACT if self.leg.explore_seeds else RESULTS_ARTIFACT
        return f"{kind}-{self.name}"


def shard_dir(index: int, count: int) -> str:
    return SHARD_DIR.format(index=index, count=count)


def leg_jobs(leg: MatrixEntry) -> tuple[LegJob, ...]:
    """The leg's jobs, in order (shard 1 first, node 0 first)."""
    if leg.nodes > 1:
        assert leg.rdzv_endpoint is not None and len(leg.node_runners) == leg.nodes
        return tuple(
            LegJob(
                leg=leg,
                name=f"{leg.name}-node-{rank}",
                runner=leg.node_runners[rank],
                test_args=(
                    *leg.test_args,
                    f"--nnodes={leg.nodes}",
                    f"--node-rank={rank}",
                    f"--rdzv-endpoint={leg.rdzv_endpoint}",
                ),
                directory=leg.name if rank == 0 else f"{leg.name}/node-{rank}",
                node_rank=rank,
                writes_results=rank == 0,
            )
            for rank in range(leg.nodes)
        )
    if leg.shards > 1:
        return tuple(
            LegJob(
                leg=leg,
                name=f"{leg.name}-shard-{index}-of-{leg.shards}",
                runner=leg.runner,
                test_args=(*leg.test_args, f"--shard={index}/{leg.shards}"),
                directory=f"{leg.name}/{shard_dir(index, leg.shards)}",
                shard=(index, leg.shards),
            )
            for index in range(1, leg.shards + 1)
        )
    return (
        LegJob(
            leg=leg, name=leg.name, runner=leg.runner, test_args=leg.test_args, directory=leg.name
        ),
    )
