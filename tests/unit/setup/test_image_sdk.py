"""`accelkit setup rocm --torch-wheel W`: the wheel's SDK pin (rocm[libraries]==<exact>) comes
from the index its build installed the SDK from, named by the build's manifest beside W, and
from that index alone (the image's install step, accelkit/incontainer/image_install.py).
Nothing starts here: the plan, the install inputs and the install step's pip commands."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from accelkit.errors import BadInput
from accelkit.incontainer import image_install
from accelkit.setup import image
from accelkit.setup.image import image_tag, plan_setup, write_context
from accelkit.setup.request import SetupRequest
from tests import rocm_standin
from tests.rocm_standin import BUILT_INDEX as INDEX
from tests.rocm_standin import BUILT_SDK as SDK
from tests.rocm_standin import built_wheelhouse

SECRET_INDEX = "https://ci:s3cr3t-token@rocm.example.org/whl/"


def _plan(wheelhouse: Path, backend: str = "rocm") -> Any:
    return plan_setup(SetupRequest(backend=backend, torch_wheel=wheelhouse, python="3.11"))


def test_the_plan_takes_the_sdk_and_its_index_from_the_manifest(tmp_path: Path) -> None:
    wheel = built_wheelhouse(tmp_path / "wheelhouse", index=SECRET_INDEX)
    plan = _plan(wheel.parent)  # the folder, as the nightly's leg passes it
    assert plan.torch_wheel == wheel
    assert plan.torch_sdk.index_url == SECRET_INDEX
    assert plan.torch_sdk.requirements == (f"rocm[libraries]=={SDK}",)
    shown = json.dumps(plan.to_dict()) + "\n".join(plan.render())
    assert "s3cr3t" not in shown  # --dry-run and --json never show the credentials
    assert plan.to_dict()["torch"]["sdk"]["index"] == "https://****@rocm.example.org/whl/"
    line = f"    its SDK: rocm[libraries]=={SDK} from https://****@rocm.example.org/whl/ alone"
    assert any(text.startswith(line) for text in plan.render()), plan.render()
    # Another index, another image: its tag hashes the index (never shows it).
    other = built_wheelhouse(tmp_path / "other")
    assert image_tag(plan, "sha256:base") != image_tag(_plan(other.parent), "sha256:base")
    assert "s3cr3t" not in image_tag(plan, "sha256:base")


def test_a_wheel_that_needs_its_manifest_is_refused_without_it(tmp_path: Path) -> None:
    wheel = built_wheelhouse(tmp_path / "wheelhouse", manifest=False)
    with pytest.raises(BadInput, match=r"no manifest\.json of its build is beside it"):
        _plan(wheel)
    # A matrix's file-free check plans the leg before its build has run: nothing to read.
    request = SetupRequest(backend="rocm", torch_wheel=tmp_path / "not-built-yet")
    assert plan_setup(request, check_files=False).torch_sdk is None
    # A backend whose wheels pin no SDK distribution reads no manifest.
    assert _plan(wheel, "cpu").torch_sdk is None


def test_the_install_inputs_split_the_sdk_from_the_other_requirements(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = built_wheelhouse(tmp_path / "wheelhouse")
    accelkit_wheel = rocm_standin.make_wheel(tmp_path, "accelkit", "0.1.0", {"accelkit/x.py": ""})
    monkeypatch.setattr(image, "build_accelkit_wheel", lambda source, into: accelkit_wheel)
    inputs = tmp_path / "inputs"
    write_context(_plan(wheel.parent), tmp_path / "context", inputs, {})
    install = json.loads((inputs / "install.json").read_text())
    assert install["torch_wheels"] == [wheel.name]
    assert install["torch_sdk"] == {
        "index_url": INDEX,
        "requirements": [f"rocm[libraries]=={SDK}"],
    }
    assert (inputs / "torch-requirements.txt").read_text() == "filelock\n"


def test_the_install_step_asks_the_sdk_index_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[tuple[list[str], dict[str, str] | None]] = []

    def run(argv: list[str], check: bool, env: dict[str, str] | None = None) -> Any:
        calls.append((argv, env))
        return subprocess.CompletedProcess(argv, 0)

    monkeypatch.setattr(image_install.subprocess, "run", run)
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "https://pypi.example.org/simple")
    monkeypatch.setenv("PIP_FIND_LINKS", "/opt/wheels")
    monkeypatch.setenv("PIP_CONFIG_FILE", "/tmp/accelkit-context/pip/pip.conf")
    (tmp_path / "pip").mkdir()
    (tmp_path / "pip" / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    image_install.pip_from_sdk_index(tmp_path, SECRET_INDEX, [f"rocm[libraries]=={SDK}"])
    ((argv, env),) = calls
    assert argv[-5:] == [
        "--index-url",
        SECRET_INDEX,
        "--cert",
        str(tmp_path / "pip" / "ca.pem"),
        f"rocm[libraries]=={SDK}",
    ]
    # No configuration file and no PIP_* variable: no extra index, no find-links.
    assert env is not None and env["PIP_CONFIG_FILE"] == os.devnull
    assert not {k for k in env if k.startswith("PIP_")} - {"PIP_CONFIG_FILE"}
    printed = capsys.readouterr().out
    assert "--index-url https://****@rocm.example.org/whl/" in printed
    assert "s3cr3t" not in printed


def test_empty_pip_variables_would_not_have_dropped_an_extra_index(tmp_path: Path) -> None:
    """Why the install step reads no configuration at all: an empty PIP_EXTRA_INDEX_URL does
    not override a pip.conf's extra-index-url (pip falls back to the file's value)."""
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nextra-index-url = https://pypi.example.org/simple\n")
    read = (
        "from pip._internal.commands import create_command; "
        "print(create_command('install').parse_args([])[0].extra_index_urls)"
    )
    env = {"PATH": os.environ["PATH"], "PIP_CONFIG_FILE": str(conf), "PIP_EXTRA_INDEX_URL": ""}
    out = subprocess.run(
        ["python", "-c", read], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert "pypi.example.org" in out
    env["PIP_CONFIG_FILE"] = os.devnull
    out = subprocess.run(
        ["python", "-c", read], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
