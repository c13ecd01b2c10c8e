"""The Markdown views, for GitHub's step summary ($GITHUB_STEP_SUMMARY) or a results
branch's README: each takes a model and returns text capped below 1 MiB
(`step_summary.cap`), its cells escaped one-liners (`step_summary.cell`).

- `comparison_markdown`: `accelkit compare --markdown` (regressions, newly failing with
  their `accelkit repro` lines, improvements, then the rest in brief);
- `nightly_markdown`: `accelkit matrix compare` (a row per leg, the explore legs' seeds and
  findings with their findings.md, then the comparison of each red or improved leg, its
  headings one level down);
- `report_markdown`: `accelkit report --markdown` (runs, canaries, each suite's metrics with
  their verdicts against the baseline run, the cases not passing everywhere, differentials);
- `history_markdown`: `accelkit report --history DIR --markdown` (leg verdicts per night,
  every perf metric's trend as a sparkline);
- `exploration_markdown`: the findings.md of `accelkit test --explore-seeds N` (each
  seed's run, then each finding's ready-to-file issue text, `finding_markdown`): a file
  of its own, not a step summary, so not capped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from accelkit.results.compare import Comparison, MetricComparison, StatusChange
from accelkit.results.findings import Exploration, Finding
from accelkit.results.model import BAD_STATUSES, SUITES, repro_command
from accelkit.results.nightly import ExploreVerdict, LegVerdict, NightlyVerdict
from accelkit.results.noise import IQR_WARN_THRESHOLD
from accelkit.results.render import step_summary
from accelkit.results.render.sparkline import NO_VALUE, sparkline
from accelkit.results.render.text import (
    band_text,
    canary_state_text,
    canary_summary,
    format_cell,
    format_ci,
    format_ratio,
    iqr_share,
    legend,
    methods_text,
    skipped_everywhere_line,
    spread_text,
    status_summary,
)
from accelkit.results.render.units import format_value
from accelkit.results.report.model import Cell, Report, interesting_cases
from accelkit.results.report.trends import HistoryReport, trend_rows
from accelkit.results.report.verdicts import RunComparison, canary_rows, compare_runs

_MESSAGE_CHARS = 200
"""Longest case id, metric name or message in a comparison's cell."""
_CELL_CHARS = 160
"""Longest text in a report's cell; statuses' messages get 80, run labels in a header 60."""


# ---------------------------------------------------------------------------------------
# A comparison (`accelkit compare`)


def _message_cell(text: str) -> str:
    return step_summary.cell(text, _MESSAGE_CHARS)


def _metric_rows(metrics: list[MetricComparison]) -> list[str]:
    if not metrics:
        return []
    return step_summary.table(
        ("case", "metric", "verdict", "base", "new", "ratio", "CI", "p", "why"),
        (
            (
                _message_cell(m.case),
                _message_cell(m.metric),
                m.verdict,
                format_value(m.base_median, m.unit),
                format_value(m.new_median, m.unit),
                format_ratio(m),
                format_ci(m),
                f"{m.p_value:.2g}" if m.p_value is not None else "-",
                _message_cell(m.reason),
            )
            for m in metrics
        ),
    )


def _change_rows(changes: tuple[StatusChange, ...]) -> list[str]:
    if not changes:
        return []
    return step_summary.table(
        ("case", "was", "now", "message"),
        (
            (
                _message_cell(c.case),
                c.base_status or "-",
                c.new_status or "-",
                _message_cell(c.message),
            )
            for c in changes
        ),
    )


