"""The events that tell the progress view (`accelkit.cli.progress`) what a run will do
before it does it: `plan` once at the start, `session` before each pytest session collects.

- `plan` {suites, passes, workers {suite: n}, sides, seed {suite: [cases, seconds a case]}};
- `session` {suite, pass, label}.
"""

from __future__ import annotations

import contextlib

from accelkit.events import Event
from accelkit.suite.run.request import RunRequest


def plan_event(
    request: RunRequest,
    phases: list[tuple[tuple[str, ...], int]],
    sides: tuple[str, ...] = ("",),
) -> Event:
    """The run's `plan` event: its suites, perf passes, sessions' workers and sides, and,
    with --durations-from, each suite's cases and mean seconds a case (per pass) in that
    file, which seed the progress view's total and time left before this run has its own."""
    seed: dict[str, tuple[int, float]] = {}
    if request.durations_from is not None:
        from accelkit.results.io import load_results

        with contextlib.suppress(Exception):  # only an estimate: validate() read it already
            previous = load_results(request.durations_from)
            passes = max(1, previous.run.passes or 1)
            shards = int(request.shard.split("/")[1]) if request.shard else 1  # this shard's part
            for suite in ("conformance", "perf"):
                cases = [c for c in previous.cases if c.suite == suite]
                if cases:
                    seconds = sum(c.duration_s for c in cases) / (passes if suite == "perf" else 1)
                    seed[suite] = (max(1, len(cases) // shards), seconds / len(cases))
    return {
        "event": "plan",
        "suites": [suite for suites, _ in phases for suite in suites],
        "passes": request.passes if "perf" in request.suites else 1,
        "workers": {suites[0]: max(1, workers) for suites, workers in phases},
        "sides": list(sides),
        "seed": seed,
    }


def session_event(suite: str, number: int, passes: int) -> Event:
    """A pytest session starts (and collects before its `collected`/`pass` event)."""
    label = f"{suite} cases" + (f" (perf pass {number}/{passes})" if suite == "perf" else "")
    return {"event": "session", "suite": suite, "pass": number, "label": label}
