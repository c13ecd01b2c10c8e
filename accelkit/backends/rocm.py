"""AMD ROCm. In torch, ROCm devices are `cuda` devices and `torch.version.hip` is set."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from accelkit.backends import _elf
from accelkit.backends._containers import (
    UBUNTU_BASE_IMAGE,
    any_exists,
    compile_only,
    existing_devices,
    gpu_groups,
    passthrough,
    section,
    suite_smoke,
    torch_problems,
)
from accelkit.backends._cudalike import CUDA_GRAPH, cuda_devices
from accelkit.backends._defaults import BackendDefaults
from accelkit.backends._tools import tool_output
from accelkit.backends.base import (
    Availability,
    BuildFlags,
    CapabilityCheck,
    CrossTarget,
    DeviceInfo,
    GraphCapture,
    IsaCheck,
    TargetFlag,
    TestImageSpec,
    Toolchain,
    VersionRule,
)
from accelkit.backends.checks import cuda_devices_needed, torch_module, torch_version
from accelkit.backends.peaks import TB_S, DevicePeak, P, T, dense_rates
from accelkit.containers.run import RunOptions
from accelkit.errors import BadInput
from accelkit.options import Opt
from accelkit.torch_import import torch_import_error, torch_or_none

# TheRock's GPU families (the legacy per-family wheel indexes are named after them) and
# the gfx targets each covers. See ../shared/notes/therock.md.
GFX_FAMILIES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "gfx90a": ("gfx90a",),
        "gfx94X-dcgpu": ("gfx942",),
        "gfx950-dcgpu": ("gfx950",),
        "gfx101X-dgpu": ("gfx1010", "gfx1011", "gfx1012"),
        "gfx103X-all": ("gfx1030", "gfx1031", "gfx1032", "gfx1034", "gfx1035", "gfx1036"),
        "gfx110X-all": ("gfx1100", "gfx1101", "gfx1102", "gfx1103"),
        "gfx115X-all": ("gfx1150", "gfx1151", "gfx1152", "gfx1153"),
        "gfx1151": ("gfx1151",),
        "gfx120X-all": ("gfx1200", "gfx1201"),
    }
)


#: TheRock's current multi-arch index: one `rocm` package, a `device-<gfx>` extra per GPU.
MULTI_ARCH_INDEX_URL = "https://rocm.nightlies.amd.com/whl-multi-arch/"
#: The legacy scheme: one index per GPU family (no new releases since mid 2026).
FAMILY_INDEX_URL = "https://rocm.nightlies.amd.com/v2/{family}/"

#: SDK versions as `--rocm-version` and matrices spell them. TheRock publishes stable X.Y.Z,
#: release candidates X.Y.ZrcN, nightlies X.Y.ZaYYYYMMDD (older ones X.Y.ZrcYYYYMMDD) and dev
#: builds X.Y.Z.dev0+<sha>. A bare X.Y names a release series: the build asks the index and
#: takes the newest X.Y.* there (final releases only, unless --pre); anything longer is exact.
SDK_VERSION = VersionRule(
    re.compile(
        r"[1-9][0-9]?\.[0-9]{1,2}(\.[0-9]{1,2}((a|rc)[0-9]{1,8}|\.dev[0-9]+(\+[0-9a-f]{7,40})?)?)?"
    ),
    "7.14",
    "ROCm SDK version",
    "X.Y (the newest X.Y.* in the index), X.Y.Z, X.Y.ZrcN, X.Y.ZaYYYYMMDD or X.Y.Z.dev0+<sha>",
)

#: The local-version label of a wheel built against SDK X.Y.Z: torch 2.14.1+rocm7.14.0, and
#: +devrocm7.14.0.dev0-<sha> against a development SDK (TheRock's determine_version.py rule).
LOCAL_VERSION_PREFIX = "rocm"
DEV_LOCAL_VERSION_PREFIX = "devrocm"


@dataclass(frozen=True)
class RocmLibrary:
    """A library torch preloads through rocm_sdk: TheRock's shortname, and the file name
    pattern rocm_sdk finds it by (its `LibraryEntry.so_pattern`)."""

    shortname: str
    so_pattern: str


#: What `torch/_rocm_init.py` preloads on Linux, in order: TheRock's LINUX_LIBRARY_PRELOADS
#: (external-builds/pytorch/build_prod_wheels.py, 2026). The patterns are those of
#: rocm_sdk/_dist_info.py's library table; amd_smi, rocprofiler-sdk, rocm_smi64 and hipfile
#: joined the list after the newest table read here, so theirs follow the table's own rule
#: (lib<name>.so*). One table: the recipe writes it, the wheel validator and the smoke test
#: check it, and the test image's verification checks the libraries are loaded.
PRELOADS: tuple[RocmLibrary, ...] = (
    RocmLibrary("amd_comgr", "libamd_comgr.so*"),
    RocmLibrary("amd_smi", "libamd_smi.so*"),
    RocmLibrary("amdhip64", "libamdhip64.so*"),
    RocmLibrary("rocprofiler-sdk", "librocprofiler-sdk.so*"),
    RocmLibrary("rocprofiler-sdk-roctx", "librocprofiler-sdk-roctx.so*"),
    RocmLibrary("roctracer64", "libroctracer64.so*"),
    RocmLibrary("roctx64", "libroctx64.so*"),
    RocmLibrary("hiprtc", "libhiprtc.so*"),
    RocmLibrary("hipblas", "libhipblas.so*"),
    RocmLibrary("hipfft", "libhipfft.so*"),
    RocmLibrary("hiprand", "libhiprand.so*"),
    RocmLibrary("hipsparse", "libhipsparse.so*"),
    RocmLibrary("hipsparselt", "libhipsparselt.so*"),
    RocmLibrary("hipsolver", "libhipsolver.so*"),
    RocmLibrary("rccl", "librccl.so*"),
    RocmLibrary("hipblaslt", "libhipblaslt.so*"),
    RocmLibrary("miopen", "libMIOpen.so*"),
    RocmLibrary("hipdnn", "libhipdnn_backend.so*"),
    RocmLibrary("rocm_sysdeps_liblzma", "librocm_sysdeps_liblzma.so.*"),
    RocmLibrary("rocm-openblas", "librocm-openblas.so.*"),
    RocmLibrary("rocm_smi64", "librocm_smi64.so*"),
    RocmLibrary("hipfile", "libhipfile.so*"),
)
PRELOAD_SHORTNAMES: tuple[str, ...] = tuple(lib.shortname for lib in PRELOADS)

#: The distribution of TheRock's pip SDK (`rocm[libraries]`, `rocm[devel]`, the device
#: extras), which only TheRock's indexes serve (PyPI's `rocm` is a placeholder).
SDK_DISTRIBUTION = "rocm"
#: The module whose warnings mean the wheel and the installed SDK disagree (rocm_sdk warns
#: "The program was compiled against a ROCm version matching ..." on a version mismatch).
SDK_MODULE = "rocm_sdk"

#: AMDGPU code objects name their GPU in the ELF header: e_machine EM_AMDGPU and the low byte
#: of e_flags (EF_AMDGPU_MACH_AMDGCN_*, LLVM's AMDGPUUsage and hsa/amd_hsa_elf.h).
EM_AMDGPU = 224
AMDGPU_MACH: Mapping[str, int] = MappingProxyType(
    {
        "gfx1010": 0x033,
        "gfx1011": 0x034,
        "gfx1012": 0x035,
        "gfx1030": 0x036,
        "gfx1031": 0x037,
        "gfx1032": 0x038,
        "gfx1034": 0x03E,
        "gfx1035": 0x03D,
        "gfx1036": 0x045,
        "gfx90a": 0x03F,
        "gfx1100": 0x041,
        "gfx1101": 0x046,
        "gfx1102": 0x047,
        "gfx1103": 0x044,
        "gfx1150": 0x043,
        "gfx1151": 0x04A,
        "gfx1152": 0x055,
        "gfx1153": 0x058,
        "gfx1200": 0x048,
        "gfx1201": 0x04E,
        "gfx942": 0x04C,
        "gfx950": 0x04F,
    }
)

#: Targets AOTriton (torch's flash and memory-efficient attention on ROCm) supports, by
#: prefix; TheRock turns both on when triton is built and a target matches.
AOTRITON_TARGET_PREFIXES = ("gfx90a", "gfx942", "gfx950", "gfx11", "gfx12")

#: Shared libraries a ROCm torch wheel must not bundle: it depends on rocm[libraries].
BUNDLED_LIBRARY_PREFIXES = (
    "libamdhip64",
    "libhsa-runtime64",
    "libamd_comgr",
    "libhipblas",
    "libhipblaslt",
    "libhipfft",
    "libhiprand",
    "libhipsparse",
    "libhipsolver",
    "librocblas",
    "librocsolver",
    "librocfft",
    "librocrand",
    "librocsparse",
    "libMIOpen",
    "librccl",
    "librocm_sysdeps",
    "librocprofiler",
    "libroctracer",
    "libroctx",
    "libhipdnn",
    "libamd_smi",
    "librocm_smi64",
    "librocm-openblas",
    "libhipfile",
)

#: Device-selection variables (not a security boundary: only the device nodes are).
ROCM_PASSTHROUGH = ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")

#: What the suite's pytest process needs on ROCm (`RocmBackend.suite_environment`).
ROCM_SUITE_ENV: Mapping[str, str] = MappingProxyType({"PYTORCH_TEST_WITH_ROCM": "1"})


def check_gfx(targets: tuple[str, ...], family: str | None = None) -> None:
    """BadInput for an unknown gfx target or family, or a target outside `family`."""
    for gfx in targets:
        BACKEND.check_target(gfx, flag="--gfx", families=False)
    if family is None:
        return
    if family not in GFX_FAMILIES:
        raise BadInput(f"--family: unknown GPU family {family!r}; valid: {', '.join(GFX_FAMILIES)}")
    outside = [gfx for gfx in targets if gfx not in GFX_FAMILIES[family]]
    if outside:
        raise BadInput(
            f"--gfx {','.join(outside)} is not in family {family} "
            f"({', '.join(GFX_FAMILIES[family])})"
        )


def family_index_url(family: str) -> str:
    return FAMILY_INDEX_URL.format(family=family)


ROCM_TARGETS: tuple[str, ...] = tuple(
    sorted({gfx for members in GFX_FAMILIES.values() for gfx in members})
)


#: An hsaco's ELF machine (EM_AMDGPU) and the processor numbers in the low byte of its
#: e_flags (EF_AMDGPU_MACH_AMDGCN_*, from LLVM's BinaryFormat/ELF.h and its
#: test/CodeGen/AMDGPU/elf-header-flags-mach.ll).
EM_AMDGPU = 224
EF_AMDGPU_MACH: Mapping[int, str] = MappingProxyType(
    {
        0x3F: "gfx90a",
        0x4C: "gfx942",
        0x4F: "gfx950",
        0x33: "gfx1010",
        0x34: "gfx1011",
        0x35: "gfx1012",
        0x36: "gfx1030",
        0x37: "gfx1031",
        0x38: "gfx1032",
        0x3E: "gfx1034",
        0x3D: "gfx1035",
        0x45: "gfx1036",
        0x41: "gfx1100",
        0x46: "gfx1101",
        0x47: "gfx1102",
        0x44: "gfx1103",
        0x43: "gfx1150",
        0x4A: "gfx1151",
        0x55: "gfx1152",
        0x58: "gfx1153",
        0x48: "gfx1200",
        0x4E: "gfx1201",
    }
)
_TARGET_ID = re.compile(rb"amdgcn-amd-amdhsa--(gfx[0-9a-f]+)")

#: Matrix instructions a `tl.dot` becomes (measured with triton 3.8: bf16 on gfx942 is
#: v_mfma_f32_32x32x8_bf16, fp8 v_mfma_f32_32x32x16_fp8_fp8; on gfx950 fp8 is
#: v_mfma_f32_32x32x64_f8f6f4; on gfx1100 v_wmma_f32_16x16x16_bf16). RDNA1/2 (gfx10) have
#: no matrix instructions: triton emits FMA there, so no check is made.
_MFMA = IsaCheck(r"\bv_mfma_", "v_mfma (CDNA matrix cores)")
_WMMA = IsaCheck(r"\bv_wmma_", "v_wmma (RDNA matrix instructions)")
_FP8 = {
    "gfx942": (
        "fp8e4b8",
        IsaCheck(r"\bv_mfma_\w*_fp8_fp8", "v_mfma on fp8 (FNUZ) operands"),
    ),
    "gfx950": ("fp8e4nv", IsaCheck(r"\bv_mfma_\w*(f8f6f4|fp8_fp8)", "v_mfma on fp8 operands")),
    "gfx1200": ("fp8e4nv", IsaCheck(r"\bv_wmma_\w*fp8", "v_wmma on fp8 operands")),
    "gfx1201": ("fp8e4nv", IsaCheck(r"\bv_wmma_\w*fp8", "v_wmma on fp8 operands")),
}
_NO_TMA = "triton's AMD backend has no TMA: tensor descriptors become ordinary loads"
_NO_WARP_SPECIALIZE = "warp specialization is an NVIDIA (sm_90 and newer) feature in triton"


#: Published ceilings of AMD's devices (`accelkit.backends.peaks`: conventions and
#: units). Order matters: the first matching row wins, so specific names precede general
#: ones.
PEAKS: tuple[DevicePeak, ...] = (
    # AMD Instinct MI325X data sheet (amd.com/en/products/accelerators/instinct/mi300/
    # mi325x.html): FP32 vector 163.4 TFLOPS, TF32 matrix 653.7, FP16/BF16 1,307.4,
    # FP8 2,614.9 TFLOPS (dense); 256 GB HBM3E at 6 TB/s.
    DevicePeak(
        name="AMD Instinct MI325X",
        pattern=r"MI325X",
        flops=dense_rates(163.4 * T, 653.7 * T, 1307.4 * T, 2614.9 * T),
        memory_bandwidth=6.0 * TB_S,
        source="AMD Instinct MI325X data sheet",
    ),
    # AMD Instinct MI300X data sheet (amd.com/en/products/accelerators/instinct/mi300/
    # mi300x.html): same compute as MI325X (dense); 192 GB HBM3 at 5.3 TB/s.
    DevicePeak(
        name="AMD Instinct MI300X",
        pattern=r"MI300X",
        flops=dense_rates(163.4 * T, 653.7 * T, 1307.4 * T, 2614.9 * T),
        memory_bandwidth=5.3 * TB_S,
        source="AMD Instinct MI300X data sheet",
    ),
    # AMD Instinct MI355X data sheet (amd.com/en/products/accelerators/instinct/mi350/
    # mi355x.html): FP32 vector 157.3 TFLOPS, FP16/BF16 2.5 PFLOPS, FP8 5.0 PFLOPS (dense;
    # 2x with sparsity); 288 GB HBM3E at 8 TB/s. CDNA 4 has no TF32 matrix rate.
    DevicePeak(
        name="AMD Instinct MI355X",
        pattern=r"MI355X",
        flops={"float32": 157.3 * T, "bfloat16": 2.5 * P, "float16": 2.5 * P, "float8": 5.0 * P},
        memory_bandwidth=8.0 * TB_S,
        source="AMD Instinct MI355X data sheet",
    ),
)


def _gfx_in_arch_list() -> Availability:
    """torch has kernels for device 0's target (PYTORCH_ROCM_ARCH of its build)."""
    torch = torch_module()
    if not getattr(torch.version, "hip", None):
        return Availability(False, f"torch {torch_version(torch)} is not a ROCm build")
    devices = cuda_devices_needed(torch, 1)
    if not devices.available:
        return devices
    # gcnArchName carries target features after a colon (gfx942:sramecc+:xnack-).
    arch = str(torch.cuda.get_device_properties(0).gcnArchName).split(":")[0]
    arch_list = [entry.split(":")[0] for entry in torch.cuda.get_arch_list()]
    if arch not in arch_list:
        return Availability(
            False,
            f"device 0 is {arch}, and torch {torch_version(torch)} has kernels for "
            f"{' '.join(arch_list) or 'no GPU'} only (PYTORCH_ROCM_ARCH of its build)",
        )
    return Availability(True, f"device 0 is {arch}, in torch {torch_version(torch)}'s arch list")


