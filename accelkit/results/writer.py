"""The results file, kept valid on disk while a run adds cases to it.

Every update rewrites the whole file through a temp file and a rename, so a reader (or a run
killed at any moment) sees the previous complete version or the new one, never a torn file.
Cases are serialised once, when they are added, to keep each rewrite cheap.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path

from accelkit.results.io import atomic_write_text
from accelkit.results.model import Case, Results, Summary


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class ResultsWriter:
    """Adds cases to a results file on disk; `min_interval_s` bounds rewrite frequency.

    With a non-zero interval, passing cases may be held back for at most that long; any case
    that did not pass, and `finish()`, are always written at once.
    """

    def __init__(self, path: Path, header: Results, *, min_interval_s: float = 0.0) -> None:
        self.path = path
        self._header = header.model_copy(update={"cases": [], "summary": Summary()})
        self._cases: list[Case] = list(header.cases)
        self._encoded: list[str] = [self._encode(c) for c in self._cases]
        self._min_interval_s = min_interval_s
        self._last_write = 0.0
        self._dirty = False

    @staticmethod
    def _encode(case: Case) -> str:
        return json.dumps(case.model_dump(mode="json", exclude_none=True))

    @property
    def cases(self) -> list[Case]:
        return list(self._cases)

    def results(self) -> Results:
        return self._header.model_copy(
            update={"cases": list(self._cases), "summary": Summary.of(self._cases)}
        )

    def add(self, case: Case) -> None:
        self._cases.append(case)
        self._encoded.append(self._encode(case))
        self._dirty = True
        urgent = case.status not in ("passed", "skipped")
        if urgent or time.monotonic() - self._last_write >= self._min_interval_s:
            self.write()

    def update_run(self, **fields: object) -> None:
        """Change fields of the header's `run` (written with the next write)."""
        self._header = self._header.model_copy(
            update={"run": self._header.run.model_copy(update=fields)}
        )
        self._dirty = True

    def finish(self, finished: str | None = None) -> Results:
        self._header = self._header.model_copy(
            update={"run": self._header.run.model_copy(update={"finished": finished or now_iso()})}
        )
        self.write(durable=True)
        return self.results()

    def write(self, *, durable: bool = False) -> None:
        head = self._header.to_json_dict()
        head.pop("cases", None)
        head.pop("summary", None)
        summary = Summary.of(self._cases).model_dump(mode="json")
        head_text = json.dumps(head, indent=1)
        # Splice the pre-encoded cases into the object: `{..., "cases": [...], "summary": {...}}`.
        text = (
            head_text[:-1].rstrip()
            + ',\n "cases": [\n  '
            + ",\n  ".join(self._encoded)
            + '\n ],\n "summary": '
            + json.dumps(summary)
            + "\n}\n"
        )
        atomic_write_text(self.path, text, durable=durable)
        self._last_write = time.monotonic()
        self._dirty = False

    def flush(self) -> None:
        if self._dirty:
            self.write()
