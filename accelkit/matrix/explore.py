"""An explore leg: `explore_seeds: N` makes a leg run `accelkit test --explore-seeds N`, the
conformance suite at N fresh seeds, whose disagreements are findings, not failures
(docs/design.md, "Seed exploration").

    - backend: cpu
      variant: explore            # a name of its own beside the gating leg of its Python
      suites: [conformance]       # the suite an exploration runs, and the only one
      explore_seeds: 3            # 1 to 1000; its job writes findings.json and findings.md

The leg is one job (no `shards`, no `nodes`: its seeds run one after the other), adds
`--explore-seeds=N` to its test arguments (never written in `test_args`), uploads its
findings as artifact `findings-<job>` and is judged by whether its exploration ran, never
by what it found (`accelkit.results.nightly`).
"""

from __future__ import annotations

from typing import Any

from accelkit.matrix.values import ValueChecker, kind

Found = tuple[Any, int] | None


def explore_seeds(
    checker: ValueChecker, found: Found, *, suites: tuple[str, ...], shards: int, nodes: int
) -> int:
    """The leg's seeds to explore (0: not an explore leg); a located ConfigError for a leg
    an exploration cannot be."""
    from accelkit.suite.run.request import MAX_EXPLORE_SEEDS

    if found is None:
        return 0
    value, line = found
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_EXPLORE_SEEDS:
        checker.fail(
            f"explore_seeds must be a whole number from 1 to {MAX_EXPLORE_SEEDS}, "
            f"not {kind(value)}",
            line,
        )
    if suites != ("conformance",):
        checker.fail(
            f"explore_seeds: {value} explores the conformance suite only, not "
            f"{', '.join(suites)}: set suites: [conformance]",
            line,
        )
    if shards > 1 or nodes > 1:
        checker.fail(
            f"explore_seeds: {value} is one job, its seeds run one after the other: remove "
            + ("shards" if shards > 1 else "nodes"),
            line,
        )
    return value
