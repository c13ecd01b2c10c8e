"""A results history as a report: every leg's metrics over the last N nights, and the nights
where a leg's verdict against the night before changed (`accelkit report --history DIR`).

`load_history` reads the history's index (accelkit.results.history_store) and each night's
results files into one `Report` whose runs are (night, leg) pairs (a leg that produced
nothing on a night is a missing run, a gap in its trend), plus the recorded verdicts: per
leg and night its state (green, red, no-baseline, stale-baseline), and per metric its
compare verdict (regressed, improved, else unchanged; None where the leg was not compared
that night).
A verdict *changed* on a night when it differs from the leg's previous compared night.

`trend_rows` gives each perf metric's values per leg over the nights; the views
(`accelkit.results.render`) draw them. Markdown shows them as sparklines, one row per leg
and metric:

    | leg | case | metric | trend | first | last | change | verdict changed |
    | cpu-py3.12 | perf/gemm | latency (s) | ▁▁▁▁▁▁▇▇▇▇▇▇ | 1 ms | 1.25 ms | +25.0% |
      03-07: unchanged → regressed |      (one line in the table)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from accelkit.errors import BadInput
from accelkit.results.history_store import load_index
from accelkit.results.io import load_results
from accelkit.results.report.discover import Run
from accelkit.results.report.model import Report, build_report

#: States a leg was compared in (its metric verdicts mean something that night).
COMPARED = frozenset({"green", "red", "stale-baseline"})


@dataclass(frozen=True)
class VerdictChange:
    night: str
    before: str
    after: str

    def label(self) -> str:
        return f"{self.night}: {self.before} → {self.after}"


@dataclass(frozen=True)
class HistoryReport:
    report: Report
    nights: tuple[str, ...]
    legs: tuple[str, ...]
    states: Mapping[str, tuple[str | None, ...]]
    """leg -> its state per night (None: not run that night, or no verdict recorded)."""
    metric_verdicts: Mapping[tuple[str, str], tuple[str | None, ...]]
    """(leg, `case · metric`) -> its verdict per night (None: not compared that night)."""

    def state_changes(self, leg: str) -> list[VerdictChange]:
        return _changes(self.nights, self.states[leg])

    def metric_changes(self, leg: str, key: str) -> list[VerdictChange]:
        return _changes(self.nights, self.metric_verdicts.get((leg, key), ()))


def _changes(nights: Sequence[str], values: Sequence[str | None]) -> list[VerdictChange]:
    out: list[VerdictChange] = []
    previous: str | None = None
    for night, value in zip(nights, values, strict=False):
        if value is None:
            continue
        if previous is not None and value != previous:
            out.append(VerdictChange(night, previous, value))
        previous = value
    return out


def load_history(store: Path, nights: int | None = None) -> HistoryReport:
    """The last `nights` nights of the history in `store` (all when None)."""
    if nights is not None and nights < 2:
        raise BadInput(f"--nights {nights}: a trend needs at least 2 nights")
    index = load_index(store)
    if nights is not None:
        index = index[-nights:]
    if not index:
        raise BadInput(f"{store}: the history holds no night yet")
    legs = sorted({leg for night in index for leg in night.legs})
    runs: list[Run] = []
    for night in index:
        for leg in legs:
            record = night.legs.get(leg)
            if record is None:
                continue
            label = f"{leg} · {night.night}"
            if record.results is None:
                runs.append(Run(label=label, leg=leg, group=night.night, source=str(store)))
                continue
            path = store / record.results
            results = load_results(path)  # BadInput for a broken file
            runs.append(
                Run(label=label, leg=leg, group=night.night, source=str(path), results=results)
            )
    states = {
        leg: tuple(night.legs[leg].state if leg in night.legs else None for night in index)
        for leg in legs
    }
    report = build_report(runs)
    verdicts: dict[tuple[str, str], tuple[str | None, ...]] = {}
    for row in report.metrics:
        key = f"{row.case} · {row.metric}"
        for leg in legs:
            per_night: list[str | None] = []
            for night in index:
                record = night.legs.get(leg)
                if record is None or record.state not in COMPARED:
                    per_night.append(None)
                else:
                    per_night.append(record.metric_verdicts.get(key, "unchanged"))
            if any(v is not None for v in per_night):
                verdicts[(leg, key)] = tuple(per_night)
    return HistoryReport(
        report=report,
        nights=tuple(n.night for n in index),
        legs=tuple(legs),
        states=states,
        metric_verdicts=verdicts,
    )


def series(history: HistoryReport, leg: str, case: str, metric: str) -> list[float | None]:
    """The metric's median per night for one leg (None: no value that night)."""
    row = next(m for m in history.report.metrics if (m.case, m.metric) == (case, metric))
    by_night: dict[str, float | None] = {}
    for run, cell in zip(history.report.runs, row.cells, strict=True):
        if run.leg == leg:
            by_night[run.group] = cell.value if cell is not None else None
    return [by_night.get(night) for night in history.nights]


@dataclass(frozen=True)
class TrendRow:
    leg: str
    case: str
    metric: str
    unit: str
    values: tuple[float | None, ...]
    """The median per night (None: no value that night)."""
    changes: tuple[VerdictChange, ...]
    """The nights where this metric's verdict changed."""

    @property
    def present(self) -> list[float]:
        return [v for v in self.values if v is not None]

    @property
    def change(self) -> float | None:
        """last / first - 1 over the nights with a value."""
        present = self.present
        return present[-1] / present[0] - 1 if present and present[0] else None


def trend_rows(history: HistoryReport) -> list[TrendRow]:
    """One row per (perf metric, leg) with a value on at least one night."""
    rows: list[TrendRow] = []
    for metric in history.report.metrics:
        if metric.suite != "perf":
            continue
        for leg in history.legs:
            values = tuple(series(history, leg, metric.case, metric.metric))
            if all(v is None for v in values):
                continue
            key = f"{metric.case} · {metric.metric}"
            changes = tuple(history.metric_changes(leg, key))
            rows.append(TrendRow(leg, metric.case, metric.metric, metric.unit, values, changes))
    return rows
