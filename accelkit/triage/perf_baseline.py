"""`accelkit repro perf/CASE --from R.json --baseline B.json`: does the slowdown reproduce?

The perf reproducer (`accelkit.triage.perf_replay`) ends its output with one line,
`MEASURED_PREFIX` and JSON: every metric's samples measured there. `accelkit repro` runs it
`--passes` times, each its own process, and `against_baseline` pools those samples with the
run as their group and compares them with the baseline's recorded samples of the case
(their passes as groups) by `accelkit.results.stats.compare_samples`, the rule `accelkit
compare` uses: grouped when both sides have at least `stats.MIN_GROUPS` groups (4 runs
here and a baseline of 4 passes or more), else by sample; the ratio here / baseline (of
medians), its confidence interval, and regressed, improved, unchanged or noisy with the
minimum effect `threshold`. The recorded run's own samples of the case (from R.json) are
compared with the same baseline the same way, so `reproduces` can say whether the change
the recorded run showed is seen here too. Standalone, the reproducer file still only
prints its measurement; the verdict needs accelkit (numpy and the statistics).

`accelkit.triage.repro.judge_reproducer` reruns the written reproducer until it has
`--passes` measurements and returns their `BaselineJudgement` (the command renders it and
exits 1 when a metric regressed).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from accelkit.errors import BadInput
from accelkit.results.model import Case, Metric, Results
from accelkit.triage.perf_replay import MEASURED_PREFIX


@dataclass(frozen=True)
class MetricVerdict:
    """One metric of the case: here against the baseline, and the recorded run against it."""

    metric: str
    unit: str
    verdict: str
    reason: str
    ratio: float | None
    ci: tuple[float, float] | None
    runs: int
    recorded_verdict: str | None
    recorded_ratio: float | None

    def to_json_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ci": list(self.ci) if self.ci is not None else None}


def baseline_case(baseline: Results, case_id: str, flag: str = "--baseline") -> Case:
    """The case in the baseline, with metrics to compare against; BadInput otherwise."""
    for case in baseline.cases:
        if case.id == case_id:
            if not any(m.samples for m in case.metrics.values()):
                raise BadInput(f"{flag}: {case_id} has no measured samples there")
            return case
    raise BadInput(f"{flag}: no case {case_id} in that results file")


def parse_measured(output: str) -> dict[str, Any] | None:
    """The reproducer's measurement (its `MEASURED_PREFIX` line), None if it printed none."""
    for line in reversed(output.splitlines()):
        if line.startswith(MEASURED_PREFIX):
            try:
                data = json.loads(line[len(MEASURED_PREFIX) :])
            except ValueError:
                return None
            return data if isinstance(data, dict) else None
    return None


def _groups(samples: Sequence[float], groups: Sequence[int] | None) -> Sequence[int] | None:
    return list(groups) if groups is not None and len(groups) == len(samples) else None


def _judge(
    base: Metric, samples: Sequence[float], groups: Sequence[int] | None, threshold: float
) -> Any:
    """compare_samples of `samples` (grouped by `groups` where they fit) against `base`."""
    from accelkit.results import stats

    return stats.compare_samples(
        base.samples,
        samples,
        higher_is_better=base.higher_is_better,
        threshold=threshold,
        base_groups=_groups(base.samples, base.sample_groups),
        new_groups=_groups(samples, groups),
    )


def against_baseline(
    baseline: Case,
    recorded: Case | None,
    runs: Sequence[dict[str, Any]],
    *,
    threshold: float,
) -> list[MetricVerdict]:
    """Each metric the baseline and the runs both have, judged (module doc)."""

    found: list[MetricVerdict] = []
    for name, base in baseline.metrics.items():
        samples: list[float] = []
        groups: list[int] = []
        for index, run in enumerate(runs):
            values = [float(v) for v in (run.get(name) or {}).get("samples", [])]
            samples += values
            groups += [index] * len(values)
        if not samples or not base.samples:
            continue
        here = _judge(base, samples, groups, threshold)
        mine = recorded.metrics.get(name) if recorded is not None else None
        then = (
            _judge(base, mine.samples, mine.sample_groups, threshold)
            if (mine is not None and mine.samples)
            else None
        )
        found.append(
            MetricVerdict(
                metric=name,
                unit=base.unit,
                verdict=here.verdict,
                reason=here.reason,
                ratio=here.ratio,
                ci=here.ci,
                runs=len(runs),
                recorded_verdict=then.verdict if then is not None else None,
                recorded_ratio=then.ratio if then is not None else None,
            )
        )
    return found


def conclusion(verdicts: Sequence[MetricVerdict]) -> str:
    """One line: whether the recorded change is seen here."""
    here = {v.verdict for v in verdicts}
    then = {v.recorded_verdict for v in verdicts}
    if "regressed" in here:
        if "regressed" in then:
            return "the regression reproduces here"
        return "regressed here against the baseline (the recorded run was not)"
    if "regressed" in then:
        if "noisy" in here:
            return "cannot tell whether the regression reproduces (noisy here; more --passes)"
        return "the regression does not reproduce here"
    if "noisy" in here:
        return "no regression recorded; noisy here (more --passes)"
    return "no regression, recorded or here"


def iter_lines(verdicts: Sequence[MetricVerdict], threshold: float) -> Iterator[str]:
    yield f"\nagainst the baseline (minimum effect {threshold:.0%}):"

    def ratio(value: float | None) -> str:
        return f"{value:.3f}x" if value is not None else "no ratio"

    for v in verdicts:
        ci = f", CI {v.ci[0]:.3f}-{v.ci[1]:.3f}x" if v.ci is not None else ""
        recorded = (
            f"; recorded run {v.recorded_verdict} ({ratio(v.recorded_ratio)})"
            if v.recorded_verdict is not None
            else ""
        )
        yield (
            f"  {v.metric}: here {v.verdict} ({ratio(v.ratio)}{ci}; {v.runs} runs; "
            f"{v.reason}){recorded}"
        )
    yield conclusion(verdicts)


@dataclass(frozen=True)
class BaselineJudgement:
    """Every metric's verdict against the baseline, at the minimum effect `threshold`."""

    threshold: float
    metrics: tuple[MetricVerdict, ...]

    @property
    def lines(self) -> list[str]:
        return list(iter_lines(self.metrics, self.threshold))

    @property
    def regressed(self) -> bool:
        return any(v.verdict == "regressed" for v in self.metrics)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "threshold": self.threshold,
            "metrics": [v.to_json_dict() for v in self.metrics],
            "conclusion": self.lines[-1],
        }


def without_measurement(output: str) -> str:
    """The reproducer's output for a reader: its measurement line is for the judgement."""
    return "\n".join(ln for ln in output.splitlines() if not ln.startswith(MEASURED_PREFIX))
