"""Canaries in `accelkit compare`: telling a change in the build from a change in the machine.

Every perf pass measures a fixed calibration set first (`perf/canary/...`: a host memory
copy and a host GEMM, and on a device with its own memory a device copy and GEMM). Their
metrics carry `canary` (the kind they calibrate: "memory" or "compute") and `scope` ("host"
or "device"); the other cases' throughput metrics carry `bound` and `scope`. The method,
and why the environment band is as wide as it is, is in `accelkit.results.stats`'s module
docstring ("Canaries"); this module holds its arithmetic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from accelkit.results.model import Case, Metric

ENV_SPREAD = 1.25
"""How differently one machine shift may move two kernels of the same kind, in log space:
a kernel of a kind whose canary slowed by a factor f is taken to have slowed by anything in
[f^max(0, 1-ENV_SPREAD), f^(1+ENV_SPREAD)] from the machine alone (calibration: stats
docstring)."""
ENVIRONMENT_SHIFTED = "environment-shifted"
MOVED = ("regressed", "improved")


@dataclass(frozen=True)
class CanaryShift:
    """One canary's change between two runs, as a slowdown (new time / base time)."""

    case: str
    metric: str
    kind: str
    scope: str
    verdict: str
    slowdown: float
    slowdown_ci: tuple[float, float]
    threshold: float = 0.03

    @property
    def may_have_moved(self) -> bool:
        """The machine may have moved by more than the threshold: the canary's interval
        reaches beyond the band on either side (a confirmed change, or one the canary
        cannot rule out: `noisy`, or `unchanged` with one end beyond the band). Such a
        canary is a reference the build's metrics are judged against (`reference`)."""
        return reaches_beyond(self.slowdown_ci, self.threshold)

    @property
    def moved(self) -> bool:
        """The machine moved (`interval_moved`): the word every view uses."""
        return interval_moved(self.slowdown_ci, self.threshold)

    @property
    def reach(self) -> float:
        """How far the environment band reaches from 1, in log space."""
        return max(abs(math.log(v)) for v in self.environment_band())

    def environment_band(self) -> tuple[float, float]:
        """The slowdowns the machine's shift alone can cause a kernel of this kind: the
            canary's interval, widened by ENV_SPREAD in log space away from 1 (an interval across 1
        widens on both sides)."""
        low, high = (math.log(v) for v in self.slowdown_ci)
        near = max(0.0, 1.0 - ENV_SPREAD)  # the near end never crosses 1
        low *= 1.0 + ENV_SPREAD if low < 0 else near
        high *= 1.0 + ENV_SPREAD if high > 0 else near
        return math.exp(low), math.exp(high)


def reaches_beyond(ci: tuple[float, float], threshold: float) -> bool:
    """Whether an interval of a ratio reaches beyond the band [1/(1+t), 1+t]."""
    low, high = ci
    return low < 1.0 / (1.0 + threshold) or high > 1.0 + threshold


def interval_moved(ci: tuple[float, float], threshold: float) -> bool:
    """The one rule for "moved", in every view (terminal, Markdown, HTML, JSON): a canary
    moved when its interval excludes 1 (the shift is confirmed: an interval containing 1 is
    not a move) and reaches beyond the band (it may be larger than the threshold). A moved
    canary's own verdict is `environment-shifted`; one that only may have moved (`noisy`,
    or an interval across 1 with an end beyond the band) keeps its verdict, and is still a
    reference for the metrics of its kind (`CanaryShift.may_have_moved`)."""
    low, high = ci
    return (low > 1.0 or high < 1.0) and reaches_beyond(ci, threshold)


def _extra(metric: Metric, key: str) -> str | None:
    value = (metric.model_extra or {}).get(key)
    return value if isinstance(value, str) else None


def canary_kind(metric: Metric | None) -> tuple[str, str] | None:
    """(kind, scope) when `metric` is a canary's, else None."""
    if metric is None:
        return None
    kind = _extra(metric, "canary")
    return (kind, _extra(metric, "scope") or "host") if kind else None


def case_bound(case: Case | None) -> tuple[str | None, str | None]:
    """(bound, scope) of a case: from the first of its metrics that records them (a case's
    latency is bound like its bandwidth or FLOP/s); (None, None) when none does."""
    if case is None:
        return None, None
    for metric in case.metrics.values():
        bound = _extra(metric, "bound")
        if bound:
            return bound, _extra(metric, "scope")
    return None, None


def as_slowdown(
    ratio: float, ci: tuple[float, float], higher_is_better: bool
) -> tuple[float, tuple[float, float]]:
    """A metric's ratio and interval as a slowdown (time ratio: above 1 is slower)."""
    if not higher_is_better:
        return ratio, ci
    return 1.0 / ratio, (1.0 / ci[1], 1.0 / ci[0])


def reference(
    shifts: Sequence[CanaryShift], bound: str | None, scope: str | None
) -> CanaryShift | None:
    """The canary a metric is judged against, or None when no canary of its scope moved:
    its own kind's canary in its scope when that one moved, else the canary of its scope
    that moved most (a machine's shift is not confined to one kind: the issue's memory
    drift also slowed float8 GEMMs on a CPU); a metric of no recorded scope looks at all.
    Among several, the one whose environment band reaches farthest."""
    moved = [s for s in shifts if s.may_have_moved and (scope is None or s.scope == scope)]
    if not moved:
        return None
    for shift in moved:
        if shift.kind == bound:
            return shift
    return max(moved, key=lambda s: s.reach)


def rejudge(
    verdict: str,
    ratio: float,
    ci: tuple[float, float],
    higher_is_better: bool,
    shift: CanaryShift,
    threshold: float,
) -> tuple[str, str, tuple[float, float]]:
    """The verdict of a metric whose raw verdict is `regressed` or `improved` while its
    reference canary moved: the same verdict when the change is beyond the band even after
    the machine's largest possible effect (`environment_band`) is taken out, else
    `environment-shifted`. Returns (verdict, reason, interval relative to the machine's
    effect, in the metric's own orientation)."""
    _, (low, high) = as_slowdown(ratio, ci, higher_is_better)
    env_low, env_high = shift.environment_band()
    rel_low, rel_high = low / env_high, high / env_low
    relative = (rel_low, rel_high)
    if higher_is_better:
        relative = (1.0 / rel_high, 1.0 / rel_low)
    band = f"machine {env_low:.3f}-{env_high:.3f}x from {shift.case} ({shift.slowdown:.3f}x)"
    beyond = rel_low > 1.0 + threshold if verdict == "regressed" else rel_high < 1 / (1 + threshold)
    if beyond:
        return verdict, f"beyond the {band}", relative
    moved = "the machine moved" if shift.moved else "the machine may have moved"
    return ENVIRONMENT_SHIFTED, f"within the {band}: {moved}", relative


def shift_of(
    case: str, name: str, kind: tuple[str, str], comparison: Any, threshold: float
) -> CanaryShift | None:
    """A canary's shift from its metric comparison (None without an interval)."""
    if comparison.ratio is None or comparison.ci is None:
        return None
    slowdown, ci = as_slowdown(comparison.ratio, comparison.ci, comparison.higher_is_better)
    return CanaryShift(
        case=case,
        metric=name,
        kind=kind[0],
        scope=kind[1],
        verdict=comparison.verdict,
        slowdown=slowdown,
        slowdown_ci=ci,
        threshold=threshold,
    )
