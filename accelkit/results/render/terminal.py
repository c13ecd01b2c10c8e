"""The terminal views (rich): `accelkit compare`'s tables (also the end of `accelkit test
--ab`), `accelkit report`'s runs, and a nightly's legs (`accelkit matrix compare` and the
rehearsal `accelkit matrix run --baseline`), and `accelkit diff`'s cases whose answers
differ.

Each `print_*` takes the console to write on; the CLI chooses it (`accelkit.cli.console`:
the terminal's width, or plain at `PLAIN_WIDTH` when piped). Tables fold a cell that does
not fit instead of cutting it (`table`), and a comparison too wide for the terminal is
printed one metric a line with its reason below (`fits`). Cells are `Text`, never markup:
case ids such as `mm[cpu-float32]` hold brackets.

Light to import (rich and the models load when a view is printed): the CLI's console
module takes `PLAIN_WIDTH` from here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from accelkit.results.names import SUITES
from accelkit.results.render.units import format_value

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from accelkit.results.compare import Comparison
    from accelkit.results.differential_file import Differential
    from accelkit.results.report.model import Report

PLAIN_WIDTH: Final = 4096
"""The width output is laid out at where there is no terminal: wider than any row, so a
table takes its natural width and no cell is cut or wrapped."""

VERDICT_STYLE: Final = {
    "regressed": "bold red",
    "improved": "green",
    "environment-shifted": "cyan",
    "noisy": "yellow",
    "missing": "magenta",
    "unchanged": "dim",
}


def fits(console: Console, renderable: Table) -> bool:
    """Whether `renderable` fits `console`'s width at its natural width, no cell wrapped."""
    from rich.measure import Measurement

    unbounded = console.options.update(max_width=PLAIN_WIDTH)
    return Measurement.get(console, unbounded, renderable).maximum <= console.width


def table(title: str | None, columns: Sequence[str], *, right: Sequence[str] = ()) -> Table:
    """A table whose cells wrap (fold) when the width is short, never end in an ellipsis;
    the `right` columns are right-aligned (numbers)."""
    from rich.table import Table

    result = Table(title=title, title_justify="left")
    for column in columns:
        result.add_column(column, overflow="fold", justify="right" if column in right else "left")
    return result


def print_comparison(console: Console, comparison: Comparison) -> None:
    """`accelkit compare`'s view: the environments' differences, every metric's verdict
    (regressions first), the status changes, then one summary line and the canaries."""
    from rich.padding import Padding
    from rich.text import Text

    from accelkit.results.render.text import (
        canary_summary,
        format_ci,
        format_ratio,
        method_text,
        metrics_by_severity,
    )

    if comparison.environment:
        differ = table(
            "The runs differ in their environment (verdicts compare different setups)",
            ("what", "base", "new"),
        )
        differ.title_style = "bold yellow"
        for d in comparison.environment:
            differ.add_row(d.label, Text(d.base or "not recorded"), Text(d.new or "not recorded"))
        console.print(differ)
    if comparison.metrics:
        # How each metric was measured (timer, threads, cache state), where the files say.
        measured = any(m.method is not None for m in comparison.metrics)
        metrics = table(
            "Metrics (new vs base)",
            ("verdict", "case", "metric", "base", "new", "ratio", "CI", "why")
            + (("measured",) if measured else ()),
            right=("base", "new"),
        )
        ordered = metrics_by_severity(comparison)
        for m in ordered:
            style = VERDICT_STYLE[m.verdict]
            cells: tuple[str, ...] = (
                m.case,
                m.metric,
                format_value(m.base_median, m.unit),
                format_value(m.new_median, m.unit),
                format_ratio(m),
                format_ci(m),
                m.reason,
            )
            if measured:
                cells += (method_text(m.method),)
            metrics.add_row(
                Text(m.verdict, style=style),
                *(Text(cell) for cell in cells),
                style="dim" if m.verdict == "unchanged" else None,
            )
        if fits(console, metrics):
            console.print(metrics)
        else:  # a narrow terminal: one metric a line, its reason below, wrapped at words
            console.print(Text("Metrics (new vs base)", style="italic"))
            for m in ordered:
                head = Text(m.verdict, style=VERDICT_STYLE[m.verdict])
                head.append(
                    f" {m.case} {m.metric}: {format_value(m.base_median, m.unit)} -> "
                    f"{format_value(m.new_median, m.unit)}, {format_ratio(m)} {format_ci(m)}"
                )
                console.print(head)
                console.print(Padding(Text(m.reason, style="dim"), (0, 0, 0, 4)))
                if m.method is not None:
                    how = Text(f"measured: {method_text(m.method)}", style="dim")
                    console.print(Padding(how, (0, 0, 0, 4)))
    if comparison.cases:
        order = {"newly_failing": 0, "still_failing": 2, "missing_in_new": 3}
        lost = set(comparison.skipped_after_passing)
        changes = sorted(comparison.cases, key=lambda c: 1 if c in lost else order.get(c.kind, 4))
        status = table("Status changes", ("change", "case", "was", "now", "message"))
        for c in changes:
            style = "bold red" if c.kind == "newly_failing" else "yellow" if c in lost else ""
            kind = "skipped_after_passing" if c in lost else c.kind
            status.add_row(
                Text(kind, style=style),
                Text(c.case),
                c.base_status or "-",
                c.new_status or "-",
                Text(c.message.splitlines()[0] if c.message else ""),
            )
        console.print(status)
    s = comparison.summary()
    line = (
        f"{s['regressed']} regressed, {s['newly_failing']} newly failing, "
        f"{s['improved']} improved, {s['environment-shifted']} environment-shifted, "
        f"{s['unchanged']} unchanged, {s['noisy']} noisy, "
        f"{s['missing']} missing metrics; {s['newly_passing']} newly passing, "
        f"{s['newly_skipped']} newly skipped ({s['skipped_after_passing']} passed before), "
        f"{s['missing_in_new']} cases missing in new"
    )
    if comparison.environment:
        line += "; the environments differ: " + ", ".join(d.label for d in comparison.environment)
    console.print(Text(line, style="bold red" if comparison.fails else ""))
    canaries = canary_summary(comparison)
    if canaries is not None:
        console.print(Text(canaries))


