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

import json
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
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


# ---------------------------------------------------------------------------------------
# Results files


def write_results(path: Path, data: Results) -> Path:
    """`data` as the results file `path` (its folders made), as accelkit writes one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data.to_json_dict()), encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------
# Whole runs that the unit and the integration tests of a command share


# accelkit compare


def perf_run(mm_latency: float = 1e-3, *, seed: int = 0) -> Results:
    """A matmul (latency and throughput), an add and a conformance case; one process."""
    return results(
        [
            case(
                "perf/mm[float32-256]",
                metrics={
                    "latency": sampled_metric(mm_latency, seed=seed),
                    "throughput": sampled_metric(
                        2 * 256**3 / mm_latency,
                        unit="FLOP/s",
                        higher_is_better=True,
                        seed=seed + 1,
                    ),
                },
            ),
            case("perf/add[1M]", metrics={"latency": sampled_metric(2e-4, seed=seed + 2)}),
            case("conformance/abs[float32]"),
        ]
    )


#: Two runs whose conformance statuses change in every way a comparison names.
STATUS_BASE = [
    case("c/pass-fail", suite="conformance"),
    case("c/pass-crash", suite="conformance"),
    case("c/skip-error", "skipped", suite="conformance", message="no XPU"),
    case("c/fail-pass", "failed", suite="conformance", message="mismatch"),
    case("c/pass-skip", suite="conformance"),
    case("c/fail-timeout", "failed", suite="conformance"),
    case("c/same", suite="conformance"),
    case("c/gone", suite="conformance"),
]
STATUS_NEW = [
    case("c/pass-fail", "failed", suite="conformance", message="max abs diff 0.5 > 1e-5"),
    case("c/pass-crash", "crashed", suite="conformance", message="worker died: SIGSEGV"),
    case("c/skip-error", "error", suite="conformance", message="ImportError"),
    case("c/fail-pass", suite="conformance"),
    case("c/pass-skip", "skipped", suite="conformance", message="sm_107 target absent"),
    case("c/fail-timeout", "timeout", suite="conformance"),
    case("c/same", suite="conformance"),
    case("c/added", suite="conformance"),
]


def grouped_run(latency: float = 1e-3, *, seed: int = 0, passes: int = 5) -> Results:
    """`perf_run`'s matmul measured in `passes` processes, and its add; no conformance."""
    return results(
        [
            case(
                "perf/mm[float32-256]",
                metrics={"latency": grouped_metric(latency, seed=seed, passes=passes)},
            ),
            case("perf/add[1M]", metrics={"latency": sampled_metric(2e-4, seed=seed + 2)}),
        ]
    )


# accelkit report


def report_run(
    device: str = "cpu",
    started: str = STARTED,
    gemm: float | None = 1e12,
    torch_version: str = "2.14.1",
    extra_cases: list[Case] | None = None,
) -> Results:
    """A run with a passing and a failing conformance case, a skipped perf case and (unless
    `gemm` is None) a GEMM at `gemm` FLOP/s against a table peak of 2e12."""
    cases = [
        case("conformance/ops/add/float32"),
        case("conformance/ops/mul/float32", "failed", message="mismatch | 3 of 10 elements"),
        case("perf/graphs/replay_overhead", "skipped", message="cuda_graph: no CUDA device"),
    ]
    if gemm is not None:
        latency = 2 * 256**3 / gemm
        flops = metric(
            gemm,
            samples=even_samples(gemm),
            unit="FLOP/s",
            higher_is_better=True,
            peak_fraction=gemm / 2e12,
            peak_source="table",
        )
        cases.append(
            case(
                "perf/gemm/bfloat16/256x256x256",
                metrics={"flops": flops, "latency": metric(samples=even_samples(latency))},
            )
        )
    cases += extra_cases or []
    return results(
        cases,
        device=device,
        started=started,
        finished=started,
        suites=["conformance", "perf"],
        env={
            "torch": {"version": torch_version},
            "backends": {device: {"devices": [{"name": f"{device.upper()} Model X"}]}},
        },
    )


