"""README.md is a front page (issue 47, item 5): what accelkit is, the quickstart, one line
per command, the exit codes and links; everything else lives in docs/.

What it checks: the length, that the command table says what `accelkit --help` says
(accelkit.cli.app.SUMMARIES) and names every command, that every link points at a file or
folder that exists, and that the workflow rehearsal's command names test files that exist.
The quickstart and the CI test command are checked by tests/unit/test_quickstart.py.
"""

from __future__ import annotations

import re
import shlex

from accelkit.cli.app import SUMMARIES
from tests.helpers import REPO

README = REPO / "README.md"
#: "At most about 150 lines" (issue 47).
MAX_LINES = 160


def _readme() -> str:
    return README.read_text(encoding="utf-8")


def test_readme_is_a_front_page() -> None:
    lines = _readme().splitlines()
    assert len(lines) <= MAX_LINES, (
        f"README.md has {len(lines)} lines: move how-to material to docs/guide.md, "
        "measurements to docs/results/"
    )


def test_the_command_table_is_accelkit_help() -> None:
    rows = re.findall(r"^\| `accelkit (\w+)[^`]*` \| (.+) \|$", _readme(), flags=re.MULTILINE)
    table = dict(rows)
    assert len(rows) == len(table), "one row per command"
    assert table == SUMMARIES


def test_readme_links_exist() -> None:
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", _readme())
    assert targets, "the README links to its docs"
    missing = [t for t in targets if not (REPO / t).exists()]
    assert missing == []
    for page in ("docs/cli.md", "docs/design.md", "docs/reading-output.md", "docs/guide.md"):
        assert f"]({page})" in _readme()
    assert "](docs/results/)" in _readme() and "](benchmarks/)" in _readme()


def test_the_workflow_rehearsal_command_names_real_tests() -> None:
    (line,) = [
        ln for ln in _readme().splitlines() if ln.startswith("python -m pytest ") and "act" in ln
    ]
    paths = [word for word in shlex.split(line) if word.startswith("tests/")]
    assert paths and all((REPO / p).is_file() for p in paths)
    rehearsals = sorted(p.name for p in (REPO / "tests/integration").glob("test_workflows_act*.py"))
    assert sorted(p.rsplit("/", 1)[-1] for p in paths) == rehearsals
