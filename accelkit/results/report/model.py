"""The report as data: runs lined up side by side by case id.

`build_report` turns the runs found by `discover` into a `Report`: one `CaseRow` per case
id and one `MetricRow` per (case, metric), each with one entry per run (None where the run
lacks it), in first-seen order, conformance before perf. The views (`accelkit.results.render`)
and `accelkit report --json` all read this one object.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelkit.results.differential_file import (
    Differential,
    is_differential_document,
    load_differential,
)
from accelkit.results.model import STATUSES, SUITES, Case, MeasurementMethod, Metric
from accelkit.results.noise import IQR_WARN_THRESHOLD
from accelkit.results.report.discover import Run, discover


@dataclass(frozen=True)
class Cell:
    """One metric of one run."""

    value: float
    p25: float | None
    p75: float | None
    samples: int
    noisy: bool
    peak_fraction: float | None
    peak_source: str | None
    method: MeasurementMethod | None = None
    """How the run measured it (`Metric.method`); None in files before the field."""


@dataclass(frozen=True)
class MetricRow:
    suite: str
    case: str
    metric: str
    unit: str
    higher_is_better: bool
    cells: tuple[Cell | None, ...]
    """One per run, None where the run has no such metric."""


@dataclass(frozen=True)
class CaseRow:
    suite: str
    case: str
    statuses: tuple[str | None, ...]
    messages: tuple[str, ...]
    repro: tuple[bool, ...] = ()
    """Per run: whether the run recorded how to rebuild the case (`accelkit repro`)."""


@dataclass(frozen=True)
class Report:
    runs: tuple[Run, ...]
    cases: tuple[CaseRow, ...]
    metrics: tuple[MetricRow, ...]
    skipped_inputs: tuple[str, ...] = ()
    counts: tuple[dict[str, dict[str, int]], ...] = field(default=())
    """Per run: suite -> status -> number of cases."""
    differentials: tuple[Differential, ...] = ()
    """Differential files given beside the runs (`accelkit diff --out`)."""

    def suites(self) -> list[str]:
        present = {row.suite for row in self.cases}
        return [s for s in SUITES if s in present]

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "runs": [
                {
                    "label": r.label,
                    "leg": r.leg,
                    "group": r.group,
                    "source": r.source,
                    "missing": r.missing,
                    "device": r.device if not r.missing else None,
                    "device_name": r.device_name,
                    "torch": r.torch_version,
                    "started": r.started or None,
                    "counts": counts,
                }
                for r, counts in zip(self.runs, self.counts, strict=True)
            ],
            "cases": [
                {
                    "suite": c.suite,
                    "case": c.case,
                    "statuses": list(c.statuses),
                    "repro": list(c.repro),
                }
                for c in self.cases
            ],
            "metrics": [
                {
                    "suite": m.suite,
                    "case": m.case,
                    "metric": m.metric,
                    "unit": m.unit,
                    "higher_is_better": m.higher_is_better,
                    "values": [
                        None
                        if c is None
                        else {
                            "value": c.value,
                            "p25": c.p25,
                            "p75": c.p75,
                            "samples": c.samples,
                            "noisy": c.noisy,
                            "peak_fraction": c.peak_fraction,
                            "peak_source": c.peak_source,
                            "method": c.method.model_dump() if c.method else None,
                        }
                        for c in m.cells
                    ],
                }
                for m in self.metrics
            ],
            "skipped_inputs": list(self.skipped_inputs),
            "differentials": [d.to_json_dict() for d in self.differentials],
        }


def _quantiles(samples: Sequence[float]) -> tuple[float | None, float | None]:
    finite = sorted(s for s in samples if math.isfinite(s))
    if not finite:
        return None, None

    def q(p: float) -> float:
        pos = p * (len(finite) - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, len(finite) - 1)
        return finite[lo] + (finite[hi] - finite[lo]) * (pos - lo)

    return q(0.25), q(0.75)


def _cell(metric: Metric) -> Cell:
    extra = metric.model_extra or {}
    p25, p75 = _quantiles(metric.samples)
    fraction = extra.get("peak_fraction")
    source = extra.get("peak_source")
    noisy = extra.get("noisy")
    if not isinstance(noisy, bool):
        noisy = bool(
            p25 is not None
            and p75 is not None
            and metric.value
            and (p75 - p25) / abs(metric.value) >= IQR_WARN_THRESHOLD
        )
    return Cell(
        value=metric.value,
        p25=p25,
        p75=p75,
        samples=len(metric.samples),
        noisy=noisy,
        peak_fraction=float(fraction) if isinstance(fraction, (int, float)) else None,
        peak_source=str(source) if source is not None else None,
        method=metric.method,
    )


def build_report(runs: Sequence[Run], skipped_inputs: Iterable[str] = ()) -> Report:
    """Line the runs' cases and metrics up by case id (first-seen order, suite by suite)."""
    case_order: dict[tuple[str, str], None] = {}
    metric_order: dict[tuple[str, str, str], tuple[str, bool]] = {}
    by_run: list[dict[str, Case]] = []
    counts: list[dict[str, dict[str, int]]] = []
    for run in runs:
        cases: dict[str, Case] = {}
        per_suite: dict[str, dict[str, int]] = {}
        if run.results is not None:
            for case in run.results.cases:
                cases[case.id] = case
                case_order.setdefault((case.suite, case.id), None)
                suite_counts = per_suite.setdefault(case.suite, dict.fromkeys(STATUSES, 0))
                suite_counts[case.status] += 1
                for name, metric in case.metrics.items():
                    metric_order.setdefault(
                        (case.suite, case.id, name), (metric.unit, metric.higher_is_better)
                    )
        by_run.append(cases)
        counts.append(per_suite)
    suite_rank: dict[str, int] = {s: i for i, s in enumerate(SUITES)}
    ordered_cases = sorted(case_order, key=lambda k: suite_rank.get(k[0], len(SUITES)))
    case_rows = tuple(
        CaseRow(
            suite=suite,
            case=case_id,
            statuses=tuple(c[case_id].status if case_id in c else None for c in by_run),
            messages=tuple(c[case_id].message if case_id in c else "" for c in by_run),
            repro=tuple(case_id in c and c[case_id].repro is not None for c in by_run),
        )
        for suite, case_id in ordered_cases
    )
    ordered_metrics = sorted(metric_order, key=lambda k: suite_rank.get(k[0], len(SUITES)))
    metric_rows = tuple(
        MetricRow(
            suite=suite,
            case=case_id,
            metric=name,
            unit=metric_order[(suite, case_id, name)][0],
            higher_is_better=metric_order[(suite, case_id, name)][1],
            cells=tuple(
                _cell(c[case_id].metrics[name])
                if case_id in c and name in c[case_id].metrics
                else None
                for c in by_run
            ),
        )
        for suite, case_id, name in ordered_metrics
    )
    return Report(
        runs=tuple(runs),
        cases=case_rows,
        metrics=metric_rows,
        skipped_inputs=tuple(skipped_inputs),
        counts=tuple(counts),
    )


