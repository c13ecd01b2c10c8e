"""The progress of one `accelkit test` run: one model of the run's events, rendered in one
place, live on a terminal or as plain lines elsewhere.

`RunProgress` reads the events (`accelkit.events`) and keeps the run's stages in order: the
conformance session, then each perf pass (each its own process; with --ab each pass once per
side). The total is every stage's cases, counted up front where the run's `plan` event makes
them known: conformance cases + perf cases x passes. A stage not collected yet counts the
cases of the previous results file given with --durations-from (marked `~`), or, without
one, is named but not counted (the total ends in `+`).

The time left is `eta_s()`: per kind of case (conformance, perf), the wall time per case seen
so far in this run, times the cases left of that kind, plus the collection time of each
session still to start. Before a kind has finished enough cases to judge, the previous
results file's mean case duration stands in (divided by the workers of the session). With
neither, the estimate is a lower bound (`at_least`).

`LiveDisplay` (a terminal): one view for the whole run, a spinner while cases are collected,
one bar over the total with the stage (`perf pass 2/5`) inside it, and what comes next.
`PlainDisplay` (a pipe, a file, a CI log): no control characters; one line per finished case
(CI logs grep for them), one line per stage, and a progress line with the estimate at most
every `interval_s`, collection included.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from accelkit.events import Event

STATUS_STYLE = {
    "passed": "green",
    "failed": "bold red",
    "error": "bold red",
    "crashed": "bold magenta",
    "timeout": "bold yellow",
    "skipped": "dim",
}

MIN_OBSERVED_CASES = 5
"""A kind's own wall time per case is trusted from this many finished cases (or
`MIN_OBSERVED_S` of its busy time); before that the previous results file's, if any."""
MIN_OBSERVED_S = 5.0


@dataclass
class Stage:
    """One pytest session of the run: conformance, or one perf pass (of one side)."""

    kind: str  # "conformance" or "perf"
    number: int = 1  # the pass
    side: str = ""
    total: int | None = None  # collected cases; None until collected
    done: int = 0

    def label(self, passes: int) -> str:
        if self.kind == "conformance":
            return "conformance"
        text = f"perf pass {self.number}/{passes}"
        return text + (f" ({self.side.upper()})" if self.side else "")


