"""What a suite run ends with, wherever it ran (this host: `accelkit.suite.run.runner`; an image:
`accelkit.suite.run.container`): the results, the exit code of the contract, the log."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelkit.errors import ExitCode

NO_TESTS = 5
"""pytest's exit status when nothing was selected."""

COMPILE_SKIP_PREFIX = "cannot compile: "
"""How the message of a compiled OpInfo case begins when its op is a known compile failure
(`opinfo.skips.COMPILE_SKIPS`: the case is skipped) or some of its samples are
(`opinfo.skips.COMPILE_SAMPLE_SKIPS`: the case passes with the others), written out in
`opinfo.compiled`, which a reproducer carries alone; tests/test_compile_skips.py checks the
two agree)."""


PEER_RULE_PREFIX = "passed by the peer rule: "
"""How the message of a passing case begins, or what it holds after a compile note, when
the peer rule passed one of its samples (`opinfo.peer`, which a reproducer carries alone)."""


@dataclass(frozen=True)
class RunOutcome:
    results: Any  # accelkit.results.model.Results (kept lazy for start-up time)
    exit_code: ExitCode
    log_path: Path | None
    pytest_exit: int


def exit_code(results: Any, pytest_exit: int) -> ExitCode:
    """FAILED when a case failed, errored, crashed or timed out, or pytest did not end
    cleanly (interrupted, internal error); OK otherwise (skips allowed)."""
    from accelkit.results.model import BAD_STATUSES

    if any(case.status in BAD_STATUSES for case in results.cases):
        return ExitCode.FAILED
    if pytest_exit not in (0, NO_TESTS):
        return ExitCode.FAILED
    return ExitCode.OK


def compile_skips(results: Any, status: str = "skipped") -> list[str]:
    """The ids of the cases skipped because their op cannot compile (COMPILE_SKIP_PREFIX),
    or with `status="passed"`, of those that left out samples that cannot compile."""
    return [
        case.id
        for case in results.cases
        if case.status == status and (case.message or "").startswith(COMPILE_SKIP_PREFIX)
    ]


def peer_rule_passes(results: Any) -> list[str]:
    """The ids of the passed cases that passed one of their samples by the peer rule."""
    return [
        case.id
        for case in results.cases
        if case.status == "passed" and PEER_RULE_PREFIX in (case.message or "")
    ]


def empty_share(results: Any, pytest_exit: int) -> bool:
    """A shard that got none of a selection that has cases (a narrow -k over many shards):
    its results file holds no case and says what the selection had, which `accelkit merge`
    needs from every shard, so it is a result, not an error."""
    shard = results.run.shard
    return (
        pytest_exit == NO_TESTS
        and shard is not None
        and bool(shard.selections)
        and any(selection.cases > 0 for selection in shard.selections.values())
    )
