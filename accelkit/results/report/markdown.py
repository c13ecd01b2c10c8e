"""The report as a Markdown summary for $GITHUB_STEP_SUMMARY, capped below 1 MiB."""

from __future__ import annotations

from collections.abc import Sequence

from accelkit.results import markdown
from accelkit.results.model import SUITES
from accelkit.results.noise import IQR_WARN_THRESHOLD
from accelkit.results.report.model import (
    Cell,
    Report,
    format_cell,
    interesting_cases,
    skipped_everywhere_line,
    status_summary,
)
from accelkit.results.report.verdicts import (
    RunComparison,
    band_text,
    canary_rows,
    canary_state_text,
    compare_runs,
    iqr_share,
    legend,
    spread_text,
)

_CELL_CHARS = 160
"""Longest text in a cell; statuses' messages get 80, run labels in a header 60."""


def _cell(text: str, limit: int = _CELL_CHARS) -> str:
    return markdown.cell(text, limit)


def _metric_cell(
    case: str, name: str, unit: str, cell: Cell | None, compared: RunComparison | None
) -> str:
    text = _cell(format_cell(cell, unit), 80)
    share = iqr_share(cell)
    if share:
        text += f" ({share})"
    verdict = compared.metric(case, name) if compared is not None and cell is not None else None
    if verdict is not None and verdict.verdict != "missing":
        text += " · " + _cell(band_text(verdict), 120)
    return text


def _canaries(
    report: Report, compared: Sequence[RunComparison | None], columns: list[str]
) -> list[str]:
    rows = canary_rows(report, compared)
    if not rows:
        return []
    lines = [
        "### Canaries: the machine",
        "",
        "Measured first in every perf pass, through code the build under test does not "
        "change. A canary that moved means the machine changed between the runs: metrics of "
        "its kind are judged against it (environment-shifted, not regressed, when the "
        "machine alone could explain the change).",
        "",
    ]
    lines += markdown.table(
        ["canary", "metric", *columns],
        (
            [
                _cell(row.case),
                f"{_cell(row.metric)} ({_cell(row.unit)})",
                *(
                    _cell(spread_text(cell, row.unit), 80)
                    + (f" · **{canary_state_text(state)}**" if state and state.moved else "")
                    + (f" · {canary_state_text(state)}" if state and not state.moved else "")
                    for cell, state in zip(row.cells, row.states, strict=True)
                ),
            ]
            for row in rows
        ),
    )
    lines.append("")
    return lines


def render_markdown(
    report: Report,
    *,
    max_bytes: int = markdown.DEFAULT_MAX_BYTES,
    comparisons: Sequence[RunComparison | None] | None = None,
) -> str:
    """A summary for $GITHUB_STEP_SUMMARY; never longer than `max_bytes` (UTF-8). Each run
    is compared against its baseline (`comparisons`, from `verdicts.compare_runs` unless
    given): the canaries get a table, each metric its verdict and interval."""
    runs = report.runs
    compared = comparisons if comparisons is not None else compare_runs(report)
    lines = ["## accelkit report", ""]
    missing = sum(r.missing for r in runs)
    lines.append(
        f"{len(runs)} runs" + (f"; {missing} produced no results" if missing else "") + "."
    )
    lines.append("")
    run_rows: list[list[str]] = []
    for run, counts in zip(runs, report.counts, strict=True):
        if run.missing:
            run_rows.append([_cell(run.label), "—", "—", "—", *["**missing**"] * len(SUITES)])
            continue
        run_rows.append(
            [
                _cell(run.label),
                _cell(run.device_name or run.device),
                _cell(run.torch_version or "?"),
                _cell(run.started[:19]),
                *(status_summary(counts[s]) if s in counts else "—" for s in SUITES),
            ]
        )
    lines += markdown.table(["run", "device", "torch", "started", *SUITES], run_rows)
    lines.append("")
    columns = [_cell(r.label, 60) for r in runs]
    lines += _canaries(report, compared, columns)
    note = legend(report, compared)
    if note:
        lines += [note, ""]
    for suite in report.suites():
        metrics = [m for m in report.metrics if m.suite == suite]
        if metrics:
            lines += [f"### {suite}: metrics", ""]
            lines += markdown.table(
                ["case", "metric", *columns],
                (
                    [
                        _cell(m.case),
                        f"{_cell(m.metric)} ({_cell(m.unit)})",
                        *(
                            _metric_cell(m.case, m.metric, m.unit, c, compared[i])
                            for i, c in enumerate(m.cells)
                        ),
                    ]
                    for m in metrics
                ),
            )
            lines.append("")
        cases = interesting_cases(report, suite)
        everywhere = skipped_everywhere_line(report, suite)
        if cases or everywhere is not None:
            title = "cases" if suite == "perf" else "cases not passing everywhere"
            lines += [f"### {suite}: {title}", ""]
            if everywhere is not None:
                lines += [markdown.cell(everywhere, 1000) + ".", ""]
        if cases:
            lines += markdown.table(
                ["case", *columns],
                (
                    [
                        _cell(c.case),
                        *(
                            _cell(s or "—")
                            + (f": {_cell(msg, 80)}" if s not in ("passed", None) and msg else "")
                            for s, msg in zip(c.statuses, c.messages, strict=True)
                        ),
                    ]
                    for c in cases
                ),
            )
            lines.append("")
    for diff in report.differentials:
        s = diff.summary
        lines += [
            f"### Differences: {_cell(diff.a.label, 60)} against {_cell(diff.b.label, 60)}",
            "",
        ]
        lines.append(
            f"{s.compared} cases compared: {s.identical} identical, {s.differ} differ, "
            f"**{s.beyond_tolerance} beyond tolerance** ({s.beyond_tolerance_both_passed} of "
            f"them passed in both runs), {s.not_comparable} not comparable."
        )
        lines.append("")
        disagreeing = diff.disagreeing()
        if disagreeing:
            lines += markdown.table(
                ["case", "A", "B", "max abs", "max rel", "both passed"],
                (
                    [
                        _cell(c.id),
                        c.status_a or "—",
                        c.status_b or "—",
                        f"{c.max_abs:.3g}" if c.max_abs is not None else "—",
                        f"{c.max_rel:.3g}" if c.max_rel is not None else "—",
                        "yes" if c.both_passed else "no",
                    ]
                    for c in disagreeing
                ),
            )
            lines.append("")
    lines.append(
        f"`~` marks a noisy metric (IQR/median at least {IQR_WARN_THRESHOLD:.0%}); — means absent."
    )
    if report.skipped_inputs:
        lines += ["", f"{len(report.skipped_inputs)} JSON files skipped (not results files)."]
    text = "\n".join(lines) + "\n"
    return markdown.cap(text, max_bytes, see="the HTML report or `accelkit report --json`")
