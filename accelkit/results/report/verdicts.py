"""The report's comparisons: each run against its baseline, with the canaries and noise bands.

So that a reader of `accelkit report` sees whether a red cell is the build or the machine:

- every run with results is compared (`accelkit.results.compare.compare`, the rule of
  `accelkit compare`) against its baseline: the first run before it in the report with
  results from the same device type and device name. The first run of each device is a
  baseline itself and has no verdicts. The two files of one `accelkit test --ab` run are
  compared paired, as `compare` does;
- each perf metric of a compared run carries its verdict, the ratio to the baseline and
  the confidence interval the verdict used (against the band of ±threshold), and, where a
  canary had moved, the interval once the machine's largest effect is taken out
  (`MetricComparison.relative_ci`) and the canary it was judged against;
- each canary (`perf/canary/...`) shows its value and spread in every run and, in a
  compared run, whether it moved (`accelkit.results.canary.interval_moved`: its interval
  excludes 1 and reaches beyond the band; its verdict is then `environment-shifted`, the
  word `accelkit compare` prints for it too).

The history report (`--history`) has its own verdicts per night and does not use this.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from accelkit.results import canary
from accelkit.results.compare import CANARY_PREFIX, Comparison, MetricComparison, compare
from accelkit.results.report.model import Cell, MetricRow, Report


@dataclass(frozen=True)
class RunComparison:
    """One run compared against its baseline run (indices into `Report.runs`)."""

    run: int
    baseline: int
    comparison: Comparison
    _by_key: dict[tuple[str, str], MetricComparison] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        for m in self.comparison.metrics:
            self._by_key.setdefault((m.case, m.metric), m)

    def metric(self, case: str, name: str) -> MetricComparison | None:
        return self._by_key.get((case, name))


@dataclass(frozen=True)
class CanaryState:
    """One canary metric of one run: whether it moved against the baseline run."""

    moved: bool
    comparison: MetricComparison


@dataclass(frozen=True)
class CanaryRow:
    case: str
    metric: str
    unit: str
    cells: tuple[Cell | None, ...]
    states: tuple[CanaryState | None, ...]
    """Per run: None for a baseline run, or where either run lacks the canary."""


def baselines(report: Report) -> tuple[int | None, ...]:
    """Per run: the index of its baseline run (module docstring), or None."""
    out: list[int | None] = []
    for index, run in enumerate(report.runs):
        found = None
        if not run.missing:
            for earlier in range(index):
                other = report.runs[earlier]
                if (
                    not other.missing
                    and other.device == run.device
                    and other.device_name == run.device_name
                ):
                    found = earlier
                    break
        out.append(found)
    return tuple(out)


def compare_runs(report: Report) -> tuple[RunComparison | None, ...]:
    """Per run: its comparison against its baseline, or None (a baseline, a missing run)."""
    out: list[RunComparison | None] = []
    for index, base in enumerate(baselines(report)):
        if base is None:
            out.append(None)
            continue
        base_results = report.runs[base].results
        new_results = report.runs[index].results
        assert base_results is not None and new_results is not None
        out.append(RunComparison(index, base, compare(base_results, new_results)))
    return tuple(out)


def canary_rows(
    report: Report, comparisons: Sequence[RunComparison | None]
) -> tuple[CanaryRow, ...]:
    """The canaries' metrics, each with its value per run and whether it moved."""
    rows: list[CanaryRow] = []
    for row in report.metrics:
        if not row.case.startswith(CANARY_PREFIX):
            continue
        rows.append(
            CanaryRow(
                case=row.case,
                metric=row.metric,
                unit=row.unit,
                cells=row.cells,
                states=tuple(_canary_state(row, c) for c in comparisons),
            )
        )
    return tuple(rows)


def _canary_state(row: MetricRow, comparison: RunComparison | None) -> CanaryState | None:
    if comparison is None:
        return None
    m = comparison.metric(row.case, row.metric)
    if m is None or m.ratio is None or m.ci is None:
        return None
    # The one rule every view uses: its verdict is `environment-shifted` exactly then.
    moved = canary.interval_moved(m.ci, comparison.comparison.threshold)
    return CanaryState(moved=moved, comparison=m)
