"""`accelkit test`: run the shared suite on one backend and render its progress."""

from __future__ import annotations

import sys
import time
from typing import Any

import typer

from accelkit import options
from accelkit.cli.app import app
from accelkit.suite.run.request import RUN_OPTIONS


def test(**params: Any) -> None:
    from accelkit.cli.console import make_console
    from accelkit.cli.progress import display_for
    from accelkit.suite.run import container, runner
    from accelkit.suite.run.request import RunRequest

    request = RunRequest.from_params(params, argv=("accelkit", *sys.argv[1:]))
    # Piped or in CI: plain lines at full width, so no case id wraps or is cut.
    console = make_console()
    if request.node_rank > 0:  # a multi-node run's other nodes serve ranks; node 0 reports
        jobs = runner.serve(request, lambda line: console.print(line, markup=False, soft_wrap=True))
        console.print(
            f"node {request.node_rank}: served {jobs} rank sessions; node 0 has the results"
        )
        raise typer.Exit(0)
    display = display_for(console)  # one view of the run: live on a terminal, else lines
    started = time.monotonic()
    if request.ab is not None:
        from accelkit.suite.run import ab

        with display:
            ab_outcome = ab.run(request, display.on_event)
        _ab_summary(console, ab_outcome, time.monotonic() - started, request)
        raise typer.Exit(int(ab_outcome.exit_code))
    if request.explore_seeds:
        from accelkit.cli.explore import explore

        raise typer.Exit(explore(request, console, display))
    # Here or in a test image: two siblings with the same contract.
    execute = container.run if request.image is not None else runner.run
    with display:
        outcome = execute(request, display.on_event)
    _summary(console, outcome, time.monotonic() - started, request)
    raise typer.Exit(int(outcome.exit_code))


app.command(
    name="test",
    help="Run the shared conformance and performance suite on a device (cpu, cuda, rocm, xpu, "
    "mps).",
)(options.command(RUN_OPTIONS, test))


def _summary(console: Any, outcome: Any, wall_s: float, request: Any) -> None:
    from collections import Counter

    from rich.table import Table

    from accelkit.cli.progress import STATUS_STYLE as _STATUS_STYLE
    from accelkit.suite.run.outcome import compile_skips, peer_rule_passes

    results = outcome.results
    table = Table(title=f"accelkit test --device {request.device}", title_justify="left")
    table.add_column("suite")
    for status in _STATUS_STYLE:
        table.add_column(status, justify="right", style=_STATUS_STYLE[status])
    for suite in results.run.suites:
        cases = [c for c in results.cases if c.suite == suite]
        table.add_row(suite, *(str(sum(c.status == s for c in cases)) for s in _STATUS_STYLE))
    console.print(table)
    bad = [c for c in results.cases if c.status not in ("passed", "skipped")]
    for case in bad[:50]:
        first = (case.message or "").splitlines()[:1]
        console.print(
            f"  {case.status.upper():8} {case.id}" + (f": {first[0][:200]}" if first else ""),
            markup=False,
            highlight=False,
        )
    if len(bad) > 50:
        console.print(f"  ... and {len(bad) - 50} more (see the results file)")
    cannot_compile = compile_skips(results)
    if cannot_compile:
        ops = sorted({cid.split("/")[2] for cid in cannot_compile if cid.count("/") > 2})
        console.print(
            f"{len(cannot_compile)} compiled OpInfo cases skipped, their ops cannot compile "
            f"under Inductor (COMPILE_SKIPS): {', '.join(ops)}",
            markup=False,
            highlight=False,
        )
    partial = compile_skips(results, status="passed")
    if partial:
        names = sorted("/".join(cid.split("/")[2:4]) for cid in partial)
        console.print(
            f"{len(partial)} compiled OpInfo cases left out samples that cannot compile "
            f"(COMPILE_SAMPLE_SKIPS; the case message names them): {', '.join(names)}",
            markup=False,
            highlight=False,
        )
    by_peer = peer_rule_passes(results)
    if by_peer:
        per_op = Counter(cid.split("/")[2] if cid.count("/") > 2 else cid for cid in by_peer)
        counted = ", ".join(f"{op} ({n})" for op, n in sorted(per_op.items()))
        console.print(
            f"{len(by_peer)} cases passed a sample by the peer rule only (within 2x the "
            f"peer's float64 error; the case message names the samples): {counted}",
            markup=False,
            highlight=False,
        )
    cache = results.run.compile_cache
    if cache is not None:
        console.print(
            f"Inductor cache ({cache.key}): {cache.describe()}", markup=False, highlight=False
        )
    verdict = "OK" if int(outcome.exit_code) == 0 else "FAILED"
    count = len(results.cases)
    counted = "1 case" if count == 1 else f"{count} cases"
    console.print(f"{verdict}: {counted} in {wall_s:.1f} s", highlight=False)
    for label, path in (("results", request.json_path), ("junit", request.junit_path)):
        if path is not None:
            console.print(f"{label}: {path}", highlight=False)
    if outcome.log_path is not None:
        console.print(f"pytest log: {outcome.log_path}", highlight=False)


def _ab_summary(console: Any, outcome: Any, wall_s: float, request: Any) -> None:
    """The --ab run's end: compare's table of B against A, then where things were written."""
    from accelkit.results.render.terminal import print_comparison

    assert request.ab is not None
    print_comparison(console, outcome.comparison)
    for side, results in zip(("A", "B"), outcome.results, strict=True):
        bad = [c for c in results.cases if c.status not in ("passed", "skipped")]
        for case in bad[:20]:
            console.print(f"  {side}: {case.status.upper():8} {case.id}", markup=False)
    for side, results in zip(("A", "B"), outcome.results, strict=True):
        # A side that never reached the baton measured alone: its samples were not taken
        # in turns with the other side's, and the comparison is only as good as two runs'.
        if (results.run.ab or {}).get("turns") == "0":
            console.print(
                f"warning: side {side} measured alone (0 lockstep turns): its samples were "
                "not taken in turns with the other side's; see the pytest log",
                markup=False,
                highlight=False,
            )
    verdict = "OK" if int(outcome.exit_code) == 0 else "FAILED"
    a, b = request.ab
    console.print(
        f"{verdict}: B ({b}) against A ({a}), {request.passes} interleaved passes each, "
        f"in {wall_s:.1f} s",
        markup=False,
        highlight=False,
    )
    if outcome.paths is not None:
        for label, path in zip(
            ("A results", "B results", "comparison"), outcome.paths, strict=True
        ):
            console.print(f"{label}: {path}", markup=False, highlight=False)
    if outcome.log_path is not None:
        console.print(f"pytest log: {outcome.log_path}", markup=False, highlight=False)
