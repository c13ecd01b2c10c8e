"""Findings of a seed exploration (`accelkit test --explore-seeds N`).

A gating run judges the suite at its fixed seed. An exploration runs the conformance suite
at seeds nobody tuned against, and what disagrees there is a *finding*, not a failure: a
case whose answer at that seed lies outside the bound the verdict derives. It is not a red
leg and not a new rule. Each finding carries what a person needs to decide its cause: the
seed's results file, the `accelkit repro` command that rebuilds the exact inputs, the
comparison that failed (expected against actual, the tolerance it had) and a ready-to-file
issue text. Only after a review that writes the cause down does a finding become a listed
exception or a change of the model (docs/design.md, "Seed exploration").

Known failures (the backend's expectations file) are not findings: they are reported as
known. `findings_of` reads one seed's results file; `Exploration` holds every seed's and
gives the JSON file; its Markdown (findings.md, with each finding's issue text) is
`accelkit.results.render.markdown.exploration_markdown`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from accelkit.results.model import Case, Results, repro_command
from accelkit.results.names import BAD_STATUSES

FINDINGS_SCHEMA = "accelkit.findings/1"


@dataclass(frozen=True)
class Finding:
    """One case that disagreed at one exploration seed."""

    case_id: str
    seed: int
    status: str
    message: str
    results_file: str
    repro: str
    """The command that writes and runs the case's reproducer."""
    check: dict[str, Any] | None = None
    """The comparison that failed (what, rtol, atol, index, actual, expected, abs_diff)."""
    sample: int | None = None
    layout: str | None = None


@dataclass(frozen=True)
class SeedRun:
    seed: int
    results_file: str
    cases: int
    passed: int
    findings: int
    exit_code: int
    """The run's own exit code (1: it had failures, which are findings here)."""


@dataclass
class Exploration:
    device: str
    torch: str
    runs: list[SeedRun] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "schema": FINDINGS_SCHEMA,
            "device": self.device,
            "torch": self.torch,
            "seeds": [asdict(run) for run in self.runs],
            "findings": [asdict(f) for f in self.findings],
        }


def _torch_version(results: Results) -> str:
    torch = results.env.get("torch")
    if isinstance(torch, dict):
        return str(torch.get("version") or "unknown")
    return "unknown"


def findings_of(results: Results, results_file: Path) -> list[Finding]:
    """The cases of one seed's run that disagreed (failed, error, crashed, timeout; known
    failures excluded), each with its reproducer command."""
    seed = results.run.seed if results.run.seed is not None else 0
    found = []
    for case in results.cases:
        if case.status not in BAD_STATUSES or case.known_failure:
            continue
        found.append(_finding(case, seed, results_file))
    return found


def _finding(case: Case, seed: int, results_file: Path) -> Finding:
    check = None
    sample = layout = None
    if case.repro is not None:
        sample, layout = case.repro.sample, case.repro.layout
        if case.repro.check is not None:
            check = case.repro.check.model_dump(exclude_none=True)
    return Finding(
        case_id=case.id,
        seed=seed,
        status=case.status,
        message=case.message,
        results_file=str(results_file),
        repro=repro_command(case.id, str(results_file)),
        check=check,
        sample=sample,
        layout=layout,
    )


def exploration(runs: list[tuple[Results, Path, int]]) -> Exploration:
    """The exploration of several seeds' runs: (results, its file, the run's exit code)."""
    first = runs[0][0]
    result = Exploration(device=first.run.device, torch=_torch_version(first))
    for results, path, exit_code in runs:
        found = findings_of(results, path)
        result.findings.extend(found)
        result.runs.append(
            SeedRun(
                seed=results.run.seed if results.run.seed is not None else 0,
                results_file=str(path),
                cases=len(results.cases),
                passed=sum(1 for c in results.cases if c.status == "passed"),
                findings=len(found),
                exit_code=exit_code,
            )
        )
    return result
