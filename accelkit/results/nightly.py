"""A nightly against the night before: one verdict per leg (`judge_nightly`), rendered as
one summary (`accelkit.results.render.markdown.nightly_markdown`) by the workflow's report
job (`accelkit matrix compare`) and by its rehearsal (`accelkit matrix run --baseline`), so
both say the same thing about the same files.

The baseline of a leg is that leg's results in the most recent *completed* nightly, whatever
that run's conclusion: a red night is still last night. The workflow downloads that run's
merged results into BASELINE/<leg>/results.json, beside tonight's RESULTS/<leg>/results.json.

A leg is red when any of these holds:
- it produced no results file (setup failed, runner lost, cancelled);
- a case failed, errored, crashed or timed out. Cases the backend's expectations list
  (`accelkit/suite/expectations/<backend>.yaml`) run as expected failures and are recorded
  `skipped` with `known_failure`, so only listed failures keep a leg green;
- against its baseline: a metric regressed (`accelkit compare`'s verdict), or a case that
  ran last night is skipped tonight (newly skipped), unless as a listed known failure.

Named in the summary but not red by themselves: a leg without a baseline (a new leg, or one
that produced nothing last night), a baseline older than `max_age_hours` (measured between
the two results files' `run.started`), unexpected passes of listed failures (the list needs
an update), improvements.

An explore leg (`explore_seeds: N` in the matrix) writes findings, not results: FINDINGS/<leg>/
findings.json (`accelkit.results.findings`), never compared and never a baseline. Its
verdict (`judge_exploration`) is the exploration's, not its findings': red only when it
wrote no findings file (a seed's run could not finish: exit 2 or 3, the job is red too) or
one that does not read; otherwise `explored`, with its seeds and findings counted in the
summary, however many it found.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from accelkit.results.compare import Comparison, compare
from accelkit.results.findings import FINDINGS_SCHEMA
from accelkit.results.io import load_results
from accelkit.results.model import BAD_STATUSES, Results

RESULTS_FILE = "results.json"
FINDINGS_FILE = "findings.json"
#: A baseline older than this (two nights) is named: something kept the nights in between
#: from producing this leg's results.
DEFAULT_MAX_AGE_HOURS = 48.0
#: Case ids listed per reason before "and N more".
_LISTED = 20


@dataclass(frozen=True)
class LegVerdict:
    """One leg of tonight's nightly against its baseline."""

    name: str
    red: bool
    reasons: tuple[str, ...]
    """Why the leg is red (empty when green)."""
    notes: tuple[str, ...]
    """What the summary names without turning the leg red (no baseline, stale, ...)."""
    results: str | None = None
    baseline: str | None = None
    baseline_started: str | None = None
    baseline_age_hours: float | None = None
    failing: tuple[str, ...] = ()
    regressed: tuple[str, ...] = ()
    """`case · metric` of every regressed metric."""
    newly_skipped: tuple[str, ...] = ()
    comparison: Comparison | None = field(default=None, compare=False)
    compile_cache: str = ""
    """Inductor's cache hit rate over the leg's run (`run.compile_cache`), or empty."""

    @property
    def state(self) -> str:
        """red, green, or (green and named) no-baseline / stale-baseline."""
        if self.red:
            return "red"
        if self.baseline is None:
            return "no-baseline"
        if any(note.startswith("baseline is") for note in self.notes):
            return "stale-baseline"
        return "green"

    def to_json_dict(self) -> dict[str, Any]:
        metric_verdicts: dict[str, str] = {}
        if self.comparison is not None:
            for metric in self.comparison.metrics:
                if metric.verdict in ("regressed", "improved"):
                    metric_verdicts[f"{metric.case} · {metric.metric}"] = metric.verdict
        return {
            "name": self.name,
            "state": self.state,
            "red": self.red,
            "reasons": list(self.reasons),
            "notes": list(self.notes),
            "results": self.results,
            "baseline": self.baseline,
            "baseline_started": self.baseline_started,
            "baseline_age_hours": self.baseline_age_hours,
            "failing": list(self.failing),
            "regressed": list(self.regressed),
            "newly_skipped": list(self.newly_skipped),
            "metric_verdicts": metric_verdicts,
            "compile_cache": self.compile_cache,
        }


