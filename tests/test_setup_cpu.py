"""`accelkit setup cpu` and `accelkit test --image` end to end on the real engine (no GPU, no
registry): the test image gets a CPU torch wheel from this machine, a second setup is a
cache hit, and the suite runs inside the image with its results landing on the host."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from accelkit.containers.run import MANAGED_LABEL
from tests.helpers import REPO, assert_one_line_error, run_cli

TORCH_WHEEL_ENV = "ACCELKIT_TEST_TORCH_WHEEL"


def _cpu_torch_wheel(tmp: Path) -> Path | None:
    """A CPU-only torch wheel for this Python from this machine's disk, or None.

    This machine's torch 2.14.1 wheel is a CUDA 13 build whose import needs ~2.4 GB of
    nvidia-* wheels, so a CPU build (+cpu) found in pip's find-links folders is preferred;
    ACCELKIT_TEST_TORCH_WHEEL names another.
    """
    if os.environ.get(TORCH_WHEEL_ENV):
        return Path(os.environ[TORCH_WHEEL_ENV])
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    folders = [*(os.environ.get("PIP_FIND_LINKS") or "").split(), "/opt/wheels"]
    for folder in folders:
        found = sorted(Path(folder).glob(f"torch-*+cpu-{tag}-{tag}-*linux*x86_64.whl"))
        if found:
            return found[-1]
    return None


def _snapshot_source(target: Path) -> Path:
    """A copy of accelkit's source: others editing the checkout must not change the tag."""
    target.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, target / name)
    shutil.copytree(REPO / "accelkit", target / "accelkit",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))  # fmt: skip
    # The wheel carries the Dockerfiles (pyproject's force-include).
    shutil.copytree(REPO / "dockerfiles", target / "dockerfiles")
    # A marker unique to this test run: its image tag is new, so the first setup is a real
    # cold build even on an engine that kept the images of earlier runs.
    (target / "accelkit" / "_test_run_marker.py").write_text(f"RUN = {uuid.uuid4().hex!r}\n")
    return target


