"""Intel GPUs through XPU (SYCL / Level Zero)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from accelkit.backends._containers import (
    UBUNTU_BASE_IMAGE,
    any_exists,
    existing_devices,
    gpu_groups,
    host_path,
    passthrough,
    section,
    suite_smoke,
    torch_problems,
)
from accelkit.backends._defaults import BackendDefaults
from accelkit.backends.base import (
    Availability,
    BuildFlags,
    CapabilityCheck,
    DeviceInfo,
    GraphCapture,
    TargetFlag,
    TestImageSpec,
    VersionRule,
)
from accelkit.backends.checks import torch_module, torch_version
from accelkit.backends.peaks import GB_S, TB_S, DevicePeak, T
from accelkit.containers.run import Mount, RunOptions
from accelkit.options import Opt
from accelkit.torch_import import torch_import_error, torch_or_none

#: PyTorch's XPU wheel index (torch and triton-xpu); nightlies under .../whl/nightly/xpu.
XPU_INDEX_URL = "https://download.pytorch.org/whl/xpu"

#: Device selection and the Level Zero / SYCL settings that change what a process sees.
XPU_PASSTHROUGH = (
    "ZE_AFFINITY_MASK",
    "ONEAPI_DEVICE_SELECTOR",
    "ZE_FLAT_DEVICE_HIERARCHY",
    "SYCL_CACHE_PERSISTENT",
)


#: Intel's oneAPI / Deep Learning Essentials release, e.g. 2025.3.
ONEAPI_VERSION = VersionRule(
    re.compile(r"20[2-9][0-9]\.[0-9]{1,2}(\.[0-9]{1,2})?"),
    "2025.3",
    "oneAPI version",
    "YYYY.N or YYYY.N.M",
)


#: Published ceilings of Intel's devices (`accelkit.backends.peaks`: conventions and
#: units). Order matters: the first matching row wins, so specific names precede general
#: ones.
PEAKS: tuple[DevicePeak, ...] = (
    # Intel ark, Data Center GPU Max 1550 (ark.intel.com product 232873) and the Max Series
    # product brief: 128 Xe cores at 1.6 GHz, FP32 52 TFLOPS, TF32 419 TFLOPS, BF16/FP16
    # 839 TFLOPS (XMX, no sparsity); 128 GB HBM2e at 3.2768 TB/s.
    DevicePeak(
        name="Intel Data Center GPU Max 1550",
        pattern=r"Max 1550",
        flops={
            "float32": 52.4 * T,
            "tfloat32": 419.4 * T,
            "bfloat16": 838.9 * T,
            "float16": 838.9 * T,
        },
        memory_bandwidth=3.2768 * TB_S,
        source="Intel ark / Data Center GPU Max Series product brief",
    ),
    # Intel ark, Data Center GPU Max 1100 (ark.intel.com product 232876): 56 Xe cores at
    # 1.55 GHz, FP32 22.2 TFLOPS; 48 GB HBM2e at 1.2288 TB/s. XMX rates derived with the
    # Max 1550's per-core rate (4,096 BF16 FLOP/clock/Xe core): 56 x 1.55 GHz x 4,096.
    DevicePeak(
        name="Intel Data Center GPU Max 1100",
        pattern=r"Max 1100",
        flops={
            "float32": 22.2 * T,
            "tfloat32": 177.8 * T,
            "bfloat16": 355.5 * T,
            "float16": 355.5 * T,
        },
        memory_bandwidth=1.2288 * TB_S,
        source="Intel ark (Max 1100); XMX rates derived from Xe-core count and clock",
        note="tfloat32/bfloat16/float16 derived, not printed by Intel",
    ),
    # Intel Arc B580 product page / ark: 20 Xe2 cores, 233 INT8 TOPS (XMX), 12 GB GDDR6
    # 192-bit at 19 Gbps = 456 GB/s. FP16/BF16 XMX rate is half the INT8 rate; FP32 =
    # 20 cores x 128 lanes x 2 x 2.67 GHz.
    DevicePeak(
        name="Intel Arc B580",
        pattern=r"B580",
        flops={"float32": 13.7 * T, "bfloat16": 116.5 * T, "float16": 116.5 * T},
        memory_bandwidth=456 * GB_S,
        source="Intel Arc B580 product page (233 INT8 TOPS, 456 GB/s)",
        note="float16/bfloat16 = INT8 TOPS / 2; float32 from core count and clock",
    ),
    # Intel Arc B570 product page / ark: 18 Xe2 cores, 203 INT8 TOPS, 10 GB GDDR6 160-bit
    # at 19 Gbps = 380 GB/s.
    DevicePeak(
        name="Intel Arc B570",
        pattern=r"B570",
        flops={"float32": 11.5 * T, "bfloat16": 101.5 * T, "float16": 101.5 * T},
        memory_bandwidth=380 * GB_S,
        source="Intel Arc B570 product page (203 INT8 TOPS, 380 GB/s)",
        note="float16/bfloat16 = INT8 TOPS / 2; float32 from core count and clock",
    ),
)


def _xpu_graph() -> Availability:
    torch = torch_module()
    xpu = getattr(torch, "xpu", None)
    if xpu is None or not hasattr(xpu, "XPUGraph"):
        return Availability(False, f"torch {torch_version(torch)} has no torch.xpu.XPUGraph")
    # On a build without XPU, XPUGraph is a dummy that raises when constructed.
    return BACKEND.availability()


class XpuBackend(BackendDefaults):
    name = "xpu"
    torch_device_type = "xpu"
    description = "Intel GPUs through XPU (SYCL, Level Zero)"
    peaks = PEAKS
    torch_build: str | None = "xpu"
    capability_checks: tuple[CapabilityCheck, ...] = (
        CapabilityCheck("xpu_graph", "graph", _xpu_graph),
    )
    version_rule = ONEAPI_VERSION
    build_flags = BuildFlags(
        toolkit=Opt(
            "oneapi_version",
            ("--oneapi-version",),
            str,
            None,
            "XPU: oneAPI Deep Learning Essentials version (2025.3).",
            True,
        ),
        targets=TargetFlag("--arch", "XPU", "pvc,bmg"),
    )
    collective_backends = ("xccl",)
    torch_wheel_variant = "xpu"
    graph_capture = GraphCapture("xpu_graph", "XPUGraph")
    # 2.14's native XPU graph capture is what an XPU leg is for.
    requirements = MappingProxyType({None: ("xpu_graph",)})
    # AOT targets as TORCH_XPU_ARCH_LIST names them: Data Center GPU Max (pvc), Arc B-series
    # (bmg), Lunar Lake (lnl-m), Arrow Lake H (arl-h), Meteor Lake (mtl-h), Arc A-series (dg2).
    targets: tuple[str, ...] = ("pvc", "bmg", "lnl-m", "arl-h", "mtl-h", "dg2")

    @property
    def unsupported_dtypes(self) -> Mapping[str, str]:  # type: ignore[override]
        """float64 and complex128 where the device under test has no double precision (its
        `has_fp64` property: Arc A- and B-series, the integrated GPUs; Data Center GPU Max
        has it). Nothing where no XPU answers; never raises."""
        if self._has_fp64() is not False:
            return MappingProxyType({})
        why = "this XPU device has no double precision (has_fp64 is False)"
        return MappingProxyType({"float64": why, "complex128": f"two float64s: {why}"})

    def _has_fp64(self) -> bool | None:
        torch = torch_or_none()
        try:
            if torch is None or not torch.xpu.is_available():
                return None
            return bool(torch.xpu.get_device_properties(torch.xpu.current_device()).has_fp64)
        except Exception:  # a broken driver: the device's cases say so, not this fact
            return None

    def availability(self) -> Availability:
        torch = torch_or_none()
        if torch is None:
            return Availability(False, torch_import_error())
        xpu = getattr(torch, "xpu", None)
        if xpu is None:
            return Availability(False, f"torch {torch.__version__} has no torch.xpu")
        compiled = getattr(xpu, "_is_compiled", None)
        try:
            built = bool(compiled()) if compiled is not None else bool(torch.version.xpu)
        except Exception:
            built = False
        if not built:
            return Availability(False, "torch built without XPU support")
        try:
            if not xpu.is_available():
                return Availability(False, "no XPU device (torch built with XPU support)")
        except Exception as exc:
            return Availability(False, f"XPU initialisation failed: {exc}")
        return Availability(True, f"torch.xpu.is_available(): {xpu.device_count()} device(s)")

    def devices(self) -> list[DeviceInfo]:
        torch = torch_or_none()
        if torch is None or not self.availability().available:
            return []
        out: list[DeviceInfo] = []
        for index in range(int(torch.xpu.device_count())):
            try:
                props = torch.xpu.get_device_properties(index)
            except Exception as exc:
                out.append(DeviceInfo(index=index, name=f"unknown ({exc})"))
                continue
            out.append(
                DeviceInfo(
                    index=index,
                    name=str(props.name),
                    memory_bytes=int(getattr(props, "total_memory", 0)) or None,
                    arch=str(getattr(props, "device_id", "")) or None,
                    driver=str(getattr(props, "driver_version", "")) or None,
                )
            )
        return out

    def versions(self) -> dict[str, str | None]:
        torch = torch_or_none()
        if torch is None:
            return {}
        return {"xpu": getattr(torch.version, "xpu", None)}

    passthrough_env: tuple[str, ...] = XPU_PASSTHROUGH

    def container_options(
        self, env: Mapping[str, str] | None = None, *, host_root: Path = Path("/")
    ) -> RunOptions:
        # The DRI nodes, and /dev/dri/by-path (Level Zero maps devices to PCI slots through
        # it, vLLM mounts it too); the render group by numeric GID; host IPC for the
        # runtime's shared memory.
        mounts: tuple[Mount, ...] = ()
        by_path = host_path(host_root, "/dev/dri/by-path")
        if by_path.is_dir():
            mounts = (Mount(source=by_path, target="/dev/dri/by-path", read_only=True),)
        return RunOptions(
            env=passthrough(env, self.passthrough_env),
            devices=existing_devices(host_root, ("/dev/dri",)),
            mounts=mounts,
            group_add=gpu_groups(host_root),
            ipc_mode="host",
        )

    def suite_environment(self) -> dict[str, str]:
        return {}

    def test_image(self, arch: str | None = None) -> TestImageSpec:
        if arch is not None:
            self.check_target(arch, flag="--arch")
        probe = "import ctypes.util; print('ze_loader=%s' % ctypes.util.find_library('ze_loader'))"
        return TestImageSpec(
            dockerfile="xpu.Dockerfile",
            default_base_image=UBUNTU_BASE_IMAGE,
            build_args={"TORCH_INDEX_URL": XPU_INDEX_URL},
            arch=arch,
            probes={"level_zero": ("python", "-c", probe)},
            # With the device, XPU graph capture (required on every XPU leg) must work.
            device_checks={"graph capture": suite_smoke(self.name)},
        )

    def host_has_device(self, host_root: Path = Path("/")) -> bool:
        return any_exists(host_root, ("/dev/dri/renderD*",))

    def verify_test_image(
        self, doctor: Mapping[str, Any], probes: Mapping[str, str], spec: TestImageSpec
    ) -> list[str]:
        problems = torch_problems(doctor)
        if problems:
            return problems
        torch = section(doctor, "env", "torch")
        if not torch.get("xpu"):
            problems.append(f"torch {torch.get('version')} is not an XPU build")
        graph = section(doctor, "capabilities", "xpu_graph")
        reason = str(graph.get("reason") or "")
        if not graph.get("available") and ("has no" in reason or "built without" in reason):
            problems.append(f"XPU graph capture is not compiled in: {reason}")
        if "ze_loader=None" in probes.get("level_zero", "ze_loader=None"):
            problems.append("the Level Zero loader (libze_loader) is not installed in the image")
        return problems


BACKEND = XpuBackend()