def comparison_markdown(
    comparison: Comparison,
    *,
    base_label: str = "base",
    new_label: str = "new",
    max_bytes: int = step_summary.DEFAULT_MAX_BYTES,
    new_source: str | None = None,
) -> str:
    """A summary for `$GITHUB_STEP_SUMMARY`: regressions, newly failing (with the
    `accelkit repro` line of each, given the new run's file `new_source`), improvements,
    then the rest in brief. Never longer than `max_bytes` (UTF-8): extra rows are cut with
    a note.
    """
    summary = comparison.summary()
    verdict = "❌ regressions or new failures" if comparison.fails else "✅ no regressions"
    head = [
        f"## accelkit compare: {verdict}",
        "",
        f"`{_message_cell(new_label)}` against `{_message_cell(base_label)}`; minimum effect "
        f"{comparison.threshold:.0%}, {comparison.confidence:.0%} interval.",
        "",
        f"**{summary['regressed']}** regressed, **{summary['newly_failing']}** newly failing, "
        f"**{summary['improved']}** improved, "
        f"{summary['environment-shifted']} environment-shifted, {summary['unchanged']} unchanged, "
        f"{summary['noisy']} noisy, {summary['missing']} missing metrics; "
        f"{summary['newly_passing']} newly passing, {summary['newly_skipped']} newly skipped "
        f"({summary['skipped_after_passing']} of them passed before), "
        f"{summary['missing_in_new']} cases missing in the new run.",
        "",
    ]
    canaries = canary_summary(comparison)
    if canaries is not None:
        head += [step_summary.cell(canaries[:1].upper() + canaries[1:], 4000) + ".", ""]
    if comparison.environment:
        head += [
            "⚠️ **The runs differ in their environment**: verdicts compare different "
            "hardware or software.",
            "",
            *step_summary.table(
                ("what", "base", "new"),
                (
                    (
                        _message_cell(d.label),
                        _message_cell(d.base or "not recorded"),
                        _message_cell(d.new or "-"),
                    )
                    for d in comparison.environment
                ),
            ),
            "",
        ]
    skipped_after_passing = comparison.skipped_after_passing
    other_skips = tuple(
        c for c in comparison.changes_of("newly_skipped") if c not in skipped_after_passing
    )
    sections: list[tuple[str, list[str]]] = [
        ("### Regressions", _metric_rows(list(comparison.metrics_with("regressed")))),
        ("### Newly failing", _change_rows(comparison.changes_of("newly_failing"))),
        ("#### Reproduce the new failures", _repro_lines(comparison, new_source)),
        ("### Passed before, skipped now", _change_rows(skipped_after_passing)),
        ("### Improvements", _metric_rows(list(comparison.metrics_with("improved")))),
        (
            "### Environment-shifted (the canaries moved: the machine, not the build)",
            _metric_rows(list(comparison.metrics_with("environment-shifted"))),
        ),
        ("### Noisy (no verdict possible)", _metric_rows(list(comparison.metrics_with("noisy")))),
        ("### Missing metrics", _missing_rows(comparison.metrics_with("missing"))),
        (
            "### Other status changes",
            _change_rows(
                comparison.changes_of("newly_passing")
                + other_skips
                + comparison.changes_of("still_failing")
                + comparison.changes_of("missing_in_new")
                + comparison.changes_of("new_case")
            ),
        ),
    ]
    lines = list(head)
    for title, rows in sections:
        if rows:
            lines += [title, "", *rows, ""]
    if summary["unchanged"]:
        lines.append(
            f"{summary['unchanged']} metrics unchanged (within "
            f"±{comparison.threshold:.0%}); see `accelkit compare --json` for every metric."
        )
    return step_summary.cap("\n".join(lines) + "\n", max_bytes, see="`accelkit compare --json`")


def _missing_rows(metrics: tuple[MetricComparison, ...]) -> list[str]:
    if not metrics:
        return []
    return step_summary.table(
        ("case", "metric", "reason"),
        (
            (_message_cell(m.case), _message_cell(m.metric), _message_cell(m.reason))
            for m in metrics
        ),
    )


def _repro_lines(comparison: Comparison, new_source: str | None) -> list[str]:
    new_cases = comparison.changes_of("new_case")
    new_failures = [*comparison.changes_of("newly_failing"), *new_cases]
    commands = [
        repro_command(c.case, new_source)
        for c in new_failures
        if c.repro and c.new_status in BAD_STATUSES and new_source is not None
    ]
    return ["```bash", *commands, "```"] if commands else []


# ---------------------------------------------------------------------------------------
# A nightly against the previous nightly (`accelkit matrix compare`)


