"""What each backend's containers need, built against a fake host tree (no device here)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from accelkit import backends
from accelkit.backends import rocm as rocm_backend
from accelkit.errors import BadInput


def _fake_host(root: Path, *, render_gid: int | None = None) -> Path:
    (root / "dev" / "dri" / "by-path").mkdir(parents=True)
    (root / "dev" / "kfd").write_text("")
    node = root / "dev" / "dri" / "renderD128"
    node.write_text("")
    if render_gid is not None and os.getuid() == 0:
        os.chown(node, -1, render_gid)
    (root / "etc").mkdir()
    (root / "etc" / "group").write_text("root:x:0:\nvideo:x:44:\nrender:x:992:\n")
    return root


def test_rocm_options(tmp_path: Path) -> None:
    host = _fake_host(tmp_path, render_gid=992)
    env = {"HIP_VISIBLE_DEVICES": "1", "ROCR_VISIBLE_DEVICES": "0", "SECRET_TOKEN": "x"}
    options = backends.get("rocm").container_options(env, host_root=host)
    assert options.devices == (f"{host}/dev/kfd:/dev/kfd:rwm", f"{host}/dev/dri:/dev/dri:rwm")
    assert set(options.group_add) >= {"44", "992"}
    assert options.security_opt == ("seccomp=unconfined",)
    assert options.ipc_mode == "host"
    assert dict(options.env) == {"HIP_VISIBLE_DEVICES": "1", "ROCR_VISIBLE_DEVICES": "0"}
    assert not options.cap_add  # never privileged


def test_missing_device_nodes_do_not_fail(tmp_path: Path) -> None:
    for name in backends.names():
        options = backends.get(name).container_options({}, host_root=tmp_path)
        assert options.devices == ()
        assert options.group_add == ()


def test_xpu_options(tmp_path: Path) -> None:
    host = _fake_host(tmp_path)
    options = backends.get("xpu").container_options({"ZE_AFFINITY_MASK": "0.1"}, host_root=host)
    assert options.devices == (f"{host}/dev/dri:/dev/dri:rwm",)
    assert [(str(m.source), m.target) for m in options.mounts] == [
        (f"{host}/dev/dri/by-path", "/dev/dri/by-path")
    ]
    assert options.ipc_mode == "host"
    assert "44" in options.group_add and "992" in options.group_add
    assert dict(options.env) == {"ZE_AFFINITY_MASK": "0.1"}


def test_cuda_and_cpu_options(tmp_path: Path) -> None:
    cuda = backends.get("cuda").container_options({"CUDA_VISIBLE_DEVICES": "2"}, host_root=tmp_path)
    (request,) = cuda.device_requests
    assert request.count == -1 and request.capabilities == (("gpu",),)
    assert dict(cuda.env) == {"CUDA_VISIBLE_DEVICES": "2"}
    cpu = backends.get("cpu").container_options({"CUDA_VISIBLE_DEVICES": "2"}, host_root=tmp_path)
    assert not cpu.devices and not cpu.device_requests and not cpu.env


def test_create_kwargs_of_rocm_options(tmp_path: Path) -> None:
    from accelkit.containers.run import create_kwargs

    kwargs = create_kwargs(
        backends.get("rocm").container_options({}, host_root=_fake_host(tmp_path))
    )
    assert kwargs["security_opt"] == ["seccomp=unconfined"] and kwargs["ipc_mode"] == "host"
    assert "privileged" not in kwargs


def _doctor(**caps: bool) -> dict[str, Any]:
    ptxas = "/opt/venv/bin/ptxas"
    return {
        "env": {
            "torch": {"version": "2.14.1", "cuda": "13.4"},
            "env": {
                "TORCH_CUDA_ARCH_LIST": "10.7",
                "TRITON_PTXAS_PATH": ptxas,
                "TRITON_PTXAS_BLACKWELL_PATH": ptxas,
            },
            "backends": {"cuda": {"versions": {"cuda_arch_list": "sm_90 sm_100 sm_120"}}},
        },
        "capabilities": {name: _capability(ok) for name, ok in caps.items()},
    }


def _capability(available: bool) -> dict[str, Any]:
    return {"available": available, "reason": "" if available else "nope"}


def test_cuda_sm_107_verification() -> None:
    cuda = backends.get("cuda")
    spec = cuda.test_image("sm_107")
    assert spec.build_args["TORCH_CUDA_ARCH_LIST"] == "10.7"
    good = cuda.verify_test_image(_doctor(sm_107=True), {"gpu_codes": "sm_100\nsm_107\n"}, spec)
    assert good == []
    bad = cuda.verify_test_image(_doctor(sm_107=False), {"gpu_codes": "sm_100\n"}, spec)
    assert any("sm_107: nope" in p for p in bad)
    assert any("cannot target sm_107" in p for p in bad)
    with pytest.raises(BadInput, match="is not a cuda target"):
        cuda.test_image("sm_999")


def test_xpu_and_rocm_verification() -> None:
    xpu = backends.get("xpu")
    doctor = {
        "env": {"torch": {"version": "2.14.1+xpu", "xpu": "20250300"}},
        "capabilities": {"xpu_graph": {"available": False, "reason": "no XPU device"}},
    }
    spec = xpu.test_image()
    assert xpu.verify_test_image(doctor, {"level_zero": "ze_loader=libze_loader.so.1"}, spec) == []
    doctor["capabilities"]["xpu_graph"]["reason"] = "torch 2.14.1 has no torch.xpu.XPUGraph"
    assert any("graph capture" in p for p in xpu.verify_test_image(doctor, {}, spec))
    rocm = backends.get("rocm")
    spec = rocm.test_image("gfx942")
    doctor = {
        "env": {
            "torch": {"version": "2.14.1+rocm7.14.0", "hip": "7.14.0"},
            "backends": {"rocm": {"versions": {"arch_list": "gfx90a gfx942"}}},
        }
    }
    # The probe prints one loaded=<shortname> per preload of the one table found mapped.
    loaded = "\n".join(f"loaded={name}" for name in rocm_backend.PRELOAD_SHORTNAMES)
    good = {"preload": "rocm_init=True\n" + loaded}
    assert rocm.verify_test_image(doctor, good, spec) == []
    assert rocm.verify_test_image(doctor, {"preload": "rocm_init=False"}, spec) == [
        "import torch did not run torch/_rocm_init.py (or warned about the ROCm SDK)"
    ]
    partial = {"preload": good["preload"].replace("loaded=miopen\n", "")}
    assert rocm.verify_test_image(doctor, partial, spec) == [
        "import torch did not preload through rocm_sdk: miopen"
    ]
    # The probe makes rocm_sdk's warnings errors and checks files against the table.
    probe = spec.probes["preload"][-1]
    assert "warnings.filterwarnings('error'" in probe and "libMIOpen.so*" in probe
    # No PTX-like fallback on AMD: the target must be in torch's arch list.
    assert rocm.verify_test_image(doctor, good, rocm.test_image("gfx950")) == [
        "torch 2.14.1+rocm7.14.0 has no code for gfx950: it was built for gfx90a gfx942 "
        "(PYTORCH_ROCM_ARCH)"
    ]
    broken = {"env": {"torch": {"error": "libMIOpen.so.1: cannot open shared object file"}}}
    assert rocm.verify_test_image(broken, {}, spec) == [
        "torch does not import: libMIOpen.so.1: cannot open shared object file"
    ]
