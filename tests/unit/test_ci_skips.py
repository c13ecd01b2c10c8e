"""The CI rule on skips (tests/conftest.py): under CI=true a skip fails unless its reason is
on ALLOWED_SKIPS_IN_CI. Checked on a small generated test folder in a real pytest
subprocess that loads the rule from tests/conftest.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ALLOWED_SKIPS_IN_CI, allowed_skip
from tests.helpers import REPO

TESTS = """
import pytest

def test_passes():
    pass

def test_skips_for_a_missing_tool():
    pytest.skip("widget is not installed")

@pytest.mark.skipif(True, reason="widget is not installed")
def test_skipif_mark():
    pass

def test_skips_for_hardware_it_has():
    pytest.skip("this machine has a CUDA device")

def test_xfail_is_not_a_skip():
    pytest.xfail("a known failure")
"""

MODULE_SKIP = 'import pytest\npytest.skip("whole module: no widget", allow_module_level=True)\n'


def _run(folder: Path, ci: str | None) -> str:
    (folder / "conftest.py").write_text(
        "from tests.conftest import pytest_make_collect_report, pytest_runtest_makereport\n"
    )
    (folder / "test_cases.py").write_text(TESTS)
    (folder / "test_module_skip.py").write_text(MODULE_SKIP)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    if ci is not None:
        env["CI"] = ci
    # A skip at collection becomes a collection error, which stops a run; here the rest of
    # the run must still show.
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA"]
    argv += ["--continue-on-collection-errors", str(folder)]
    proc = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        cwd=folder,
        env=env,
        timeout=120,
        check=False,
    )
    return proc.stdout + proc.stderr


def test_in_ci_an_unlisted_skip_fails(tmp_path: Path) -> None:
    out = _run(tmp_path, "true")
    assert "FAILED test_cases.py::test_skips_for_a_missing_tool" in out, out
    assert "ERROR test_cases.py::test_skipif_mark" in out, out  # skipped at setup
    assert "ERROR test_module_skip.py" in out, out  # skipped at collection
    assert "not in ALLOWED_SKIPS_IN_CI" in out and "widget is not installed" in out, out
    assert "SKIPPED [1] test_cases.py" in out and "this machine has a CUDA device" in out, out
    assert "XFAIL test_cases.py::test_xfail_is_not_a_skip" in out, out
    assert "PASSED test_cases.py::test_passes" in out, out


@pytest.mark.parametrize("ci", [None, "false"])
def test_outside_ci_skips_stay_skips(tmp_path: Path, ci: str | None) -> None:
    out = _run(tmp_path, ci)
    assert "FAILED" not in out and "ERROR" not in out, out
    assert out.count("SKIPPED") == 4, out


def test_the_allow_list_is_short_and_explained() -> None:
    assert len(ALLOWED_SKIPS_IN_CI) <= 5
    for entry in ALLOWED_SKIPS_IN_CI:
        assert len(entry.why) > 40, entry
    assert allowed_skip("this machine has an XPU") is not None
    assert allowed_skip("torch is not installed") is None
    assert allowed_skip("no CPU torch wheel on this machine") is None
