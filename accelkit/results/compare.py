"""Compare two results files: per-metric verdicts and conformance status changes.

`compare(base, new)` returns a `Comparison`: a frozen, typed object that
`accelkit.results.render` shows (rich table, `--markdown`) and `--json` prints. Every
metric of either side is accounted for:

- present in both with the same unit and direction: a verdict from the two sample sets
  (`accelkit.results.stats`, whose module docstring states the decision rule). Where both
  sides record the pass each sample came from (`Metric.sample_groups`) with at least
  `stats.MIN_GROUPS` passes, passes are the unit of replication and `base_groups` /
  `new_groups` give their counts; otherwise (null) the samples are taken as independent;
- present on one side only, or with a changed unit or direction: verdict `missing`, with
  the side and the reason. Such metrics never enter the regression/improvement counts.
- the two sides of one interleaved run (`accelkit test --ab`: `run.ab`, same start time):
  pass g of one side ran beside pass g of the other, so the comparison is paired
  (`stats`, "Paired mode"): per-pass ratios, not two independent sets of groups.
- canaries (`perf/canary/...`, metrics with a `canary` key) measure the machine: where both
  runs have them and one may have moved (its interval reaches beyond the band), a
  `regressed` or `improved` metric of its kind stays so only when the change is larger
  than the machine's shift could make it; otherwise its verdict is `environment-shifted`
  (`accelkit.results.canary`; the method is in `accelkit.results.stats`'s docstring), as
  is a moved canary's own. `canary` names the canary a metric was judged against,
  `relative_ci` the interval with the machine's largest effect taken out. Not for the two
  sides of one interleaved run: they share the machine, so only the moved canaries
  themselves become `environment-shifted` there.

Status changes between the two runs (keyed by case id):
`newly_failing` (now failed/error/crashed/timeout, before passed or skipped),
`newly_passing` (now passed, before anything else), `newly_skipped` (now skipped, before
anything else), `still_failing` (a bad status that changed, e.g. failed -> crashed),
`missing_in_new` (in base only) and `new_case` (in new only). A comparison `fails` (the
CLI exits 1) when any metric regressed or any case is newly failing. The newly skipped
cases that passed in the base (`skipped_after_passing`: coverage the new run lost, such as a
capability that disappeared) are listed first among the other changes.

`environment` lists what differs between the two runs' environments (backend, target,
device name, driver, torch version and git hash, accelkit version:
`accelkit.results.environment`), so a verdict never silently compares different hardware
or software; every rendering shows them before any verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal, cast

from accelkit.results import canary, stats
from accelkit.results.environment import EnvironmentDifference, environment_differences
from accelkit.results.model import BAD_STATUSES, Case, MeasurementMethod, Metric, Results

MetricVerdict = Literal[
    "regressed", "improved", "environment-shifted", "unchanged", "noisy", "missing"
]
METRIC_VERDICTS: tuple[MetricVerdict, ...] = (
    "regressed",
    "improved",
    "environment-shifted",
    "unchanged",
    "noisy",
    "missing",
)
ChangeKind = Literal[
    "newly_failing",
    "newly_passing",
    "newly_skipped",
    "still_failing",
    "missing_in_new",
    "new_case",
]
CHANGE_KINDS: tuple[ChangeKind, ...] = (
    "newly_failing",
    "newly_passing",
    "newly_skipped",
    "still_failing",
    "missing_in_new",
    "new_case",
)

CANARY_PREFIX = "perf/canary/"
"""Case ids of the canaries (`accelkit/suite/perf/test_canary.py`)."""


@dataclass(frozen=True)
class MetricComparison:
    case: str
    metric: str
    verdict: MetricVerdict
    reason: str
    unit: str
    higher_is_better: bool
    base_median: float | None
    new_median: float | None
    ratio: float | None
    """median(new) / median(base)."""
    ci: tuple[float, float] | None
    p_value: float | None
    base_samples: int
    new_samples: int
    missing_in: Literal["base", "new"] | None = None
    base_groups: int | None = None
    """Groups (passes) of the base side when the grouped mode decided; None: by sample."""
    new_groups: int | None = None
    canary: str | None = None
    """The canary case this metric was judged against (its kind's canary had moved)."""
    relative_ci: tuple[float, float] | None = None
    """The interval of the ratio once the machine's largest effect is taken out."""
    method: MeasurementMethod | None = None
    """How the new run measured it (the base's where the new run lacks it); None in files
    before `Metric.method`."""

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "case": self.case,
            "metric": self.metric,
            "verdict": self.verdict,
            "ratio": self.ratio,
            "ci": list(self.ci) if self.ci is not None else None,
            "p_value": self.p_value,
            "base_median": self.base_median,
            "new_median": self.new_median,
            "unit": self.unit,
            "higher_is_better": self.higher_is_better,
            "base_samples": self.base_samples,
            "new_samples": self.new_samples,
            "base_groups": self.base_groups,
            "new_groups": self.new_groups,
            "missing_in": self.missing_in,
            "canary": self.canary,
            "relative_ci": list(self.relative_ci) if self.relative_ci is not None else None,
            "method": self.method.model_dump() if self.method is not None else None,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class StatusChange:
    case: str
    suite: str
    kind: ChangeKind
    base_status: str | None
    new_status: str | None
    message: str
    """The new run's message (failure or skip reason); the base's for a missing case."""
    repro: bool = False
    """The new run recorded how to rebuild the case (`accelkit repro`)."""

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "case": self.case,
            "suite": self.suite,
            "kind": self.kind,
            "base_status": self.base_status,
            "new_status": self.new_status,
            "message": self.message,
            "repro": self.repro,
        }


