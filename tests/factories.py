"""Results objects for accelkit's own tests: the one place that builds `Results`, `Case` and
`Metric` (with samples and sample groups), so a change to the results model is one change
here, not one per test module.

Every builder returns a validated model object; anything not given gets a plain default.
A CUDA run with one passing conformance case and one GEMM, its latency timed in five
passes and its throughput in one process:

    results(
        [
            case("conformance/ops/add/float32"),  # suite from the id, status passed
            case("perf/gemm", metrics={
                "latency": grouped_metric(1e-3, passes=5),
                "flops": sampled_metric(2e12, unit="FLOP/s", higher_is_better=True),
            }),
        ],
        device="cuda",
    )
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from accelkit.results.model import (
    SUITES,
    Case,
    Metric,
    Results,
    RunInfo,
    Shard,
    ShardSelection,
    Summary,
)

STARTED = "2026-01-01T00:00:00+00:00"
"""The start time of a run built here unless the test gives one."""


# ---------------------------------------------------------------------------------------
# Samples


def lognormal_samples(
    median: float, n: int = 15, spread: float = 0.02, seed: int = 0
) -> list[float]:
    """`n` seeded samples around `median`, with the multiplicative noise of a timer."""
    rng = np.random.default_rng(seed)
    return (median * rng.lognormal(0.0, spread, n)).tolist()


def even_samples(value: float, n: int = 10, spread: float = 0.02) -> list[float]:
    """`n` samples evenly spread within ±`spread` of `value`, with `value` as their median."""
    return [value * (1 + spread * ((i % 5) - 2) / 2) for i in range(n)]


# ---------------------------------------------------------------------------------------
# Model objects


def metric(
    value: float | None = None,
    *,
    samples: Sequence[float] | None = None,
    groups: Sequence[int] | None = None,
    unit: str = "s",
    higher_is_better: bool = False,
    **extra: Any,
) -> Metric:
    """A metric; `value` defaults to the median of `samples`, as a writer records it.
    `extra` keys (`peak_fraction`, `noisy`, `iqr`, ...) are kept as the model keeps them."""
    values = list(samples) if samples is not None else []
    if value is None:
        if not values:
            raise ValueError("metric() needs a value or samples")
        value = float(statistics.median(values))
    return Metric(
        value=value,
        unit=unit,
        higher_is_better=higher_is_better,
        samples=values,
        sample_groups=list(groups) if groups is not None else None,
        **extra,
    )


def sampled_metric(
    median: float,
    *,
    seed: int = 0,
    n: int = 15,
    spread: float = 0.02,
    unit: str = "s",
    higher_is_better: bool = False,
    **extra: Any,
) -> Metric:
    """A metric of `n` seeded lognormal samples around `median`, all from one process."""
    return metric(
        samples=lognormal_samples(median, n, spread, seed),
        unit=unit,
        higher_is_better=higher_is_better,
        **extra,
    )


def grouped_metric(
    median: float,
    *,
    passes: int = 5,
    per_pass: int = 20,
    between: float = 0.03,
    within: float = 0.015,
    seed: int = 0,
    first_group: int = 0,
    unit: str = "s",
    higher_is_better: bool = False,
    **extra: Any,
) -> Metric:
    """A metric measured in `passes` processes (sample groups `first_group`, ...): each pass
    has its own lognormal offset from `median` (`between`), and its samples scatter
    around that offset (`within`). `extra` keys (`canary`, `bound`, `scope`, ...) are kept."""
    rng = np.random.default_rng(seed)
    samples: list[float] = []
    groups: list[int] = []
    for index in range(passes):
        offset = median * rng.lognormal(0.0, between)
        samples += (offset * rng.lognormal(0.0, within, per_pass)).tolist()
        groups += [first_group + index] * per_pass
    return metric(
        samples=samples, groups=groups, unit=unit, higher_is_better=higher_is_better, **extra
    )


def case(
    case_id: str,
    status: str = "passed",
    *,
    suite: str | None = None,
    message: str = "",
    metrics: dict[str, Metric] | None = None,
    duration_s: float = 0.0,
    **extra: Any,
) -> Case:
    """A case; its suite is the first part of its id unless given (`perf/gemm` is perf)."""
    if suite is None:
        suite = case_id.split("/", 1)[0]
        if suite not in SUITES:
            raise ValueError(f"case({case_id!r}): the id names no suite; pass suite=")
    return Case.model_validate(
        {
            "id": case_id,
            "suite": suite,
            "status": status,
            "message": message,
            "duration_s": duration_s,
            "metrics": metrics or {},
            **extra,
        }
    )


def results(
    cases: Sequence[Case] = (),
    *,
    device: str = "cpu",
    started: str = STARTED,
    finished: str | None = None,
    suites: Sequence[str] | None = None,
    argv: Sequence[str] = ("accelkit", "test"),
    env: Mapping[str, object] | None = None,
    **run: Any,
) -> Results:
    """A results file's content with `cases` and their summary. `suites` defaults to those
    of the cases (both when there are none); `run` sets other `RunInfo` fields."""
    if suites is None:
        suites = [s for s in SUITES if any(c.suite == s for c in cases)] or list(SUITES)
    info = RunInfo.model_validate(
        {
            "started": started,
            "finished": finished,
            "device": device,
            "suites": list(suites),
            "argv": list(argv),
            **run,
        }
    )
    return Results(
        run=info, env=dict(env or {}), cases=list(cases), summary=Summary.of(list(cases))
    )


def shard(
    index: int,
    count: int,
    *,
    selections: Mapping[str, tuple[int, int, str]] | None = None,
    durations_sha256: str | None = None,
) -> Shard:
    """A results file's `run.shard`: shard `index` of `count`; `selections` maps a suite to
    (cases chosen from, cases selected, digest)."""
    return Shard(
        index=index,
        count=count,
        balanced_by="durations" if durations_sha256 else "count",
        durations_sha256=durations_sha256,
        selections={
            suite: ShardSelection(cases=cases, selected=selected, digest=digest)
            for suite, (cases, selected, digest) in (selections or {}).items()
        },
    )


# ---------------------------------------------------------------------------------------
# Shards of one run

#: The torch and environment of a plain CPU run.
CPU_TORCH = {"version": "2.14.1", "git_version": "abc123", "cuda": None, "hip": None}
CPU_ENV = {
    "accelkit": "0.1",
    "torch": CPU_TORCH,
    "backends": {"cpu": {"devices": [{"name": "EPYC"}]}},
}


def shard_results(
    index: int, ids: list[str], *, count: int = 3, **changes: Any
) -> tuple[str, Results]:
    """Shard `index` of `count` (a file name and its results) of a conformance run of `ids`;
    `changes` set its status, env, digest, finished time, seed and other `RunInfo` fields."""
    env = changes.pop("env", CPU_ENV)
    digest = changes.pop("digest", "d" * 64)
    made = results(
        [case(i, changes.pop("status", "passed")) for i in ids],
        env=env,
        finished=changes.pop("finished", f"2026-01-01T00:0{index}:00+00:00"),
        shard=shard(index, count, selections={"conformance": (9, len(ids), digest)}),
        seed=changes.pop("seed", 0),
        suites=["conformance"],
        **changes,
    )
    return f"s{index}.json", made


def three_shards() -> list[tuple[str, Results]]:
    """The three shards of one five-case run, all passed."""
    return [
        shard_results(1, ["conformance/a/1", "conformance/a/4"]),
        shard_results(2, ["conformance/a/2", "conformance/a/5"]),
        shard_results(3, ["conformance/a/3"]),
    ]
