"""AMD ROCm. In torch, ROCm devices are `cuda` devices and `torch.version.hip` is set."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from accelkit.backends._containers import (
    UBUNTU_BASE_IMAGE,
    existing_devices,
    gpu_groups,
    passthrough,
    section,
    torch_problems,
)
from accelkit.backends._cudalike import cuda_devices
from accelkit.backends._defaults import BackendDefaults
from accelkit.backends._tools import tool_output
from accelkit.backends.base import (
    Availability,
    DeviceInfo,
    GraphCapture,
    TestImageSpec,
    VersionRule,
)
from accelkit.containers.run import RunOptions
from accelkit.errors import BadInput
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


class RocmBackend(BackendDefaults):
    name = "rocm"
    torch_device_type = "cuda"
    description = "AMD GPUs through ROCm (HIP)"
    targets = ROCM_TARGETS
    families = GFX_FAMILIES
    version_rule = SDK_VERSION
    # RCCL answers to torch.distributed's "nccl" name; HIP graphs sit behind torch.cuda.CUDAGraph.
    collective_backends = ("nccl",)
    graph_capture = GraphCapture("cuda_graph", "CUDAGraph")
    # MI300-class GPUs run float32 GEMMs as XF32 where torch allows TF32.
    tf32 = True

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
        return Availability(True, "")

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
        return {"hip": getattr(torch.version, "hip", None), "rocm_sdk": _rocm_sdk_version()}

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
        )

    def verify_test_image(
        self, doctor: Mapping[str, Any], probes: Mapping[str, str], spec: TestImageSpec
    ) -> list[str]:
        problems = torch_problems(doctor)
        if problems:
            return problems
        torch = section(doctor, "env", "torch")
        if not torch.get("hip"):
            problems.append(f"torch {torch.get('version')} has no torch.version.hip")
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


def _rocm_sdk_version() -> str | None:
    # TheRock's pip SDK ships a `rocm_sdk` module; older ROCm installs do not.
    try:
        import rocm_sdk
    except Exception:
        return None
    version = getattr(rocm_sdk, "__version__", None)
    return str(version) if version else None


BACKEND = RocmBackend()
