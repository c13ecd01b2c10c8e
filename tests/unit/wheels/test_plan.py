"""Build plans as data: rocm (gfx942, 7.14), cuda sm_107 and xpu, checked without running
anything (`accelkit build --dry-run` and its refusals end to end:
tests/integration/test_build_dry_run.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from accelkit.backends import rocm as rocm_backend
from accelkit.errors import BadInput
from accelkit.wheels.recipes import plan
from accelkit.wheels.request import BuildRequest


def _env(built: object) -> dict[str, str]:
    return {var.name: var.render().split("=", 1)[1] for var in built.env}  # type: ignore[attr-defined]


def _rocm(output: Path, **flags: Any) -> BuildRequest:
    return BuildRequest.from_params(
        dict(backend="rocm", output=output, rocm_version="7.14", **flags)
    )


def test_rocm_plan_multi_arch(tmp_path: Path) -> None:
    built = plan(_rocm(tmp_path, gfx="gfx942,gfx950", torch_ref="v2.14.1"))
    # The exact version is the builder's to find: every later use names it.
    assert built.requirement == "rocm[libraries,devel,device-gfx942,device-gfx950]==@{rocm_version}"
    assert built.index_url == "https://rocm.nightlies.amd.com/whl-multi-arch/"
    env = _env(built)
    assert env["PYTORCH_ROCM_ARCH"] == "gfx942;gfx950"
    assert env["USE_ROCM"] == "ON" and env["USE_CUDA"] == "OFF"
    assert env["USE_MPI"] == "OFF" and env["USE_NUMA"] == "OFF"
    assert env["PYTORCH_BUILD_VERSION"] == "2.14.1+@{rocm_local}"
    assert env["PYTORCH_EXTRA_INSTALL_REQUIREMENTS"] == (
        "rocm[libraries]==@{rocm_version}|@{triton_requirement}"
    )
    assert env["CMAKE_PREFIX_PATH"] == "@{rocm_cmake}"
    assert env["ROCM_HOME"] == env["ROCM_PATH"] == "@{rocm_root}"
    assert env["HIP_DEVICE_LIB_PATH"] == "@{rocm_root}/lib/llvm/amdgcn/bitcode"
    assert env["PATH"] == "@{rocm_bin}:$PATH"
    assert env["BLAS"] == "OpenBLAS" and env["OpenBLAS_LIB_NAME"] == "rocm-openblas"
    assert env["OpenBLAS_HOME"] == "@{rocm_root}/lib/host-math"
    for flag in (
        "-Wno-error=maybe-uninitialized",
        "-Wno-error=uninitialized",
        "-Wno-error=restrict",
        "-I@{rocm_root}/lib/rocm_sysdeps/include",
        "-I@{rocm_root}/include/roctracer",
    ):
        assert flag in env["CXXFLAGS"].split()
    assert "-Wno-error=restrict" in env["CPPFLAGS"]
    assert env["LDFLAGS"].split() == ["-L@{rocm_root}/lib/rocm_sysdeps/lib"]
    assert env["PKG_CONFIG_PATH"] == "@{rocm_root}/lib/rocm_sysdeps/lib/pkgconfig"
    assert env["LD_LIBRARY_PATH"] == "@{rocm_root}/lib/rocm_sysdeps/lib"
    # Triton is built, and both targets are AOTriton's: flash attention on.
    assert env["USE_FLASH_ATTENTION"] == env["USE_MEM_EFF_ATTENTION"] == "ON"
    assert env["TRITON_APPEND_CMAKE_ARGS"] == "-DCMAKE_FIND_USE_CMAKE_ENVIRONMENT_PATH=FALSE"
    assert env["TRITON_WHEEL_VERSION_SUFFIX"] == "+@{rocm_local}"
    names = [step.name for step in built.steps]
    assert names == [
        "sdk-resolve",
        "sdk-cache",
        "sdk",
        "sdk-version",
        "sdk-libraries",
        "sdk-paths",
        "sdk-sysdeps",
        "checkout",
        "hipify",
        "triton-checkout",
        "triton-requirements",
        "triton-wheel",
        "triton-install",
        "rocm-init",
        "torch-uninstall",
        "build-requirements",
        "build-backend",
        "wheel",
    ]
    steps = {step.name: step for step in built.steps}
    assert steps["sdk-resolve"].args["requested"] == "7.14"
    assert steps["sdk-resolve"].args["pre"] is False
    assert steps["sdk"].argv[-1] == built.requirement
    assert "--force-reinstall" in steps["sdk"].argv and "--pre" not in steps["sdk"].argv
    assert steps["sdk"].env["PIP_EXTRA_INDEX_URL"] == ""
    assert steps["sdk-version"].args["expected"] == "@{rocm_version}"
    assert steps["rocm-init"].args["version"] == "@{rocm_version}"
    assert steps["rocm-init"].args["preload"] == list(rocm_backend.PRELOAD_SHORTNAMES)
    assert steps["wheel"].args["force_include"] == ["torch/_rocm_init.py"]
    assert steps["build-backend"].args["requirements"] == "requirements-build.txt"
    assert steps["hipify"].argv == ("python", "tools/amd_build/build_amd.py")
    assert "v2.14.1" in steps["checkout"].argv
    assert built.outputs == ("torch-2.14.1+*-*.whl", "triton-*.whl")
    assert built.expect.requires == (
        "rocm[libraries]==@{rocm_version}",
        "@{triton_requirement}",
    )
    assert built.expect.platform_specific
    assert built.expect.code_objects is not None
    assert built.expect.code_objects.targets == ("gfx942", "gfx950")
    assert built.smoke.warnings_as_errors == ("rocm_sdk",)
    assert list(built.smoke.libraries) == list(rocm_backend.PRELOAD_SHORTNAMES)
    assert built.builder.dockerfile == "rocm.Dockerfile"
    assert built.builder.base_image == "quay.io/pypa/manylinux_2_28_x86_64"
    assert len(built.builder.tag) == 16
    # Deterministic: the same request plans the same builder tag.
    again = plan(_rocm(tmp_path, gfx="gfx942,gfx950", torch_ref="v2.14.1"))
    assert again.builder.tag == built.builder.tag
    json.loads(built.to_json())


def test_rocm_plan_pre_and_exact_versions(tmp_path: Path) -> None:
    built = plan(_rocm(tmp_path, gfx="gfx942", pre=True))
    steps = {step.name: step for step in built.steps}
    assert steps["sdk-resolve"].args["pre"] is True
    assert "--pre" in steps["sdk"].argv
    assert "pre-releases too" in built.notes[0]
    nightly = plan(
        BuildRequest.from_params(
            dict(
                backend="rocm",
                output=tmp_path,
                rocm_version="7.14.0a20261128",
                gfx="gfx1100",
                triton=False,
            )
        )
    )
    assert "exactly this version" in nightly.notes[0]
    assert _env(nightly)["USE_FLASH_ATTENTION"] == "OFF"  # no triton, no AOTriton
    assert "@{triton_requirement}" not in _env(nightly)["PYTORCH_EXTRA_INSTALL_REQUIREMENTS"]
    with pytest.raises(BadInput, match="--pre does not apply to accelkit build cuda"):
        plan(
            BuildRequest.from_params(dict(backend="cuda", output=tmp_path, arch="sm_90", pre=True))
        )


def test_rocm_plan_legacy_family_index(tmp_path: Path) -> None:
    built = plan(
        _rocm(
            tmp_path, gfx="gfx942", family="gfx94X-dcgpu", torch_ref="release/2.14", python="3.13"
        )
    )
    assert built.index_url == "https://rocm.nightlies.amd.com/v2/gfx94X-dcgpu/"
    assert built.requirement == "rocm[libraries,devel]==@{rocm_version}"
    assert _env(built)["PYTORCH_BUILD_VERSION"] == "2.14.0+@{rocm_local}"
    assert built.builder.build_args == {"PYTHON_VERSION": "3.13"}
    # A mirror of the family's index.
    mirror = plan(
        _rocm(
            tmp_path,
            gfx="gfx942",
            family="gfx94X-dcgpu",
            index_url="http://127.0.0.1:8080/v2/gfx94X-dcgpu/",
        )
    )
    assert mirror.index_url == "http://127.0.0.1:8080/v2/gfx94X-dcgpu/"
    assert mirror.requirement == "rocm[libraries,devel]==@{rocm_version}"


def test_cuda_sm_107_plan(tmp_path: Path) -> None:
    built = plan(
        BuildRequest.from_params(
            dict(backend="cuda", output=tmp_path, arch="sm_90,sm_107", torch_ref="v2.14.1")
        )
    )
    env = _env(built)
    assert env["TORCH_CUDA_ARCH_LIST"] == "9.0;10.7"
    assert env["PYTORCH_BUILD_VERSION"] == "2.14.1+cu134"
    assert built.builder.base_image == "nvidia/cuda:13.4.0-devel-ubuntu24.04"
    with pytest.raises(BadInput, match=r"sm_107 needs CUDA version >= 13.4, got 13.3"):
        plan(
            BuildRequest.from_params(
                dict(backend="cuda", output=tmp_path, cuda_version="13.3", arch="sm_107")
            )
        )
    # An update release is a CUDA version too (the matrix accepts it, so build does).
    update = plan(
        BuildRequest.from_params(
            dict(backend="cuda", output=tmp_path, cuda_version="13.4.1", arch="sm_107")
        )
    )
    assert update.builder.base_image == "nvidia/cuda:13.4.1-devel-ubuntu24.04"


def test_xpu_plan(tmp_path: Path) -> None:
    built = plan(BuildRequest.from_params(dict(backend="xpu", output=tmp_path, arch="pvc,bmg")))
    env = _env(built)
    assert env["USE_XCCL"] == "1" and env["USE_XPU"] == "1"
    assert env["TORCH_XPU_ARCH_LIST"] == "pvc,bmg"
    assert built.builder.base_image.startswith("intel/deep-learning-essentials:")
    with pytest.raises(BadInput, match="'gfx942' is not a xpu target"):
        plan(BuildRequest.from_params(dict(backend="xpu", output=tmp_path, arch="gfx942")))


def test_cpu_plan_rejects_gpu_flags(tmp_path: Path) -> None:
    assert (
        _env(plan(BuildRequest.from_params(dict(backend="cpu", output=tmp_path))))["USE_CUDA"]
        == "0"
    )
    with pytest.raises(BadInput, match="does not apply to accelkit build cpu"):
        plan(BuildRequest.from_params(dict(backend="cpu", output=tmp_path, gfx="gfx942")))


def _clone_at(tmp_path: Path, ref: str) -> Path:
    """A git repository whose HEAD is `ref` (a tag), with one more commit on its branch."""
    import subprocess

    tree = tmp_path / "pytorch"
    tree.mkdir()
    git = ["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "--quiet", "--initial-branch", "main"], check=True)
    (tree / "version.txt").write_text("2.14.1\n")
    subprocess.run([*git, "add", "version.txt"], check=True)
    subprocess.run([*git, "commit", "--quiet", "-m", "2.14.1"], check=True)
    subprocess.run([*git, "tag", ref], check=True)
    return tree


def test_source_with_torch_ref_must_be_a_clean_checkout_of_it(tmp_path: Path) -> None:
    """--source DIR --torch-ref REF: DIR is a checkout of REF made outside the builder (the
    nightly's leg job clones it); the plan copies it and records the ref and its commit."""
    import subprocess

    tree = _clone_at(tmp_path, "v2.14.1")
    built = plan(_rocm(tmp_path / "out", gfx="gfx942", source=tree, torch_ref="v2.14.1"))
    (checkout,) = [s for s in built.steps if s.name == "checkout"]
    head = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert checkout.action == "copy-tree" and f"a checkout of v2.14.1 at {head}" in (
        checkout.description
    )
    with pytest.raises(BadInput, match=r"has no ref v2\.14\.2 \(--torch-ref\)"):
        plan(_rocm(tmp_path / "out", gfx="gfx942", source=tree, torch_ref="v2.14.2"))
    (tree / "version.txt").write_text("2.14.2\n")
    with pytest.raises(BadInput, match=r"not a clean checkout of v2\.14\.1: tracked files changed"):
        plan(_rocm(tmp_path / "out", gfx="gfx942", source=tree, torch_ref="v2.14.1"))
    git = ["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "commit", "--quiet", "-am", "moved on"], check=True)
    with pytest.raises(BadInput, match=r"is at [0-9a-f]{12}, not at --torch-ref v2\.14\.1"):
        plan(_rocm(tmp_path / "out", gfx="gfx942", source=tree, torch_ref="v2.14.1"))
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(BadInput, match=r"with --torch-ref v2\.14\.1: not a git checkout"):
        plan(_rocm(tmp_path / "out", gfx="gfx942", source=plain, torch_ref="v2.14.1"))