class RocmBackend(BackendDefaults):
    name = "rocm"
    torch_device_type = "cuda"
    description = "AMD GPUs through ROCm (HIP)"
    peaks = PEAKS
    torch_build: str | None = "hip"
    capability_checks: tuple[CapabilityCheck, ...] = (
        CUDA_GRAPH,
        CapabilityCheck("gfx_in_arch_list", "target", _gfx_in_arch_list),
    )
    targets = ROCM_TARGETS
    families = GFX_FAMILIES
    version_rule = SDK_VERSION
    build_flags = BuildFlags(
        toolkit=Opt(
            "rocm_version", ("--rocm-version",), str, None, "ROCm SDK version (e.g. 7.14).", True
        ),
        targets=TargetFlag("--gfx", "ROCm", "gfx942,gfx950", noun="GPU targets"),
        family=Opt(
            "family",
            ("--family",),
            str,
            None,
            "ROCm: a legacy per-family index (gfx94X-dcgpu).",
            True,
        ),
    )
    # RCCL answers to torch.distributed's "nccl" name; HIP graphs sit behind torch.cuda.CUDAGraph.
    collective_backends = ("nccl",)
    graph_capture = GraphCapture("cuda_graph", "CUDAGraph")
    # MI300-class GPUs run float32 GEMMs as XF32 where torch allows TF32.
    tf32 = True
    # A ROCm leg runs only GPUs its torch has kernels for (PYTORCH_ROCM_ARCH at build).
    requirements = MappingProxyType({None: ("gfx_in_arch_list",)})

    def availability(self) -> Availability:
        torch = torch_or_none()
        if torch is None:
            return Availability(False, torch_import_error())
        hip = getattr(torch.version, "hip", None)
        if not hip:
            return Availability(False, "torch built without ROCm (HIP)")
        try:
            if not torch.cuda.is_available():
                return Availability(False, f"no ROCm device (torch built for HIP {hip})")
        except Exception as exc:
            return Availability(False, f"HIP initialisation failed: {exc}")
        count = torch.cuda.device_count()
        return Availability(True, f"torch {torch.__version__} (HIP {hip}): {count} device(s)")

    def devices(self) -> list[DeviceInfo]:
        torch = torch_or_none()
        if torch is None or not self.availability().available:
            return []
        devices = cuda_devices(torch, rocm=True)
        driver = tool_output(["rocm-smi", "--showdriverversion", "--csv"])
        if driver:
            version = driver.splitlines()[-1].split(",")[-1].strip()
            devices = [dataclasses.replace(d, driver=version) for d in devices]
        return devices

    def versions(self) -> dict[str, str | None]:
        torch = torch_or_none()
        if torch is None:
            return {}
        arch_list = None
        if getattr(torch.version, "hip", None):
            try:
                arch_list = " ".join(torch.cuda.get_arch_list()) or None
            except Exception:
                arch_list = None
        return {
            "hip": getattr(torch.version, "hip", None),
            "rocm_sdk": _rocm_sdk_version(),
            "arch_list": arch_list,
        }

    def cross_target(self, target: str) -> CrossTarget | None:
        self.check_target(target, flag="--target", families=False)
        # Wave64 on CDNA (gfx9), wave32 on RDNA (gfx10 and newer), as triton's HIPOptions.
        wave = 64 if target.startswith("gfx9") else 32
        isa: dict[str, IsaCheck] = {}
        if target.startswith("gfx9"):
            isa["mma"] = _MFMA
        elif target.startswith(("gfx11", "gfx12")):
            isa["mma"] = _WMMA
        lacks = {
            "tma": _NO_TMA,
            "warp_specialize": _NO_WARP_SPECIALIZE,
            # The stand-in device accelkit shows Inductor is an NVIDIA one; Inductor writes
            # HIP kernels only in a ROCm build of torch, with the GPU's real properties.
            "inductor": "Inductor generates AMD kernels only in a ROCm build of torch, "
            "not for a stand-in device",
        }
        fp8 = _FP8.get(target)
        if fp8 is not None:
            isa["mma_fp8"] = fp8[1]
        else:
            # triton would emulate fp8 dots with f16 instructions (minutes for one kernel
            # on gfx1100): not what an fp8 GEMM is for.
            lacks["fp8"] = f"{target} has no fp8 matrix instructions"
        return CrossTarget(
            target=target,
            triton_backend="hip",
            triton_arch=target,
            warp_size=wave,
            assembly="amdgcn",
            binary="hsaco",
            assembly_target=rf'\.amdgcn_target\s+"amdgcn-amd-amdhsa--{target}[":]',
            isa=isa,
            fp8_type=fp8[0] if fp8 is not None else None,
            lacks=lacks,
        )

    def cross_toolchain(self, cross: CrossTarget, environ: Mapping[str, str]) -> Toolchain:
        # triton links hsaco with the LLVM it carries: no ROCm needed, and no list of the
        # processors it knows to ask for (a compile says "unsupported target").
        version, path = _triton_version()
        return Toolchain("triton's AMDGPU LLVM", version, path, cross.target, None)

    def binary_target(self, binary: bytes) -> str | None:
        header = _elf.read_header(binary)
        if header is None or header.machine != EM_AMDGPU:
            return None
        mach = EF_AMDGPU_MACH.get(header.flags & 0xFF, f"unknown mach {header.flags & 0xFF:#x}")
        # The code object's metadata note names the target id too; both must agree.
        named = {m.decode() for n in _elf.notes(binary) for m in _TARGET_ID.findall(n.desc)}
        others = sorted(named - {mach})
        return mach if not others else f"{mach} (its notes say {', '.join(others)})"

    passthrough_env: tuple[str, ...] = ROCM_PASSTHROUGH

    def container_options(
        self, env: Mapping[str, str] | None = None, *, host_root: Path = Path("/")
    ) -> RunOptions:
        # What ROCm's own docs ask for, and no more (never --privileged): the KFD compute
        # node and the DRI render nodes, the video and render groups by numeric GID,
        # seccomp unconfined (the runtime uses syscalls the default profile blocks), host IPC.
        return RunOptions(
            env=passthrough(env, self.passthrough_env),
            devices=existing_devices(host_root, ("/dev/kfd", "/dev/dri")),
            group_add=gpu_groups(host_root),
            security_opt=("seccomp=unconfined",),
            ipc_mode="host",
        )

    def suite_environment(self) -> dict[str, str]:
        # torch.testing._internal.common_utils reads it at import: OpInfo's dtypesIfROCM
        # tables and ROCm-only skips apply, as in PyTorch's own ROCm CI.
        return dict(ROCM_SUITE_ENV)

    def test_image(self, arch: str | None = None) -> TestImageSpec:
        if arch is not None:
            check_gfx((arch,))
        # TheRock's runtime comes from pip (torch requires rocm[libraries]), so the plain
        # test image serves; nothing GPU-specific is installed from the base.
        return TestImageSpec(
            dockerfile="cpu.Dockerfile",
            default_base_image=UBUNTU_BASE_IMAGE,
            arch=arch,
            probes={"preload": ("python", "-c", preload_probe())},
            # triton's AMD backend builds hsaco with the LLVM it carries: no device needed.
            checks={f"compile-only {arch}": compile_only(self.name, arch)} if arch else {},
            device_checks={"graph capture": suite_smoke(self.name)},
            # A built wheel requires rocm[libraries]==<its SDK>: TheRock's index alone has it.
            sdk_requirements=(SDK_DISTRIBUTION,),
        )

    def host_has_device(self, host_root: Path = Path("/")) -> bool:
        return any_exists(host_root, ("/dev/kfd",))

    def verify_test_image(
        self, doctor: Mapping[str, Any], probes: Mapping[str, str], spec: TestImageSpec
    ) -> list[str]:
        problems = torch_problems(doctor)
        if problems:
            return problems
        torch = section(doctor, "env", "torch")
        if not torch.get("hip"):
            problems.append(f"torch {torch.get('version')} has no torch.version.hip")
        if spec.arch is not None and torch.get("hip"):
            versions = section(doctor, "env", "backends", self.name, "versions")
            arch_list = [a.split(":")[0] for a in str(versions.get("arch_list") or "").split()]
            if spec.arch not in arch_list:
                # No PTX-like fallback on AMD: without the target's code objects nothing runs.
                problems.append(
                    f"torch {torch.get('version')} has no code for {spec.arch}: it was built "
                    f"for {' '.join(arch_list) or 'no GPU'} (PYTORCH_ROCM_ARCH)"
                )
        problems.extend(preload_problems(probes.get("preload", "")))
        return problems


