"""The progress view's model (accelkit.cli.progress): the run's total with the perf passes
inside it, the time left, and the plain rendering's lines (no control characters)."""

from __future__ import annotations

import io
import re
from typing import Any

import pytest
from rich.console import Console

from accelkit.cli.progress import LiveDisplay, PlainDisplay, RunProgress, clock


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def plan(passes: int = 5, seed: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "event": "plan",
        "suites": ["conformance", "perf"],
        "passes": passes,
        "workers": {"conformance": 2, "perf": 1},
        "sides": [""],
        "seed": seed or {},
        **extra,
    }


def case(suite: str, index: int, status: str = "passed") -> dict[str, Any]:
    return {"event": "case", "case": {"id": f"{suite}/c{index}", "suite": suite, "status": status}}


def finish(model: RunProgress, tick: FakeClock, events: list[dict[str, Any]], dt: float) -> None:
    for event in events:
        tick.now += dt
        model.on_event(event)


def test_the_total_counts_every_perf_pass_once_the_perf_cases_are_collected() -> None:
    tick = FakeClock()
    model = RunProgress(clock=tick)
    model.on_event(plan(passes=5))
    model.on_event({"event": "session", "suite": "conformance", "pass": 1, "label": "x"})
    assert model.total() == (0, "+")  # nothing counted yet, and more to come
    model.on_event({"event": "collected", "total": 100})
    assert model.total() == (100, "+")  # perf not collected: named, not counted
    assert model.upcoming() == "then perf pass 1-5/5"
    finish(model, tick, [case("conformance", i) for i in range(100)], 0.1)
    model.on_event({"event": "session", "suite": "perf", "pass": 1, "label": "x"})
    model.on_event({"event": "collected", "total": 20})
    # conformance + perf x passes; passes 2-5 may leave out single-pass cases: about
    assert model.total() == (100 + 20 * 5, "~")
    assert model.upcoming() == "then perf pass 2-5/5, 20 cases each"
    finish(model, tick, [case("perf", i) for i in range(20)], 1.0)
    model.on_event({"event": "session", "suite": "perf", "pass": 2, "label": "x"})
    # Later passes leave out the single-pass cases: the pass says how many it runs.
    model.on_event({"event": "pass", "pass": 2, "passes": 5, "total": 18})
    assert model.total() == (100 + 20 + 18 * 4, "")
    assert model.active is not None and model.active.label(model.passes) == "perf pass 2/5"
    for i in range(3):
        model.on_event({"event": "pass_case", "pass": 2, "case": case("perf", i)["case"]})
    assert model.done() == 123
    assert model.counts == {"passed": 120}  # the counts are of cases, not of passes


def test_the_time_left_is_each_kinds_wall_time_a_case_times_the_cases_left() -> None:
    tick = FakeClock()
    model = RunProgress(clock=tick)
    model.on_event(plan(passes=3))
    assert model.eta_s() == (None, True)  # nothing known at all
    model.on_event({"event": "session", "suite": "conformance", "pass": 1, "label": "x"})
    tick.now += 10  # collection takes 10 s
    model.on_event({"event": "collected", "total": 100})
    finish(model, tick, [case("conformance", i) for i in range(50)], 0.2)
    # 50 conformance cases left at 0.2 s; perf not counted yet: a lower bound.
    left, at_least = model.eta_s()
    assert left == pytest.approx(50 * 0.2) and at_least
    finish(model, tick, [case("conformance", i) for i in range(50, 100)], 0.2)
    model.on_event({"event": "session", "suite": "perf", "pass": 1, "label": "x"})
    tick.now += 4
    model.on_event({"event": "collected", "total": 10})
    finish(model, tick, [case("perf", i) for i in range(5)], 2.0)
    # pass 1: 5 cases left at 2 s; passes 2 and 3: 10 cases at 2 s each, plus each one's
    # collection (the mean of the two seen: (10 + 4) / 2 = 7 s).
    left, at_least = model.eta_s()
    assert not at_least
    assert left == pytest.approx(5 * 2.0 + 2 * (10 * 2.0 + 7.0))
    # Mid-collection of pass 2, the collection time already spent is taken off.
    finish(model, tick, [case("perf", i) for i in range(5, 10)], 2.0)
    model.on_event({"event": "session", "suite": "perf", "pass": 2, "label": "x"})
    tick.now += 3
    left, _ = model.eta_s()
    assert left == pytest.approx(2 * (10 * 2.0 + 7.0) - 3)


