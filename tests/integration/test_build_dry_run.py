"""`accelkit build --dry-run` and bad input, end to end in a subprocess: every step of TheRock's
build in the plan, the flags the nightly passes, one-line errors before the engine is asked,
and no torch or docker imported (the plans as data: tests/unit/wheels/test_plan.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import assert_one_line_error, run_cli

NO_DOCKER = {"DOCKER_HOST": "unix:///nonexistent.sock"}


def test_rocm_plan_follows_therock_step_by_step(tmp_path: Path) -> None:
    """Every step of TheRock's build_prod_wheels.py shows in --dry-run --json, each ROCm step
    names the reference step it follows, and each deliberate difference carries a note."""
    proc = run_cli(
        "build",
        "rocm",
        "--rocm-version=7.14",
        "--gfx=gfx942",
        "--dry-run",
        "--json",
        "--output",
        str(tmp_path / "o"),
        env=NO_DOCKER,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["reference"] == "TheRock external-builds/pytorch/build_prod_wheels.py"
    text = proc.stdout
    for needle in (
        "pip cache remove rocm",
        "--force-reinstall",
        "rocm-sdk",
        "USE_MPI",
        "USE_NUMA",
        "-Wno-error=maybe-uninitialized",
        "rocm_sysdeps/include",
        "include/roctracer",
        "rocm_sysdeps/lib",
        "PKG_CONFIG_PATH",
        "LD_LIBRARY_PATH",
        "host-math",
        "USE_FLASH_ATTENTION",
        "USE_MEM_EFF_ATTENTION",
        "requirements-build.txt",
        "force_include",
        "triton/python/requirements.txt",
        "triton==<the version",
        "TRITON_WHEEL_VERSION_SUFFIX",
        "check_version",
        "@{rocm_local}",
    ):
        assert needle in text, needle
    unreferenced = [s["name"] for s in data["steps"] if not s["reference"]]
    assert unreferenced == ["sdk-libraries", "checkout", "build-requirements"], unreferenced
    notes = {s["name"]: s["note"] for s in data["steps"] if s["note"]}
    assert set(notes) == {"sdk-resolve", "sdk-libraries"}
    assert any("smoke test" in note for note in data["notes"])
    text = run_cli(
        "build", "rocm", "--rocm-version=7.14", "--gfx=gfx942", "--dry-run", env=NO_DOCKER
    ).stdout
    assert "reference: do_install_rocm: pip cache remove rocm" in text
    assert "differs: a bare X.Y is the newest X.Y.*" in text


def test_nightly_build_args_plan(tmp_path: Path) -> None:
    # The flags .github/workflows/nightly.yml passes (matrices/nightly.yaml build_args).
    proc = run_cli(
        "build",
        "rocm",
        "--rocm-version=7.14",
        "--gfx=gfx942",
        "--family=gfx94X-dcgpu",
        "--python=3.12",
        "--torch-ref=release/2.14",
        "--output",
        str(tmp_path / "wheelhouse"),
        "--json",
        "--dry-run",
        env=NO_DOCKER,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["requirement"] == "rocm[libraries,devel]==@{rocm_version}"
    text = run_cli(
        "build", "rocm", "--rocm-version=7.14", "--gfx=gfx942", "--dry-run", env=NO_DOCKER
    )
    assert "PYTORCH_ROCM_ARCH=gfx942" in text.stdout
    assert "rocm[libraries,devel,device-gfx942]==@{rocm_version}" in text.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (
            ["--rocm-version", "7.14", "--gfx", "gfx9999"],
            "'gfx9999' is not a rocm target (did you mean 'gfx950'?); valid: gfx1010",
        ),
        (
            ["--rocm-version", "7.14", "--gfx", "gfx942", "--family", "gfx95X"],
            "unknown GPU family 'gfx95X'; valid:",
        ),
        (
            ["--rocm-version", "7.14", "--gfx", "gfx1100", "--family", "gfx94X-dcgpu"],
            "is not in family",
        ),
        (["--rocm-version", "seven", "--gfx", "gfx942"], "malformed ROCm SDK version"),
        (["--rocm-version", "7", "--gfx", "gfx942"], "malformed ROCm SDK version '7'"),
        (["--rocm-version", "v7.14", "--gfx", "gfx942"], "malformed ROCm SDK version"),
        (["--rocm-version", "7.14.0-rc1", "--gfx", "gfx942"], "X.Y (the newest X.Y.*"),
        (["--rocm-version", "7.14.0b1", "--gfx", "gfx942"], "malformed ROCm SDK version"),
        (["--rocm-version", "7.14.x", "--gfx", "gfx942"], "malformed ROCm SDK version"),
        (["--rocm-version", "7.14", "--gfx", "gfx942", "--python", "3.x"], "--python"),
        (
            ["--rocm-version", "7.14", "--gfx", "gfx942", "--torch-version", "2.14.1-x"],
            "--torch-version",
        ),
        (["--rocm-version", "7.14;touch /tmp/pwned", "--gfx", "gfx942"], "metacharacters"),
        (["--rocm-version", "7.14", "--gfx", "gfx942$(id)"], "metacharacters"),
        (
            ["--rocm-version", "7.14", "--gfx", "gfx942", "--torch-ref", "main`id`"],
            "metacharacters",
        ),
        (
            ["--rocm-version", "7.14", "--gfx", "gfx942", "--index-url", "https://x|sh"],
            "metacharacters",
        ),
        (
            ["--rocm-version", "7.14", "--gfx", "gfx942", "--source", "/nonexistent/src"],
            "is not a directory",
        ),
        (
            ["--rocm-version", "7.14", "--gfx", "gfx942", "--builder-base-image", "a b"],
            "metacharacters",
        ),
        (["--gfx", "gfx942"], "needs --rocm-version"),
    ],
)
def test_build_bad_input(args: list[str], needle: str, tmp_path: Path) -> None:
    # Without --dry-run: bad input must be rejected before the engine is even asked.
    proc = run_cli("build", "rocm", *args, "--output", str(tmp_path / "o"), env=NO_DOCKER)
    assert_one_line_error(proc, 2, needle)
    assert not Path("/tmp/pwned").exists()
    assert not (tmp_path / "o").exists()


def test_dry_run_never_imports_torch_or_docker() -> None:
    # (pydantic is left out: recent typer releases import it themselves.)
    code = (
        "import sys\n"
        "from accelkit.cli import main\n"
        "try:\n"
        "    main(['build', 'rocm', '--rocm-version', '7.14', '--gfx', 'gfx942', '--dry-run'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "bad = [m for m in ('torch', 'docker') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
