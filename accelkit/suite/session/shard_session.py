"""The pytest side of `accelkit test --shard I/N`: which collected items this shard keeps
(`accelkit.suite.session.sharding` decides, from the ids alone), what the shard chose from (sent
by each xdist worker with its `workeroutput`, stashed in the controller) and the results
file's `run.shard` record."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from accelkit.results.model import Shard
from accelkit.suite.session import sharding
from accelkit.suite.session.caseid import case_id, suite_of

SHARD_SELECTIONS = "accelkit_shard_selections"
SELECTIONS_KEY = pytest.StashKey[dict[str, dict[str, Any]]]()


def select_shard(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect every case outside this shard (`accelkit.suite.session.sharding`); record what the
    shard chose from for the results file (a worker sends it with its `workeroutput`)."""
    text = config.getoption("--accelkit-shard", default=None)
    if not text:
        return
    spec = sharding.ShardSpec.parse(str(text))
    durations = None
    path = config.getoption("--accelkit-durations", default=None)
    if path:
        from accelkit.results.io import load_results

        durations = sharding.durations_of(load_results(Path(path)))
    ids = [case_id(item.nodeid) for item in items]
    groups: dict[str, str] = {}
    for item, case in zip(items, ids, strict=True):
        mark = item.get_closest_marker("shard_group")
        if mark is not None and mark.args:
            groups[case] = str(mark.args[0])
    chosen = sharding.select(ids, spec, groups=groups, durations=durations)
    selections: dict[str, dict[str, Any]] = {}
    for suite in sorted({suite_of(item.nodeid) for item in items}):
        mine = [c for item, c in zip(items, ids, strict=True) if suite_of(item.nodeid) == suite]
        selections[suite] = {
            "cases": len(mine),
            "selected": sum(c in chosen for c in mine),
            "digest": sharding.selection_digest(mine),
        }
    config.stash[SELECTIONS_KEY] = selections
    workeroutput = getattr(config, "workeroutput", None)
    if isinstance(workeroutput, dict):
        workeroutput[SHARD_SELECTIONS] = json.dumps(selections)
    dropped = [item for item, case in zip(items, ids, strict=True) if case not in chosen]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item, case in zip(items, ids, strict=True) if case in chosen]


def shard_record(shard: str | None, durations_from: Path | None) -> Shard | None:
    """The results file's `run.shard` for a `--shard` run (the plugin adds what each
    session chose from), else None."""
    if shard is None:
        return None
    spec = sharding.ShardSpec.parse(shard)
    digest = None
    if durations_from is not None:
        digest = hashlib.sha256(durations_from.read_bytes()).hexdigest()
    return Shard(
        index=spec.index,
        count=spec.count,
        balanced_by="durations" if digest else "count",
        durations_sha256=digest,
    )