_LEG_STATE_MARK = {
    "red": "❌ red",
    "green": "✅ green",
    "no-baseline": "⚠️ no baseline",
    "stale-baseline": "⚠️ stale baseline",
}


def _baseline_line(run: Mapping[str, Any] | None, directory: str | None) -> str:
    if run is None and directory is not None:
        return f"Baseline: the results in `{step_summary.cell(directory, 200)}`."
    if run is None:
        return "Baseline: no completed nightly before this one; every leg is named below."
    number = run.get("number")
    when = str(run.get("createdAt") or "")[:19]
    conclusion = run.get("conclusion") or "?"
    url = run.get("url")
    name = f"run #{number}" if number is not None else f"run {run.get('databaseId')}"
    shown = f"[{name}]({url})" if url else name
    return (
        f"Baseline: the previous completed nightly, {shown} of {when} (conclusion: {conclusion})."
    )


def nightly_markdown(
    verdict: NightlyVerdict, *, max_bytes: int = step_summary.DEFAULT_MAX_BYTES
) -> str:
    """The summary for $GITHUB_STEP_SUMMARY: the verdict, a row per leg, then details."""
    # An explore leg is red when its exploration did not run, never for its findings.
    every: list[LegVerdict | ExploreVerdict] = [*verdict.legs, *verdict.explorations]
    red = [leg for leg in every if leg.red]
    named = [leg for leg in verdict.legs if leg.state in ("no-baseline", "stale-baseline")]
    title = f"❌ {len(red)} of {len(every)} legs red" if red else "✅ every leg green"
    if not every:
        title = "no legs"
    lines = [
        f"## Nightly against the previous nightly: {title}",
        "",
        _baseline_line(verdict.baseline_run, verdict.baseline_dir),
        "",
    ]
    if named:
        lines.append(
            f"**{len(named)} {'leg' if len(named) == 1 else 'legs'} without a usable baseline** "
            "(missing, or older than "
            f"{verdict.max_age_hours:g} h): "
            + ", ".join(f"`{step_summary.cell(leg.name, 80)}` ({leg.state})" for leg in named)
        )
        lines.append("")
    # Inductor's cache hit rate, where a leg kept its caches from the night before.
    caches = any(leg.compile_cache for leg in verdict.legs)
    rows = []
    for leg in verdict.legs:
        age = f"{leg.baseline_age_hours / 24:.1f} d" if leg.baseline_age_hours is not None else "—"
        row = [
            step_summary.cell(leg.name, 80),
            _LEG_STATE_MARK[leg.state],
            age,
            str(len(leg.failing)),
            str(len(leg.regressed)),
            str(len(leg.newly_skipped)),
        ]
        if caches:
            row.append(step_summary.cell(leg.compile_cache or "—", 80))
        rows.append([*row, step_summary.cell("; ".join((*leg.reasons, *leg.notes)), 300)])
    header = ["leg", "verdict", "baseline age", "failing", "regressed", "newly skipped"]
    lines += step_summary.table([*header, *(["Inductor cache"] if caches else []), "why"], rows)
    lines.append("")
    lines += _exploration_lines(verdict.explorations)
    for leg in verdict.legs:
        if leg.comparison is None or not (leg.red or leg.comparison.metrics_with("improved")):
            continue
        detail = comparison_markdown(
            leg.comparison,
            base_label=f"{leg.name} (baseline)",
            new_label=f"{leg.name} (tonight)",
            new_source=leg.results,  # each new failure's `accelkit repro` line
        )
        detail = detail.replace("\n### ", "\n#### ").replace(
            "## accelkit compare", f"### {leg.name}", 1
        )
        lines += [detail, ""]
    return step_summary.cap("\n".join(lines) + "\n", max_bytes, see="the nightly-report artifact")


