"""`accelkit doctor`: rendering with fake probes, then the real command in subprocesses."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

import accelkit.cli.doctor  # noqa: F401  (registers the command on the app)
from accelkit.backends import Availability
from accelkit.cli import app
from accelkit.probe import capabilities as caps
from accelkit.probe import fingerprint as fp

FAKE_ENV: dict[str, object] = {
    "accelkit": "0.0.test",
    "python": {"version": "3.11.0", "implementation": "CPython", "executable": "/py[x]"},
    "os": {"kernel": "6.1", "machine": "x86_64", "distro": {"name": "Debian 12"}},
    "cpu": {"error": "PermissionError: no /proc"},
    "host": {"name": "box"},
    "torch": {"installed": True, "version": "2.14.1", "git_version": "abc", "cuda": "13.0"},
    "backends": {
        "cpu": {"available": True, "reason": "", "devices": [{"name": "EPYC"}], "versions": {}},
        "xpu": {"available": False, "reason": "torch built without XPU support", "devices": []},
    },
    "env": {"CUDA_VISIBLE_DEVICES": "0"},
    "docker": {"engine": None},
}
FAKE_CAPS = {
    "cpu": Availability(True, ""),
    "xpu": Availability(False, "torch built without XPU support"),
    "switch": Availability(True, ""),
    "xpu_graph": Availability(False, "torch built without XPU support"),
}


@pytest.fixture
def fake_probes(monkeypatch):
    monkeypatch.setattr(fp, "fingerprint", lambda **_: FAKE_ENV)
    monkeypatch.setattr(caps, "capabilities", lambda: FAKE_CAPS)


def test_json_is_one_object_with_env_and_capabilities(fake_probes):
    result = CliRunner().invoke(app, ["doctor", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "env": FAKE_ENV,
        "capabilities": {
            name: {"available": a.available, "reason": a.reason} for name, a in FAKE_CAPS.items()
        },
    }


def test_human_output_has_both_tables(fake_probes):
    result = CliRunner().invoke(app, ["doctor"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    out = result.stdout
    for text in (
        "Environment",
        "Capabilities",
        "2.14.1",
        "/py[x]",  # data is not read as rich markup
        "PermissionError: no /proc",
        "CUDA_VISIBLE_DEVICES=0",
        "no engine answered",
        "torch built without XPU support",
        "✓",
        "✗",
        "2 of 4 capabilities available.",
    ):
        assert text in out, text


def _run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONIOENCODING": "utf-8", "COLUMNS": "200"}
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
    assert found["switch"] == {"available": True, "reason": ""}
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
