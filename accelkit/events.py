"""Progress events: what the suite runner, the container path and the matrix rehearsal report
while they work, and what the CLI renders. One JSON-able mapping per event, keyed by "event":

- suite runs (the pytest plugin, `accelkit.suite.run.runner`, `accelkit.suite.run.container`):
  `plan` {suites, passes, workers, sides, seed} once first and `session` {suite, pass,
  label} before each pytest session (`accelkit.suite.run.run_plan`), `collected` {total},
  `start` {id}, `case` {case}; measurement passes add `pass` {pass, passes, total} and
  `pass_case` {pass, case}. `accelkit.cli.progress` renders them, one view for the run;
- the rehearsal (`accelkit.matrix.rehearse`), per leg: `leg-start`, `setup-line` {line},
  `setup-done` {image, cached}, `shard-start` {shard} (a sharded leg, before each shard's
  run), `leg-done` {outcome}, and the leg's suite events.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Event = dict[str, Any]
EventCallback = Callable[[Event], None]


def ignore(event: Event) -> None:
    """An EventCallback that drops every event."""
