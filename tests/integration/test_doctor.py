"""`accelkit doctor` end to end: the real command in subprocesses (its rendering with fake probes:
tests/unit/cli/test_doctor.py)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from accelkit.probe import capabilities as caps


def _run(
    argv: list[str], env: dict[str, str] | None = None, **kwargs: object
) -> subprocess.CompletedProcess[str]:
    env = {**(env or os.environ), "PYTHONIOENCODING": "utf-8", "COLUMNS": "200"}
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=120, env=env, check=False, **kwargs
    )


def _torch_installed() -> bool:
    # find_spec, not an import: collecting tests must not pay for importing torch.
    return importlib.util.find_spec("torch") is not None


@pytest.mark.slow
@pytest.mark.skipif(not _torch_installed(), reason="torch is not importable")
def test_doctor_json_on_this_machine():
    proc = _run([sys.executable, "-m", "accelkit", "doctor", "--json"])
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)  # exactly one JSON document on stdout
    assert set(report) == {"env", "capabilities"}
    found = report["capabilities"]
    assert list(found) == caps.names()
    # Every row says what was checked, for a ✓ as for a ✗, naming the torch it checked.
    import torch

    assert found["switch"] == {
        "available": True,
        "reason": f"torch {torch.__version__} has torch._higher_order_ops.switch",
    }
    assert all(result["reason"] for result in found.values()), found
    assert found["cpu"]["available"] is True
    import torch

    if not torch.xpu.is_available():
        assert found["xpu_graph"]["available"] is False
        assert found["xpu_graph"]["reason"]
    assert report["env"]["torch"]["version"] == torch.__version__


@pytest.mark.slow
def test_doctor_without_torch_says_so():
    code = (
        "import sys; sys.modules['torch'] = None; "
        "from accelkit.cli import main; main(['doctor', '--json'])"
    )
    proc = _run([sys.executable, "-c", code])
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert "torch is not installed" in report["env"]["torch"]["error"]
    for name, result in report["capabilities"].items():
        assert result["available"] is False, name
        assert "torch is not installed" in result["reason"], name

    human = _run([sys.executable, "-c", code.replace(", '--json'", "")])
    assert human.returncode == 0, human.stderr
    assert "torch is not installed" in human.stdout
    assert "0 of" in human.stdout


@pytest.mark.parametrize("argv", [["--help"], ["doctor", "--help"]])
def test_help_does_not_import_torch(argv):
    # pydantic is not checked: typer >= 0.29 itself imports it to coerce option values.
    code = (
        "import sys\n"
        "from accelkit.cli import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in ('torch', 'docker') if m in sys.modules))\n"
    )
    proc = _run([sys.executable, "-c", code])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.slow
@pytest.mark.skipif(not _torch_installed(), reason="torch is not importable")
def test_doctor_sm_107_row_runs_the_compile_only_toolchain_check():
    """Without a ptxas that knows sm_107 (triton's own 13.3), doctor's sm_107 row reads ✗
    with the ptxas version and the fix, the line `accelkit test --device cuda --target sm_107
    --compile-only` exits 3 with (tests/integration/test_test_crosscompile.py)."""
    from tests.toolchains import BUNDLED_BLACKWELL_PTXAS

    env = {**os.environ, "TRITON_PTXAS_BLACKWELL_PATH": str(BUNDLED_BLACKWELL_PTXAS)}
    proc = _run([sys.executable, "-m", "accelkit", "doctor", "--json"], env=env)
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)["capabilities"]["sm_107"]
    assert row["available"] is False
    assert row["reason"].startswith(f"ptxas 13.3 ({BUNDLED_BLACKWELL_PTXAS}) does not know sm_107a")
    assert "pip install nvidia-cuda-nvcc" in row["reason"]
    # The table a person reads says the same, the reason in full even where piped.
    proc = _run([sys.executable, "-m", "accelkit", "doctor"], env=env)
    line = next(ln for ln in proc.stdout.splitlines() if "sm_107 " in ln)
    assert "✗" in line and "ptxas 13.3" in line and "pip install nvidia-cuda-nvcc" in line
