"""The words and numbers every view of the results shares: terminal, Markdown and HTML say
the same thing in the same way.

    format_ratio(m)      ->  1.300x (+30.0%)
    format_ci(m)         ->  [1.262, 1.341]
    band_text(m)         ->  1.300x [1.262, 1.341] regressed
    format_cell(c, "s")  ->  1.3 ms (12.0% of peak) ~
    status_summary(...)  ->  3 passed, 1 failed
    method_text(method)  ->  inputs rotated through 4.25 MiB (8 sets); perf_counter; 1 thread

Pure functions of the models (`accelkit.results.compare`, `accelkit.results.report`); none
decides a verdict.
"""

from __future__ import annotations

from collections.abc import Sequence

from accelkit.results import canary
from accelkit.results.compare import CANARY_PREFIX, Comparison, MetricComparison
from accelkit.results.model import STATUSES, MeasurementMethod
from accelkit.results.render.units import format_bytes, format_value
from accelkit.results.report.model import Cell, Report, present_runs, skipped_everywhere
from accelkit.results.report.verdicts import CanaryState, RunComparison

_SEVERITY = ("regressed", "improved", "environment-shifted", "noisy", "missing", "unchanged")


def metrics_by_severity(comparison: Comparison) -> list[MetricComparison]:
    """Regressions first, then improvements, environment-shifted, noisy, missing, unchanged;
    stable within."""
    return sorted(comparison.metrics, key=lambda m: _SEVERITY.index(m.verdict))


def format_ratio(metric: MetricComparison) -> str:
    if metric.ratio is None:
        return "-"
    return f"{metric.ratio:.3f}x ({(metric.ratio - 1.0) * 100:+.1f}%)"


def format_ci(metric: MetricComparison) -> str:
    if metric.ci is None:
        return "-"
    return f"[{metric.ci[0]:.3f}, {metric.ci[1]:.3f}]"


def canary_summary(comparison: Comparison) -> str | None:
    """One line naming each canary, its verdict and how far it moved, with the band, for
    every view's summary: `canaries (±3%): perf/canary/host/gemm environment-shifted (moved)
    1.067x [1.022, 1.097]; perf/canary/host/copy unchanged 1.019x [0.994, 1.041]`; None
    when neither run has canaries."""
    parts = []
    for m in comparison.canaries():
        if m.ratio is None or m.ci is None:
            parts.append(f"{m.case} {m.metric} {m.verdict}")
            continue
        moved = " (moved)" if canary.interval_moved(m.ci, comparison.threshold) else ""
        parts.append(f"{m.case} {m.metric} {m.verdict}{moved} {format_ratio(m)} {format_ci(m)}")
    if not parts:
        return None
    return f"canaries (band ±{comparison.threshold:.0%}): " + "; ".join(parts)


def band_text(m: MetricComparison) -> str:
    """The verdict with the band it used, in one line: ratio, interval, and where a canary
    moved, the interval relative to the machine and the canary's name."""
    if m.ratio is None or m.ci is None:
        return m.verdict
    text = f"{m.ratio:.3f}x [{m.ci[0]:.3f}, {m.ci[1]:.3f}] {m.verdict}"
    if m.canary is not None and m.relative_ci is not None:
        low, high = m.relative_ci
        text += f"; vs machine [{low:.3f}, {high:.3f}] ({m.canary.removeprefix(CANARY_PREFIX)})"
    return text


def canary_state_text(state: CanaryState | None) -> str:
    if state is None:
        return ""
    m = state.comparison
    assert m.ci is not None and m.ratio is not None
    # The comparison's own verdict, the word the terminal, Markdown and JSON use too.
    word = f"moved, {m.verdict}" if state.moved else m.verdict
    return f"{word}: {m.ratio:.3f}x [{m.ci[0]:.3f}, {m.ci[1]:.3f}]"


def iqr_share(cell: Cell | None) -> str | None:
    """The interquartile range as a share of the median ("IQR 2.1%"), or None."""
    if cell is None or cell.p25 is None or cell.p75 is None or not cell.value:
        return None
    return f"IQR {(cell.p75 - cell.p25) / abs(cell.value):.1%}"


def spread_text(cell: Cell | None, unit: str) -> str:
    """A cell's value with its interquartile range (the noise within the run)."""
    if cell is None:
        return "—"
    text = format_value(cell.value, unit)
    if cell.p25 is not None and cell.p75 is not None:
        text += f" (IQR {format_value(cell.p25, unit)} to {format_value(cell.p75, unit)})"
    return text


def legend(report: Report, comparisons: Sequence[RunComparison | None]) -> str | None:
    """One sentence naming each compared run's baseline and the band, or None."""
    pairs = [
        f"{report.runs[c.run].label} against {report.runs[c.baseline].label}"
        + (
            f" (different {', '.join(d.label for d in c.comparison.environment)})"
            if c.comparison.environment
            else ""
        )
        for c in comparisons
        if c is not None
    ]
    if not pairs:
        return None
    first = next(c for c in comparisons if c is not None).comparison
    return (
        f"Compared ({', '.join(pairs)}): ratio new/base, its "
        f"{first.confidence:.0%} confidence interval and the verdict (a change within "
        f"±{first.threshold:.0%} is unchanged); where a canary moved, the interval with the "
        "machine's largest effect taken out and the canary it was judged against."
    )


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


def skipped_everywhere_line(report: Report, suite: str) -> str | None:
    """`216 cases skipped in every run, not listed (most often: "no CUDA device" (120), ...)`,
    or None when there are none."""
    rows = skipped_everywhere(report, suite)
    if not rows:
        return None
    present = present_runs(report)
    reasons: dict[str, int] = {}
    for row in rows:
        first = (row.messages[present[0]] or "no reason given").splitlines()[0][:120]
        reasons[first] = reasons.get(first, 0) + 1
    common = sorted(reasons.items(), key=lambda item: -item[1])[:3]
    listed = ", ".join(f'"{reason}" ({count})' for reason, count in common)
    return f"{len(rows)} cases skipped in every run, not listed (most often: {listed})"


def method_text(method: MeasurementMethod | None) -> str:
    """How a perf metric was measured, in one line: `inputs rotated through 4.25 MiB (8
    sets); perf_counter; 1 thread`, or `inputs reused (warm caches); cuda events; torch's
    threads`; empty where the file does not say (files before `Metric.method`)."""
    if method is None:
        return ""
    if method.cache == "rotated":
        spread = f"{format_bytes(method.input_bytes)} " if method.input_bytes else ""
        cache = f"inputs rotated through {spread}({method.input_sets} sets)"
    else:
        cache = "inputs reused (warm caches)"
    if method.threads is None:
        threads = "torch's threads"
    else:
        threads = f"{method.threads} thread" + ("" if method.threads == 1 else "s")
    return f"{cache}; {method.timer}; {threads}"


def methods_text(methods: Sequence[MeasurementMethod | None]) -> str:
    """The distinct ways the runs measured one metric, joined by " / " (runs that measured
    alike say it once); empty when none says."""
    return " / ".join(text for text in dict.fromkeys(map(method_text, methods)) if text)
