"""`accelkit bisect --images` through the CLI: bad input as one line (the rest of
`--images` is unit-tested in tests/unit/triage/test_bisect_images.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import assert_one_line_error, run_cli


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--case", "conformance/x", "--envs", "{d}", "--images"], "add --wheels DIR"),
        (["--case", "perf/gemm/x", "--index", "{d}", "--images"], "add --wheels DIR"),
    ],
)
def test_bad_input_is_one_line(tmp_path: Path, args: list[str], needle: str) -> None:
    argv = ["--good", "1", "--bad", "2", *(a.format(d=tmp_path) for a in args)]
    assert_one_line_error(run_cli("bisect", *argv), 2, needle)
