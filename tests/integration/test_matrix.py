"""`accelkit matrix validate/expand/github` end to end: the GitHub output against the golden
files, exit codes and one-line errors (the loader, validation and expansion themselves:
tests/unit/matrix/test_matrix.py).

Golden files in tests/golden/ hold `accelkit matrix github` for the shipped matrices.
They are compared, never rewritten, unless ACCELKIT_REGEN_GOLDEN=1 is set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from accelkit.cli import main
from accelkit.matrix import GITHUB_FIELDS
from tests.helpers import REPO
from tests.matrices import BILLION_LAUGHS, MATRICES, ROCM, line_of, write_matrix

GOLDEN = REPO / "tests" / "golden"
REGEN_ENV = "ACCELKIT_REGEN_GOLDEN"


@pytest.fixture(autouse=True)
def _not_in_github_actions(monkeypatch: pytest.MonkeyPatch) -> None:
    # In GitHub Actions the CLI adds an ::error:: line on stdout; these tests check stdout.
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(args)
    out, err = capsys.readouterr()
    return int(info.value.code or 0), out, err


@pytest.mark.parametrize("name", ["nightly", "pr"])
def test_github_output_matches_golden(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["matrix", "github", str(MATRICES / f"{name}.yaml")], capsys)
    assert (code, err) == (0, "")
    assert out.count("\n") == 1, "compact: one line"
    data = json.loads(out)
    assert list(data) == ["include"]
    for item in data["include"]:
        assert tuple(item) == GITHUB_FIELDS
    pretty = json.dumps(data, indent=2) + "\n"
    golden = GOLDEN / f"matrix-github-{name}.json"
    if os.environ.get(REGEN_ENV) == "1":
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(pretty)
    assert golden.exists(), f"{golden} missing; run pytest with {REGEN_ENV}=1 to create it"
    assert pretty == golden.read_text(), f"rerun with {REGEN_ENV}=1 if the change is intended"


def test_cli_validate_ok(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["matrix", "validate", str(MATRICES / "nightly.yaml")], capsys)
    assert code == 0
    assert "ok" in out and "legs" in out


def test_cli_validate_bad_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_matrix(tmp_path, ROCM + "    suite: [perf]\n")
    code, out, err = run_cli(["matrix", "validate", str(path)], capsys)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"{path}:{line_of(path, 'suite: [perf]')}:" in err


def test_cli_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["matrix", "validate", str(tmp_path / "nope.yaml")], capsys)
    assert code == 2 and "no such file" in err


def test_cli_empty_result_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    nightly = str(MATRICES / "nightly.yaml")
    code, out, err = run_cli(["matrix", "github", nightly, "--filter", "target=gfx1201"], capsys)
    assert (code, out) == (2, "")
    assert "no legs" in err and "--allow-empty" in err and err.count("\n") == 1
    code, out, _ = run_cli(
        ["matrix", "github", nightly, "--filter", "target=gfx1201", "--allow-empty"], capsys
    )
    assert code == 0 and json.loads(out) == {"include": []}


def test_cli_bad_filter_key_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["matrix", "expand", str(MATRICES / "pr.yaml"), "--filter", "pyhton=3.12"]
    code, _, err = run_cli(args, capsys)
    assert code == 2 and "did you mean 'python'?" in err


def test_cli_expand_json_and_table(capsys: pytest.CaptureFixture[str]) -> None:
    nightly = str(MATRICES / "nightly.yaml")
    code, out, _ = run_cli(["matrix", "expand", nightly, "--json", "-f", "backend=mps"], capsys)
    assert code == 0
    (leg,) = json.loads(out)
    assert leg["name"] == "mps-py3.12" and leg["container"] is False
    code, out, _ = run_cli(["matrix", "expand", nightly, "-f", "backend=cpu"], capsys)
    assert code == 0 and "cpu-py3.12" in out


def test_cli_subprocess_one_line_error_no_traceback(tmp_path: Path) -> None:
    path = tmp_path / "lol.yaml"
    path.write_text(BILLION_LAUGHS)
    result = subprocess.run(
        [sys.executable, "-m", "accelkit", "matrix", "github", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "GITHUB_ACTIONS": ""},
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("accelkit: error: ") and result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr


def test_matrix_cli_module_imports_nothing_heavy() -> None:
    code = (
        "import sys, accelkit.cli.matrix; "
        "heavy = [m for m in ('yaml', 'pydantic', 'torch') if m in sys.modules]; "
        "print(','.join(heavy))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == ""
