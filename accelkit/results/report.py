"""`accelkit report`: several results files side by side, as data, Markdown and HTML.

Inputs are results files and directories. A directory is searched recursively for
`*.json` files holding an accelkit results file; other JSON (junit-adjacent setup.json,
build.json, manifests) is skipped and listed in `Report.skipped_inputs`. A file named
explicitly must be a results file (anything else is bad input). The nightly layout is

    results/<leg>/results.json              one nightly, one folder per matrix leg
    history/<night>/<leg>/results.json      a history of nightlies

Every results file becomes a `Run` with a `leg` (its folder, or the file's stem) and a
`group` (the folder above the leg: the night). A leg folder that holds files but no results
file (the leg produced nothing) becomes a missing `Run`: it shows as missing in tables and
trends, never silently dropped or papered over by averaging its neighbours.

Rendering: `render_markdown` (for $GITHUB_STEP_SUMMARY, capped below 1 MiB) and
`render_html` (one self-contained file: inline CSS and inline SVG plots drawn with
matplotlib; no script, no network). Nothing here prints.
"""

from __future__ import annotations

import html
import io
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelkit.errors import BadInput
from accelkit.results.compare import format_value
from accelkit.results.io import load_results
from accelkit.results.model import SCHEMA_ID, STATUSES, SUITES, Case, Metric, Results

MARKDOWN_LIMIT_BYTES = 1 << 20
"""GitHub's limit for $GITHUB_STEP_SUMMARY."""
_SCHEMA_PREFIX = SCHEMA_ID.split("/", 1)[0] + "/"
_MESSAGE_CHARS = 160


# ---------------------------------------------------------------------------------------
# Finding runs


@dataclass(frozen=True)
class Run:
    """One column of the report: a results file, or a leg that produced none."""

    label: str
    leg: str
    group: str
    source: str
    results: Results | None = None

    @property
    def missing(self) -> bool:
        return self.results is None

    @property
    def device(self) -> str:
        return self.results.run.device if self.results is not None else "?"

    @property
    def started(self) -> str:
        return self.results.run.started if self.results is not None else ""

    @property
    def torch_version(self) -> str | None:
        return _torch_version(self.results) if self.results is not None else None

    @property
    def device_name(self) -> str | None:
        return _device_name(self.results) if self.results is not None else None


def _torch_version(results: Results) -> str | None:
    torch = results.env.get("torch")
    if isinstance(torch, dict):
        version = torch.get("version")
        return str(version) if version else None
    return None


def _device_name(results: Results) -> str | None:
    device = results.run.device
    backends = results.env.get("backends")
    if isinstance(backends, dict):
        entry = backends.get(device)
        if isinstance(entry, dict):
            devices = entry.get("devices")
            if isinstance(devices, list) and devices and isinstance(devices[0], dict):
                name = devices[0].get("name")
                if name:
                    return str(name)
    if device == "cpu":
        cpu = results.env.get("cpu")
        if isinstance(cpu, dict) and cpu.get("model"):
            return str(cpu["model"])
    return None


