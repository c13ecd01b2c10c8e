"""Seed exploration (`accelkit test --explore-seeds N`): the conformance suite at seeds nobody
tuned against, each seed one ordinary run (here or in --image) with its own results file.

`run_exploration` runs the seeds and writes the findings (`accelkit.results.findings`):
`findings.json` and its `.md` beside each seed's results file. `accelkit test` prints them
(`accelkit.cli.explore`); a nightly explore leg's job (`explore_seeds: N` in a matrix) and
its rehearsal (`accelkit matrix run`) run the same function. An exploration is not a gate:
its disagreements are findings, and only a run that could not finish (exit 2 or 3) is an
error.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from accelkit.errors import ExitCode
from accelkit.events import EventCallback
from accelkit.suite.run.request import RunRequest

if TYPE_CHECKING:
    from accelkit.results.findings import Exploration

SEED_RANGE = (1000, 2**31)
"""Drawn seeds: past the 0-999 that development and the gating runs use."""


def exploration_seeds(request: RunRequest) -> list[int]:
    """With --seed S > 0: S to S + N - 1 (an exploration repeated); else N drawn at random."""
    if request.seed > 0:
        return list(range(request.seed, request.seed + request.explore_seeds))
    draw = random.SystemRandom()
    seeds: list[int] = []
    while len(seeds) < request.explore_seeds:
        seed = draw.randrange(*SEED_RANGE)
        if seed not in seeds:
            seeds.append(seed)
    return seeds


def output_paths(request: RunRequest, now: float | None = None) -> tuple[Path, Path, Path]:
    """(findings JSON, findings Markdown, the folder of the seeds' results files)."""
    if request.json_path is not None:
        findings = request.json_path
        return findings, findings.with_suffix(".md"), findings.parent
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
    folder = Path(f"accelkit-explore-{stamp}")
    return folder / "findings.json", folder / "findings.md", folder


def seed_results_path(request: RunRequest, folder: Path, seed: int) -> Path:
    stem = request.json_path.stem if request.json_path is not None else "results"
    return folder / f"{stem}.seed-{seed}.json"


@dataclass(frozen=True)
class ExploreOutcome:
    """What an exploration did: its findings, or the seed whose run could not finish."""

    exit_code: int
    """0 when every seed ran (findings or not); a seed's own 2 or 3 when it could not."""
    seeds: tuple[int, ...]
    findings_json: Path
    findings_md: Path
    exploration: Exploration | None = None
    """None when a seed's run could not finish (then no findings file is written)."""
    stopped_at: int | None = None
    """The seed whose run could not finish, and its results file (what finished)."""
    stopped_results: Path | None = None


def run_exploration(request: RunRequest, on_event: EventCallback) -> ExploreOutcome:
    """Run every seed of `request` (its `explore_seeds`), then write the findings files."""
    from accelkit.results.findings import exploration
    from accelkit.results.io import atomic_write_text
    from accelkit.results.render.markdown import exploration_markdown
    from accelkit.suite.run import container, runner
    from accelkit.suite.run.request import validate

    validate(request)  # the exploration's own checks, before any seed runs
    seeds = tuple(exploration_seeds(request))
    findings_json, findings_md, folder = output_paths(request)
    folder.mkdir(parents=True, exist_ok=True)
    execute = container.run if request.image is not None else runner.run
    runs = []
    for seed in seeds:
        path = seed_results_path(request, folder, seed)
        one = replace(request, seed=seed, suite="conformance", json_path=path, explore_seeds=0)
        outcome = execute(one, on_event)
        if outcome.exit_code not in (ExitCode.OK, ExitCode.FAILED):
            return ExploreOutcome(
                int(outcome.exit_code), seeds, findings_json, findings_md, None, seed, path
            )
        runs.append((outcome.results, path, int(outcome.exit_code)))
    result = exploration(runs)
    atomic_write_text(findings_json, json.dumps(result.to_json_dict(), indent=1) + "\n")
    atomic_write_text(findings_md, exploration_markdown(result))
    return ExploreOutcome(int(ExitCode.OK), seeds, findings_json, findings_md, result)