@dataclass
class RunProgress:
    """The run as its events tell it; `clock` is injectable for tests."""

    clock: Callable[[], float] = time.monotonic
    stages: list[Stage] = field(default_factory=list)
    passes: int = 1
    workers: dict[str, int] = field(default_factory=dict)
    seed: dict[str, tuple[int, float]] = field(default_factory=dict)
    """kind -> (cases, mean seconds a case) from --durations-from."""
    counts: dict[str, int] = field(default_factory=dict)
    current_case: str = ""
    started: float = 0.0
    collecting_since: float | None = None
    collecting_what: str = ""
    _busy: dict[str, float] = field(default_factory=dict)
    _finished: dict[str, int] = field(default_factory=dict)
    _tick: dict[str, float] = field(default_factory=dict)
    _collect_times: list[float] = field(default_factory=list)
    _active: Stage | None = None
    _session: Stage | None = None

    def __post_init__(self) -> None:
        self.started = self.clock()

    # events ---------------------------------------------------------------------------
    def on_event(self, event: Event) -> None:
        kind = event.get("event")
        if kind == "plan":
            self._plan(event)
        elif kind == "session":
            self.collecting_since = self.clock()
            self.collecting_what = str(event.get("label") or "cases")
            self.current_case = ""
            self._session = self._stage(str(event.get("suite")), int(event.get("pass") or 1))
            for stage in self.stages[: self.stages.index(self._session)]:
                stage.total = 0 if stage.total is None else stage.total  # it had no cases
        elif kind == "collected":
            self._collected(self._session or self._stage_for_session(), int(event["total"]))
        elif kind == "pass":
            number = int(event["pass"])
            self.passes = max(self.passes, int(event.get("passes") or 1))
            stage = self._stage("perf", number, str(event.get("side") or ""))
            total = event.get("total")
            self._collected(stage, int(total) if total is not None else 0)
        elif kind == "start":
            self.current_case = str(event["id"])
        elif kind in ("case", "pass_case"):
            case = event["case"]
            stage = self._active or self._stage_for_session()
            if kind == "case":  # the counts are of cases; later passes repeat perf cases
                self.counts[case["status"]] = self.counts.get(case["status"], 0) + 1
                if str(case.get("suite") or "") in ("conformance", "perf"):
                    stage = self._stage_for_suite(str(case["suite"]), stage)
            stage.done += 1
            now = self.clock()
            what = stage.kind
            self._busy[what] = self._busy.get(what, 0.0) + now - self._tick.get(what, now)
            self._tick[what] = now
            self._finished[what] = self._finished.get(what, 0) + 1

    def _plan(self, event: Event) -> None:
        suites = [str(s) for s in event.get("suites") or ()]
        self.passes = int(event.get("passes") or 1)
        self.workers = {str(k): int(v) for k, v in (event.get("workers") or {}).items()}
        sides = [str(s) for s in event.get("sides") or ("",)]
        seed = event.get("seed") or {}
        self.seed = {str(k): (int(v[0]), float(v[1])) for k, v in seed.items() if v and v[0]}
        self.stages = []
        if "conformance" in suites:
            self.stages.append(Stage("conformance"))
        if "perf" in suites:
            for number in range(1, self.passes + 1):
                for side in sides:
                    self.stages.append(Stage("perf", number, side))

    def _stage(self, kind: str, number: int = 1, side: str = "") -> Stage:
        for stage in self.stages:
            if (stage.kind, stage.number, stage.side) == (kind, number, side):
                return stage
        stage = Stage(kind, number, side)
        self.stages.append(stage)
        return stage

    def _stage_for_session(self) -> Stage:
        """The first stage not collected yet (sessions run in the plan's order)."""
        for stage in self.stages:
            if stage.total is None:
                return stage
        return self._stage("conformance" if not self.stages else "perf", len(self.stages) + 1)

    def _stage_for_suite(self, suite: str, fallback: Stage) -> Stage:
        if fallback.kind == suite:
            return fallback
        for stage in self.stages:
            if stage.kind == suite and stage.number == 1 and stage.side in ("", "a"):
                return stage
        return fallback

    def _collected(self, stage: Stage, total: int) -> None:
        now = self.clock()
        if self.collecting_since is not None:
            self._collect_times.append(now - self.collecting_since)
        self.collecting_since = None
        self._session = None
        stage.total = total
        self._active = stage
        self._tick[stage.kind] = now

    # what it says -----------------------------------------------------------------------
    @property
    def active(self) -> Stage | None:
        return self._active

    def done(self) -> int:
        return sum(stage.done for stage in self.stages)

    def _expected(self, stage: Stage) -> int | None:
        """A stage's cases: collected, else the run's best guess, else None."""
        if stage.total is not None:
            return stage.total
        if stage.kind == "perf":
            later = [s.total for s in self.stages if s.kind == "perf" and s.total is not None]
            if stage.number > 1:  # later passes run what the last pass did (no single-pass)
                later = [
                    s.total
                    for s in self.stages
                    if s.kind == "perf" and s.number > 1 and s.total is not None
                ] or later
            if later:
                return later[-1]
        if stage.kind in self.seed:
            return self.seed[stage.kind][0]
        return None

    def _settled(self, stage: Stage) -> bool:
        """A later pass runs what the pass before it ran (every later pass leaves out the
        same single-pass cases): once one later pass is collected, the others are known."""
        return stage.kind == "perf" and any(
            s.kind == "perf" and s.number > 1 and s.total is not None for s in self.stages
        )

    def total(self) -> tuple[int, str]:
        """(cases counted, mark): mark is "" when every stage is collected or settled, "~"
        when some are estimated, "+" when some are not counted at all."""
        counted, mark = 0, ""
        for stage in self.stages:
            expected = self._expected(stage)
            if expected is None:
                mark = "+"
                continue
            counted += expected
            if stage.total is None and mark != "+" and not self._settled(stage):
                mark = "~"
        return counted, mark

    def seconds_per_case(self, kind: str) -> float | None:
        """Wall seconds a case of this kind takes in this run (its sessions' workers
        included); the previous results file's until enough has been seen."""
        finished = self._finished.get(kind, 0)
        busy = self._busy.get(kind, 0.0)
        enough = finished >= MIN_OBSERVED_CASES or (finished and busy >= MIN_OBSERVED_S)
        if enough or (finished and kind not in self.seed):
            return busy / finished
        if kind in self.seed:
            return self.seed[kind][1] / max(1, self.workers.get(kind, 1))
        return None

    def eta_s(self) -> tuple[float | None, bool]:
        """(seconds left, at_least): None until something is known; at_least when a stage
        still to run could not be counted or timed, so the time is a lower bound."""
        left, at_least, known = 0.0, False, False
        collect = sum(self._collect_times) / len(self._collect_times) if self._collect_times else 0
        for stage in self.stages:
            expected = self._expected(stage)
            rate = self.seconds_per_case(stage.kind)
            if expected is None or rate is None:
                at_least = at_least or expected != stage.done
                continue
            known = True
            left += max(0, expected - stage.done) * rate
            if stage.total is None:
                left += collect
        if self.collecting_since is not None and self._collect_times:  # mid-collection
            left = max(0.0, left - min(collect, self.clock() - self.collecting_since))
        return (left, at_least) if known else (None, at_least)

    def elapsed_s(self) -> float:
        return self.clock() - self.started

    def upcoming(self) -> str:
        """The stages still to start after this one: `then perf pass 2-5/5, 27 cases each`."""
        pending = [s for s in self.stages if s.total is None]
        if self.collecting_since is not None or self._active is None:
            pending = pending[1:]  # the one being collected is shown as such
        described = self.describe(pending)
        return f"then {described}" if described else ""

    def describe(self, stages: list[Stage]) -> str:
        """`conformance, then perf pass 1-5/5, 27 cases each`."""
        parts: list[str] = []
        if any(s.kind == "conformance" for s in stages):
            parts.append("conformance")
        perf = [s for s in stages if s.kind == "perf"]
        if perf:
            numbers = sorted({s.number for s in perf})
            span = str(numbers[0]) if len(numbers) == 1 else f"{numbers[0]}-{numbers[-1]}"
            sides = " (A and B)" if any(s.side for s in perf) else ""
            count = self._expected(perf[-1])
            each = "" if count is None else f", {count} cases" + (" each" if len(perf) > 1 else "")
            parts.append(f"perf pass {span}/{self.passes}{sides}{each}")
        return ", then ".join(parts)

    def status_line(self) -> str:
        """One line: where the run is, the total, the time so far and the time left."""
        total, mark = self.total()
        done = self.done()
        stage = self.active
        if self.collecting_since is not None:
            waited = self.clock() - self.collecting_since
            where = f"collecting {self.collecting_what}... {waited:.0f} s"
        else:
            where = stage.label(self.passes) if stage is not None else "starting"
        percent = f" ({100 * done / total:.0f}%)" if total and mark != "+" else ""
        line = f"{where}: {done}/{total}{mark} cases{percent}, {clock(self.elapsed_s())} elapsed"
        return line + _eta_text(*self.eta_s(), prefix=", ")


