"""The Python and the torch a test image gets (`accelkit setup --python/--torch-channel`):
the plan, the refusal of a wheel for another Python, the verification of the interpreter
inside the image, the torch source record, and (with Docker) install-python.sh on real
Debian base images: bookworm (3.11) and trixie (3.13), made by .ci/run with mmdebstrap."""

from __future__ import annotations

import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from accelkit.errors import BadInput
from accelkit.incontainer import torch_source
from accelkit.probe.fingerprint import fingerprint
from accelkit.setup.image import plan_setup, python_problems, wheel_python_problem
from accelkit.setup.request import SetupRequest
from tests.helpers import REPO

CP311 = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"


@pytest.mark.parametrize(
    ("python_tag", "abi", "python", "problem"),
    [
        ("cp311", "cp311", "3.11", None),
        ("cp311", "cp311", "3.13", "built for cp311, the image's Python is 3.13 (cp313)"),
        ("cp313", "cp313t", "3.13t", None),
        ("cp313", "cp313t", "3.13", "built for the free-threaded build (cp313t)"),
        ("cp313", "cp313", "3.13t", "built for the build with the GIL (cp313)"),
        ("py3", "none", "3.13", None),
    ],
)
def test_wheel_python_problem(python_tag: str, abi: str, python: str, problem: str | None) -> None:
    found = wheel_python_problem(python_tag, abi, python)
    assert found == problem or (problem is not None and found is not None and problem in found)


def test_plan_takes_the_python_and_the_channel(tmp_path: Path) -> None:
    plan = plan_setup(SetupRequest(backend="cpu", python="3.13", torch_channel="nightly"))
    assert plan.build_args["PYTHON_VERSION"] == "3.13"
    assert plan.torch_index == "https://download.pytorch.org/whl/nightly/cpu"
    assert plan.torch_pre and plan.torch_source() == {
        "kind": "index",
        "index": "https://download.pytorch.org/whl/nightly/cpu",
        "spec": "torch",
        "channel": "nightly",
    }
    release = plan_setup(SetupRequest(backend="xpu", torch_channel="release"))
    assert release.torch_index == "https://download.pytorch.org/whl/xpu" and not release.torch_pre
    assert "PYTHON_VERSION" not in release.build_args  # the base image's python3
    wheel = tmp_path / CP311
    wheel.write_bytes(b"")
    with pytest.raises(BadInput, match=r"built for cp311, the image's Python is 3\.13"):
        plan_setup(SetupRequest(backend="cpu", torch_wheel=wheel, python="3.13"))
    with pytest.raises(BadInput, match="with --torch-wheel there is none"):
        plan_setup(SetupRequest(backend="cpu", torch_wheel=wheel, torch_channel="nightly"))
    with pytest.raises(BadInput, match="PyTorch publishes no rocm wheels"):
        plan_setup(SetupRequest(backend="rocm", torch_channel="nightly"))
    with pytest.raises(BadInput, match="unknown channel 'weekly'"):
        plan_setup(SetupRequest(backend="cpu", torch_channel="weekly"))
    with pytest.raises(BadInput, match=r"--python: malformed value '3\.9t'"):
        plan_setup(SetupRequest(backend="cpu", torch_channel="nightly", python="3.9t"))


def test_plan_takes_the_torch_of_the_base_image(tmp_path: Path) -> None:
    base = "nvcr.io/nvidia/pytorch:26.11-py3"
    plan = plan_setup(SetupRequest(backend="cuda", torch_from_base=True, base_image=base))
    assert plan.build_args["SYSTEM_SITE_PACKAGES"] == "1"  # the venv sees the base's torch
    assert plan.torch_index is None and plan.torch_wheel is None and not plan.torch_pre
    assert plan.torch_source() == {"kind": "base", "base_image": base}
    assert plan.to_dict()["torch"]["from_base"] is True
    assert f"  torch: the base image's own (in {base}; nothing installed)" in plan.render()
    assert (
        "SYSTEM_SITE_PACKAGES"
        not in plan_setup(SetupRequest(backend="cuda", torch_channel="nightly")).build_args
    )
    with pytest.raises(BadInput, match="--torch-from-base needs --base-image"):
        plan_setup(SetupRequest(backend="cpu", torch_from_base=True))
    wheel = tmp_path / CP311
    wheel.write_bytes(b"")
    for other, flags in (
        ({"torch_wheel": wheel}, "--torch-wheel"),
        ({"torch_index": "https://e.org/simple", "torch_spec": "torch<3"}, "--torch-index, "),
        ({"torch_channel": "nightly"}, "--torch-channel"),
    ):
        with pytest.raises(BadInput, match=f"installs none: drop {flags}"):
            plan_setup(SetupRequest(backend="cpu", torch_from_base=True, base_image=base, **other))


