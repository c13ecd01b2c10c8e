"""The report as one self-contained HTML page (`accelkit report --html`): inline CSS and
inline SVG plots, no script, no network. `report_html` renders a `Report` (with each run's
`RunComparison`, or with a `HistoryReport`'s verdicts per night and trends);
`report_html_with_plots` adds the plots where matplotlib is installed."""

from __future__ import annotations

import html
from collections.abc import Sequence

from accelkit.results.compare import MetricComparison
from accelkit.results.model import BAD_STATUSES, SUITES, repro_command
from accelkit.results.noise import IQR_WARN_THRESHOLD
from accelkit.results.render.plots import Plot, render_plots
from accelkit.results.render.sparkline import sparkline, value_range
from accelkit.results.render.text import (
    band_text,
    canary_state_text,
    format_cell,
    iqr_share,
    legend,
    methods_text,
    skipped_everywhere_line,
    spread_text,
    status_summary,
)
from accelkit.results.render.units import format_value
from accelkit.results.report.model import Cell, Report, interesting_cases
from accelkit.results.report.trends import HistoryReport, TrendRow, trend_rows
from accelkit.results.report.verdicts import RunComparison, canary_rows, compare_runs

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em}h2{font-size:1.2em;margin-top:1.6em}h3{font-size:1em}
table{border-collapse:collapse;margin:.5em 0;font-size:.85em}
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#f3f3f3;position:sticky;top:0}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.passed{color:#1a7f37}.failed,.error,.crashed,.timeout{color:#b00020;font-weight:bold}
.skipped{color:#777}.missing{color:#b00020;font-style:italic}.noisy{color:#9a6700}
.plots{display:flex;flex-wrap:wrap;gap:1em}.plot{border:1px solid #eee;padding:.3em}
.plot svg{max-width:100%;height:auto}.note{color:#555;font-size:.85em}
.wrap{overflow-x:auto}
tr.disagree td{background:#fde7e9;font-weight:bold}
td.state-green{background:#e6f4ea}td.state-red{background:#fce8e6;color:#b00020}
td.state-no-baseline,td.state-stale-baseline{background:#fff4ce}
td.changed{outline:2px solid #1f4e9c;outline-offset:-2px;font-weight:bold}
svg.spark{vertical-align:middle}
.band{display:block;font-size:.8em;color:#555;font-weight:normal}
td.verdict-regressed{background:#fce8e6}td.verdict-regressed .band{color:#b00020}
td.verdict-improved{background:#e6f4ea}td.verdict-environment-shifted{background:#fff4ce}
td.verdict-noisy .band{color:#9a6700}
td.canary-moved{background:#fff4ce;font-weight:bold}
"""

#: Width and height of a trend row's inline sparkline (pixels).
_SPARK_W, _SPARK_H = 160, 24


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def verdict_css(m: MetricComparison) -> str:
    """A CSS class name for the verdict (`verdict-environment-shifted`, ...)."""
    return f"verdict-{m.verdict}"


def _spark_svg(row: TrendRow, nights: Sequence[str]) -> str:
    """A small inline SVG polyline of the row's values; gaps where a night has none, and a
    dot on each night where the verdict changed."""
    low, high = value_range(row.values)
    span = high - low
    step = _SPARK_W / max(len(row.values) - 1, 1)

    def y(value: float) -> float:
        return _SPARK_H - 2 - (value - low) / span * (_SPARK_H - 4)

    segments: list[list[str]] = [[]]
    for index, value in enumerate(row.values):
        if value is None:
            segments.append([])
        else:
            segments[-1].append(f"{index * step:.1f},{y(value):.1f}")
    lines = "".join(
        f'<polyline fill="none" stroke="#1f4e9c" stroke-width="1.5" points="{" ".join(s)}"/>'
        for s in segments
        if s
    )
    changed = {c.night for c in row.changes}
    dots = "".join(
        f'<circle cx="{i * step:.1f}" cy="{y(v):.1f}" r="3" fill="#b00020">'
        f"<title>{_e(night)}</title></circle>"
        for i, (night, v) in enumerate(zip(nights, row.values, strict=True))
        if night in changed and v is not None
    )
    return (
        f'<svg class="spark" width="{_SPARK_W}" height="{_SPARK_H}" '
        f'viewBox="-3 0 {_SPARK_W + 6} {_SPARK_H}" role="img" '
        f'aria-label="{_e(sparkline(row.values))}">{lines}{dots}</svg>'
    )


def _history_section(history: HistoryReport) -> list[str]:
    out = [
        '<h2 id="history">History</h2>',
        f'<p class="note">{len(history.nights)} nights, {_e(history.nights[0])} to '
        f"{_e(history.nights[-1])}. Each leg's verdict against the night before; an outlined "
        "cell is a night where it changed.</p>",
        '<div class="wrap"><table id="verdicts"><thead><tr><th>leg</th>',
    ]
    out += [f"<th>{_e(night)}</th>" for night in history.nights]
    out.append("</tr></thead><tbody>")
    for leg in history.legs:
        changed = {c.night: c for c in history.state_changes(leg)}
        cells = []
        for night, state in zip(history.nights, history.states[leg], strict=True):
            css = f"state-{state}" if state else "missing"
            title = changed[night].label() if night in changed else (state or "not run")
            if night in changed:
                css += " changed"
            cells.append(f'<td class="{_e(css)}" title="{_e(title)}">{_e(state or "—")}</td>')
        out.append(f"<tr><td>{_e(leg)}</td>{''.join(cells)}</tr>")
    out.append("</tbody></table></div>")
    out.append('<h2 id="trends">Trends per metric and leg</h2>')
    out.append('<div class="wrap"><table id="trends-table"><thead><tr>')
    out.append(
        "<th>leg</th><th>case</th><th>metric</th><th>trend</th><th>first</th><th>last</th>"
        "<th>change</th><th>verdict changed</th></tr></thead><tbody>"
    )
    for row in trend_rows(history):
        change = row.change
        changes = "; ".join(c.label() for c in row.changes) or "—"
        out.append(
            f"<tr><td>{_e(row.leg)}</td><td>{_e(row.case)}</td>"
            f"<td>{_e(row.metric)} ({_e(row.unit)})</td>"
            f"<td>{_spark_svg(row, history.nights)}</td>"
            f'<td class="num">{_e(format_value(row.present[0], row.unit))}</td>'
            f'<td class="num">{_e(format_value(row.present[-1], row.unit))}</td>'
            f'<td class="num">{_e(f"{change:+.1%}" if change is not None else "—")}</td>'
            f"<td>{_e(changes)}</td></tr>"
        )
    out.append("</tbody></table></div>")
    return out


def report_html(
    report: Report,
    *,
    plots: Sequence[Plot] | None = None,
    plots_note: str | None = None,
    history: HistoryReport | None = None,
    comparisons: Sequence[RunComparison | None] | None = None,
) -> str:
    """One self-contained HTML page: tables and the given inline-SVG plots. With `history`,
    the verdicts per night and the trends replace the tables of every run's values; without,
    the canaries and each run's verdicts against its baseline (`comparisons`, computed by
    `verdicts.compare_runs` unless given) are shown beside the values."""
    runs = report.runs
    if history is None and comparisons is None:
        comparisons = compare_runs(report)
    compared: Sequence[RunComparison | None] = comparisons or [None] * len(runs)
    out: list[str] = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>accelkit report</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>accelkit report</h1>",
        f'<p class="note">{len(runs)} runs. Values are medians; ~ marks a noisy metric '
        f"(IQR/median at least {IQR_WARN_THRESHOLD:.0%}); percentages are fractions of the "
        "device's peak (table or measured, as noted).</p>",
        '<h2 id="runs">Runs</h2><div class="wrap"><table id="runs-table"><thead><tr>',
        "<th>run</th><th>device</th><th>torch</th><th>started</th><th>source</th>",
    ]
    out += [f"<th>{_e(s)}</th>" for s in SUITES]
    out.append("</tr></thead><tbody>")
    for run, counts in zip(runs, report.counts, strict=True):
        if run.missing:
            out.append(
                f"<tr><td>{_e(run.label)}</td>"
                + '<td class="missing" colspan="3">produced no results</td>'
                + f"<td>{_e(run.source)}</td>"
                + "".join('<td class="missing">missing</td>' for _ in SUITES)
                + "</tr>"
            )
            continue
        summary_cells = "".join(
            f"<td>{_e(status_summary(counts[s]))}</td>" if s in counts else "<td>—</td>"
            for s in SUITES
        )
        out.append(
            f"<tr><td>{_e(run.label)}</td><td>{_e(run.device_name or run.device)}</td>"
            f"<td>{_e(run.torch_version or '?')}</td><td>{_e(run.started[:19])}</td>"
            f"<td>{_e(run.source)}</td>{summary_cells}</tr>"
        )
    out.append("</tbody></table></div>")
    if history is not None:
        out += _history_section(history)
    else:
        out += _canaries_section(report, compared)
        note = legend(report, compared)
        if note:
            out.append(f'<p class="note" id="compared">{_e(note)}</p>')
    head = "".join(f"<th>{_e(r.label)}</th>" for r in runs)
    reproducers: list[tuple[str, str]] = []
    for suite in report.suites() if history is None else ():
        metrics = [m for m in report.metrics if m.suite == suite]
        if metrics:
            out.append(f'<h2 id="{_e(suite)}-metrics">{_e(suite)}: metrics</h2>')
            out.append(f'<div class="wrap"><table class="metrics" data-suite="{_e(suite)}">')
            # How each metric was measured, where a run says (files before it do not).
            how = [methods_text([c.method if c else None for c in m.cells]) for m in metrics]
            measured = any(how)
            out.append(
                "<thead><tr><th>case</th><th>metric</th><th>unit</th>"
                + ("<th>measured</th>" if measured else "")
                + f"{head}</tr></thead>"
            )
            out.append("<tbody>")
            for k, m in enumerate(metrics):
                cells: list[str] = [f"<td>{_e(how[k])}</td>"] if measured else []
                for index, cell in enumerate(m.cells):
                    cells.append(_metric_cell(m.case, m.metric, m.unit, cell, compared[index]))
                direction = "higher is better" if m.higher_is_better else "lower is better"
                out.append(
                    f"<tr><td>{_e(m.case)}</td><td>{_e(m.metric)}</td>"
                    f'<td title="{direction}">{_e(m.unit)}</td>{"".join(cells)}</tr>'
                )
            out.append("</tbody></table></div>")
        cases = interesting_cases(report, suite)
        title = "cases" if suite == "perf" else "cases not passing everywhere"
        out.append(f'<h2 id="{_e(suite)}-cases">{_e(suite)}: {title}</h2>')
        everywhere = skipped_everywhere_line(report, suite)
        if everywhere is not None:
            out.append(f'<p class="note skipped-everywhere">{_e(everywhere)}.</p>')
        if not cases:
            other = "other " if everywhere is not None else ""
            out.append(f'<p class="note">Every {other}case passed in every run.</p>')
            continue
        out.append(f'<div class="wrap"><table class="cases" data-suite="{_e(suite)}">')
        out.append(f"<thead><tr><th>case</th>{head}</tr></thead><tbody>")
        for c in cases:
            status_cells: list[str] = []
            for i, (status, message) in enumerate(zip(c.statuses, c.messages, strict=True)):
                css = status or "missing"
                text = _e(status or "—")
                if status in BAD_STATUSES and i < len(c.repro) and c.repro[i]:
                    anchor = f"repro-{len(reproducers)}"
                    reproducers.append((anchor, repro_command(c.case, runs[i].source)))
                    text = f'<a href="#{anchor}" title="reproduce it">{text}</a>'
                status_cells.append(
                    f'<td class="{_e(css)}" title="{_e(message[:2000])}">{text}</td>'
                )
            out.append(f"<tr><td>{_e(c.case)}</td>{''.join(status_cells)}</tr>")
        out.append("</tbody></table></div>")
    if reproducers:
        out.append('<h2 id="reproduce">Reproduce the failures</h2>')
        out.append(
            '<p class="note">Each command writes one Python file that rebuilds the case from '
            'its seed, needs only torch, and runs it once.</p><ul class="reproduce">'
        )
        out += [f'<li id="{a}"><code>{_e(command)}</code></li>' for a, command in reproducers]
        out.append("</ul>")
    out += _differentials(report)
    if plots_note:
        out.append(f'<p class="note">{_e(plots_note)}</p>')
    if plots:
        for kind, title in (("bars", "Metric per run"), ("trend", "Trend over history")):
            selected = [p for p in plots if p.kind == kind]
            if not selected:
                continue
            out.append(f'<h2 id="plots-{kind}">{title}</h2><div class="plots">')
            for plot in selected:
                caption = f'<figcaption class="note">{_e(plot.title)}</figcaption>'
                out.append(f'<figure class="plot" data-kind="{kind}">{plot.svg}{caption}</figure>')
            out.append("</div>")
    if report.skipped_inputs:
        out.append('<h2 id="skipped">Skipped inputs</h2><ul class="note">')
        out += [f"<li>{_e(s)}</li>" for s in report.skipped_inputs]
        out.append("</ul>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _metric_cell(
    case: str, name: str, unit: str, cell: Cell | None, compared: RunComparison | None
) -> str:
    """One run's value of a metric: the median, its IQR as a share of it (the noise within
    the run) and, in a compared run, the verdict with the interval it used."""
    css = "num noisy" if cell is not None and cell.noisy else "num"
    title = ""
    bands: list[str] = []
    if cell is not None:
        title = f"{cell.samples} samples"
        if cell.p25 is not None and cell.p75 is not None:
            title += f"; IQR {format_value(cell.p25, unit)} to {format_value(cell.p75, unit)}"
        share = iqr_share(cell)
        if share:
            bands.append(share)
        if cell.peak_source:
            title += f"; peak: {cell.peak_source}"
        verdict = compared.metric(case, name) if compared is not None else None
        if verdict is not None and verdict.verdict != "missing":
            css += f" {verdict_css(verdict)}"
            bands.append(band_text(verdict))
            title += f"; {verdict.reason}"
    spans = "".join(f'<span class="band">{_e(b)}</span>' for b in bands)
    return f'<td class="{css}" title="{_e(title)}">{_e(format_cell(cell, unit))}{spans}</td>'


def _canaries_section(report: Report, compared: Sequence[RunComparison | None]) -> list[str]:
    """Each run's canaries: value and IQR, and in a compared run whether they moved."""
    rows = canary_rows(report, compared)
    if not rows:
        return []
    out = [
        '<h2 id="canaries">Canaries: the machine</h2>',
        '<p class="note">Measured first in every perf pass, through code the build under test '
        "does not change. A canary that moved (its interval excludes 1 and reaches beyond the "
        "band; its verdict is then environment-shifted) means "
        "the machine changed between the runs: metrics of its kind are then judged against "
        "it, and a change the machine alone could explain is environment-shifted, not "
        "regressed.</p>",
        '<div class="wrap"><table id="canaries-table"><thead><tr><th>canary</th><th>metric</th>',
    ]
    out += [f"<th>{_e(r.label)}</th>" for r in report.runs]
    out.append("</tr></thead><tbody>")
    for row in rows:
        cells: list[str] = []
        for cell, state in zip(row.cells, row.states, strict=True):
            css = "num"
            band = ""
            if state is not None:
                css += " canary-moved" if state.moved else " canary-steady"
                band = f'<span class="band">{_e(canary_state_text(state))}</span>'
            cells.append(f'<td class="{css}">{_e(spread_text(cell, row.unit))}{band}</td>')
        out.append(
            f"<tr><td>{_e(row.case)}</td><td>{_e(row.metric)} ({_e(row.unit)})</td>"
            f"{''.join(cells)}</tr>"
        )
    out.append("</tbody></table></div>")
    return out


def _differentials(report: Report) -> list[str]:
    """Where two environments computed different answers (`accelkit diff`): the cases beyond
    tolerance first (marked when both runs passed), then the largest differences."""
    out: list[str] = []
    for n, diff in enumerate(report.differentials):
        s = diff.summary
        out.append(
            f'<h2 id="differential-{n}">Differences: {_e(diff.a.label)} against '
            f"{_e(diff.b.label)}</h2>"
        )
        out.append(
            f'<p class="note">{s.compared} cases compared: {s.identical} identical, '
            f"{s.differ} differ, <b>{s.beyond_tolerance} beyond tolerance</b> "
            f"({s.beyond_tolerance_both_passed} of them passed in both runs), "
            f"{s.not_comparable} not comparable"
            + (f"; {_e(s.peer_sentence())}." if s.failed_in_one else ".")
            + "</p>"
        )
        rows = diff.disagreeing() + [c for c in diff.cases if not c.beyond_tolerance][:50]
        if not rows:
            continue
        out.append(f'<div class="wrap"><table class="differential" data-index="{n}"><thead>')
        out.append(
            "<tr><th>case</th><th>A</th><th>B</th><th>max |a-b|</th><th>max relative</th>"
            "<th>beyond tolerance</th><th>note</th></tr></thead><tbody>"
        )
        for c in rows:
            css = "disagree" if c.beyond_tolerance else ""
            flag = ""
            if c.beyond_tolerance:
                flag = "yes, both passed" if c.both_passed else "yes"
            cells = [
                c.id,
                c.status_a or "—",
                c.status_b or "—",
                f"{c.max_abs:.3g}" if c.max_abs is not None else "—",
                f"{c.max_rel:.3g}" if c.max_rel is not None else "—",
                flag,
                "; ".join(x for x in (c.peer_verdict, c.note[:300]) if x),
            ]
            out.append(
                f'<tr class="{css}" title="{_e(c.worst[:500])}">'
                + "".join(f"<td>{_e(x)}</td>" for x in cells)
                + "</tr>"
            )
        out.append("</tbody></table></div>")
    return out


def report_html_with_plots(
    report: Report,
    history: HistoryReport | None = None,
    comparisons: Sequence[RunComparison | None] | None = None,
) -> tuple[str, str | None]:
    """The HTML page with plots when matplotlib is installed; else without, and why."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        note = "Plots need matplotlib (pip install matplotlib); this page has tables only."
        page = report_html(report, plots_note=note, history=history, comparisons=comparisons)
        return page, note
    marks = None
    if history is not None:
        marks = {
            (row.case, row.metric): [(c.night, row.leg, c.after) for c in row.changes]
            for row in trend_rows(history)
            if row.changes
        }
    plots = render_plots(report, marks=marks)
    return report_html(report, plots=plots, history=history, comparisons=comparisons), None
