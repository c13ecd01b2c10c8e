"""Plots of a report, drawn with matplotlib and returned as inline SVG.

Bar charts show each perf case's primary metric per run (with history: the newest night
of each leg), with the IQR as error bars; with history, trends show the median per night
and leg with the IQR as a band. A run without the metric is marked missing: a gap in a
trend, never an interpolation.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from accelkit.results.render.units import axis_scale
from accelkit.results.report.model import MetricRow, Report


def _primary_metrics(rows: Sequence[MetricRow]) -> list[MetricRow]:
    """The metrics worth a plot: throughputs/speedups where a case has them (its latency
    carries the same samples), else its latencies."""
    non_latency = [m for m in rows if m.unit != "s"]
    return non_latency or list(rows)


def _by_case(report: Report, suite: str = "perf") -> dict[str, list[MetricRow]]:
    grouped: dict[str, list[MetricRow]] = {}
    for row in report.metrics:
        if row.suite == suite:
            grouped.setdefault(row.case, []).append(row)
    return grouped


LOG_SCALE_SPAN = 100.0
"""Plot on a log axis when the values span more than this factor (a CPU beside a GPU)."""


def _wide_span(values: Iterable[float]) -> bool:
    positive = [v for v in values if math.isfinite(v) and v > 0]
    return len(positive) > 1 and max(positive) / min(positive) > LOG_SCALE_SPAN


def _svg(figure: Any) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    text = buffer.getvalue()
    start = text.find("<svg")
    return text[start:] if start >= 0 else text


def _has_history(report: Report) -> bool:
    groups_per_leg: dict[str, set[str]] = {}
    for run in report.runs:
        groups_per_leg.setdefault(run.leg, set()).add(run.group)
    return any(len(groups) > 1 for groups in groups_per_leg.values())


def _latest_per_leg(report: Report) -> list[int]:
    """Run indices to show in bar charts: every run, or with history the newest night of
    each leg (a leg whose newest night produced nothing shows as missing)."""
    if not _has_history(report):
        return list(range(len(report.runs)))
    night = {group: index for index, group in enumerate(_group_order(report))}
    latest: dict[str, int] = {}
    for i, run in enumerate(report.runs):
        current = latest.get(run.leg)
        if current is None or night[run.group] >= night[report.runs[current].group]:
            latest[run.leg] = i
    return sorted(latest.values())


def _group_order(report: Report) -> list[str]:
    first_started: dict[str, str] = {}
    for run in report.runs:
        if run.started:
            current = first_started.get(run.group)
            if current is None or run.started < current:
                first_started[run.group] = run.started
        else:
            first_started.setdefault(run.group, "")
    return sorted(first_started, key=lambda g: (first_started[g] or "~", g))


@dataclass(frozen=True)
class Plot:
    title: str
    kind: str
    """"bars" or "trend"."""
    svg: str


#: (case, metric) -> (night, leg, verdict after the change): where a trend marks a change.
Marks = Mapping[tuple[str, str], Sequence[tuple[str, str, str]]]


def render_plots(report: Report, *, max_plots: int = 200, marks: Marks | None = None) -> list[Plot]:
    """Bar charts (metric per run) and, with history, trends with the IQR noise band and a
    dashed line on each night where a leg's verdict for the metric changed (`marks`)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    from matplotlib import pyplot as plt
    from matplotlib import rcParams

    rcParams["svg.fonttype"] = "none"  # text stays text: smaller, searchable
    rcParams["svg.hashsalt"] = "accelkit"  # deterministic ids
    plots: list[Plot] = []
    shown = _latest_per_leg(report)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    legs = sorted({r.leg for r in report.runs})
    leg_color = {leg: colors[i % len(colors)] for i, leg in enumerate(legs)}
    for case, rows in _by_case(report).items():
        for row in _primary_metrics(rows):
            if len(plots) >= max_plots:
                return plots
            values = [row.cells[i] for i in shown]
            if not any(c is not None for c in values):
                continue
            scale, unit = axis_scale((c.value for c in values if c is not None), row.unit)
            labels = [report.runs[i].label for i in shown]
            figure, axes = plt.subplots(figsize=(7.0, 0.45 * len(shown) + 1.2))
            for y, (cell, i) in enumerate(zip(values, shown, strict=True)):
                color = leg_color[report.runs[i].leg]
                if cell is None:
                    axes.text(
                        0.01,
                        y,
                        "missing",
                        va="center",
                        color="#b00020",
                        fontsize=8,
                        transform=axes.get_yaxis_transform(),
                    )
                    continue
                low = (cell.value - cell.p25) / scale if cell.p25 is not None else 0.0
                high = (cell.p75 - cell.value) / scale if cell.p75 is not None else 0.0
                axes.barh(
                    y,
                    cell.value / scale,
                    color=color,
                    xerr=[[max(low, 0.0)], [max(high, 0.0)]],
                    capsize=3,
                )
                note = f" {cell.peak_fraction:.0%} of peak" if cell.peak_fraction else ""
                axes.text(
                    cell.value / scale,
                    y,
                    f" {cell.value / scale:.3g}{note}",
                    va="center",
                    fontsize=8,
                )
            if _wide_span(c.value for c in values if c is not None):
                axes.set_xscale("log")
            axes.set_yticks(range(len(shown)), labels=labels, fontsize=8)
            axes.invert_yaxis()
            axes.set_xlabel(unit + ("" if row.higher_is_better else " (lower is better)"))
            axes.set_title(f"{case} · {row.metric}", fontsize=9)
            axes.margins(x=0.25)
            plots.append(Plot(title=f"{case} · {row.metric}", kind="bars", svg=_svg(figure)))
            plt.close(figure)
    if _has_history(report):
        plots.extend(_trend_plots(report, leg_color, max_plots - len(plots), marks or {}))
    return plots


