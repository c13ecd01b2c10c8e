"""`accelkit test --explore-seeds N`: the conformance suite at seeds nobody tuned against.

Each seed is one ordinary run (here or in --image), with its own results file; what
disagrees is a finding (`accelkit.results.findings`), listed with its reproducer and a
ready-to-file issue text, and the command exits 0: an exploration is not a gate.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from accelkit.errors import ExitCode
from accelkit.suite.run.request import RunRequest

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


def explore(request: RunRequest, console: Any, display: Any) -> int:
    """Run every seed, write the findings, print them; the exit code."""
    from accelkit.results.findings import exploration
    from accelkit.results.io import atomic_write_text
    from accelkit.results.render.markdown import exploration_markdown
    from accelkit.suite.run import container, runner
    from accelkit.suite.run.request import validate

    validate(request)  # the exploration's own checks, before any seed runs
    seeds = exploration_seeds(request)
    findings_json, findings_md, folder = output_paths(request)
    folder.mkdir(parents=True, exist_ok=True)
    execute = container.run if request.image is not None else runner.run

    def say(line: str) -> None:
        console.print(line, markup=False, soft_wrap=True)

    runs = []
    with display:
        for seed in seeds:
            path = seed_results_path(request, folder, seed)
            one = replace(request, seed=seed, suite="conformance", json_path=path, explore_seeds=0)
            outcome = execute(one, display.on_event)
            if outcome.exit_code not in (ExitCode.OK, ExitCode.FAILED):
                code = int(outcome.exit_code)
                say(f"seed {seed}: the run could not finish (exit {code}); its results: {path}")
                return code
            runs.append((outcome.results, path, int(outcome.exit_code)))
    result = exploration(runs)
    atomic_write_text(findings_json, json.dumps(result.to_json_dict(), indent=1) + "\n")
    atomic_write_text(findings_md, exploration_markdown(result))
    for run in result.runs:
        say(
            f"seed {run.seed}: {run.cases} cases, {run.passed} passed, "
            f"{run.findings} finding(s)  ({run.results_file})"
        )
    for finding in result.findings:
        say(f"FINDING  {finding.case_id} at seed {finding.seed}: {finding.repro}")
    say(
        f"{len(result.findings)} finding(s) over {len(seeds)} seed(s); not failures: each has "
        f"its reproducer and an issue text in {findings_md} ({findings_json})"
    )
    return int(ExitCode.OK)