def _exploration_lines(explorations: Sequence[ExploreVerdict]) -> list[str]:
    """The explore legs: seeds and findings counted, each leg's findings.md named; red only
    where the exploration did not run through."""
    if not explorations:
        return []
    found = sum(len(e.findings) for e in explorations)
    lines = [
        f"### Seed explorations: {found} finding(s), not failures",
        "",
        "Each finding is a case that disagreed at a fresh seed; its leg's findings.md has "
        "its `accelkit repro` command and a ready-to-file issue text (in the nightly-report "
        "artifact, and the leg's `findings-<leg>` artifact). A finding is filed and its cause "
        'written down before any rule changes (docs/design.md, "Seed exploration").',
        "",
    ]
    rows = []
    for e in explorations:
        where = e.markdown or e.findings_file or "—"
        why = "; ".join(e.reasons) or _listed_findings(e.findings)
        rows.append(
            [
                step_summary.cell(e.name, 80),
                "❌ red" if e.red else "🔎 explored",
                ", ".join(str(seed) for seed in e.seeds) or "—",
                "—" if e.red else str(len(e.findings)),
                f"`{step_summary.cell(where, 200)}`" if where != "—" else where,
                step_summary.cell(why, 300),
            ]
        )
    header = ["leg", "exploration", "seeds", "findings", "findings.md", "what"]
    lines += step_summary.table(header, rows)
    lines.append("")
    return lines


def _listed_findings(findings: Sequence[str], shown: int = 5) -> str:
    if not findings:
        return "every case agreed with its bound at every seed"
    more = f" and {len(findings) - shown} more" if len(findings) > shown else ""
    return ", ".join(findings[:shown]) + more


# ---------------------------------------------------------------------------------------
# A report (`accelkit report`)


