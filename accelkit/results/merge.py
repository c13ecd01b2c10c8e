"""Pool several results files of the same run into one: measurement passes, or rounds.

`accelkit test --passes N` runs the perf cases in N separate processes and pools them with
`pool()`; `benchmarks/bench_perf_aa.py` pools interleaved rounds the same way. Each input
file is one or more *groups* of samples (a group = one process's samples of a metric, see
`Metric.sample_groups`); pooling keeps every sample and numbers the groups so they stay
distinct: the groups of input `i` follow those of inputs `0..i-1`, with the same offset for
every metric, so group `g` names the same process across all metrics of the pooled file.
(A case that numbers its own groups in one pass, `perf/compile/latency` in an `--ab` pass,
takes that many numbers: the next input's groups start after them. The two sides of an
interleaved run are pooled alike, so their labels still match pass by pass.)

What the pooled file holds:
- the first input's header (`run`, `env`, `capabilities`);
- every case of every input, in first-seen order. A case in several inputs keeps the worst
  status (crashed > timeout > error > failed > passed > skipped) with that input's message,
  prefixed by its label; durations add up;
- per metric: the samples of all inputs, `sample_groups` beside them, and the statistics
  recomputed from the pool: `value` (median), and where the writer recorded them `iqr`,
  `iqr_over_median`, `noisy` and `peak_fraction`;
- the summary recounted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from accelkit.results.model import Results, Summary
from accelkit.results.noise import IQR_WARN_THRESHOLD

_SEVERITY = {"skipped": 0, "passed": 1, "failed": 2, "error": 3, "timeout": 4, "crashed": 5}


def group_count(results: Results) -> int:
    """How many sample groups the file holds: 1 + the largest group id of any metric (a
    metric without `sample_groups` is group 0)."""
    largest = 0
    for case in results.cases:
        for metric in case.metrics.values():
            if metric.sample_groups:
                largest = max(largest, max(metric.sample_groups))
    return largest + 1


def _pooled_metric(parts: list[tuple[dict[str, Any], int]]) -> dict[str, Any]:
    """One metric from (metric dict, group offset) pairs; the first dict's keys are kept."""
    merged = dict(parts[0][0])
    samples: list[float] = []
    groups: list[int] = []
    for metric, offset in parts:
        own = list(metric.get("samples") or [])
        own_groups = metric.get("sample_groups") or [0] * len(own)
        samples += own
        groups += [offset + g for g in own_groups]
    merged["samples"] = samples
    merged["sample_groups"] = groups
    finite = np.asarray(samples, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    if finite.size:
        p25, median, p75 = (float(q) for q in np.quantile(finite, [0.25, 0.5, 0.75]))
        merged["value"] = median
        if "iqr" in merged:
            merged["iqr"] = p75 - p25
        if "iqr_over_median" in merged or "noisy" in merged:
            ratio = (p75 - p25) / median if median > 0 else float("inf")
            if "iqr_over_median" in merged:
                merged["iqr_over_median"] = ratio
            if "noisy" in merged:
                merged["noisy"] = ratio >= IQR_WARN_THRESHOLD
        peak = merged.get("peak")
        if "peak_fraction" in merged and isinstance(peak, int | float) and peak > 0:
            merged["peak_fraction"] = median / peak
    return merged


def pool(runs: Sequence[Results], labels: Sequence[str] | None = None) -> Results:
    """One results file from several of the same run (see the module docstring).

    `labels` name the inputs in messages of cases whose worst status came from a later
    input (default "pass 1", "pass 2", ...).
    """
    if not runs:
        raise ValueError("pool() needs at least one results file")
    names = list(labels) if labels is not None else [f"pass {i + 1}" for i in range(len(runs))]
    if len(names) != len(runs):
        raise ValueError(f"{len(names)} labels for {len(runs)} results files")
    offsets: list[int] = []
    next_group = 0
    for results in runs:
        offsets.append(next_group)
        next_group += group_count(results)

    order: list[str] = []
    cases: dict[str, dict[str, Any]] = {}
    metric_parts: dict[str, dict[str, list[tuple[dict[str, Any], int]]]] = {}
    for index, results in enumerate(runs):
        for case_model in results.cases:
            case = case_model.model_dump(mode="json")
            metrics = case.pop("metrics", {}) or {}
            mine = cases.get(case["id"])
            if mine is None:
                order.append(case["id"])
                cases[case["id"]] = case
                metric_parts[case["id"]] = {}
            else:
                mine["duration_s"] = mine.get("duration_s", 0.0) + case.get("duration_s", 0.0)
                if _SEVERITY[case["status"]] > _SEVERITY[mine["status"]]:
                    mine["status"] = case["status"]
                    message = case.get("message", "")
                    mine["message"] = f"{names[index]}: {message}" if message else names[index]
            parts = metric_parts[case["id"]]
            for name, metric in metrics.items():
                parts.setdefault(name, []).append((metric, offsets[index]))

    pooled_cases = []
    for case_id in order:
        case = cases[case_id]
        case["metrics"] = {
            name: _pooled_metric(parts) for name, parts in metric_parts[case_id].items()
        }
        pooled_cases.append(case)
    first = runs[0].to_json_dict()
    first["cases"] = pooled_cases
    pooled = Results.model_validate(first)
    return pooled.model_copy(update={"summary": Summary.of(pooled.cases)})
