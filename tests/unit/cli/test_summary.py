"""`accelkit test`'s closing line: the verdict, how many cases, how long."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from rich.console import Console

from accelkit.cli.test import _summary
from accelkit.suite.run.request import RunRequest
from tests.factories import case, results


@pytest.mark.parametrize(
    ("count", "line"), [(1, "OK: 1 case in 2.0 s"), (3, "OK: 3 cases in 2.0 s")]
)
def test_the_closing_line_counts_the_cases_in_words(count: int, line: str) -> None:
    run = results([case(f"conformance/opinfo/exp/float{bits}") for bits in (16, 32, 64)[:count]])
    console = Console(record=True, width=200)
    _summary(console, SimpleNamespace(results=run, exit_code=0, log_path=None), 2.0, RunRequest())
    assert line in console.export_text().splitlines()
