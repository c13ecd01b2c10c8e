"""What every view says alike (accelkit.results.render.text): how a perf metric was measured."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from accelkit.results.compare import Comparison, compare
from accelkit.results.model import MeasurementMethod, Results
from accelkit.results.render.html import report_html
from accelkit.results.render.markdown import report_markdown
from accelkit.results.render.terminal import PLAIN_WIDTH, print_comparison
from accelkit.results.render.text import method_text, methods_text
from accelkit.results.render.units import format_bytes
from accelkit.results.report.discover import Run
from accelkit.results.report.model import build_report
from tests.factories import case, results, sampled_metric

ROTATED = MeasurementMethod(
    timer="perf_counter", threads=1, cache="rotated", input_sets=8, input_bytes=4456448
)
REUSED = MeasurementMethod(timer="cuda events", cache="reused")
SAID = "inputs rotated through 4.25 MiB (8 sets); perf_counter; 1 thread"


def test_the_method_in_one_line() -> None:
    assert method_text(ROTATED) == SAID
    assert method_text(REUSED) == "inputs reused (warm caches); cuda events; torch's threads"
    assert method_text(ROTATED.model_copy(update={"threads": 4})).endswith("; 4 threads")
    assert method_text(None) == ""
    assert methods_text([ROTATED, None, ROTATED]) == SAID
    assert methods_text([ROTATED, REUSED]) == SAID + " / " + method_text(REUSED)
    assert [format_bytes(n) for n in (512, 8 << 20, 3 << 30, None)] == [
        "512 B",
        "8 MiB",
        "3 GiB",
        "-",
    ]


def _run(latency: float, method: MeasurementMethod | None, seed: int = 0) -> Results:
    extra: dict[str, Any] = {"method": method} if method is not None else {}
    gemm = sampled_metric(latency, seed=seed, **extra)
    return results([case("perf/gemm/float32/16x512x256", metrics={"latency": gemm})])


def _terminal(comparison: Comparison) -> str:
    out = io.StringIO()
    console = Console(file=out, width=PLAIN_WIDTH, no_color=True, highlight=False)
    print_comparison(console, comparison)
    return out.getvalue()


def test_the_terminal_table_and_the_report_say_how_it_was_measured() -> None:
    base, new = _run(1e-3, ROTATED), _run(1e-3, ROTATED, seed=1)
    assert "measured" in _terminal(compare(base, new)) and SAID in _terminal(compare(base, new))
    report = build_report(
        [Run(label=n, leg=n, group="", source=n, results=r) for n, r in (("a", base), ("b", new))]
    )
    assert f"| {SAID} |" in report_markdown(report)
    assert "<th>measured</th>" in report_html(report) and SAID in report_html(report)


def test_files_before_the_field_show_no_measured_column() -> None:
    base, new = _run(1e-3, None), _run(1e-3, None, seed=1)
    assert "measured" not in _terminal(compare(base, new))
    report = build_report(
        [Run(label=n, leg=n, group="", source=n, results=r) for n, r in (("a", base), ("b", new))]
    )
    assert "measured" not in report_markdown(report)
    assert "<th>measured</th>" not in report_html(report)