def clock(seconds: float) -> str:
    """`1:05`, or `1:02:03` past an hour."""
    hours, rest = divmod(max(0, round(seconds)), 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def _eta_text(seconds: float | None, at_least: bool, *, prefix: str = "") -> str:
    if seconds is None or (at_least and seconds < 1):  # the rest is not timed yet
        return f"{prefix}time left: estimating" if not at_least else ""
    return f"{prefix}{'at least ' if at_least else 'about '}{clock(seconds)} left"


def _first_line(case: dict[str, Any], limit: int = 160) -> str:
    first = (case.get("message") or "").splitlines()[:1]
    return first[0][:limit] if first else ""


class PlainDisplay:
    """No terminal: plain lines (no control characters); see the module docstring."""

    def __init__(
        self, console: Any, *, interval_s: float = 30.0, progress: RunProgress | None = None
    ) -> None:
        self.console = console
        self.model = progress or RunProgress()
        self.interval_s = interval_s
        self._last_status = self.model.clock()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def __enter__(self) -> PlainDisplay:
        if self.interval_s > 0:
            self._ticker = threading.Thread(target=self._tick, daemon=True)
            self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=5)

    def _print(self, line: str) -> None:
        self.console.print(line, markup=False, highlight=False, soft_wrap=True)

    def _tick(self) -> None:
        while not self._stop.wait(min(1.0, self.interval_s)):
            with self._lock:
                self._status_if_due()

    def _status_if_due(self) -> None:
        now = self.model.clock()
        if now - self._last_status >= self.interval_s and self.model.stages:
            self._last_status = now
            self._print(f"progress: {self.model.status_line()}")

    def on_event(self, event: Event) -> None:
        with self._lock:
            self._on_event(event)

    def _on_event(self, event: Event) -> None:
        model = self.model
        model.on_event(event)
        kind = event.get("event")
        if kind == "plan":
            total, mark = model.total()
            counted = f" ({total}{mark} cases)" if total else ""
            self._print(f"plan: {model.describe(model.stages)}{counted}")
        elif kind == "session":
            self._print(f"collecting {model.collecting_what}...")
        elif kind == "collected":  # once per session: conformance, then perf's first pass
            total, mark = model.total()
            self._print(f"collected {event['total']} cases (run total {total}{mark})")
        elif kind == "pass":
            stage = model.active
            label = stage.label(model.passes) if stage else f"perf pass {event['pass']}"
            self._print(f"{label}: {event.get('total')} cases")
        elif kind == "pass_case":
            case = event["case"]
            if case["status"] not in ("passed", "skipped"):
                line = f"[pass {event['pass']}] {case['status'].upper():8} {case['id']}"
                detail = _first_line(case)
                self._print(line + (f"  ({detail})" if detail else ""))
        elif kind == "case":
            case = event["case"]
            total, mark = model.total()
            of = f"/{total}{mark}" if total else ""
            line = f"[{model.done()}{of}] {case['status'].upper():8} {case['id']}"
            detail = _first_line(case) if case["status"] != "passed" else ""
            self._print(line + (f"  ({detail})" if detail else ""))
        self._status_if_due()