def write_nightly(root: Path) -> Path:
    """results/<leg>/results.json plus the files a leg leaves beside it, and a dead leg."""
    write_results(root / "cpu" / "results.json", report_run("cpu"))
    (root / "cpu" / "junit.xml").write_text("<testsuites/>", encoding="utf-8")
    (root / "cpu" / "setup.json").write_text('{"image": "x"}', encoding="utf-8")
    (root / "cpu" / "build.json").write_text("[1, 2]", encoding="utf-8")
    write_results(root / "cuda" / "results.json", report_run("cuda", gemm=5e14))
    (root / "xpu").mkdir()
    (root / "xpu" / "setup.json").write_text('{"error": "no device"}', encoding="utf-8")
    return root


def write_history(root: Path, nights: int = 4) -> Path:
    """history/<night>/<leg>/results.json; the cuda leg produced nothing on night 2."""
    for night in range(nights):
        day = f"2026-01-0{night + 1}"
        started = f"{day}T02:00:00+00:00"
        write_results(
            root / day / "cpu" / "results.json",
            report_run("cpu", started=started, gemm=1e12 * (1 + 0.01 * night)),
        )
        if night == 2:
            (root / day / "cuda").mkdir(parents=True)
            (root / day / "cuda" / "setup.json").write_text("{}", encoding="utf-8")
        else:
            write_results(
                root / day / "cuda" / "results.json", report_run("cuda", started=started, gemm=5e14)
            )
    return root


# accelkit report: the verdicts against a baseline

#: The host copy canary and a memory-bound case, as in `write_canary_runs`.
HOST_COPY_CANARY = "perf/canary/host/copy"
MEMORY_BOUND_COPY = "perf/copy/float32/262144"


def canary_run(
    started: str, canary_factor: float, case_factor: float, device: str = "cpu"
) -> Results:
    """The host copy canary and the memory-bound copy, their latencies scaled by the factors."""

    def timed(median: float, seed: int, **tags: str) -> object:
        return grouped_metric(median, seed=seed, between=0.005, within=0.01, **tags)

    return results(
        [
            case(
                HOST_COPY_CANARY,
                metrics={"latency": timed(1e-5 * canary_factor, 1, canary="memory")},
            ),
            case(
                MEMORY_BOUND_COPY,
                metrics={"latency": timed(2e-5 * case_factor, 2, bound="memory", scope="host")},
            ),
        ],
        device=device,
        started=started,
    )


def write_canary_runs(folder: Path) -> Path:
    """Four results files in `folder`: three CPU runs and one CUDA run. `1-base`; `2-shifted`,
    where the machine got 1.5x slower (the canary and the memory-bound case alike);
    `3-slower-build`, where only the case did; and `4-cuda`, the first of its device."""
    runs = {
        "1-base": canary_run("2026-01-01T00:00:00+00:00", 1.0, 1.0),
        "2-shifted": canary_run("2026-01-02T00:00:00+00:00", 1.5, 1.5),
        "3-slower-build": canary_run("2026-01-03T00:00:00+00:00", 1.0, 1.5),
        "4-cuda": canary_run("2026-01-04T00:00:00+00:00", 1.0, 1.0, device="cuda"),
    }
    for name, run in runs.items():
        write_results(folder / f"{name}.json", run)
    return folder


# accelkit matrix compare: a nightly against the previous one

#: The start times of two nightlies in a row.
LAST_NIGHT = "2026-03-01T02:17:00+00:00"
TONIGHT = "2026-03-02T02:17:00+00:00"


def night_run(
    started: str,
    *,
    gemm: float = 1e-3,
    statuses: dict[str, str] | None = None,
    known: tuple[str, ...] = (),
    seed: int = 0,
) -> Results:
    """Three conformance cases (statuses as given, default passed) and one timed GEMM."""
    statuses = statuses or {}
    cases = []
    for name in ("add", "mul", "eig"):
        case_id = f"conformance/ops/{name}/float32"
        status = statuses.get(case_id, "passed")
        extra = {"known_failure": True} if case_id in known else {}
        cases.append(case(case_id, status, message="boom" if status != "passed" else "", **extra))
    cases.append(case("perf/gemm", metrics={"latency": grouped_metric(gemm, seed=seed)}))
    return results(cases, started=started, finished=started)


def write_leg(root: Path, leg: str, data: Results) -> None:
    """`data` as the results of one nightly leg: `root/<leg>/results.json`."""
    write_results(root / leg / "results.json", data)