@pytest.fixture(scope="module")
def cpu_image(
    base_image: str, docker_client: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("setup-cpu")
    wheel = _cpu_torch_wheel(tmp)
    if wheel is None:
        pytest.skip(f"no CPU torch wheel on this machine (set {TORCH_WHEEL_ENV})")
    source = _snapshot_source(tmp / "accelkit-src")
    args = ["setup", "cpu", "--torch-wheel", str(wheel), "--base-image", base_image,
            "--accelkit-source", str(source), "--json"]  # fmt: skip
    timings = []
    outcomes = []
    for _ in range(2):
        started = time.monotonic()
        proc = run_cli(*args, timeout=1500)
        timings.append(time.monotonic() - started)
        assert proc.returncode == 0, proc.stderr[-4000:]
        outcomes.append(json.loads(proc.stdout))
    print(f"\nsetup cpu: cold {timings[0]:.1f} s, cached {timings[1]:.1f} s")
    yield {"cold": outcomes[0], "cached": outcomes[1], "timings": timings, "wheel": wheel}
    # Each run's image is unique (see _snapshot_source): do not let them pile up.
    docker_client.images.remove(outcomes[0]["image"], force=True)


@pytest.mark.slow
@pytest.mark.docker
def test_setup_cpu_builds_verifies_and_caches(cpu_image: dict[str, Any]) -> None:
    cold, cached = cpu_image["cold"], cpu_image["cached"]
    assert cold["image"] == cached["image"]
    assert cold["cached"] is False
    assert cold["image"].startswith("accelkit-test-cpu:")
    assert cached["cached"] is True
    verified = cached["verified"]
    wheel_version = cpu_image["wheel"].name.split("-")[1]
    assert verified["torch"]["version"] == wheel_version
    assert verified["capabilities"]["cpu"] is True
    assert verified["capabilities"]["inductor"] is True
    # The CPU is every container's device: doctor ran with it, and nothing else was asked.
    assert verified["device"] is True
    assert verified["checks"] == {"accelkit doctor": "with device"}
    cold_s, cached_s = cpu_image["timings"]
    # The cached setup only hashes its inputs and re-verifies the image.
    assert cached["build_s"] < cold["build_s"] / 10, (cold, cached)
    assert cached_s < cold_s / 3, cpu_image["timings"]


@pytest.mark.slow
@pytest.mark.docker
def test_suite_runs_inside_the_image(
    cpu_image: dict[str, Any], docker_client: Any, tmp_path: Path
) -> None:
    image = cpu_image["cached"]["image"]
    before = {
        c.id for c in docker_client.containers.list(all=True, filters={"label": MANAGED_LABEL})
    }
    out = tmp_path / "out"
    out.mkdir()
    proc = run_cli("test", "--device", "cpu", "--image", image, "--suite", "conformance",
                   "-k", "while_loop", "--json", str(out / "results.json"),
                   "--junit", str(out / "junit.xml"), timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads((out / "results.json").read_text())
    assert results["run"]["image"] == image
    assert results["run"]["device"] == "cpu"
    assert "--image" in results["run"]["argv"]
    statuses = [c["status"] for c in results["cases"]]
    assert "passed" in statuses and set(statuses) <= {"passed", "skipped"}, statuses
    assert (out / "junit.xml").read_text().startswith("<?xml")
    assert (out / "results.json").stat().st_uid == os.getuid()
    after = {
        c.id for c in docker_client.containers.list(all=True, filters={"label": MANAGED_LABEL})
    }
    assert after == before


@pytest.mark.slow
@pytest.mark.docker
def test_in_container_bad_selection_is_bad_input(cpu_image: dict[str, Any]) -> None:
    proc = run_cli(
        "test",
        "--device",
        "cpu",
        "--image",
        cpu_image["cached"]["image"],
        "--suite",
        "conformance",
        "-k",
        "no_such_case_anywhere",
        timeout=600,
    )
    assert_one_line_error(proc, 2, "matched no case")


@pytest.mark.docker
def test_missing_image_is_unavailable(docker_client: Any) -> None:
    proc = run_cli(
        "test", "--device", "cpu", "--image", "accelkit-test-cpu:does-not-exist", "-k", "x"
    )
    assert_one_line_error(proc, 3, "not present on the Docker engine")


def test_setup_bad_input(tmp_path: Path) -> None:
    missing = tmp_path / "torch-9.9.9-cp311-cp311-linux_x86_64.whl"
    assert_one_line_error(
        run_cli("setup", "cpu", "--torch-wheel", str(missing)), 2, "does not exist"
    )
    assert_one_line_error(
        run_cli("setup", "cpu", "--torch-index", "https://x/$(id)"), 2, "shell metacharacters"
    )
    assert_one_line_error(
        run_cli(
            "setup",
            "cuda",
            "--arch",
            "sm_107;rm",
            "--torch-index",
            "https://download.pytorch.org/whl/cu134",
        ),
        2,
        "metacharacters",
    )
    assert_one_line_error(
        run_cli(
            "setup",
            "cuda",
            "--arch",
            "sm_999",
            "--torch-index",
            "https://download.pytorch.org/whl/cu134",
        ),
        2,
        "is not a cuda target",
    )
    assert_one_line_error(
        run_cli(
            "setup",
            "cpu",
            "--torch-index",
            "https://example.org/simple",
            "--base-image",
            "ubuntu:24.04 && id",
        ),
        2,
        "metacharacters",
    )
    assert_one_line_error(
        run_cli("setup", "tpu", "--torch-index", "https://e.org/x"), 2, "unknown backend"
    )
    assert_one_line_error(
        run_cli("setup", "mps", "--torch-index", "https://e.org/x"), 2, "without a container"
    )


def test_setup_dry_run_plans_without_docker(tmp_path: Path) -> None:
    env = {"DOCKER_HOST": "unix:///nonexistent.sock"}
    proc = run_cli(
        "setup",
        "cuda",
        "--arch",
        "sm_107",
        "--torch-index",
        "https://download.pytorch.org/whl/cu134",
        "--dry-run",
        "--json",
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)["plan"]
    assert plan["build_args"] == {
        "TORCH_CUDA_ARCH_LIST": "10.7",
        "INDUCTOR_CUDA_ARCH": "107",
        "TRITON_PTXAS": "/opt/venv/bin/ptxas",
    }
    assert plan["requirements"] == ["nvidia-cuda-nvcc>=13.4"]
    assert plan["checks"] == {
        "compile-only sm_107": "accelkit test --device cuda --target sm_107 --compile-only"
    }
    assert "graph_capture" in plan["device_checks"]["graph capture"]
    assert plan["base_image"] == "nvidia/cuda:13.4.0-devel-ubuntu24.04"
    assert plan["dockerfile"].endswith("cuda.Dockerfile")
    assert "nvcc --list-gpu-code" in plan["verify"]
    xpu = json.loads(run_cli("setup", "xpu", "--dry-run", "--json", env=env).stdout)["plan"]
    assert xpu["torch"]["index"] == "https://download.pytorch.org/whl/xpu"


def test_docker_unreachable_is_exit_3(tmp_path: Path) -> None:
    env = {"DOCKER_HOST": "unix:///nonexistent.sock"}
    proc = run_cli("setup", "cpu", "--torch-index", "https://example.org/simple", env=env)
    assert_one_line_error(proc, 3, "Docker engine unreachable")
    proc = run_cli(
        "build", "cpu", "--source", str(tmp_path), "--output", str(tmp_path / "o"), env=env
    )
    assert_one_line_error(proc, 3, "Docker engine unreachable")
    proc = run_cli("test", "--device", "cpu", "--image", "whatever:1", "-k", "x", env=env)
    assert_one_line_error(proc, 3, "Docker engine unreachable")