class LiveDisplay:
    """A terminal: one rich live view of the whole run (see the module docstring)."""

    def __init__(self, console: Any, *, progress: RunProgress | None = None) -> None:
        from rich.live import Live
        from rich.spinner import Spinner

        self.console = console
        self.model = progress or RunProgress()
        self.spinner = Spinner("dots", style="cyan")
        self.live = Live(
            console=console, refresh_per_second=8, transient=True, get_renderable=self._render
        )

    def _render(self) -> Any:
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        model = self.model
        total, mark = model.total()
        done = model.done()
        stage = model.active
        if model.collecting_since is not None or stage is None:
            waited = model.clock() - (model.collecting_since or model.started)
            what = model.collecting_what if model.collecting_since is not None else "cases"
            where = f"collecting {what}... {waited:.0f} s"
        else:
            where = stage.label(model.passes)
        row = Table.grid(padding=(0, 1))
        row.add_column()
        row.add_column()
        row.add_column(width=30)
        row.add_column()
        eta = _eta_text(*model.eta_s())
        numbers = f"{done}/{total}{mark}" if total else f"{done}/?"
        row.add_row(
            self.spinner,
            Text(where, style="bold"),
            ProgressBar(total=float(total) if total else None, completed=float(done)),
            Text(f"{numbers}  {clock(model.elapsed_s())}" + (f"  {eta}" if eta else "")),
        )
        counts = Text()
        for status, style in STATUS_STYLE.items():
            if model.counts.get(status):
                counts.append(f"{status} {model.counts[status]}  ", style=style)
        lines: list[Any] = [row, counts]
        if model.upcoming():
            lines.append(Text(model.upcoming(), style="dim"))
        if model.current_case:
            lines.append(Text(f"running {model.current_case}", style="dim"))
        return Group(*lines)

    def __enter__(self) -> LiveDisplay:
        self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.__exit__(None, None, None)

    def on_event(self, event: Event) -> None:
        from rich.markup import escape

        self.model.on_event(event)
        if event.get("event") in ("case", "pass_case"):
            case = event["case"]
            if case["status"] not in ("passed", "skipped"):
                style = STATUS_STYLE[case["status"]]
                first = _first_line(case)
                prefix = f"[pass {event['pass']}] " if event.get("event") == "pass_case" else ""
                self.console.print(
                    f"{escape(prefix)}[{style}]{case['status'].upper()}[/] {escape(case['id'])}"
                    + (f"  [dim]{escape(first)}[/]" if first else ""),
                    highlight=False,
                )
        self.live.refresh()


def display_for(console: Any) -> PlainDisplay | LiveDisplay:
    """The run's display: live on a terminal, plain lines elsewhere (`console.make_console`
    decides which)."""
    from accelkit.cli.console import is_plain

    return PlainDisplay(console) if is_plain(console) else LiveDisplay(console)
