"""Which cases a shard runs (`accelkit test --shard I/N`): a pure function of the cases the
session collected, so every shard, every pytest-xdist worker and every measurement pass
chooses the same way without talking to the others.

The unit of assignment is a case, or a *group* of cases that share an expensive session
(`@pytest.mark.shard_group("name")`: the distributed cases share their rank sessions, and
splitting them would start those sessions once per shard). Units are assigned greedily,
largest first, each to the shard with the least total so far (ties: the lower shard), as
PyTorch's CI assigns test files to shards by their recorded times:

- with durations (`--durations-from RESULTS`, e.g. last night's results file), a unit
  weighs the seconds its cases took there; units none of whose cases were recorded (new
  cases) are then dealt round-robin, starting with the lightest shard;
- without, a unit weighs its number of cases, so shards differ by at most one unit.

Example: cases a (10 s), b (6 s), c (5 s), d (1 s) and a new case e over 2 shards: a -> 1,
b -> 2, c -> 2 (6 < 10), d -> 1 (10 < 11), then e round-robin from the lighter shard 1
(11 = 11: the lower one): shard 1 runs a, d, e and shard 2 runs b, c.

Every shard of a run records the digest of the case ids it chose from
(`selection_digest`); `accelkit merge` refuses shards whose digests differ, since they did
not split the same list and their union need not be the whole run.

In the pytest session (`select_shard`, called by the plugin after `-k`/`-m`): the shard
deselects every case outside it and records what it chose from, per suite (cases collected
and selected, the digest); each xdist worker sends that with its `workeroutput`, and the
controller stashes it for the results file's `run.shard` (`shard_record`).

The request imports `ShardSpec` from here to check `--shard` before anything starts, so this
module imports neither pytest nor the results model at its top: the session side imports
them where it runs.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelkit.errors import BadInput
from accelkit.suite.session.caseid import case_id, suite_of

if TYPE_CHECKING:
    import pytest

    from accelkit.results.model import Shard

SHARD = re.compile(r"([0-9]{1,6})/([0-9]{1,6})")
MAX_SHARDS = 1000
#: The `workeroutput` key under which an xdist worker sends what its shard chose from.
SHARD_SELECTIONS = "accelkit_shard_selections"


@dataclass(frozen=True)
class ShardSpec:
    """Shard `index` (1-based) of `count`."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str, *, flag: str = "--shard") -> ShardSpec:
        """`2/3` -> ShardSpec(2, 3); BadInput (one line) for anything else."""
        match = SHARD.fullmatch(text.strip())
        if match is None:
            raise BadInput(f"{flag} {text!r}: expected I/N, e.g. 2/3 (shard 2 of 3)")
        index, count = int(match.group(1)), int(match.group(2))
        if not 1 <= count <= MAX_SHARDS:
            raise BadInput(f"{flag} {text}: the number of shards must be 1 to {MAX_SHARDS}")
        if not 1 <= index <= count:
            raise BadInput(f"{flag} {text}: the shard must be 1 to {count} (they count from 1)")
        return cls(index, count)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass(frozen=True)
class Unit:
    """Cases that go to one shard together: one case, or one shard_group."""

    key: str
    ids: tuple[str, ...]
    weight: float
    known: bool
    """Whether `weight` comes from recorded durations (always True without durations)."""


def units(
    case_ids: Sequence[str],
    groups: Mapping[str, str],
    durations: Mapping[str, float] | None,
) -> list[Unit]:
    """The units of `case_ids` in collection order (a group where its first case is).

    `groups` maps a case id to its shard group; `durations` maps case ids to seconds."""
    members: dict[str, list[str]] = {}
    for case in case_ids:
        group = groups.get(case)
        members.setdefault(f"group:{group}" if group else f"case:{case}", []).append(case)
    out: list[Unit] = []
    for key, ids in members.items():
        if durations is None:
            out.append(Unit(key, tuple(ids), float(len(ids)), True))
            continue
        recorded = [durations[c] for c in ids if c in durations]
        out.append(Unit(key, tuple(ids), float(sum(recorded)), bool(recorded)))
    return out


def assign(unit_list: Sequence[Unit], count: int) -> list[list[Unit]]:
    """The units of each shard (index 0 is shard 1), as the module docstring describes."""
    shards: list[list[Unit]] = [[] for _ in range(count)]
    totals = [0.0] * count
    order = {unit.key: position for position, unit in enumerate(unit_list)}
    known = sorted((u for u in unit_list if u.known), key=lambda u: (-u.weight, order[u.key]))
    for unit in known:
        lightest = min(range(count), key=lambda i: (totals[i], i))
        shards[lightest].append(unit)
        totals[lightest] += unit.weight
    unknown = [u for u in unit_list if not u.known]
    if unknown:
        start = min(range(count), key=lambda i: (totals[i], i))
        for offset, unit in enumerate(unknown):
            shards[(start + offset) % count].append(unit)
    return shards


def select(
    case_ids: Sequence[str],
    spec: ShardSpec,
    *,
    groups: Mapping[str, str] | None = None,
    durations: Mapping[str, float] | None = None,
) -> set[str]:
    """The case ids shard `spec` runs out of `case_ids`."""
    plan = assign(units(case_ids, groups or {}, durations), spec.count)
    return {case for unit in plan[spec.index - 1] for case in unit.ids}


def selection_digest(case_ids: Sequence[str]) -> str:
    """sha256 of the sorted, distinct case ids a shard chose from (the same in every shard
    of one run)."""
    text = "\n".join(sorted(set(case_ids)))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def durations_of(results: object) -> dict[str, float]:
    """Case id -> seconds from a loaded results file (`accelkit.results.model.Results`)."""
    return {case.id: float(case.duration_s) for case in getattr(results, "cases", [])}


# In the pytest session: the shard applied to the collected items.


@functools.cache
def selections_key() -> pytest.StashKey[dict[str, dict[str, Any]]]:
    """The config stash key of what this session's shard chose from, per suite (made on first
    use, so that importing this module imports no pytest)."""
    import pytest

    return pytest.StashKey[dict[str, dict[str, Any]]]()


def select_shard(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect every case outside this shard (`select`); record what the shard chose from
    for the results file (a worker sends it with its `workeroutput`)."""
    text = config.getoption("--accelkit-shard", default=None)
    if not text:
        return
    spec = ShardSpec.parse(str(text))
    durations = None
    path = config.getoption("--accelkit-durations", default=None)
    if path:
        from accelkit.results.io import load_results

        durations = durations_of(load_results(Path(path)))
    ids = [case_id(item.nodeid) for item in items]
    groups: dict[str, str] = {}
    for item, case in zip(items, ids, strict=True):
        mark = item.get_closest_marker("shard_group")
        if mark is not None and mark.args:
            groups[case] = str(mark.args[0])
    chosen = select(ids, spec, groups=groups, durations=durations)
    selections: dict[str, dict[str, Any]] = {}
    for suite in sorted({suite_of(item.nodeid) for item in items}):
        mine = [c for item, c in zip(items, ids, strict=True) if suite_of(item.nodeid) == suite]
        selections[suite] = {
            "cases": len(mine),
            "selected": sum(c in chosen for c in mine),
            "digest": selection_digest(mine),
        }
    config.stash[selections_key()] = selections
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
    from accelkit.results.model import Shard

    spec = ShardSpec.parse(shard)
    digest = None
    if durations_from is not None:
        digest = hashlib.sha256(durations_from.read_bytes()).hexdigest()
    return Shard(
        index=spec.index,
        count=spec.count,
        balanced_by="durations" if digest else "count",
        durations_sha256=digest,
    )