def load_report(paths: Sequence[Path]) -> Report:
    """`discover` then `build_report`, with the differential files among `paths` (named,
    or found in the folders): BadInput for unreadable input."""
    runs, skipped = discover(paths)
    report = build_report(runs, skipped)
    found: list[Path] = []
    for path in paths:
        candidates = sorted(path.rglob("*.json")) if path.is_dir() else [path]
        found += [p for p in candidates if p.is_file() and is_differential_document(p)]
    differentials = tuple(load_differential(p) for p in dict.fromkeys(found))
    return dataclasses.replace(report, differentials=differentials)


# ---------------------------------------------------------------------------------------
# Which cases the views list


def present_runs(report: Report) -> list[int]:
    """The indices of the runs that have results."""
    return [i for i, run in enumerate(report.runs) if not run.missing]


def skipped_everywhere(report: Report, suite: str) -> list[CaseRow]:
    """The cases of `suite` skipped in every run that has results: nothing differs between
    the runs there, so the views give them one line with a count, not a row each."""
    present = present_runs(report)
    return [
        c
        for c in report.cases
        if c.suite == suite and present and all(c.statuses[i] == "skipped" for i in present)
    ]


def interesting_cases(report: Report, suite: str) -> list[CaseRow]:
    """Perf: every case. Conformance: only cases not passing in some run that has results
    (absent from it, or another status); the rest are only counted. In both, the cases
    skipped in every run are left out (`skipped_everywhere` counts them)."""
    everywhere = {c.case for c in skipped_everywhere(report, suite)}
    rows = [c for c in report.cases if c.suite == suite and c.case not in everywhere]
    if suite == "perf":
        return rows
    present = present_runs(report)
    return [c for c in rows if any(c.statuses[i] != "passed" for i in present)]