def test_install_step_needs_a_torch_in_the_base(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from accelkit.incontainer import image_install

    image_install.check_base_torch()  # this interpreter imports torch
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    monkeypatch.setattr(sys, "executable", str(bare / "bin" / "python"))
    with pytest.raises(SystemExit, match=r"imports no torch \(ModuleNotFoundError: No module"):
        image_install.check_base_torch()


def test_install_step_adds_what_the_base_torch_declares_and_lacks() -> None:
    from accelkit.incontainer import image_install

    # What Debian trixie's python3-torch declares, and `pip check` in its venv says.
    declared = [
        "filelock",
        "setuptools; python_version >= '3.12'",
        "sympy==1.13.1; python_version >= '3.9'",
        "nvidia-cublas-cu12==12.4.5.8; platform_system == 'Linux'",
        "opt-einsum>=3.3; extra == 'opt-einsum'",
    ]
    output = (
        "torch 2.6.0+debian requires setuptools, which is not installed.\n"
        "torch 2.6.0+debian requires nvidia-cublas-cu12, which is not installed.\n"
        "torch 2.6.0+debian has requirement sympy==1.13.1, but you have sympy 1.13.3.\n"
        "sphinx 8.1.3 requires babel, which is not installed.\n"
    )
    missing, others = image_install.read_pip_check(output, declared, ["nvidia-*"])
    assert missing == ["setuptools"]  # the GPU runtime skipped, another package's need too
    assert others == ["sympy 1.13.3 (torch asks for sympy==1.13.1)"]
    assert image_install.read_pip_check("No broken requirements found.\n", declared, []) == (
        [],
        [],
    )
    # This interpreter's torch (installed by pip with its requirements) lacks nothing.
    assert image_install.base_torch_requirements(["nvidia-*", "triton", "cuda-*"])[0] == []


def _doctor(version: str, free_threaded: bool = False) -> dict[str, Any]:
    return {"env": {"python": {"version": version, "free_threaded": free_threaded}}}


def test_the_image_python_is_verified() -> None:
    assert python_problems(_doctor("3.13.5"), "3.13") == []
    assert python_problems(_doctor("3.13.5"), None) == []
    assert python_problems(_doctor("3.12.3"), "3.13") == [
        "the image runs Python 3.12.3, not 3.13 (--python 3.13)"
    ]
    assert python_problems(_doctor("3.13.5"), "3.13t") == [
        "the image runs Python 3.13.5 with the GIL, not 3.13t (--python 3.13t)"
    ]
    assert python_problems(_doctor("3.13.5", True), "3.13") == [
        "the image runs Python 3.13.5 free-threaded, not 3.13 (--python 3.13)"
    ]
    assert "reports no Python version" in python_problems({}, "3.13")[0]


def test_fingerprint_says_whether_python_is_free_threaded() -> None:
    python = fingerprint(include_docker=False)["python"]
    assert isinstance(python, dict)
    assert python["free_threaded"] is False and python["gil_enabled"] is True


def test_torch_source_record(tmp_path: Path) -> None:
    record = torch_source.write_record(
        {"kind": "index", "channel": "nightly", "index": "https://x.org/s"}, str(tmp_path)
    )
    assert record["version"] == torch_source.installed_version()  # this interpreter's torch
    assert torch_source.read_record(str(tmp_path)) == record
    assert torch_source.read_record(str(tmp_path / "none")) is None
    with pytest.raises(ValueError, match="kind"):
        torch_source.write_record({"kind": "ftp"}, str(tmp_path))
    base = torch_source.write_record({"kind": "base", "base_image": "b:1"}, str(tmp_path))
    assert base == {"kind": "base", "base_image": "b:1", "version": record["version"]}


def test_install_python_script_is_clean_posix_sh() -> None:
    shellcheck = shutil.which("shellcheck") or str(Path(sys.executable).with_name("shellcheck"))
    script = REPO / "dockerfiles" / "install-python.sh"
    proc = subprocess.run(
        [shellcheck, "--shell=sh", str(script)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --- install-python.sh in real Debian images (Docker) -------------------------------------


@pytest.fixture(scope="module")
def python_images(base_image: str, trixie_image: str) -> dict[str, str]:
    """The bookworm and trixie base images (CI builds both with mmdebstrap)."""
    return {"3.11": base_image, "3.13": trixie_image}


def _system_part(client: Any, base: str, python: str, tag: str, tmp: Path) -> list[str]:
    """Build the system part of cpu.Dockerfile on `base` for `python`; its log lines."""
    from accelkit.containers.images import build_from_base

    context = tmp / tag.replace(":", "-")
    context.mkdir()
    dockerfile = (REPO / "dockerfiles" / "cpu.Dockerfile").read_text(encoding="utf-8")
    # Only what comes before the install step: the interpreter, its venv and its check,
    # no torch (the install step starts by copying the script that fetches its inputs).
    system, marker, _ = dockerfile.partition("\nCOPY fetch_inputs.py ")
    assert marker, "cpu.Dockerfile no longer has its install step where this test cuts it"
    (context / "Dockerfile").write_text(system + "\n")
    shutil.copyfile(REPO / "dockerfiles" / "install-python.sh", context / "install-python.sh")
    lines: list[str] = []
    build_from_base(
        client, base, context, tag, build_args={"PYTHON_VERSION": python}, on_line=lines.append
    )
    return lines


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.timeout(900)
def test_install_python_on_bookworm_and_trixie(
    python_images: dict[str, str], docker_client: Any, tmp_path: Path
) -> None:
    from accelkit.containers.run import run_container
    from accelkit.errors import AccelkitError

    # Bookworm's 3.11 is built by every CPU setup on it (the rehearsal's cpu-py3.11 leg):
    # here trixie's 3.13, and a bookworm asked for 3.13.
    tag = f"accelkit-test-python:313-{uuid.uuid4().hex[:8]}"
    try:
        # (Its log says "install-python.sh: Python 3.13.x" unless the engine cached the step.)
        _system_part(docker_client, python_images["3.13"], "3.13", tag, tmp_path)
        command = ["/opt/venv/bin/python", "-c", "import sys; print(sys.version)"]
        result = run_container(docker_client, tag, command)
        assert result.output_tail[-1].startswith("3.13."), result.output_tail
    finally:
        docker_client.images.remove(tag, force=True, noprune=True)
    # Bookworm has no Python 3.13: the build fails with the script's one line.
    with pytest.raises(AccelkitError) as info:
        _system_part(
            docker_client, python_images["3.11"], "3.13", "accelkit-test-python:x", tmp_path
        )
    assert "Python 3.13 is neither in this base image nor in its package sources" in str(info.value)