def test_a_previous_results_file_seeds_the_total_and_the_time_left() -> None:
    tick = FakeClock()
    model = RunProgress(clock=tick)
    # conformance: 200 cases of 0.5 s (2 workers: 0.25 s of wall time a case); perf: 10 of 3 s
    model.on_event(plan(passes=2, seed={"conformance": [200, 0.5], "perf": [10, 3.0]}))
    assert model.total() == (200 + 10 * 2, "~")
    left, at_least = model.eta_s()
    assert left == pytest.approx(200 * 0.25 + 10 * 2 * 3.0) and not at_least
    model.on_event({"event": "session", "suite": "conformance", "pass": 1, "label": "x"})
    model.on_event({"event": "collected", "total": 150})
    assert model.total() == (150 + 10 * 2, "~")
    # This run's own rate replaces the seed once enough cases have finished.
    finish(model, tick, [case("conformance", i) for i in range(10)], 1.0)
    assert model.seconds_per_case("conformance") == pytest.approx(1.0)
    assert model.seconds_per_case("perf") == pytest.approx(3.0)


def test_a_selection_without_conformance_cases_does_not_wait_for_them() -> None:
    model = RunProgress(clock=FakeClock())
    model.on_event(plan(passes=1))
    model.on_event({"event": "session", "suite": "conformance", "pass": 1, "label": "x"})
    model.on_event({"event": "session", "suite": "perf", "pass": 1, "label": "x"})
    model.on_event({"event": "collected", "total": 4})
    assert model.total() == (4, "")
    assert model.active is not None and model.active.kind == "perf"


def test_clock() -> None:
    assert (clock(0), clock(65.4), clock(3723)) == ("0:00", "1:05", "1:02:03")


def a_run(display: Any, tick: FakeClock) -> None:
    display.on_event(plan(passes=2))
    display.on_event({"event": "session", "suite": "conformance", "pass": 1, "label": "c"})
    tick.now += 40  # a long collection: the plain view says it is still collecting
    display.on_event({"event": "collected", "total": 3})
    for i in range(3):
        display.on_event({"event": "start", "id": f"conformance/c{i}"})
        tick.now += 1
        display.on_event(case("conformance", i, "failed" if i == 1 else "passed"))
    display.on_event({"event": "session", "suite": "perf", "pass": 1, "label": "p"})
    display.on_event({"event": "collected", "total": 2})
    for i in range(2):
        tick.now += 20
        display.on_event(case("perf", i))
    display.on_event({"event": "session", "suite": "perf", "pass": 2, "label": "p2"})
    display.on_event({"event": "pass", "pass": 2, "passes": 2, "total": 2})
    for i in range(2):
        tick.now += 20
        display.on_event({"event": "pass_case", "pass": 2, "case": case("perf", i)["case"]})


def test_a_plain_run_prints_lines_without_control_characters_or_spinner_frames() -> None:
    out = io.StringIO()
    console = Console(file=out, width=4096, no_color=True, highlight=False)
    assert not console.is_terminal
    tick = FakeClock()
    display = PlainDisplay(console, interval_s=30, progress=RunProgress(clock=tick))
    with display:
        a_run(display, tick)
    text = out.getvalue()
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", text), repr(text)  # no ESC, no \r
    assert not re.search("[\u2800-\u28ff\u2500-\u259f]", text), text  # no spinner, no bar
    lines = text.splitlines()
    assert lines[0] == "plan: conformance, then perf pass 1-2/2"
    assert "collected 3 cases (run total 3+)" in lines
    assert "collected 2 cases (run total 7~)" in lines  # 3 + 2 x 2 passes
    assert "[5/7~] PASSED   perf/c1" in lines
    assert "perf pass 2/2: 2 cases" in lines
    # A progress line with the time left at most every 30 s (the 40 s collection: one).
    progress = [line for line in lines if line.startswith("progress: ")]
    assert progress and len(progress) <= 4, lines
    assert any("left" in line for line in progress), progress


def test_the_live_view_shows_the_pass_within_the_total() -> None:
    out = io.StringIO()
    console = Console(file=out, width=120, force_terminal=True, color_system=None)
    tick = FakeClock()
    display = LiveDisplay(console, progress=RunProgress(clock=tick))
    display.on_event(plan(passes=2))
    display.on_event({"event": "session", "suite": "conformance", "pass": 1, "label": "cc"})
    collecting = Console(file=io.StringIO(), width=120)
    collecting.print(display._render())
    assert "collecting cc... 0 s" in collecting.file.getvalue()  # type: ignore[attr-defined]
    a_run(display, tick)
    shown = Console(file=io.StringIO(), width=120)
    shown.print(display._render())
    view = shown.file.getvalue()  # type: ignore[attr-defined]
    assert "perf pass 2/2" in view and "7/7" in view, view
