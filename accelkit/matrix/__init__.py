"""Matrix files (matrices/*.yaml): typed model, safe loading with file:line errors,
expansion into explicit legs, and the GitHub Actions `strategy.matrix` output.

Importing this package loads PyYAML; the CLI imports it only inside command bodies.
"""

from accelkit.matrix.expand import (
    FILTER_KEYS,
    LegFilter,
    apply_filters,
    expand,
    leg_name,
    parse_filters,
)
from accelkit.matrix.github import GITHUB_FIELDS, github_item, github_matrix
from accelkit.matrix.jobs import LegJob, leg_jobs
from accelkit.matrix.model import (
    EntrySpec,
    IncludeSpec,
    LegMatcher,
    LegSettings,
    Location,
    MatrixEntry,
    MatrixFile,
    RunnerSpec,
    TorchSource,
)
from accelkit.matrix.parse import load_matrix
from accelkit.matrix.rehearse import (
    DockerHost,
    LegOutcome,
    LegPlan,
    RehearsalOptions,
    RehearsalOutcome,
    RehearsalPlan,
    RehearsalRun,
    judge_outcome,
    plan_rehearsal,
    rehearsal_options,
    rehearse,
)


def load_legs(path: str, filters: tuple[str, ...] | list[str] = ()) -> tuple[MatrixEntry, ...]:
    """Load, validate and expand `path`, then keep the legs that pass `filters`."""
    parsed = parse_filters(list(filters))
    return apply_filters(expand(load_matrix(path)), parsed)


__all__ = [
    "FILTER_KEYS",
    "GITHUB_FIELDS",
    "DockerHost",
    "EntrySpec",
    "IncludeSpec",
    "LegFilter",
    "LegJob",
    "LegMatcher",
    "LegOutcome",
    "LegPlan",
    "LegSettings",
    "Location",
    "MatrixEntry",
    "MatrixFile",
    "RehearsalOptions",
    "RehearsalOutcome",
    "RehearsalPlan",
    "RehearsalRun",
    "RunnerSpec",
    "TorchSource",
    "apply_filters",
    "expand",
    "github_item",
    "github_matrix",
    "judge_outcome",
    "leg_jobs",
    "leg_name",
    "load_legs",
    "load_matrix",
    "parse_filters",
    "plan_rehearsal",
    "rehearsal_options",
    "rehearse",
]
