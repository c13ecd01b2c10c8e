"""A results history as a report: every leg's metrics over the last N nights, and the nights
where a leg's verdict against the night before changed (`accelkit report --history DIR`).

`load_history` reads the history's index (accelkit.results.history) and each night's results
files into one `Report` whose runs are (night, leg) pairs (a leg that produced nothing on a
night is a missing run, a gap in its trend), plus the recorded verdicts: per leg and night
its state (green, red, no-baseline, stale-baseline), and per metric its compare verdict
(regressed, improved, else unchanged; None where the leg was not compared that night).
A verdict *changed* on a night when it differs from the leg's previous compared night.

Markdown shows the trends as sparklines, one row per leg and metric:

    | leg | case | metric | trend | first | last | change | verdict changed |
    | cpu-py3.12 | perf/gemm | latency (s) | ▁▁▁▁▁▁▇▇▇▇▇▇ | 1 ms | 1.25 ms | +25.0% |
      03-07: unchanged → regressed |      (one line in the table)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from accelkit.errors import BadInput
from accelkit.results import markdown
from accelkit.results.history import load_index
from accelkit.results.io import load_results
from accelkit.results.report.discover import Run
from accelkit.results.report.model import Report, build_report
from accelkit.results.units import format_value

SPARKS = "▁▂▃▄▅▆▇█"
NO_VALUE = "·"
#: The smallest range a sparkline spreads over its height, relative to the middle of the
#: values (±3%, the compare threshold): night-to-night wobble below it stays flat instead of
#: filling the full height.
MIN_RELATIVE_SPAN = 0.06
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


def value_range(values: Sequence[float | None]) -> tuple[float, float]:
    """(low, high) a trend of `values` is drawn between: their range, widened to at least
    MIN_RELATIVE_SPAN of their middle."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return 0.0, 1.0
    low, high = min(finite), max(finite)
    middle = (low + high) / 2
    floor = MIN_RELATIVE_SPAN * abs(middle) or 1.0
    if high - low < floor:
        low, high = middle - floor / 2, middle + floor / 2
    return low, high


def sparkline(values: Sequence[float | None]) -> str:
    """One character per value between the row's (widened) minimum and maximum; `·` for
    none: `▁▁▁▁▁▁██████` is a step up of at least 3%, `▄▄▄▄▄▄` a flat trend."""
    low, high = value_range(values)
    out = []
    for value in values:
        if value is None or not math.isfinite(value):
            out.append(NO_VALUE)
        else:
            out.append(SPARKS[round((value - low) / (high - low) * (len(SPARKS) - 1))])
    return "".join(out)


_STATE_MARK = {"green": "✅", "red": "❌", "no-baseline": "⚠️", "stale-baseline": "⚠️"}


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


def render_history_markdown(
    history: HistoryReport, *, max_bytes: int = markdown.DEFAULT_MAX_BYTES
) -> str:
    """Leg verdicts per night (◆ marks a change) and every perf metric's trend as a
    sparkline, for $GITHUB_STEP_SUMMARY or a results branch's README."""
    nights = history.nights
    short = [night[5:] if len(night) > 5 else night for night in nights]
    lines = [
        f"## accelkit history: {len(nights)} nights, {nights[0]} to {nights[-1]}",
        "",
        "### Leg verdicts by night",
        "",
        "✅ green, ❌ red, ⚠️ no or stale baseline, — not run; ◆ the verdict changed.",
        "",
    ]
    rows = []
    for leg in history.legs:
        changed = {c.night for c in history.state_changes(leg)}
        cells = []
        for night, state in zip(nights, history.states[leg], strict=True):
            mark = _STATE_MARK.get(state or "", "—")
            cells.append(mark + ("◆" if night in changed else ""))
        rows.append([markdown.cell(leg, 60), *cells])
    lines += markdown.table(["leg", *short], rows)
    lines += ["", f"### Trends over {len(nights)} nights", ""]
    trend = []
    for row in trend_rows(history):
        change = row.change
        trend.append(
            [
                markdown.cell(row.leg, 60),
                markdown.cell(row.case, 100),
                markdown.cell(f"{row.metric} ({row.unit})", 60),
                "`" + sparkline(row.values) + "`",
                format_value(row.present[0], row.unit),
                format_value(row.present[-1], row.unit),
                f"{change:+.1%}" if change is not None else "—",
                markdown.cell("; ".join(c.label() for c in row.changes), 200) or "—",
            ]
        )
    lines += markdown.table(
        ["leg", "case", "metric", "trend", "first", "last", "change", "verdict changed"], trend
    )
    lines += ["", f"`{NO_VALUE}`: no value that night (the leg did not run or lacked the metric)."]
    return markdown.cap("\n".join(lines) + "\n", max_bytes, see="the HTML report")
