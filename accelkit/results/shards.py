"""The shards of one run, back into one leg result (`accelkit merge SHARD.json... -o LEG.json`).

`accelkit test --shard I/N` runs a deterministic part of the cases and records the shard in
its results file (`run.shard`: index, count, how it was balanced, and per suite the digest of
the case list it chose from). `merge_shards` checks that the files are the N shards of one
run and joins them; it refuses (BadInput, one line) anything it cannot vouch for:

- a file that is not a shard, shards of different counts, a shard missing or given twice;
- shards of different runs: a different case list to choose from (the digests differ: another
  `-k`, another accelkit, another capability table), another seed, breadth, timeout, suites,
  balancing or durations file;
- shards from different devices (the backend, or the names of its devices) or torch builds
  (version, git commit, toolkit versions), or with different capability tables;
- a case in two shards (the same collection error reported by several shards counts once).

The merged file has shard 1's header with `run.shard` cleared and `run.shards` = N, the
earliest start, the latest finish (None when a shard did not finish), every shard's cases in
shard order, the summary recounted and the shards' Inductor cache counters summed
(`run.compile_cache`). Each case ran in exactly one shard, so its metrics
and their sample groups (measurement passes) are kept as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from accelkit.errors import BadInput
from accelkit.results.model import Case, CompileCache, Results, Summary

COMPILE_CACHE_COUNTERS = ("hits", "misses", "bypasses", "autograd_hits", "autograd_misses")

#: The fingerprint's torch fields that identify a build.
TORCH_BUILD_KEYS: tuple[str, ...] = ("version", "git_version", "cuda", "hip", "xpu", "debug")


def _torch_build(results: Results) -> dict[str, object]:
    torch = results.env.get("torch")
    if not isinstance(torch, dict):
        return {}
    return {key: torch.get(key) for key in TORCH_BUILD_KEYS}


def _device_names(results: Results) -> list[str]:
    backends = results.env.get("backends")
    entry = backends.get(results.run.device) if isinstance(backends, dict) else None
    devices = entry.get("devices") if isinstance(entry, dict) else None
    if not isinstance(devices, list):
        return []
    return [str(d.get("name")) if isinstance(d, dict) else str(d) for d in devices]


def _run_settings(results: Results) -> dict[str, object]:
    run, shard = results.run, results.run.shard
    assert shard is not None
    return {
        "seed": run.seed,
        "breadth": run.breadth,
        "timeout": run.timeout_s,
        "suites": sorted(run.suites),
        "balancing": shard.balanced_by,
        "durations file (sha256)": shard.durations_sha256,
        "accelkit": results.env.get("accelkit"),
    }


def _same(label: str, what: str, values: dict[str, object]) -> None:
    """BadInput unless every shard (name -> value) has the same value."""
    distinct = {repr(v) for v in values.values()}
    if len(distinct) > 1:
        shown = "; ".join(f"{name}: {value}" for name, value in values.items())
        raise BadInput(f"{label}: the shards differ in {what} ({shown})")


def merge_shards(parts: Sequence[tuple[str, Results]]) -> Results:
    """One leg result from the shards `parts` ((name, results) pairs); see the module
    docstring for what is refused."""
    if not parts:
        raise BadInput("merge: no shard given")
    shards = []
    for name, results in parts:
        if results.run.shard is None:
            raise BadInput(f"{name}: not a shard (its run had no --shard)")
        shards.append((name, results, results.run.shard))
    count = shards[0][2].count
    by_index: dict[int, tuple[str, Results]] = {}
    for name, results, shard in shards:
        if shard.count != count:
            raise BadInput(
                f"{name}: shard {shard.index}/{shard.count}, but {shards[0][0]} is one of "
                f"{count}: not the same run"
            )
        if shard.index in by_index:
            raise BadInput(
                f"shard {shard.index}/{count} given twice ({by_index[shard.index][0]} and {name})"
            )
        by_index[shard.index] = (name, results)
    missing = [str(i) for i in range(1, count + 1) if i not in by_index]
    if missing:
        raise BadInput(f"missing shard {', '.join(f'{i}/{count}' for i in missing)}")
    ordered = [by_index[i] for i in range(1, count + 1)]
    label = "merge"
    names = [f"shard {i}/{count}" for i in range(1, count + 1)]

    def each(value: Any) -> dict[str, object]:
        return {name: value(results) for name, (_, results) in zip(names, ordered, strict=True)}

    _same(label, "device", each(lambda r: r.run.device))
    _same(label, "devices", each(_device_names))
    _same(label, "torch build", each(_torch_build))
    for key in _run_settings(ordered[0][1]):
        _same(label, f"{key} (not one run)", each(lambda r, key=key: _run_settings(r)[key]))
    _same(
        label,
        "capabilities",
        each(lambda r: sorted(k for k, v in r.capabilities.items() if v.available)),
    )
    _check_selections(ordered, names)
    return _joined(ordered, count)


def _check_selections(ordered: list[tuple[str, Results]], names: list[str]) -> None:
    """Every shard chose from the same case list, per suite (where a shard recorded it)."""
    suites = {s for _, r in ordered if r.run.shard for s in r.run.shard.selections}
    for suite in sorted(suites):
        seen: dict[str, str] = {}
        for name, (_, results) in zip(names, ordered, strict=True):
            assert results.run.shard is not None
            selection = results.run.shard.selections.get(suite)
            if selection is not None:
                seen[name] = f"{selection.cases} cases, digest {selection.digest[:12]}"
        if len(set(seen.values())) > 1:
            shown = "; ".join(f"{name}: {value}" for name, value in seen.items())
            raise BadInput(
                f"merge: the shards chose their {suite} cases from different lists, so they are "
                f"not one run ({shown})"
            )


def _joined(ordered: list[tuple[str, Results]], count: int) -> Results:
    cases: list[Case] = []
    where: dict[str, tuple[str, Case]] = {}
    for name, results in ordered:
        for case in results.cases:
            first = where.get(case.id)
            if first is None:
                where[case.id] = (name, case)
                cases.append(case)
                continue
            if _same_collection_error(first[1], case):
                continue  # every shard collects every module: one error, reported once
            raise BadInput(f"case {case.id} is in two shards ({first[0]} and {name}): they overlap")
    first_results = ordered[0][1]
    started = min(r.run.started for _, r in ordered)
    finishes = [r.run.finished for _, r in ordered]
    finished = None if any(f is None for f in finishes) else max(f for f in finishes if f)
    run = first_results.run.model_copy(
        update={
            "shard": None,
            "shards": count,
            "started": started,
            "finished": finished,
            "compile_cache": _compile_cache([r for _, r in ordered]),
        }
    )
    return first_results.model_copy(
        update={"run": run, "cases": cases, "summary": Summary.of(cases)}
    )


def _compile_cache(shards: list[Results]) -> CompileCache | None:
    """The shards' Inductor cache counters summed (each shard's own processes counted
    theirs); None when no shard kept the caches."""
    kept = [r.run.compile_cache for r in shards if r.run.compile_cache is not None]
    if not kept:
        return None
    totals = {f: sum(getattr(c, f) for c in kept) for f in COMPILE_CACHE_COUNTERS}
    return CompileCache(key=kept[0].key, **totals)


def _same_collection_error(first: Case, other: Case) -> bool:
    return (
        first.status == other.status == "error"
        and first.message == other.message
        and first.message.startswith("collection failed")
    )