def _trend_plots(
    report: Report, leg_color: dict[str, str], budget: int, marks: Marks
) -> list[Plot]:
    from matplotlib import pyplot as plt

    groups = _group_order(report)
    x_of = {g: i for i, g in enumerate(groups)}
    plots: list[Plot] = []
    for case, rows in _by_case(report).items():
        for row in _primary_metrics(rows):
            if len(plots) >= budget:
                return plots
            all_values = [c.value for c in row.cells if c is not None]
            if not all_values:
                continue
            scale, unit = axis_scale(all_values, row.unit)
            figure, axes = plt.subplots(figsize=(7.0, 2.8))
            for leg in sorted({r.leg for r in report.runs}):
                xs: list[int] = []
                median: list[float] = []
                low: list[float] = []
                high: list[float] = []
                missing_x: list[int] = []
                for i, run in enumerate(report.runs):
                    if run.leg != leg:
                        continue
                    cell = row.cells[i]
                    x = x_of[run.group]
                    xs.append(x)
                    if cell is None:
                        # No point, and no line through it: a gap, never an interpolation.
                        median.append(math.nan)
                        low.append(math.nan)
                        high.append(math.nan)
                        missing_x.append(x)
                    else:
                        median.append(cell.value / scale)
                        low.append((cell.p25 if cell.p25 is not None else cell.value) / scale)
                        high.append((cell.p75 if cell.p75 is not None else cell.value) / scale)
                order = sorted(range(len(xs)), key=lambda k: xs[k])
                xs = [xs[k] for k in order]
                median = [median[k] for k in order]
                low = [low[k] for k in order]
                high = [high[k] for k in order]
                color = leg_color[leg]
                if all(math.isnan(v) for v in median):
                    if missing_x:
                        axes.plot(
                            missing_x,
                            [0.0] * len(missing_x),
                            "x",
                            color=color,
                            transform=axes.get_xaxis_transform(),
                            clip_on=False,
                            label=f"{leg} (missing)",
                        )
                    continue
                axes.fill_between(xs, low, high, color=color, alpha=0.2, linewidth=0)
                axes.plot(xs, median, "o-", color=color, label=leg, markersize=3)
                if missing_x:
                    axes.plot(
                        missing_x,
                        [0.02] * len(missing_x),
                        "x",
                        color=color,
                        transform=axes.get_xaxis_transform(),
                        clip_on=False,
                        markersize=7,
                        label=f"{leg}: missing",
                    )
            for night, leg, after in marks.get((case, row.metric), ()):
                if night not in x_of or leg not in leg_color:
                    continue
                axes.axvline(x_of[night], color=leg_color[leg], linestyle="--", linewidth=1)
                axes.text(
                    x_of[night],
                    0.98,
                    f" {leg}: {after}",
                    color=leg_color[leg],
                    fontsize=7,
                    va="top",
                    transform=axes.get_xaxis_transform(),
                )
            axes.set_xticks(range(len(groups)), labels=groups, rotation=30, ha="right", fontsize=7)
            if _wide_span(all_values):
                axes.set_yscale("log")
            axes.set_ylabel(unit, fontsize=8)
            axes.set_title(f"{case} · {row.metric} (median, IQR band)", fontsize=9)
            axes.legend(fontsize=7, loc="best")
            plots.append(
                Plot(title=f"trend · {case} · {row.metric}", kind="trend", svg=_svg(figure))
            )
            plt.close(figure)
    return plots
