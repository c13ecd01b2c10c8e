"""`accelkit --help` as a user sees it: one line a command."""

from __future__ import annotations

from accelkit.cli.app import SUMMARIES
from tests.helpers import REPO, run_cli


def test_help_lists_each_command_on_one_line() -> None:
    proc = run_cli("--help", env={"COLUMNS": "120", "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith("│ ")]
    names = [row.split()[1] for row in rows if row.split()[1] in SUMMARIES]
    assert names == [*sorted(n for n in SUMMARIES if n != "matrix"), "matrix"]
    for name, summary in SUMMARIES.items():
        assert any(f"│ {name} " in row and summary in row for row in rows), (name, rows)