@dataclass(frozen=True)
class ExploreVerdict:
    """One explore leg of tonight: did its exploration run, and what did it find."""

    name: str
    red: bool
    reasons: tuple[str, ...]
    """Why the leg is red: its exploration did not run through (empty when it did)."""
    findings_file: str | None = None
    """Its findings.json; `markdown` is the findings.md beside it (each finding's reproducer
    and issue text), None when absent."""
    markdown: str | None = None
    seeds: tuple[int, ...] = ()
    findings: tuple[str, ...] = ()
    """`case at seed S` of every finding."""

    @property
    def state(self) -> str:
        """red (the exploration did not run through), or explored (findings or none)."""
        return "red" if self.red else "explored"

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "state": self.state,
            "red": self.red,
            "reasons": list(self.reasons),
            "findings_file": self.findings_file,
            "markdown": self.markdown,
            "seeds": list(self.seeds),
            "findings": list(self.findings),
        }


def judge_exploration(name: str, path: Path) -> ExploreVerdict:
    """The verdict of one explore leg from its findings.json (`path`): never red for what it
    found, red when there is no findings file or it is not one."""
    if not path.is_file():
        return ExploreVerdict(
            name,
            True,
            ("produced no findings: its exploration did not run through (the job's log says why)",),
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("schema") != FINDINGS_SCHEMA:
            raise ValueError(f"not an {FINDINGS_SCHEMA} file")
        seeds = tuple(int(run["seed"]) for run in data["seeds"])
        found = tuple(f"{f['case_id']} at seed {int(f['seed'])}" for f in data["findings"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return ExploreVerdict(name, True, (f"{path} does not read: {exc}",), str(path))
    markdown = path.with_suffix(".md")
    return ExploreVerdict(
        name,
        False,
        (),
        str(path),
        str(markdown) if markdown.is_file() else None,
        seeds,
        found,
    )


@dataclass(frozen=True)
class NightlyVerdict:
    legs: tuple[LegVerdict, ...]
    max_age_hours: float
    baseline_run: Mapping[str, Any] | None = None
    """The workflow run the baseline came from, as `gh run list --json` describes it."""
    baseline_dir: str | None = None
    """Where the baseline's results were (None: there was no baseline at all)."""
    explorations: tuple[ExploreVerdict, ...] = ()
    """The explore legs, judged apart: their findings are not results."""

    @property
    def red(self) -> bool:
        return any(leg.red for leg in self.legs) or any(e.red for e in self.explorations)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "red": self.red,
            "max_baseline_age_hours": self.max_age_hours,
            "baseline_run": dict(self.baseline_run) if self.baseline_run is not None else None,
            "baseline_dir": self.baseline_dir,
            "legs": [leg.to_json_dict() for leg in self.legs],
            "explorations": [e.to_json_dict() for e in self.explorations],
        }


def _started(results: Results) -> datetime | None:
    try:
        return datetime.fromisoformat(results.run.started)
    except ValueError:
        return None


def _listed(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:_LISTED])
    return shown + (f" and {len(ids) - _LISTED} more" if len(ids) > _LISTED else "")


def judge_leg(
    name: str,
    results_path: Path,
    baseline_path: Path | None,
    *,
    max_age_hours: float = DEFAULT_MAX_AGE_HOURS,
    threshold: float = 0.03,
) -> LegVerdict:
    """The verdict of one leg (BadInput for a results file that does not load)."""
    if not results_path.is_file():
        return LegVerdict(name, True, ("produced no results",), (), None, None)
    results = load_results(results_path)
    cache = results.run.compile_cache
    cache_line = cache.describe() if cache is not None else ""
    reasons: list[str] = []
    notes: list[str] = []
    failing = tuple(c.id for c in results.cases if c.status in BAD_STATUSES)
    unexpected = tuple(c.id for c in results.cases if c.unexpected_pass)
    if results.run.finished is None:
        reasons.append("the run did not finish (results.json holds what finished)")
    if unexpected:
        notes.append(
            f"{len(unexpected)} listed known failures passed (update the expectations): "
            + _listed(unexpected)
        )
    if baseline_path is None or not baseline_path.is_file():
        if failing:
            reasons.append(f"{len(failing)} failing cases: {_listed(failing)}")
        notes.append("no baseline: the previous completed nightly has no results for this leg")
        return LegVerdict(
            name=name,
            red=bool(reasons),
            reasons=tuple(reasons),
            notes=tuple(notes),
            results=str(results_path),
            failing=failing,
            compile_cache=cache_line,
        )
    baseline = load_results(baseline_path)
    comparison = compare(baseline, results, threshold=threshold)
    before = {c.id: c for c in baseline.cases}
    new_failures = tuple(
        f for f in failing if f not in before or before[f].status not in BAD_STATUSES
    )
    old_failures = tuple(f for f in failing if f not in new_failures)
    if new_failures:
        reasons.append(f"{len(new_failures)} new failures: {_listed(new_failures)}")
    if old_failures:
        reasons.append(
            f"{len(old_failures)} failing since last night, not listed as known failures: "
            + _listed(old_failures)
        )
    now = {c.id: c for c in results.cases}
    newly_skipped = tuple(
        change.case
        for change in comparison.changes_of("newly_skipped")
        if not now[change.case].known_failure
    )
    if newly_skipped:
        reasons.append(f"{len(newly_skipped)} newly skipped: {_listed(newly_skipped)}")
    regressed = tuple(f"{m.case} · {m.metric}" for m in comparison.metrics_with("regressed"))
    if regressed:
        reasons.append(f"{len(regressed)} metrics regressed: {_listed(regressed)}")
    improved = comparison.metrics_with("improved")
    if improved:
        notes.append(f"{len(improved)} metrics improved")
    age: float | None = None
    then, tonight = _started(baseline), _started(results)
    if then is not None and tonight is not None:
        age = (tonight - then).total_seconds() / 3600
        if age > max_age_hours:
            notes.append(
                f"baseline is {age / 24:.1f} days old (from {baseline.run.started[:19]}; "
                f"more than {max_age_hours:g} h)"
            )
    return LegVerdict(
        name=name,
        red=bool(reasons),
        reasons=tuple(reasons),
        notes=tuple(notes),
        results=str(results_path),
        baseline=str(baseline_path),
        baseline_started=baseline.run.started,
        baseline_age_hours=None if age is None or math.isnan(age) else round(age, 2),
        failing=failing,
        regressed=regressed,
        newly_skipped=newly_skipped,
        comparison=comparison,
        compile_cache=cache_line,
    )


def judge_nightly(
    legs: Sequence[str],
    results_dir: Path,
    baseline_dir: Path | None,
    *,
    max_age_hours: float = DEFAULT_MAX_AGE_HOURS,
    threshold: float = 0.03,
    baseline_run: Mapping[str, Any] | None = None,
    explore: Sequence[str] = (),
    findings_dir: Path | None = None,
) -> NightlyVerdict:
    """Every expected leg (`legs`, in order) of RESULTS against BASELINE (None: no nightly
    completed before this one), and every explore leg (`explore`) by its
    FINDINGS/<leg>/findings.json (FINDINGS: `findings_dir`, else RESULTS)."""
    verdicts = tuple(
        judge_leg(
            name,
            results_dir / name / RESULTS_FILE,
            baseline_dir / name / RESULTS_FILE if baseline_dir is not None else None,
            max_age_hours=max_age_hours,
            threshold=threshold,
        )
        for name in legs
    )
    findings = findings_dir if findings_dir is not None else results_dir
    explorations = tuple(
        judge_exploration(name, findings / name / FINDINGS_FILE) for name in explore
    )
    shown = str(baseline_dir) if baseline_dir is not None else None
    return NightlyVerdict(verdicts, max_age_hours, baseline_run, shown, explorations)
