"""A night of matrix legs judged against the previous one, as the nightly's report job does
(`accelkit matrix compare`, and `accelkit matrix run --baseline` after a rehearsal).

The rule itself is `accelkit.results.nightly.judge_nightly` (red: a leg without results, an
unexpected failure, a regressed metric, a newly skipped case; an explore leg without its
findings file, never for its findings); this module takes the legs of a matrix and the
folders the workflow lays out (`DIR/<leg>/results.json`, an explore leg's
`FINDINGS/<leg>/findings.json`), checks the options, writes the Markdown summary and, for a
rehearsal, `OUTPUT/verdict.json`.

Example: `compare_night(["cpu-py3.11"], Path("results"), Path("baseline"), None, None)`
judges `results/cpu-py3.11/results.json` against `baseline/cpu-py3.11/results.json`; an
empty or absent `baseline` folder (no previous nightly had results) means no baseline for
any leg, not an error.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelkit.errors import BadInput

if TYPE_CHECKING:
    from accelkit.results.nightly import NightlyVerdict

VERDICT_FILE = "verdict.json"
SUMMARY_FILE = "summary.md"


def judge_night(
    legs: Sequence[str],
    results: Path,
    baseline: Path | None,
    baseline_run: dict[str, Any] | None,
    markdown: Path | None,
    *,
    max_age_hours: float | None = None,
    threshold: float = 0.03,
    explore: Sequence[str] = (),
    findings: Path | None = None,
) -> NightlyVerdict:
    """The legs judged (`judge_nightly`), with the Markdown summary written to `markdown`;
    the explore legs (`explore`) by their FINDINGS/<leg>/findings.json (default: RESULTS)."""
    from accelkit.results.io import atomic_write_text
    from accelkit.results.nightly import DEFAULT_MAX_AGE_HOURS, judge_nightly
    from accelkit.results.render.markdown import nightly_markdown

    verdict = judge_nightly(
        list(legs),
        results,
        baseline,
        max_age_hours=DEFAULT_MAX_AGE_HOURS if max_age_hours is None else max_age_hours,
        threshold=threshold,
        baseline_run=baseline_run,
        explore=explore,
        findings_dir=findings,
    )
    if markdown is not None:
        atomic_write_text(markdown, nightly_markdown(verdict))
    return verdict


def check_compare_options(
    results: Path,
    baseline: Path | None,
    *,
    max_age_hours: float,
    threshold: float,
    markdown: Path | None,
    findings: Path | None = None,
) -> None:
    """`matrix compare`'s options, checked before any file is read (BadInput, one line)."""
    from accelkit.results.io import check_output_path

    if not results.is_dir():
        raise BadInput(f"--results {results}: not a directory")
    # Absent: no explore leg uploaded findings (each explore leg expected is then red).
    if findings is not None and findings.exists() and not findings.is_dir():
        raise BadInput(f"--findings {findings}: not a directory")
    if baseline is not None and baseline.exists() and not baseline.is_dir():
        raise BadInput(f"--baseline {baseline}: not a directory")
    if not 0.0 < threshold < 1.0:
        raise BadInput(f"--threshold {threshold}: must be between 0 and 1 (e.g. 0.03 for 3%)")
    if max_age_hours <= 0:
        raise BadInput(f"--max-baseline-age {max_age_hours:g}: must be more than 0 hours")
    if markdown is not None:
        check_output_path(markdown, flag="--markdown")


def present_baseline(baseline: Path | None) -> Path | None:
    """The baseline folder, or None when it is absent or empty: an empty folder is what the
    workflow leaves when no previous nightly had results."""
    if baseline is None or not baseline.is_dir() or not any(baseline.iterdir()):
        return None
    return baseline


def load_baseline_run(path: Path) -> dict[str, Any] | None:
    """The run object the workflow's baseline step wrote (`{}` or `null`: none)."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BadInput(f"--baseline-run {path}: {exc}") from None
    if value in (None, {}):
        return None
    if not isinstance(value, dict):
        raise BadInput(f"--baseline-run {path}: expected one run object of gh run list --json")
    return value


def load_verdict(path: Path) -> dict[str, Any]:
    """A verdict written by `accelkit matrix compare --json` (for `matrix record`)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BadInput(f"--verdict {path}: {exc}") from None
    if not isinstance(data, dict):
        raise BadInput(f"--verdict {path}: not the JSON of accelkit matrix compare --json")
    return data


def judge_rehearsal(
    legs: Sequence[str], output: Path, baseline: Path, explore: Sequence[str] = ()
) -> NightlyVerdict:
    """The rehearsed legs (`output/<leg>/`) against `baseline` as the nightly judges them,
    the explore legs (`explore`) by their `output/<leg>/findings.json`: `output/summary.md`
    and `output/verdict.json` written."""
    verdict = judge_night(
        legs, output, baseline, None, output / SUMMARY_FILE, explore=explore, findings=output
    )
    (output / VERDICT_FILE).write_text(json.dumps(verdict.to_json_dict(), indent=2) + "\n")
    return verdict
