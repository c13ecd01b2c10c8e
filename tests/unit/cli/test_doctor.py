"""accelkit.cli.doctor: rendering with fake probes (the real command in subprocesses:
tests/integration/test_doctor.py)."""

from __future__ import annotations

import json

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
