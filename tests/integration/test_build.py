"""`accelkit build rocm` end to end against a stand-in of TheRock's index (tests/rocm_standin.py:
the `rocm` packages of several versions in the multi-arch layout, real gcc-built libraries
behind every library entry, a rocm_sdk as strict as TheRock's) and a stand-in PyTorch tree that
builds with scikit-build-core (tests/fixtures/rocm/torch-src). Same code path as a real build;
only the inputs differ. Warnings of rocm_sdk (its version-mismatch warning) are errors here.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from accelkit.backends import rocm as backend
from accelkit.containers.run import MANAGED_LABEL
from accelkit.wheels.wheel import init_module_call, requires_dist
from tests import rocm_standin
from tests.helpers import assert_one_line_error, run_cli

GFX = "gfx942"
#: What --rocm-version 7.14 must give with the stand-in index: not 7.14.1rc1 (a pre-release),
#: not 7.15.0a... (another series), not 7.14.0a20261128 (a nightly, older anyway).
EXACT = "7.14.0"
WHEEL = f"torch-2.14.1+rocm{EXACT}-cp311-cp311-linux_x86_64.whl"
#: rocm_sdk's version-mismatch warning (and any other of its warnings) fails an import.
SDK_WARNINGS_ARE_ERRORS = f"error::UserWarning:{backend.SDK_MODULE}"

# Each test checks that its build left no builder container behind, by listing the engine's
# ROCm builder containers before and after: two of these builds at once (one per xdist
# worker) would see each other's. One worker runs them, one after the other.
pytestmark = pytest.mark.xdist_group("rocm-build")


@pytest.fixture(scope="module")
def standin_libraries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    return rocm_standin.build_libraries(tmp_path_factory.mktemp("standin-libs"))


@pytest.fixture(scope="module")
def rocm_index(
    tmp_path_factory: pytest.TempPathFactory, standin_libraries: dict[str, bytes]
) -> Iterator[str]:
    root = tmp_path_factory.mktemp("rocm-index")
    rocm_standin.write_index(root, standin_libraries, layout="multi-arch")
    with rocm_standin.serve(root) as url:
        yield url


def _managed(client: Any) -> set[str]:
    """accelkit's containers of the ROCm builder image (the engine is shared with other
    tests, whose containers come and go meanwhile)."""
    containers = client.containers.list(all=True, filters={"label": MANAGED_LABEL})
    return {c.id for c in containers if "accelkit-builder-rocm" in " ".join(c.image.tags)}


def _build_args(source: Path, index: str, base_image: str, output: Path, version: str) -> list[str]:
    return [
        "build",
        "rocm",
        f"--rocm-version={version}",
        f"--gfx={GFX}",
        "--python=3.11",
        "--source",
        str(source),
        "--index-url",
        index,
        "--builder-base-image",
        base_image,
        "--no-triton",
        "--output",
        str(output),
        "--json",
    ]


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.timeout(900)
def test_build_rocm_end_to_end(
    rocm_index: str, base_image: str, docker_client: Any, tmp_path: Path
) -> None:
    before = _managed(docker_client)
    output = tmp_path / "wheelhouse"
    started = time.monotonic()
    proc = run_cli(
        *_build_args(rocm_standin.TORCH_SOURCE, rocm_index, base_image, output, "7.14"),
        timeout=600,
    )
    build_seconds = time.monotonic() - started
    assert proc.returncode == 0, proc.stdout + proc.stderr[-6000:]
    # Not a terminal (a CI log): one line per step and state, no spinner frames (braille).
    assert "step builder-image: " in proc.stderr and "step smoke: done" in proc.stderr
    assert not any("\u2800" <= ch <= "\u28ff" for ch in proc.stderr), proc.stderr[-2000:]
    outcome = json.loads(proc.stdout)
    wheels = [Path(w) for w in outcome["wheels"]]
    # The installed SDK's exact version names the wheel (TheRock's +rocm<X.Y.Z>).
    assert [w.name for w in wheels] == [WHEEL]
    assert outcome["resolved"]["rocm_version"] == EXACT
    manifest = json.loads((output / "manifest.json").read_text())
    assert manifest["schema"] == "accelkit.build-manifest/1"
    assert manifest["resolved"]["rocm_version"] == EXACT
    assert manifest["artifacts"][0]["sha256"] == hashlib.sha256(wheels[0].read_bytes()).hexdigest()
    assert manifest["validation"][0]["ok"] is True, manifest["validation"]
    assert "GPU code objects" in manifest["validation"][0]["checked"]
    # The smoke test is on by default: a clean container imported the wheel.
    assert manifest["smoke"]["ok"] is True
    for step in (
        "sdk-resolve",
        "sdk",
        "sdk-version",
        "sdk-libraries",
        "sdk-paths",
        "checkout",
        "hipify",
        "rocm-init",
        "build-backend",
        "wheel",
        "smoke",
    ):
        assert step in manifest["durations_s"], manifest["durations_s"]
    log = (output / "build-rocm.log").read_text()
    assert f"rocm 7.14 -> {EXACT}" in log
    assert f"rocm[libraries,devel,device-{GFX}]=={EXACT}" in log
    assert "-Cwheel.force-include.torch/_rocm_init.py=torch/_rocm_init.py" in log
    assert "stand_in_hipcc: code objects for gfx942" in log
    # The wheel pins exactly what it was built against.
    assert f"rocm[libraries]=={EXACT}" in requires_dist(wheels[0])
    with zipfile.ZipFile(wheels[0]) as archive:
        init = archive.read("torch/_rocm_init.py").decode()
    preload, check_version = init_module_call(init)
    assert preload == list(backend.PRELOAD_SHORTNAMES)
    assert check_version == EXACT
    assert _managed(docker_client) == before  # every container removed

    # A fresh venv with the wheel and the index's rocm[libraries]: import torch preloads every
    # library through rocm_sdk, without a warning (the test image's own verification).
    started = time.monotonic()
    python = rocm_standin.fresh_venv(tmp_path / "venv")
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--index-url", rocm_index, str(wheels[0])],
        check=True,
        env={"PATH": "/usr/bin:/bin", "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    probe = subprocess.run(
        [str(python), "-W", SDK_WARNINGS_ARE_ERRORS, "-c", backend.preload_probe()],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    venv_seconds = time.monotonic() - started
    assert probe.returncode == 0, probe.stderr
    assert backend.preload_problems(probe.stdout) == [], probe.stdout

    # The stand-in SDK in that venv is as strict as TheRock's: the names accelkit used to
    # preload are unknown (no rocm_sysdeps_numa; miopen, not MIOpen), and a version that is
    # not the installed one warns, which the tests' filter makes an error.
    def check(names: str, version: str) -> subprocess.CompletedProcess[str]:
        argv = [str(python), "-W", SDK_WARNINGS_ARE_ERRORS, "-c", rocm_standin.PRELOAD_CHECK]
        return subprocess.run([*argv, names, version], capture_output=True, text=True, check=False)

    for name in ("rocm_sysdeps_numa", "MIOpen"):
        assert f"ModuleNotFoundError: Unknown rocm library '{name}'" in check(name, EXACT).stderr
    mismatch = check("amdhip64", "7.14")
    assert mismatch.returncode != 0
    assert (
        "UserWarning: The program was compiled against a ROCm version matching '7\\.14' but "
        f"the installed ROCm version in this Python environment is {EXACT}." in mismatch.stderr
    )
    print(f"build rocm (stand-in): build + smoke {build_seconds:.1f} s")
    print(f"fresh venv, install, import torch: {venv_seconds:.1f} s")


@pytest.mark.slow
@pytest.mark.docker
def test_version_missing_from_the_index_exits_3(
    rocm_index: str, base_image: str, tmp_path: Path
) -> None:
    # 7.15 has only a nightly in the index: without --pre there is no 7.15 to build against.
    output = tmp_path / "out"
    args = _build_args(rocm_standin.TORCH_SOURCE, rocm_index, base_image, output, "7.15")
    proc = run_cli(*[a for a in args if a != "--json"], timeout=600)
    assert_one_line_error(proc, 3, "rocm 7.15 is not in")
    assert "only pre-releases match: add --pre" in proc.stderr
    assert "it has: 7.15.0a20270105, 7.14.1rc1, 7.14.0, 7.14.0a20261128, 7.13.2" in proc.stderr
    assert not list(output.glob("*.whl"))
    assert not (output / "manifest.json").exists()


@pytest.mark.slow
@pytest.mark.docker
def test_failing_step_reports_no_wheel(
    rocm_index: str, base_image: str, docker_client: Any, tmp_path: Path
) -> None:
    source = tmp_path / "broken-src"
    shutil.copytree(rocm_standin.TORCH_SOURCE, source)
    (source / "tools" / "amd_build" / "build_amd.py").write_text(
        "raise SystemExit('hipify exploded')\n"
    )
    before = _managed(docker_client)
    output = tmp_path / "out"
    proc = run_cli(*_build_args(source, rocm_index, base_image, output, EXACT), timeout=600)
    assert proc.returncode == 1, proc.stderr
    assert "hipify exploded" in proc.stderr
    assert str(output / "build-rocm.log") in proc.stderr
    assert not list(output.glob("*.whl"))
    assert not (output / "manifest.json").exists()
    assert _managed(docker_client) == before