@dataclass(frozen=True)
class Comparison:
    metrics: tuple[MetricComparison, ...]
    cases: tuple[StatusChange, ...]
    threshold: float
    confidence: float
    environment: tuple[EnvironmentDifference, ...] = ()
    """What differs between the runs' environments; empty when they ran alike."""

    @property
    def skipped_after_passing(self) -> tuple[StatusChange, ...]:
        """Cases that passed in the base and are skipped in the new run."""
        return tuple(c for c in self.changes_of("newly_skipped") if c.base_status == "passed")

    def metrics_with(self, verdict: MetricVerdict) -> tuple[MetricComparison, ...]:
        return tuple(m for m in self.metrics if m.verdict == verdict)

    def changes_of(self, kind: ChangeKind) -> tuple[StatusChange, ...]:
        return tuple(c for c in self.cases if c.kind == kind)

    def canaries(self) -> tuple[MetricComparison, ...]:
        """The canaries' own comparisons (cases under `perf/canary/`)."""
        return tuple(m for m in self.metrics if m.case.startswith(CANARY_PREFIX))

    @property
    def fails(self) -> bool:
        """True when something regressed or newly fails: `accelkit compare` exits 1."""
        return bool(self.metrics_with("regressed") or self.changes_of("newly_failing"))

    def summary(self) -> dict[str, Any]:
        counts: dict[str, Any] = {verdict: 0 for verdict in METRIC_VERDICTS}
        for metric in self.metrics:
            counts[metric.verdict] += 1
        counts["metrics"] = len(self.metrics)
        for kind in CHANGE_KINDS:
            counts[kind] = 0
        for change in self.cases:
            counts[change.kind] += 1
        counts["skipped_after_passing"] = len(self.skipped_after_passing)
        counts["same_environment"] = not self.environment
        counts["threshold"] = self.threshold
        counts["confidence"] = self.confidence
        counts["ok"] = not self.fails
        return counts

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "environment": [d.to_json_dict() for d in self.environment],
            "metrics": [m.to_json_dict() for m in self.metrics],
            "cases": [c.to_json_dict() for c in self.cases],
            "summary": self.summary(),
        }