def _cell(text: str, limit: int = _CELL_CHARS) -> str:
    return step_summary.cell(text, limit)


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
    lines += step_summary.table(
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


def report_markdown(
    report: Report,
    *,
    max_bytes: int = step_summary.DEFAULT_MAX_BYTES,
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
    lines += step_summary.table(["run", "device", "torch", "started", *SUITES], run_rows)
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
            # How each metric was measured, where a run says (files before it do not).
            how = [methods_text([c.method if c else None for c in m.cells]) for m in metrics]
            measured = ["measured"] if any(how) else []
            lines += step_summary.table(
                ["case", "metric", *measured, *columns],
                (
                    [
                        _cell(m.case),
                        f"{_cell(m.metric)} ({_cell(m.unit)})",
                        *([_cell(how[k])] if measured else []),
                        *(
                            _metric_cell(m.case, m.metric, m.unit, c, compared[i])
                            for i, c in enumerate(m.cells)
                        ),
                    ]
                    for k, m in enumerate(metrics)
                ),
            )
            lines.append("")
        cases = interesting_cases(report, suite)
        everywhere = skipped_everywhere_line(report, suite)
        if cases or everywhere is not None:
            title = "cases" if suite == "perf" else "cases not passing everywhere"
            lines += [f"### {suite}: {title}", ""]
            if everywhere is not None:
                lines += [step_summary.cell(everywhere, 1000) + ".", ""]
        if cases:
            lines += step_summary.table(
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
            f"them passed in both runs), {s.not_comparable} not comparable"
            + (f"; {s.peer_sentence()}." if s.failed_in_one else ".")
        )
        lines.append("")
        disagreeing = diff.disagreeing()
        if disagreeing:
            peer = any(c.peer_verdict for c in disagreeing)
            lines += step_summary.table(
                ["case", "A", "B", "max abs", "max rel", "both passed"]
                + (["peer rule"] if peer else []),
                (
                    [
                        _cell(c.id),
                        c.status_a or "—",
                        c.status_b or "—",
                        f"{c.max_abs:.3g}" if c.max_abs is not None else "—",
                        f"{c.max_rel:.3g}" if c.max_rel is not None else "—",
                        "yes" if c.both_passed else "no",
                    ]
                    + ([c.peer_verdict or "—"] if peer else [])
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
    return step_summary.cap(text, max_bytes, see="the HTML report or `accelkit report --json`")


# ---------------------------------------------------------------------------------------
# A history (`accelkit report --history`)


_NIGHT_STATE_MARK = {"green": "✅", "red": "❌", "no-baseline": "⚠️", "stale-baseline": "⚠️"}


def history_markdown(
    history: HistoryReport, *, max_bytes: int = step_summary.DEFAULT_MAX_BYTES
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
            mark = _NIGHT_STATE_MARK.get(state or "", "—")
            cells.append(mark + ("◆" if night in changed else ""))
        rows.append([step_summary.cell(leg, 60), *cells])
    lines += step_summary.table(["leg", *short], rows)
    lines += ["", f"### Trends over {len(nights)} nights", ""]
    trend = []
    for row in trend_rows(history):
        change = row.change
        trend.append(
            [
                step_summary.cell(row.leg, 60),
                step_summary.cell(row.case, 100),
                step_summary.cell(f"{row.metric} ({row.unit})", 60),
                "`" + sparkline(row.values) + "`",
                format_value(row.present[0], row.unit),
                format_value(row.present[-1], row.unit),
                f"{change:+.1%}" if change is not None else "—",
                step_summary.cell("; ".join(c.label() for c in row.changes), 200) or "—",
            ]
        )
    lines += step_summary.table(
        ["leg", "case", "metric", "trend", "first", "last", "change", "verdict changed"], trend
    )
    lines += ["", f"`{NO_VALUE}`: no value that night (the leg did not run or lacked the metric)."]
    return step_summary.cap("\n".join(lines) + "\n", max_bytes, see="the HTML report")


# ---------------------------------------------------------------------------------------
# A seed exploration (`accelkit test --explore-seeds`)


def exploration_markdown(exploration: Exploration) -> str:
    """findings.md: the device and seeds, a row per seed's run, then each finding's issue
    text (or that there were none)."""
    seeds = ", ".join(str(run.seed) for run in exploration.runs)
    lines = [
        "# Seed exploration",
        "",
        f"Device {exploration.device}, torch {exploration.torch}; seeds {seeds}.",
        "",
        "| seed | cases | passed | findings | results |",
        "| --- | --- | --- | --- | --- |",
    ]
    lines += [
        f"| {r.seed} | {r.cases} | {r.passed} | {r.findings} | `{r.results_file}` |"
        for r in exploration.runs
    ]
    lines.append("")
    if not exploration.findings:
        lines.append("No findings: every case agreed with its bound at every seed.")
        return "\n".join(lines) + "\n"
    lines += [
        f"{len(exploration.findings)} finding(s). A finding is not a failure and not a new "
        "rule: file it, find its cause, and only then change the model or list an exception.",
        "",
    ]
    for finding in exploration.findings:
        lines += [finding_markdown(finding, exploration.device, exploration.torch), ""]
    return "\n".join(lines)


def finding_markdown(finding: Finding, device: str, torch: str) -> str:
    """A ready-to-file issue: the environment, the reproducer, expected against actual."""
    where = f"sample {finding.sample}" if finding.sample is not None else "the case"
    if finding.layout:
        where += f" in layout {finding.layout}"
    lines = [
        f"## `{finding.case_id}` disagrees at seed {finding.seed}",
        "",
        f"- Environment: device {device}, torch {torch}; the run's results file "
        f"`{finding.results_file}` has the whole environment (`env`).",
        f"- Reproducer: `{finding.repro}` (a standalone script with the exact inputs of {where}).",
    ]
    check = finding.check or {}
    if "expected" in check or "actual" in check:
        at = f" at index {check['index']}" if check.get("index") is not None else ""
        tolerance = ", ".join(
            f"{name} {check[name]:.3g}" for name in ("rtol", "atol") if check.get(name) is not None
        )
        lines.append(
            f"- Expected {check.get('expected')!r}, actual {check.get('actual')!r}{at} "
            f"(|difference| {check.get('abs_diff')!r}; allowed: {tolerance or 'exact'})."
        )
    first_line = finding.message.strip().splitlines()[0] if finding.message.strip() else ""
    lines += [
        f"- Status: {finding.status}: {first_line[:400]}",
        "- Cause: (to be written by the review, before any rule, bound or exception changes)",
    ]
    return "\n".join(lines)
