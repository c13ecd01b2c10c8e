"""A leg's scale-out settings: its test split into shard jobs, or its distributed cases run
as one torchrun job over several nodes.

    shards: 3                               # jobs running `accelkit test --shard 1/3` .. 3/3;
                                            #   the nightly merges them (`accelkit merge`)
    nodes: 2                                # jobs running `accelkit test --nnodes 2
    rdzv_endpoint: "cpu-pair-0.lan:29500"   #   --node-rank R --rdzv-endpoint HOST:PORT`
    suites: [distributed]                   #   (the distributed cases only)
    container: false                        #   (on the runners themselves)
    runner:                                 # one label list per node, node 0's first: its
      - [self-hosted, linux.cpu.pair0]      #   runner is the host of rdzv_endpoint
      - [self-hosted, linux.cpu.pair1]

`accelkit.matrix.jobs` turns a leg into its jobs; the values are checked here, with the
rules `accelkit test` applies to `--shard` and `--nnodes`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from accelkit.errors import BadInput
from accelkit.matrix import rules
from accelkit.matrix.values import ValueChecker, kind

Found = tuple[Any, int] | None
"""A setting's value and line, or None when it is not set."""


@dataclass(frozen=True)
class ScaleOut:
    shards: int = 1
    nodes: int = 1
    rdzv_endpoint: str | None = None


def _count(checker: ValueChecker, found: Found, key: str, maximum: int) -> int:
    if found is None:
        return 1
    value, line = found
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        checker.fail(f"{key} must be a whole number from 1 to {maximum}, not {kind(value)}", line)
    return value


def scale_out(
    checker: ValueChecker,
    find: Callable[[str], Found],
    *,
    suites: tuple[str, ...],
    container: bool,
) -> ScaleOut:
    """The leg's shards, nodes and rendezvous; a located ConfigError for what cannot run."""
    shards = _count(checker, find("shards"), "shards", rules.MAX_SHARDS)
    nodes_found = find("nodes")
    nodes = _count(checker, nodes_found, "nodes", rules.MAX_NODES)
    endpoint_found = find("rdzv_endpoint")
    if nodes_found is None or nodes == 1:
        if endpoint_found is not None:
            checker.fail("rdzv_endpoint is only for a leg of nodes: 2 or more", endpoint_found[1])
        return ScaleOut(shards=shards)
    at = nodes_found[1]
    if endpoint_found is None:
        checker.fail(
            f"nodes: {nodes} needs rdzv_endpoint: HOST:PORT (node 0's runner, reachable from "
            "every node)",
            at,
        )
    endpoint = checker.string(
        endpoint_found[0], endpoint_found[1], "rdzv_endpoint", rules.ENDPOINT, "HOST:PORT"
    )
    from accelkit.suite.distributed.multinode import parse_endpoint

    try:
        parse_endpoint(endpoint, flag="rdzv_endpoint")
    except BadInput as exc:
        checker.fail(str(exc), endpoint_found[1])
    if suites != ("distributed",):
        checker.fail(
            f"nodes: {nodes} runs the distributed cases only: set suites: [distributed]", at
        )
    if shards > 1:
        checker.fail(f"nodes: {nodes} is one run of the distributed cases: remove shards", at)
    if container:
        checker.fail(
            f"nodes: {nodes} runs on the runners themselves (accelkit test --nnodes takes no "
            "--image yet): set container: false",
            at,
        )
    return ScaleOut(shards=shards, nodes=nodes, rdzv_endpoint=endpoint)
