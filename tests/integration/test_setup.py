"""`accelkit setup cpu` and `accelkit test --image` end to end on the real engine (no GPU, no
registry): the test image gets a CPU torch wheel from this machine, a second setup is a
cache hit, and the suite runs inside the image with its results landing on the host."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests import rocm_standin
from tests.helpers import (
    IMAGE_TESTS_TIMEOUT_S,
    CpuTestImage,
    LegRehearsal,
    assert_one_line_error,
    run_cli,
)


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.timeout(IMAGE_TESTS_TIMEOUT_S)
def test_setup_cpu_builds_verifies_and_caches(cpu_test_image: CpuTestImage) -> None:
    """The one cold image build of the session (how fast, cold and cached:
    benchmarks/bench_setup.py)."""
    cold, cached = cpu_test_image.cold, cpu_test_image.cached
    assert cold["image"] == cached["image"]
    assert cold["cached"] is False
    assert cold["image"].startswith("accelkit-test-cpu:")
    assert cached["cached"] is True
    verified = cached["verified"]
    wheel_version = cpu_test_image.wheel.name.split("-")[1]
    assert verified["torch"]["version"] == wheel_version
    assert verified["capabilities"]["cpu"] is True
    assert verified["capabilities"]["inductor"] is True
    # The CPU is every container's device: doctor ran with it, and nothing else was asked.
    assert verified["device"] is True
    assert verified["checks"] == {"accelkit doctor": "with device"}


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.timeout(IMAGE_TESTS_TIMEOUT_S)
def test_image_keeps_no_pip_settings_and_no_torch_wheel(
    cpu_test_image: CpuTestImage, docker_client: Any
) -> None:
    """The image builds in one stage, its install inputs served from the host: no layer holds
    the pip settings or the wheel files, and its history only the served URL, dead now
    (tests/unit/containers/test_build_inputs.py proves it with an index URL with
    credentials)."""
    image = cpu_test_image.image
    history = docker_client.api.history(image)
    created_by = "\n".join(str(entry.get("CreatedBy", "")) for entry in history)
    assert " in /opt/venv" not in created_by  # one stage: the venv is never copied
    assert "ACCELKIT_INPUTS_URL=http://127.0.0.1:" in created_by
    assert "BEGIN CERTIFICATE" not in created_by and "index-url" not in created_by
    # The inputs reach the image only through its one RUN step, which deletes them: a file
    # deleted within a step is in no layer, so the final tree shows what the layers hold
    # (a `docker save` scan of the 1.7 GB image said the same in 24 s; the unit tests scan
    # their small images' layers for planted credentials).
    find = ["find", "/", "-xdev", "(", "-name", "pip.conf", "-o", "-name", "ca.pem", "-o"]
    find += ["-name", "*.whl", "-o", "-path", "*accelkit-context*", ")", "-print"]
    out = docker_client.containers.run(image, find, remove=True, network_mode="none")
    debian_wheels = "/usr/share/python-wheels/"  # the base image's own pip and setuptools
    left = [n for n in out.decode().split() if not n.startswith(debian_wheels)]
    assert left == [], left[:20]
    torch_init = ["test", "-f", "/opt/venv/lib/python3.11/site-packages/torch/__init__.py"]
    docker_client.containers.run(image, torch_init, remove=True, network_mode="none")


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.timeout(IMAGE_TESTS_TIMEOUT_S)
def test_suite_runs_inside_the_image(cpu_leg_rehearsal: LegRehearsal) -> None:
    """`accelkit test --image`, as the rehearsal of a nightly CPU leg runs it (the
    rehearsal itself: tests/integration/test_matrix_run.py)."""
    rehearsal = cpu_leg_rehearsal
    assert rehearsal.returncode == 0, (rehearsal.stdout[-3000:], rehearsal.stderr[-3000:])
    out = rehearsal.output / "cpu-py3.11"
    results = json.loads((out / "results.json").read_text())
    assert results["run"]["image"] == rehearsal.image
    assert results["run"]["device"] == "cpu"
    assert "--image" in results["run"]["argv"]
    statuses = [c["status"] for c in results["cases"]]
    assert "passed" in statuses and set(statuses) <= {"passed", "skipped"}, statuses
    assert (out / "junit.xml").read_text().startswith("<?xml")
    assert (out / "results.json").stat().st_uid == os.getuid()
    assert rehearsal.leftover_containers == set()


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.timeout(IMAGE_TESTS_TIMEOUT_S)
def test_in_container_bad_selection_is_bad_input(cpu_test_image: CpuTestImage) -> None:
    proc = run_cli(
        "test",
        "--device",
        "cpu",
        "--image",
        cpu_test_image.image,
        "--suite",
        "conformance",
        "-k",
        "no_such_case_anywhere",
        timeout=300,
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
    assert_one_line_error(
        run_cli("setup", "cpu", "--torch-from-base"), 2, "--torch-from-base needs --base-image"
    )
    assert_one_line_error(
        run_cli("setup", "cpu", "--torch-from-base", "--torch-channel", "nightly"),
        2,
        "installs none: drop --torch-channel",
    )


def test_setup_rocm_wheel_needs_the_manifest_of_its_build(tmp_path: Path) -> None:
    """A ROCm wheel pins its SDK, which only the index of its build serves: without the
    build's manifest beside it, or with another build's, setup stops at once."""
    wheel = rocm_standin.built_wheelhouse(tmp_path / "wheelhouse", manifest=False)
    setup = ("setup", "rocm", "--torch-wheel", str(wheel.parent), "--dry-run")
    assert_one_line_error(run_cli(*setup), 2, "no manifest.json of its build is beside it")
    # The same file name from another build (another requirement: another sha256).
    requires = (f"rocm[libraries]=={rocm_standin.BUILT_SDK}", "sympy")
    other = rocm_standin.built_wheelhouse(tmp_path / "other", requires=requires)
    (wheel.parent / "manifest.json").write_bytes((other.parent / "manifest.json").read_bytes())
    assert_one_line_error(run_cli(*setup), 2, "manifest.json is another build's")


def test_setup_rocm_wheel_takes_the_triton_of_its_build(tmp_path: Path) -> None:
    """A ROCm build with triton pins `triton==<what it built>`, on no index: setup plans it
    from beside the wheel, and stops at once, one line, when that file is not the build's."""
    triton = f"3.5.0+rocm{rocm_standin.BUILT_SDK}"
    wheel = rocm_standin.built_wheelhouse(tmp_path / "wheelhouse", triton=triton)
    setup = ("setup", "rocm", "--torch-wheel", str(wheel.parent), "--dry-run", "--json")
    proc = run_cli(*setup)
    assert proc.returncode == 0, proc.stderr
    built = json.loads(proc.stdout)["plan"]["torch"]["build_artifacts"]
    file = f"triton-{triton}-cp311-cp311-linux_x86_64.whl"
    assert [(a["requirement"], a["file"]) for a in built] == [(f"triton=={triton}", file)]
    (wheel.parent / file).write_bytes(b"not the build's triton")
    needle = f"the {file} beside it has another sha256 than its build's"
    assert_one_line_error(run_cli(*setup), 2, needle)
    (wheel.parent / file).unlink()
    assert_one_line_error(run_cli(*setup), 2, f"and no {file} is beside it")


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.timeout(IMAGE_TESTS_TIMEOUT_S)
def test_rocm_image_installs_the_triton_of_its_build(
    tmp_path: Path, docker_client: Any, base_image: str
) -> None:
    """The install step of `accelkit setup rocm` for a build with triton, on the real engine:
    the wheel's triton==<built> comes from beside it (no index serves it), its SDK from the
    stand-in of the build's index alone, its other requirements from the runner's pip
    settings. (The image's verification needs a real ROCm torch: the act rehearsal's.)"""
    from accelkit.containers.images import build_from_base
    from accelkit.setup.image import image_tag, plan_setup, write_context
    from accelkit.setup.request import SetupRequest

    root = tmp_path / "index"
    rocm_standin.write_index(root, rocm_standin.build_libraries(root / "libs"))
    triton = f"3.5.0+rocm{rocm_standin.BUILT_SDK}"
    with rocm_standin.serve(root) as index:
        wheel = rocm_standin.built_wheelhouse(tmp_path / "wheelhouse", index=index, triton=triton)
        request = SetupRequest(
            backend="rocm", torch_wheel=wheel.parent, python="3.11", base_image=base_image
        )
        plan = plan_setup(request)
        tag = image_tag(plan, str(docker_client.images.get(base_image).id))
        write_context(plan, tmp_path / "context", tmp_path / "inputs", dict(os.environ))
        build_from_base(
            docker_client,
            base_image,
            tmp_path / "context",
            tag,
            build_args=dict(plan.build_args),
            inputs=tmp_path / "inputs",
        )
    try:
        show = ["/opt/venv/bin/python", "-m", "pip", "list", "--format=json"]
        out = docker_client.containers.run(tag, show, remove=True, network_mode="none")
        installed = {p["name"]: p["version"] for p in json.loads(out.decode())}
        assert installed["triton"] == triton
        assert installed["torch"] == wheel.name.split("-")[1]
        assert installed["rocm"] == rocm_standin.BUILT_SDK
        assert "filelock" in installed
    finally:
        docker_client.images.remove(tag, force=True)


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
