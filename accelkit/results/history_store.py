"""The results history's store: every nightly's results kept beyond the artifacts' 30 days,
in a folder the nightly commits to the repository's `results` branch (`accelkit matrix
record`), read by `accelkit report --history` (`accelkit.results.report.trends`).

Layout (plain files, so `git log` and any script can read them):

    index.json                           the nights, oldest first (schema below)
    nights/<night>/<leg>/results.json    each leg's results file, as the leg wrote it

    {"schema": "accelkit.history/1",
     "nights": [{"night": "2026-03-02-r123", "started": "2026-03-02T02:17:00+00:00",
                 "run_id": 8123456789, "run_number": 123, "sha": "0a1b...",
                 "legs": {"cpu-py3.12": {
                              "results": "nights/2026-03-02-r123/cpu-py3.12/results.json",
                              "state": "red",
                              "metric_verdicts": {"perf/gemm · latency": "regressed"}},
                          "xpu2025.3-pvc-py3.12": {"results": null, "state": "red"}}}]}

`state` and `metric_verdicts` are the night's verdict against the night before
(accelkit.results.nightly): a report marks the nights where they changed. A night is
recorded once; recording it again is refused, so a re-run cannot rewrite history.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from accelkit.errors import BadInput
from accelkit.results.io import load_results

SCHEMA = "accelkit.history/1"
INDEX = "index.json"
NIGHTS = "nights"
RESULTS_FILE = "results.json"
_LEG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


@dataclass(frozen=True)
class LegRecord:
    results: str | None
    """The results file, relative to the store; None when the leg produced none."""
    state: str | None = None
    """red, green, no-baseline, stale-baseline; None when no verdict was recorded."""
    metric_verdicts: Mapping[str, str] = field(default_factory=dict)
    """`case · metric` -> regressed or improved (the others were unchanged or noisy)."""


@dataclass(frozen=True)
class Night:
    night: str
    started: str
    run_id: int | None
    run_number: int | None
    sha: str | None
    legs: Mapping[str, LegRecord]

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "night": self.night,
            "started": self.started,
            "run_id": self.run_id,
            "run_number": self.run_number,
            "sha": self.sha,
            "legs": {
                name: {
                    "results": leg.results,
                    "state": leg.state,
                    "metric_verdicts": dict(leg.metric_verdicts),
                }
                for name, leg in self.legs.items()
            },
        }


def load_index(store: Path) -> list[Night]:
    """The nights of a history folder, oldest first (BadInput when it is not one)."""
    path = store / INDEX
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BadInput(
            f"{store}: no {INDEX}, not a results history (`accelkit matrix record` writes one)"
        ) from None
    except (OSError, ValueError) as exc:
        raise BadInput(f"{path}: {exc}") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise BadInput(f"{path}: not an {SCHEMA} index")
    nights: list[Night] = []
    try:
        for item in data["nights"]:
            legs = {
                str(name): LegRecord(
                    results=leg.get("results"),
                    state=leg.get("state"),
                    metric_verdicts=dict(leg.get("metric_verdicts") or {}),
                )
                for name, leg in item["legs"].items()
            }
            nights.append(
                Night(
                    night=str(item["night"]),
                    started=str(item["started"]),
                    run_id=item.get("run_id"),
                    run_number=item.get("run_number"),
                    sha=item.get("sha"),
                    legs=legs,
                )
            )
    except (KeyError, TypeError, AttributeError) as exc:
        raise BadInput(f"{path}: malformed night entry ({exc})") from None
    return sorted(nights, key=lambda n: (n.started, n.night))


def _write_index(store: Path, nights: list[Night]) -> None:
    text = json.dumps(
        {"schema": SCHEMA, "nights": [n.to_json_dict() for n in nights]}, indent=1, sort_keys=True
    )
    temp = store / f".{INDEX}.tmp"
    temp.write_text(text + "\n", encoding="utf-8")
    os.replace(temp, store / INDEX)


def _verdict_legs(verdict: Mapping[str, Any] | None) -> dict[str, Mapping[str, Any]]:
    if verdict is None:
        return {}
    legs = verdict.get("legs")
    if not isinstance(legs, list):
        raise BadInput("--verdict: not the JSON of `accelkit matrix compare --json`")
    return {str(leg["name"]): leg for leg in legs if isinstance(leg, dict) and "name" in leg}


def record_night(
    store: Path,
    results_dir: Path,
    *,
    verdict: Mapping[str, Any] | None = None,
    run_id: int | None = None,
    run_number: int | None = None,
    sha: str | None = None,
) -> Night:
    """Copy tonight's leg results (RESULTS/<leg>/results.json) into the history and add the
    night to its index, with each leg's verdict. BadInput for bad input; nothing is written
    then."""
    if not results_dir.is_dir():
        raise BadInput(f"--results {results_dir}: not a directory")
    store.mkdir(parents=True, exist_ok=True)
    nights = load_index(store) if (store / INDEX).exists() else []
    found: dict[str, Path] = {}
    for path in sorted(results_dir.glob(f"*/{RESULTS_FILE}")):
        if not _LEG.fullmatch(path.parent.name):
            raise BadInput(f"{path.parent}: not a leg name")
        found[path.parent.name] = path
    judged = _verdict_legs(verdict)
    if not found and not judged:
        raise BadInput(f"{results_dir}: no <leg>/{RESULTS_FILE} and no verdict to record")
    loaded = {name: load_results(path) for name, path in found.items()}  # BadInput if invalid
    starts = sorted(r.run.started for r in loaded.values())
    started = starts[0] if starts else datetime.now().astimezone().isoformat(timespec="seconds")
    night_id = started[:10] + (f"-r{run_number}" if run_number is not None else "")
    if any(n.night == night_id for n in nights) or (store / NIGHTS / night_id).exists():
        raise BadInput(f"night {night_id} is already in {store}: a night is recorded once")
    legs: dict[str, LegRecord] = {}
    for name in sorted(set(found) | set(judged)):
        record = judged.get(name, {})
        relative = None
        if name in found:
            relative = f"{NIGHTS}/{night_id}/{name}/{RESULTS_FILE}"
            target = store / relative
            target.parent.mkdir(parents=True)
            shutil.copyfile(found[name], target)
        legs[name] = LegRecord(
            results=relative,
            state=record.get("state"),
            metric_verdicts=dict(record.get("metric_verdicts") or {}),
        )
    night = Night(night_id, started, run_id, run_number, sha, legs)
    nights.append(night)
    _write_index(store, sorted(nights, key=lambda n: (n.started, n.night)))
    return night