def _is_results_document(path: Path) -> bool | None:
    """True: claims to be a results file; False: some other JSON; None: unreadable."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(raw, dict):
        return False
    schema = raw.get("schema")
    return isinstance(schema, str) and schema.startswith(_SCHEMA_PREFIX)


@dataclass(frozen=True)
class _Found:
    path: Path
    results: Results | None
    leg: str
    group: str


def _leg_and_group(path: Path, root: Path | None) -> tuple[str, str]:
    """The leg (the folder of a results.json, else the file's stem) and its group."""
    leg_dir = path.parent
    leg = leg_dir.name if path.name == "results.json" else path.stem
    group_dir = leg_dir.parent if path.name == "results.json" else leg_dir
    if root is not None:
        group = group_dir.relative_to(root).as_posix() if group_dir.is_relative_to(root) else ""
        if group in ("", "."):
            group = root.name or root.as_posix()
    else:
        group = group_dir.as_posix()
    return leg or path.stem, group


def _scan_directory(root: Path, skipped: list[str]) -> list[_Found]:
    found: list[_Found] = []
    result_dirs: set[Path] = set()
    for path in sorted(root.rglob("*.json")):
        if not path.is_file():
            continue
        claim = _is_results_document(path)
        if not claim:
            why = "not JSON" if claim is None else "not an accelkit results file"
            skipped.append(f"{path}: {why}")
            continue
        results = load_results(path)  # claims the schema but is invalid: bad input
        leg, group = _leg_and_group(path, root)
        found.append(_Found(path, results, leg, group))
        result_dirs.update(p for p in path.parents if p.is_relative_to(root))
    # Legs that produced nothing (setup or build failed, the runner died): folders that sit
    # beside real legs (their parent leads to results files but is not a leg itself) and
    # hold files but no results file anywhere below. They are shown as missing.
    leg_dirs = {f.path.parent for f in found}
    for directory in sorted(p for p in root.rglob("*") if p.is_dir()):
        parent = directory.parent
        if directory in result_dirs or parent not in result_dirs or parent in leg_dirs:
            continue
        if any(child.is_file() for child in directory.rglob("*")):
            leg, group = _leg_and_group(directory / "results.json", root)
            found.append(_Found(directory, None, leg, group))
    return found


def _in_group_order(found: list[_Found]) -> list[_Found]:
    """Nights in time order (a night's time: its earliest run), legs by name within one."""
    group_started: dict[str, str] = {}
    for f in found:
        if f.results is not None:
            started = f.results.run.started
            if f.group not in group_started or started < group_started[f.group]:
                group_started[f.group] = started
    return sorted(found, key=lambda f: (group_started.get(f.group, "~"), f.group, f.leg))


def discover(paths: Sequence[Path]) -> tuple[list[Run], list[str]]:
    """The runs named by `paths` (files and directories), and the inputs skipped.

    Raises BadInput for a missing path, an explicitly named file that is not a valid
    results file, a results file that does not validate, or when nothing is found.
    """
    if not paths:
        raise BadInput("no results files given")
    found: list[_Found] = []
    skipped: list[str] = []
    for path in paths:
        if path.is_dir():
            in_dir = _scan_directory(path, skipped)
            if not any(f.results is not None for f in in_dir):
                raise BadInput(f"{path}: no accelkit results files found in this directory")
            found.extend(_in_group_order(in_dir))
        elif path.exists():
            leg, group = _leg_and_group(path, None)
            found.append(_Found(path, load_results(path), leg, group))
        else:
            raise BadInput(f"{path}: no such file or directory")
    return _label(found), skipped


def _label(found: list[_Found]) -> list[Run]:
    def base(f: _Found) -> str:
        if f.results is None:
            return f"{f.leg} (missing) · {f.group}"
        parts = [f.results.run.device]
        version = _torch_version(f.results)
        if version:
            parts.append(f"torch {version}")
        parts.append(f.leg)
        return " · ".join(parts)

    labels = [base(f) for f in found]
    counts: dict[str, int] = {}
    for label in labels:
        counts[label] = counts.get(label, 0) + 1
    runs: list[Run] = []
    for f, label in zip(found, labels, strict=True):
        if counts[label] > 1:
            label = f"{label} · {f.group}"
        runs.append(
            Run(label=label, leg=f.leg, group=f.group, source=str(f.path), results=f.results)
        )
    # Still ambiguous (same leg and group twice): number them.
    seen: dict[str, int] = {}
    unique: list[Run] = []
    for run in runs:
        seen[run.label] = seen.get(run.label, 0) + 1
        if seen[run.label] > 1:
            run = Run(
                label=f"{run.label} #{seen[run.label]}",
                leg=run.leg,
                group=run.group,
                source=run.source,
                results=run.results,
            )
        unique.append(run)
    return unique


# ---------------------------------------------------------------------------------------
# The report as data


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


@dataclass(frozen=True)
class Report:
    runs: tuple[Run, ...]
    cases: tuple[CaseRow, ...]
    metrics: tuple[MetricRow, ...]
    skipped_inputs: tuple[str, ...] = ()
    counts: tuple[dict[str, dict[str, int]], ...] = field(default=())
    """Per run: suite -> status -> number of cases."""

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
                {"suite": c.suite, "case": c.case, "statuses": list(c.statuses)} for c in self.cases
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
                        }
                        for c in m.cells
                    ],
                }
                for m in self.metrics
            ],
            "skipped_inputs": list(self.skipped_inputs),
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
            and (p75 - p25) / abs(metric.value) >= 0.10
        )
    return Cell(
        value=metric.value,
        p25=p25,
        p75=p75,
        samples=len(metric.samples),
        noisy=noisy,
        peak_fraction=float(fraction) if isinstance(fraction, (int, float)) else None,
        peak_source=str(source) if source is not None else None,
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
    """`discover` then `build_report`: BadInput for unreadable input."""
    runs, skipped = discover(paths)
    return build_report(runs, skipped)


# ---------------------------------------------------------------------------------------
# Formatting shared by Markdown and HTML


def format_cell(cell: Cell | None, unit: str) -> str:
    if cell is None:
        return "—"
    text = format_value(cell.value, unit)
    if cell.peak_fraction is not None:
        which = "measured peak" if cell.peak_source == "measured" else "peak"
        text += f" ({cell.peak_fraction:.1%} of {which})"
    if cell.noisy:
        text += " ~"
    return text


def status_summary(counts: dict[str, int]) -> str:
    parts = [f"{counts[s]} {s}" for s in STATUSES if counts.get(s)]
    return ", ".join(parts) if parts else "no cases"


def _interesting_cases(report: Report, suite: str) -> list[CaseRow]:
    """Perf: every case. Conformance: only cases not passing in some run that has results
    (absent from it, or another status); the rest are only counted."""
    rows = [c for c in report.cases if c.suite == suite]
    if suite == "perf":
        return rows
    present = [i for i, run in enumerate(report.runs) if not run.missing]
    return [c for c in rows if any(c.statuses[i] != "passed" for i in present)]


def _md(text: str, limit: int = _MESSAGE_CHARS) -> str:
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("`", "\\`")


# ---------------------------------------------------------------------------------------
# Markdown


def render_markdown(report: Report, *, max_bytes: int = MARKDOWN_LIMIT_BYTES - 1024) -> str:
    """A summary for $GITHUB_STEP_SUMMARY; never longer than `max_bytes` (UTF-8)."""
    runs = report.runs
    lines = ["## accelkit report", ""]
    missing = sum(r.missing for r in runs)
    lines.append(
        f"{len(runs)} runs" + (f"; {missing} produced no results" if missing else "") + "."
    )
    lines.append("")
    header = "| run | device | torch | started | " + " | ".join(SUITES) + " |"
    lines += [header, "|" + "---|" * (4 + len(SUITES))]
    for run, counts in zip(runs, report.counts, strict=True):
        if run.missing:
            lines.append(
                f"| {_md(run.label)} | — | — | — | "
                + " | ".join(["**missing**"] * len(SUITES))
                + " |"
            )
            continue
        summaries = [status_summary(counts[s]) if s in counts else "—" for s in SUITES]
        lines.append(
            f"| {_md(run.label)} | {_md(run.device_name or run.device)} | "
            f"{_md(run.torch_version or '?')} | {_md(run.started[:19])} | "
            + " | ".join(summaries)
            + " |"
        )
    lines.append("")
    columns = " | ".join(_md(r.label, 60) for r in runs)
    separator = "|" + "---|" * (2 + len(runs))
    for suite in report.suites():
        metrics = [m for m in report.metrics if m.suite == suite]
        if metrics:
            lines += [f"### {suite}: metrics", "", f"| case | metric | {columns} |", separator]
            for m in metrics:
                row = " | ".join(_md(format_cell(c, m.unit), 80) for c in m.cells)
                lines.append(f"| {_md(m.case)} | {_md(m.metric)} ({_md(m.unit)}) | {row} |")
            lines.append("")
        cases = [c for c in _interesting_cases(report, suite) if c.suite == suite]
        if cases:
            title = "cases" if suite == "perf" else "cases not passing everywhere"
            lines += [
                f"### {suite}: {title}",
                "",
                f"| case | {columns} |",
                "|" + "---|" * (1 + len(runs)),
            ]
            for c in cases:
                row = " | ".join(
                    _md(s or "—")
                    + (f": {_md(msg, 80)}" if s not in ("passed", None) and msg else "")
                    for s, msg in zip(c.statuses, c.messages, strict=True)
                )
                lines.append(f"| {_md(c.case)} | {row} |")
            lines.append("")
    lines.append("`~` marks a noisy metric (IQR/median at least 10%); — means absent.")
    if report.skipped_inputs:
        lines += ["", f"{len(report.skipped_inputs)} JSON files skipped (not results files)."]
    return _cap("\n".join(lines) + "\n", max_bytes)


def _cap(text: str, max_bytes: int) -> str:
    if len(text.encode("utf-8")) <= max_bytes:
        return text
    kept: list[str] = []
    size = 0
    lines = text.split("\n")
    for line in lines:
        size += len(line.encode("utf-8")) + 1
        if size > max_bytes - 300:
            break
        kept.append(line)
    dropped = len(lines) - len(kept)
    return "\n".join(kept) + (
        f"\n\n_Truncated: {dropped} more lines (the summary is limited to {max_bytes} "
        "bytes); see the HTML report or `accelkit report --json`._\n"
    )


# ---------------------------------------------------------------------------------------
# Plots (matplotlib, rendered to inline SVG)


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


def _scale(values: Iterable[float], unit: str) -> tuple[float, str]:
    finite = [abs(v) for v in values if math.isfinite(v)]
    top = max(finite) if finite else 0.0
    if unit.endswith("/s"):
        for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
            if top >= scale:
                return scale, f"{prefix}{unit}"
    if unit == "s" and 0 < top < 1:
        for scale, prefix in ((1e-3, "m"), (1e-6, "µ"), (1e-9, "n")):
            if top >= scale:
                return scale, f"{prefix}s"
    return 1.0, unit


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


def render_plots(report: Report, *, max_plots: int = 200) -> list[Plot]:
    """Bar charts (metric per run) and, with history, trends with the IQR noise band."""
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
            scale, unit = _scale((c.value for c in values if c is not None), row.unit)
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
        plots.extend(_trend_plots(report, leg_color, max_plots - len(plots)))
    return plots


def _trend_plots(report: Report, leg_color: dict[str, str], budget: int) -> list[Plot]:
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
            scale, unit = _scale(all_values, row.unit)
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


# ---------------------------------------------------------------------------------------
# HTML

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
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def render_html(
    report: Report, *, plots: Sequence[Plot] | None = None, plots_note: str | None = None
) -> str:
    """One self-contained HTML page: tables and the given inline-SVG plots."""
    runs = report.runs
    out: list[str] = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>accelkit report</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>accelkit report</h1>",
        f'<p class="note">{len(runs)} runs. Values are medians; ~ marks a noisy metric '
        "(IQR/median at least 10%); percentages are fractions of the device's peak "
        "(table or measured, as noted).</p>",
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
    head = "".join(f"<th>{_e(r.label)}</th>" for r in runs)
    for suite in report.suites():
        metrics = [m for m in report.metrics if m.suite == suite]
        if metrics:
            out.append(f'<h2 id="{_e(suite)}-metrics">{_e(suite)}: metrics</h2>')
            out.append(f'<div class="wrap"><table class="metrics" data-suite="{_e(suite)}">')
            out.append(f"<thead><tr><th>case</th><th>metric</th><th>unit</th>{head}</tr></thead>")
            out.append("<tbody>")
            for m in metrics:
                cells: list[str] = []
                for cell in m.cells:
                    css = "num noisy" if cell is not None and cell.noisy else "num"
                    title = ""
                    if cell is not None:
                        title = f"{cell.samples} samples"
                        if cell.p25 is not None and cell.p75 is not None:
                            title += (
                                f"; IQR {format_value(cell.p25, m.unit)} to "
                                f"{format_value(cell.p75, m.unit)}"
                            )
                        if cell.peak_source:
                            title += f"; peak: {cell.peak_source}"
                    cells.append(
                        f'<td class="{css}" title="{_e(title)}">'
                        f"{_e(format_cell(cell, m.unit))}</td>"
                    )
                direction = "higher is better" if m.higher_is_better else "lower is better"
                out.append(
                    f"<tr><td>{_e(m.case)}</td><td>{_e(m.metric)}</td>"
                    f'<td title="{direction}">{_e(m.unit)}</td>{"".join(cells)}</tr>'
                )
            out.append("</tbody></table></div>")
        cases = _interesting_cases(report, suite)
        title = "cases" if suite == "perf" else "cases not passing everywhere"
        out.append(f'<h2 id="{_e(suite)}-cases">{_e(suite)}: {title}</h2>')
        if not cases:
            out.append('<p class="note">Every case passed in every run.</p>')
            continue
        out.append(f'<div class="wrap"><table class="cases" data-suite="{_e(suite)}">')
        out.append(f"<thead><tr><th>case</th>{head}</tr></thead><tbody>")
        for c in cases:
            status_cells: list[str] = []
            for status, message in zip(c.statuses, c.messages, strict=True):
                css = status or "missing"
                text = status or "—"
                status_cells.append(
                    f'<td class="{_e(css)}" title="{_e(message[:2000])}">{_e(text)}</td>'
                )
            out.append(f"<tr><td>{_e(c.case)}</td>{''.join(status_cells)}</tr>")
        out.append("</tbody></table></div>")
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


def render_html_with_plots(report: Report) -> tuple[str, str | None]:
    """The HTML page with plots when matplotlib is installed; else without, and why."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        note = "Plots need matplotlib (pip install matplotlib); this page has tables only."
        return render_html(report, plots_note=note), note
    return render_html(report, plots=render_plots(report)), None
