"""`accelkit compare` end to end: exit codes, its JSON and Markdown outputs, one-line errors,
and the command's light imports (the verdicts themselves: tests/unit/results/test_compare.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from accelkit.cli import main
from accelkit.results.compare import compare
from accelkit.results.model import SCHEMA_ID, Results
from accelkit.results.render.markdown import comparison_markdown
from tests.factories import STATUS_BASE, STATUS_NEW, case, grouped_run, perf_run, results


def write(path: Path, data: Results | dict[str, Any] | str) -> Path:
    if isinstance(data, Results):
        text = json.dumps(data.to_json_dict())
    elif isinstance(data, dict):
        text = json.dumps(data)
    else:
        text = data
    path.write_text(text, encoding="utf-8")
    return path


def run_cli(args: list[str]) -> int:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    code = exit_info.value.code
    return int(code) if code is not None else 0


def test_cli_exit_0_for_an_unchanged_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # one table row per line
    base = write(tmp_path / "base.json", perf_run())
    new = write(tmp_path / "new.json", perf_run(seed=10))
    assert run_cli(["compare", str(base), str(new)]) == 0
    out = capsys.readouterr().out
    assert "perf/mm[float32-256]" in out  # rich markup did not eat the brackets
    assert "0 regressed" in out


def test_cli_exit_1_and_json_on_a_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = write(tmp_path / "base.json", perf_run(1e-3))
    new = write(tmp_path / "new.json", perf_run(1.15e-3, seed=10))
    assert run_cli(["compare", str(base), str(new), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["summary"]["regressed"] == 2
    assert {m["verdict"] for m in data["metrics"]} == {"regressed", "unchanged"}


def test_cli_json_carries_group_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = write(tmp_path / "base.json", grouped_run(seed=1))
    new = write(tmp_path / "new.json", grouped_run(seed=2))
    assert run_cli(["compare", str(base), str(new), "--json"]) == 0
    rows = {m["case"]: m for m in json.loads(capsys.readouterr().out)["metrics"]}
    assert (rows["perf/mm[float32-256]"]["base_groups"], rows["perf/add[1M]"]["new_groups"]) == (
        5,
        None,
    )


def test_cli_exit_1_on_a_newly_failing_case(tmp_path: Path) -> None:
    base = write(tmp_path / "base.json", results(STATUS_BASE))
    new = write(tmp_path / "new.json", results(STATUS_NEW))
    assert run_cli(["compare", str(base), str(new)]) == 1


def test_cli_threshold_option(tmp_path: Path) -> None:
    base = write(tmp_path / "base.json", perf_run(1e-3))
    new = write(tmp_path / "new.json", perf_run(1.15e-3, seed=10))
    assert run_cli(["compare", str(base), str(new), "--threshold", "0.5"]) == 0


def test_cli_writes_markdown_atomically(tmp_path: Path) -> None:
    base = write(tmp_path / "base.json", perf_run(1e-3))
    new = write(tmp_path / "new.json", perf_run(1.15e-3, seed=10))
    summary = tmp_path / "summary.md"
    assert run_cli(["compare", str(base), str(new), "--markdown", str(summary)]) == 1
    text = summary.read_text(encoding="utf-8")
    assert "### Regressions" in text and "perf/mm[float32-256]" in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["base.json", "new.json", "summary.md"]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "no such file"),
        ("{not json", "not valid JSON"),
        ({"schema": "accelkit.results/99", "run": {}}, "unknown schema"),
        ({"schema": SCHEMA_ID, "run": {"started": "x"}}, "invalid results file"),
    ],
)
def test_cli_exit_2_on_bad_input_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: Any, expected: str
) -> None:
    base = write(tmp_path / "base.json", perf_run())
    new = tmp_path / "new.json"
    if content is not None:
        write(new, content)
    assert run_cli(["compare", str(base), str(new)]) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1
    assert captured.err.startswith("accelkit: error: ") and expected in captured.err
    assert "Traceback" not in captured.err


def test_cli_markdown_into_a_missing_directory_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = write(tmp_path / "base.json", perf_run(1e-3))
    new = write(tmp_path / "new.json", perf_run(1.15e-3, seed=10))
    target = tmp_path / "missing" / "summary.md"
    assert run_cli(["compare", str(base), str(new), "--markdown", str(target), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing half-done: no JSON either
    assert "--markdown" in captured.err and "does not exist" in captured.err
    assert not target.parent.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["base.json", "new.json"]


def test_cli_rejects_a_bad_threshold(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = write(tmp_path / "base.json", perf_run())
    assert run_cli(["compare", str(base), str(base), "--threshold", "3"]) == 2
    assert "--threshold" in capsys.readouterr().err


def test_compare_command_module_imports_no_numpy_or_pydantic() -> None:
    code = (
        "import sys\n"
        "import accelkit.cli.compare\n"
        "heavy = [m for m in ('numpy', 'pydantic', 'torch') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr


@pytest.mark.slow
def test_cli_in_a_subprocess(tmp_path: Path) -> None:
    base = write(tmp_path / "base.json", perf_run(1e-3))
    new = write(tmp_path / "new.json", perf_run(1.15e-3, seed=10))
    out = subprocess.run(
        ["accelkit", "compare", str(base), str(new), "--json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert out.returncode == 1, out.stderr
    assert json.loads(out.stdout)["summary"]["regressed"] == 2
    same = subprocess.run(
        ["accelkit", "compare", str(base), str(base)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert same.returncode == 0, same.stderr
    bad = subprocess.run(
        ["accelkit", "compare", str(base), str(tmp_path / "absent.json")],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert bad.returncode == 2
    assert bad.stderr.strip().count("\n") == 0 and "no such file" in bad.stderr


def _fingerprint(name: str, driver: str, torch: str, git: str, accelkit: str) -> dict[str, Any]:
    return {
        "accelkit": accelkit,
        "torch": {"version": torch, "git_version": git},
        "backends": {"cuda": {"devices": [{"index": 0, "name": name, "driver": driver}]}},
    }


def test_environment_differences_are_reported_before_any_verdict(tmp_path: Path) -> None:
    h200 = _fingerprint("NVIDIA H200", "580.65", "2.14.1", "abc123", "0.1.0")
    b200 = _fingerprint("NVIDIA B200", "590.10", "2.15.0.dev20261201", "def456", "0.2.0")
    base = results([case("c/x", suite="conformance")], device="cuda", env=h200)
    same = compare(base, results([case("c/x", suite="conformance")], device="cuda", env=h200))
    assert same.environment == () and same.summary()["same_environment"] is True
    new = results([case("c/x", suite="conformance")], device="cuda", env=b200, target="sm_100")
    comparison = compare(base, new)
    assert [(d.field, d.base, d.new) for d in comparison.environment] == [
        ("target", None, "sm_100"),
        ("device_name", "NVIDIA H200", "NVIDIA B200"),
        ("driver", "580.65", "590.10"),
        ("torch_version", "2.14.1", "2.15.0.dev20261201"),
        ("torch_git", "abc123", "def456"),
        ("accelkit", "0.1.0", "0.2.0"),
    ]
    assert comparison.summary()["same_environment"] is False
    assert not comparison.fails  # reported, not a failure by itself
    data = comparison.to_json_dict()
    assert data["environment"][1] == {
        "field": "device_name",
        "label": "device",
        "base": "NVIDIA H200",
        "new": "NVIDIA B200",
    }
    text = comparison_markdown(comparison)
    assert "differ in their environment" in text.split("###")[0]
    assert "| device | NVIDIA H200 | NVIDIA B200 |" in text
    # The CLI says it too, above its tables and in its last line.
    base_path, new_path = tmp_path / "base.json", tmp_path / "new.json"
    base_path.write_text(json.dumps(base.to_json_dict()))
    new_path.write_text(json.dumps(new.to_json_dict()))
    proc = subprocess.run(
        [sys.executable, "-m", "accelkit", "compare", str(base_path), str(new_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    said = " ".join(proc.stdout.split())
    assert said.startswith("The runs differ in their environment")
    assert said.endswith(
        "the environments differ: GPU target, device, driver, torch, torch git hash, accelkit"
    )