def _compare_metric(
    case: str,
    name: str,
    base: Metric | None,
    new: Metric | None,
    *,
    threshold: float,
    confidence: float,
    seed: int,
    paired: bool = False,
) -> MetricComparison:
    reference = new if new is not None else base
    assert reference is not None
    method = reference.method or (base.method if base is not None else None)
    base_median = base.value if base is not None else None
    new_median = new.value if new is not None else None

    def missing(side: Literal["base", "new"] | None, reason: str) -> MetricComparison:
        return MetricComparison(
            case=case,
            metric=name,
            verdict="missing",
            reason=reason,
            unit=reference.unit,
            higher_is_better=reference.higher_is_better,
            base_median=base_median,
            new_median=new_median,
            ratio=None,
            ci=None,
            p_value=None,
            method=method,
            base_samples=len(base.samples) if base is not None else 0,
            new_samples=len(new.samples) if new is not None else 0,
            missing_in=side,
        )

    if base is None:
        return missing("base", "only in the new run")
    if new is None:
        return missing("new", "only in the base run")
    if base.unit != new.unit:
        return missing(None, f"unit changed from {base.unit!r} to {new.unit!r}")
    if base.higher_is_better != new.higher_is_better:
        return missing(None, "higher_is_better changed")
    result = stats.compare_samples(
        base.samples,
        new.samples,
        higher_is_better=new.higher_is_better,
        threshold=threshold,
        confidence=confidence,
        seed=seed,
        base_groups=base.sample_groups,
        new_groups=new.sample_groups,
        paired=paired,
    )
    groups = result.groups
    return MetricComparison(
        case=case,
        metric=name,
        verdict=result.verdict,
        reason=result.reason,
        unit=new.unit,
        higher_is_better=new.higher_is_better,
        # The recorded value is the median of the samples by contract; use it, so files
        # whose samples were trimmed still show the number their writer reported.
        base_median=base.value,
        new_median=new.value,
        ratio=result.ratio,
        ci=result.ci,
        p_value=result.p_value,
        base_samples=result.n_base,
        new_samples=result.n_new,
        base_groups=groups[0] if groups is not None else None,
        new_groups=groups[1] if groups is not None else None,
        method=method,
    )


def interleaved(base: Results, new: Results) -> bool:
    """Whether the two files are the two sides of one `accelkit test --ab` run, whose pass g
    of either side was measured beside the other's: then the paired mode decides."""
    sides = (base.run.ab, new.run.ab)
    if sides[0] is None or sides[1] is None:
        return False
    same_run = base.run.started == new.run.started
    return same_run and {sides[0].get("side"), sides[1].get("side")} == {"A", "B"}


def _against_canaries(
    metric: MetricComparison,
    shifts: list[canary.CanaryShift],
    bounds: dict[str, tuple[str | None, str | None]],
    threshold: float,
) -> MetricComparison:
    """`metric` judged against the canaries (module docstring); unchanged unless its verdict
    was a confirmed change."""
    if metric.ratio is None or metric.ci is None:
        return metric
    if metric.case.startswith(CANARY_PREFIX):
        if not canary.interval_moved(metric.ci, threshold):
            return metric  # an interval containing 1 is not a move
        return replace(
            metric,
            verdict="environment-shifted",
            reason=f"canary: the machine moved {_moved_by(metric, threshold)}; {metric.reason}",
        )
    if metric.verdict not in canary.MOVED:
        return metric
    bound, scope = bounds.get(metric.case, (None, None))
    shift = canary.reference(shifts, bound, scope)
    if shift is None:
        return metric
    verdict, why, relative = canary.rejudge(
        metric.verdict, metric.ratio, metric.ci, metric.higher_is_better, shift, threshold
    )
    return replace(
        metric,
        verdict=cast(MetricVerdict, verdict),
        reason=f"{why}; {metric.reason}",
        canary=shift.case,
        relative_ci=relative,
    )


