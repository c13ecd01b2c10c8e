"""The terminal views (`accelkit.results.render.terminal`) on a plain console."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from accelkit.results.differential_file import (
    CaseDifference,
    Differential,
    DifferentialSummary,
    Side,
)
from accelkit.results.render.terminal import PLAIN_WIDTH, print_differential


def _differential() -> Differential:
    return Differential(
        a=Side(label="torch a", source="a.json", device="cpu", git="0123456789abcdef"),
        b=Side(label="torch b", source="b.json", device="cpu"),
        cases=[
            CaseDifference(
                id="conformance/ops/[x]/float32",
                status_a="passed",
                status_b="passed",
                max_abs=0.002,
                max_rel=0.001,
                beyond_tolerance=True,
            ),
            CaseDifference(id="conformance/ops/y", status_a="passed", note="inputs differ: y"),
        ],
        summary=DifferentialSummary(compared=3, identical=1, differ=1, beyond_tolerance=1),
    )


def _printed(top: int, out: Path | None) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=PLAIN_WIDTH, no_color=True, highlight=False)
    print_differential(console, _differential(), top, out)
    return buffer.getvalue()


def test_a_differential_lists_the_cases_and_the_counts() -> None:
    text = _printed(30, None)
    assert text.splitlines()[:2] == ["A: torch a  (git 0123456789ab)", "B: torch b  (git None)"]
    assert "conformance/ops/[x]/float32" in text and "YES" in text  # brackets are not markup
    assert "inputs differ" in text and "inputs differ: y" not in text  # a note's kind only
    assert text.rstrip().endswith(
        "3 cases compared: 1 identical, 1 differ, 1 beyond tolerance "
        "(0 of them passed in both runs), 0 not comparable"
    )


def test_top_cuts_the_table_and_the_file_has_the_rest(tmp_path: Path) -> None:
    text = _printed(1, tmp_path / "d.json")
    assert "conformance/ops/y" not in text
    assert "; 1 more listed in the file" in text
    assert text.rstrip().endswith(f"differential: {tmp_path / 'd.json'}")
    assert "Cases whose answers differ" not in _printed(0, None)


def test_a_label_with_brackets_is_printed_as_written() -> None:
    differential = _differential()
    differential.a.label = "torch [bold]nightly[/bold]"
    buffer = io.StringIO()
    console = Console(file=buffer, width=PLAIN_WIDTH, no_color=True, highlight=False)
    print_differential(console, differential, 30, None)
    assert buffer.getvalue().splitlines()[0] == "A: torch [bold]nightly[/bold]  (git 0123456789ab)"