def preload_probe() -> str:
    """Python source that imports torch with rocm_sdk's warnings (a version mismatch) as
    errors, then prints one `loaded=<shortname>` line per preload whose library is mapped into
    the process, and whether torch/_rocm_init.py ran."""
    patterns = {lib.shortname: lib.so_pattern for lib in PRELOADS}
    return (
        "import fnmatch, os, re, sys, warnings\n"
        f"warnings.filterwarnings('error', module=re.escape({SDK_MODULE!r}) + r'(\\.|$)')\n"
        "import torch\n"
        "print('rocm_init=%s' % ('torch._rocm_init' in sys.modules))\n"
        "maps = {os.path.basename(l.split()[-1]) for l in open('/proc/self/maps') if '/' in l}\n"
        f"for name, pattern in {patterns!r}.items():\n"
        "    if any(fnmatch.fnmatch(m, pattern) for m in maps):\n"
        "        print('loaded=' + name)\n"
    )


def preload_problems(output: str) -> list[str]:
    """What the preload probe's output says is wrong: _rocm_init.py not run, or a library of
    PRELOADS not loaded (an import that warned or failed prints nothing)."""
    lines = output.split()
    if "rocm_init=True" not in lines:
        return ["import torch did not run torch/_rocm_init.py (or warned about the ROCm SDK)"]
    loaded = {line.split("=", 1)[1] for line in lines if line.startswith("loaded=")}
    missing = [name for name in PRELOAD_SHORTNAMES if name not in loaded]
    if missing:
        return ["import torch did not preload through rocm_sdk: " + ", ".join(missing)]
    return []


def _triton_version() -> tuple[str, str]:
    """triton's version and folder, read from its metadata (no import)."""
    import importlib.metadata
    import importlib.util

    try:
        version = importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        version = "not installed"
    spec = importlib.util.find_spec("triton")
    origin = spec.origin if spec is not None and spec.origin else ""
    return version, str(Path(origin).parent) if origin else ""


def _rocm_sdk_version() -> str | None:
    # TheRock's pip SDK ships a `rocm_sdk` module; older ROCm installs do not.
    try:
        import rocm_sdk
    except Exception:
        return None
    version = getattr(rocm_sdk, "__version__", None)
    return str(version) if version else None


BACKEND = RocmBackend()