def _moved_by(metric: MetricComparison, threshold: float) -> str:
    """How far a canary moved, and the band: "1.067x [1.022, 1.097], beyond ±3%"."""
    assert metric.ratio is not None and metric.ci is not None
    low, high = metric.ci
    return f"{metric.ratio:.3f}x [{low:.3f}, {high:.3f}], beyond ±{threshold:.0%}"


def _status_change(base: Case | None, new: Case | None) -> StatusChange | None:
    if base is None and new is None:
        return None
    if new is None:
        assert base is not None
        return StatusChange(
            case=base.id,
            suite=base.suite,
            kind="missing_in_new",
            base_status=base.status,
            new_status=None,
            message=base.message,
        )
    if base is None:
        return StatusChange(
            case=new.id,
            suite=new.suite,
            kind="new_case",
            base_status=None,
            new_status=new.status,
            message=new.message,
            repro=new.repro is not None,
        )
    if base.status == new.status:
        return None
    kind: ChangeKind
    if new.status in BAD_STATUSES:
        kind = "still_failing" if base.status in BAD_STATUSES else "newly_failing"
    elif new.status == "passed":
        kind = "newly_passing"
    else:
        kind = "newly_skipped"
    return StatusChange(
        case=new.id,
        suite=new.suite,
        kind=kind,
        base_status=base.status,
        new_status=new.status,
        message=new.message,
        repro=new.repro is not None,
    )


def _by_id(results: Results) -> dict[str, Case]:
    cases: dict[str, Case] = {}
    for case in results.cases:
        cases.setdefault(case.id, case)  # the first wins, as in a report
    return cases


def compare(
    base: Results,
    new: Results,
    *,
    threshold: float = stats.DEFAULT_THRESHOLD,
    confidence: float = stats.DEFAULT_CONFIDENCE,
    seed: int = stats.DEFAULT_SEED,
) -> Comparison:
    """Compare `new` against `base`; order: base's cases, then cases only in new."""
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"threshold must be in (0, 1), got {threshold}")
    base_cases, new_cases = _by_id(base), _by_id(new)
    paired = interleaved(base, new)
    ids = list(base_cases) + [case_id for case_id in new_cases if case_id not in base_cases]
    metrics: list[MetricComparison] = []
    changes: list[StatusChange] = []
    shifts: list[canary.CanaryShift] = []
    for case_id in ids:
        base_case, new_case = base_cases.get(case_id), new_cases.get(case_id)
        change = _status_change(base_case, new_case)
        if change is not None:
            changes.append(change)
        base_metrics = base_case.metrics if base_case is not None else {}
        new_metrics = new_case.metrics if new_case is not None else {}
        names = list(base_metrics) + [n for n in new_metrics if n not in base_metrics]
        for name in names:
            result = _compare_metric(
                case_id,
                name,
                base_metrics.get(name),
                new_metrics.get(name),
                threshold=threshold,
                confidence=confidence,
                seed=seed,
                paired=paired,
            )
            metrics.append(result)
            kinds = [canary.canary_kind(m) for m in (base_metrics.get(name), new_metrics.get(name))]
            if kinds[0] is not None and kinds[0] == kinds[1]:
                shift = canary.shift_of(case_id, name, kinds[0], result, threshold)
                if shift is not None:
                    shifts.append(shift)
    if any(shift.may_have_moved for shift in shifts):
        # Interleaved sides share one machine: a canary that differs between them measures
        # their environments (numpy, BLAS), so it is not divided out of the build's metrics.
        relevant = [] if paired else shifts
        bounds = {case_id: canary.case_bound(new_cases.get(case_id)) for case_id in new_cases}
        metrics = [_against_canaries(m, relevant, bounds, threshold) for m in metrics]
    return Comparison(
        metrics=tuple(metrics),
        cases=tuple(changes),
        threshold=threshold,
        confidence=confidence,
        environment=environment_differences(base, new),
    )