def print_report(
    console: Console, report: Report, html: Path | None, markdown: Path | None
) -> None:
    """`accelkit report`'s view: one row per run with its status counts per suite, the
    number of metrics, and where the HTML and Markdown went."""
    from rich.table import Table
    from rich.text import Text

    from accelkit.results.render.text import status_summary

    runs = Table(title="Runs", title_justify="left")
    for column in ("run", "device", "torch", *SUITES):
        runs.add_column(column, overflow="fold")
    for run, counts in zip(report.runs, report.counts, strict=True):
        if run.missing:
            runs.add_row(
                Text(run.label),
                Text("produced no results", style="bold red"),
                "",
                *("missing" for _ in SUITES),
            )
            continue
        runs.add_row(
            Text(run.label),
            Text(run.device_name or run.device),
            run.torch_version or "?",
            *(status_summary(counts[s]) if s in counts else "-" for s in SUITES),
        )
    console.print(runs)
    console.print(
        f"{len(report.metrics)} metrics across {len(report.runs)} runs"
        + (
            f"; {len(report.skipped_inputs)} non-results JSON files skipped"
            if report.skipped_inputs
            else ""
        )
    )
    for label, path in (("HTML", html), ("Markdown", markdown)):
        if path is not None:
            console.print(f"{label}: {path}")


def print_nightly(console: Console, verdict: Mapping[str, Any], summary: Path) -> None:
    """A nightly's legs against the baseline (`NightlyVerdict.to_json_dict()`, the form the
    rehearsal keeps): each leg's state and why (an explore leg's: its findings), then where
    the Markdown summary went."""
    from rich.markup import escape
    from rich.table import Table

    styles = {"red": "bold red", "green": "green"}
    legs = Table(title="against the baseline", title_justify="left")
    for column in ("leg", "verdict", "why"):
        legs.add_column(column, overflow="fold")
    for leg in verdict["legs"]:
        why = "; ".join([*leg["reasons"], *leg["notes"]])
        style = styles.get(leg["state"], "yellow")
        legs.add_row(escape(leg["name"]), f"[{style}]{leg['state']}[/]", escape(why))
    for explored in verdict.get("explorations", ()):  # findings, not failures
        why = "; ".join(explored["reasons"]) or (
            f"{len(explored['findings'])} finding(s) over {len(explored['seeds'])} seed(s): "
            f"{explored['markdown'] or explored['findings_file']}"
        )
        style = styles.get(explored["state"], "cyan")
        legs.add_row(escape(explored["name"]), f"[{style}]{explored['state']}[/]", escape(why))
    console.print(legs)
    console.print(f"summary: {summary}", markup=False)


def print_differential(console: Console, result: Differential, top: int, out: Path | None) -> None:
    """`accelkit diff`: the two runs, the first `top` cases whose answers differ (beyond the
    case's tolerance in bold red), the counts, and where the differential file went (`out`)."""
    from rich.text import Text

    console.print(f"A: {result.a.label}  (git {str(result.a.git)[:12]})", markup=False)
    console.print(f"B: {result.b.label}  (git {str(result.b.git)[:12]})", markup=False)
    shown = result.cases[:top]
    if shown:
        # The peer rule's column only where a listed case failed in one run only.
        peer = any(c.peer_verdict for c in shown)
        columns = ("case", "A", "B", "max |a-b|", "max rel", "beyond tol")
        cases = table("Cases whose answers differ", columns + (("peer rule",) if peer else ()))
        for c in shown:
            style = "bold red" if c.beyond_tolerance else ""
            cells: list[Text | str] = [
                Text(c.id, style=style),
                c.status_a or "-",
                c.status_b or "-",
                f"{c.max_abs:.3g}" if c.max_abs is not None else "-",
                f"{c.max_rel:.3g}" if c.max_rel is not None else Text(_reason(c.note)),
                Text("YES" if c.beyond_tolerance else "", style=style),
            ]
            cases.add_row(*cells, *((Text(c.peer_verdict),) if peer else ()))
        console.print(cases)
    s = result.summary
    console.print(
        f"{s.compared} cases compared: {s.identical} identical, {s.differ} differ, "
        f"{s.beyond_tolerance} beyond tolerance ({s.beyond_tolerance_both_passed} of them "
        f"passed in both runs), {s.not_comparable} not comparable"
        + (f"; {s.peer_sentence()}" if s.failed_in_one else "")
        + (f"; {len(result.cases) - len(shown)} more listed in the file" if out else ""),
        markup=False,
    )
    if out is not None:
        console.print(f"differential: {out}")


def _reason(note: str) -> str:
    """The kind of a 'not comparable' note ("inputs differ", "shapes differ", ...)."""
    return note.split(":", 1)[0].split(";", 1)[0][:40] or "not comparable"
