"""ROCm: PyTorch built against TheRock's pip-installable SDK, step by step as TheRock's own
`external-builds/pytorch/build_prod_wheels.py` builds it (see ../shared/notes/therock.md; each
step names the reference step it follows, and says where accelkit deliberately differs).

The SDK is `rocm[libraries,devel,device-<gfx>...]` from the multi-arch index (or
`rocm[libraries,devel]` from a legacy per-family index). `--rocm-version 7.14` names a release
series: the builder asks the index and takes the newest 7.14.* (final releases unless --pre),
and that exact version flows into every later step as `@{rocm_version}`: the install pin, the
wheel's local version (+rocm7.14.0), `Requires-Dist: rocm[libraries]==7.14.0` and the
`check_version` of the generated `torch/_rocm_init.py`, so rocm_sdk never warns of a mismatch.
The wheel does not bundle ROCm: it requires rocm[libraries] and preloads the libraries through
rocm_sdk at import.
"""

from __future__ import annotations

import re

from accelkit.backends import rocm as backend
from accelkit.errors import BadInput
from accelkit.inputs import check_url
from accelkit.wheels.plan import (
    CONTAINER_DIST,
    CONTAINER_TREE,
    CONTAINER_WORK,
    BuildPlan,
    CodeObjects,
    EnvVar,
    InitModule,
    SmokeCheck,
    Step,
    WheelExpectation,
)
from accelkit.wheels.recipes._common import (
    MANYLINUX_BASE_IMAGE,
    PYTHON,
    accept,
    builder_image,
    checkout_step,
    common_env,
    inputs,
    requirements_step,
    semicolons,
    torch_version,
)
from accelkit.wheels.request import BuildRequest

REFERENCE = "TheRock external-builds/pytorch/build_prod_wheels.py"
#: ROCm's triton fork, built at the pin in torch's tree, before torch.
TRITON_REPO = "https://github.com/ROCm/triton.git"
TRITON_PIN_FILE = ".ci/docker/ci_commit_pins/triton.txt"
TRITON_SOURCE = f"{CONTAINER_WORK}/triton"
TRITON_WHEEL_NAME = "triton"
ROCM_INIT = "torch/_rocm_init.py"
#: What the bundles of a HIP build name each GPU code object (clang's offload kind and triple).
HIP_BUNDLE_PREFIX = "hipv4-amdgcn-amd-amdhsa--"

#: Plan variables the builder sets, and how.
VARIABLES = {
    "rocm_version": "the exact SDK version the index gives for --rocm-version (sdk-resolve)",
    "rocm_local": "the wheels' local version: rocm<exact>, devrocm<exact> for dev SDKs",
    "sdk_libraries": "the library names the installed SDK knows (sdk-libraries)",
    "rocm_root": "rocm-sdk path --root (sdk-paths)",
    "rocm_cmake": "rocm-sdk path --cmake (sdk-paths)",
    "rocm_bin": "rocm-sdk path --bin (sdk-paths)",
    "triton_requirement": "triton==<the version of the triton wheel built> (triton-install)",
}
#: GCC 12 warnings that PyTorch's -Werror turns into errors (TheRock's workaround).
GCC_WARNING_FLAGS = "-Wno-error=maybe-uninitialized -Wno-error=uninitialized -Wno-error=restrict"
#: pip of the SDK steps sees the SDK index alone: an extra index of the host (PyPI) must not
#: offer a `rocm` of its own (PyPI has 0.1.0 placeholders).
SDK_INDEX_ONLY = {"PIP_EXTRA_INDEX_URL": "", "PIP_FIND_LINKS": ""}

#: The backend this recipe builds for (its registry key).
BACKEND = backend.BACKEND


def plan_build(request: BuildRequest) -> BuildPlan:
    accept(request, "--rocm-version", "--gfx", "--family", "--index-url", "--pre", "--triton")
    if request.version is None:
        raise BadInput("accelkit build rocm needs --rocm-version (e.g. 7.14)")
    requested = backend.SDK_VERSION.check(request.version, flag="--rocm-version")
    if not request.targets:
        raise BadInput(
            f"accelkit build rocm needs --gfx (valid: {', '.join(backend.ROCM_TARGETS)})"
        )
    backend.check_gfx(request.targets, request.family)

    if request.family is not None:
        # Legacy scheme: the family's index carries the device libraries itself.
        default_index = backend.family_index_url(request.family)
        extras = ["libraries", "devel"]
    else:
        default_index = backend.MULTI_ARCH_INDEX_URL
        # Always name the device extras: on a GPU-less builder the sdist would guess.
        extras = ["libraries", "devel", *(f"device-{gfx}" for gfx in request.targets)]
    index = check_url("--index-url", request.index_url or default_index)
    requirement = f"{backend.SDK_DISTRIBUTION}[{','.join(extras)}]==@{{rocm_version}}"
    torch = torch_version(request)
    full_version = f"{torch}+@{{rocm_local}}"
    # Only TheRock's index serves it: `accelkit setup` installs it from the index named in
    # the build's manifest (accelkit/wheels/manifest.py).
    runtime_requirement = f"{backend.SDK_DISTRIBUTION}[libraries]==@{{rocm_version}}"
    flash = request.triton and any(
        gfx.startswith(backend.AOTRITON_TARGET_PREFIXES) for gfx in request.targets
    )
    install_requirements = [runtime_requirement]
    if request.triton:
        install_requirements.append("@{triton_requirement}")

    env = _environment(request, full_version, install_requirements, flash)
    steps = [*_sdk_steps(request, requested, index, requirement), checkout_step(request)]
    steps.append(
        Step(
            name="hipify",
            description="translate the CUDA sources to HIP",
            argv=(PYTHON, "tools/amd_build/build_amd.py"),
            cwd=CONTAINER_TREE,
            reference="pytorch_torch_repo.py checkout (hipify at checkout time)",
        )
    )
    outputs = [f"torch-{torch}+*-*.whl"]
    if re.fullmatch(r"\d+\.\d+", requested):
        which = "pre-releases too (--pre)" if request.pre else "final releases only"
        meaning = f"the newest {requested}.* in the index, {which}"
    else:
        meaning = "exactly this version"
    notes = [
        f"--rocm-version {requested}: {meaning}; the builder resolves it to @{{rocm_version}}",
        "TheRock installs the built wheel into the build environment and imports torch "
        "there; accelkit imports it in a clean container instead (the smoke test, "
        "--no-smoke to skip), with rocm_sdk's warnings as errors",
        "TheRock's --release-type dev (+git<torch commit> in the local version) is not "
        "offered: a development SDK (X.Y.Z.devN+<sha>) gives +devrocm<version> as in TheRock",
    ]
    if request.triton:
        steps += _triton_steps()
        outputs.append(f"{TRITON_WHEEL_NAME}-*.whl")
    else:
        notes.append(
            "triton is not built (--no-triton): torch does not pin one, and flash and "
            "memory-efficient attention are off (TheRock: no triton, no AOTriton on Linux)"
        )
    steps += _torch_steps()
    builder = builder_image("rocm", "rocm.Dockerfile", request, MANYLINUX_BASE_IMAGE)
    requires = tuple(install_requirements)
    return BuildPlan(
        backend="rocm",
        inputs=inputs(request, torch_version=torch, index=index),
        builder=builder,
        requirement=requirement,
        index_url=index,
        env=tuple(env),
        steps=tuple(steps),
        outputs=tuple(outputs),
        expect=WheelExpectation(
            version=full_version,
            requires=requires,
            platform_specific=True,
            forbidden_library_prefixes=backend.BUNDLED_LIBRARY_PREFIXES,
            init_module=InitModule(
                path=ROCM_INIT,
                preload=backend.PRELOAD_SHORTNAMES,
                check_version="@{rocm_version}",
                known_variable="sdk_libraries",
            ),
            code_objects=CodeObjects(
                targets=request.targets,
                bundle_prefix=HIP_BUNDLE_PREFIX,
                elf_machine=backend.EM_AMDGPU,
                elf_mach={t: backend.AMDGPU_MACH[t] for t in request.targets},
            ),
        ),
        notes=tuple(notes),
        variables={k: v for k, v in VARIABLES.items() if request.triton or "triton" not in k},
        smoke=SmokeCheck(
            module="torch",
            warnings_as_errors=(backend.SDK_MODULE,),
            libraries={lib.shortname: lib.so_pattern for lib in backend.PRELOADS},
        ),
        reference=REFERENCE,
    )


def _environment(
    request: BuildRequest, full_version: str, install_requirements: list[str], flash: bool
) -> list[EnvVar]:
    sysdeps = "@{rocm_root}/lib/rocm_sysdeps"
    env = [
        EnvVar("PYTHONUTF8", "1"),
        EnvVar("USE_ROCM", "ON"),
        EnvVar("USE_CUDA", "OFF"),
        EnvVar("USE_MPI", "OFF"),
        EnvVar("USE_NUMA", "OFF"),
        EnvVar("USE_KINETO", "ON"),
        EnvVar("USE_GLOO", "ON"),
        # Always explicit: the `rocm-sdk targets` fallback picks too many.
        EnvVar("PYTORCH_ROCM_ARCH", semicolons(request.targets)),
        EnvVar("USE_FLASH_ATTENTION", "ON" if flash else "OFF"),
        EnvVar("USE_MEM_EFF_ATTENTION", "ON" if flash else "OFF"),
        *common_env(request, full_version),
        EnvVar("PYTORCH_EXTRA_INSTALL_REQUIREMENTS", "|".join(install_requirements)),
        EnvVar("CMAKE_PREFIX_PATH", "@{rocm_cmake}"),
        EnvVar("ROCM_HOME", "@{rocm_root}"),
        EnvVar("ROCM_PATH", "@{rocm_root}"),
        EnvVar("PATH", "@{rocm_bin}", prepend=True),
        EnvVar("HIP_DEVICE_LIB_PATH", "@{rocm_root}/lib/llvm/amdgcn/bitcode"),
        # OpenBLAS from the SDK's host-math.
        EnvVar("BLAS", "OpenBLAS"),
        EnvVar("OpenBLAS_HOME", "@{rocm_root}/lib/host-math"),
        EnvVar("OpenBLAS_LIB_NAME", "rocm-openblas"),
        # The SDK's sysdeps first: rocm_smi's kfd_ioctl.h needs their libdrm/drm.h; Kineto
        # includes roctracer.h from include/roctracer.
        EnvVar(
            "CXXFLAGS",
            f" {GCC_WARNING_FLAGS} -I{sysdeps}/include -I@{{rocm_root}}/include/roctracer ",
        ),
        EnvVar("CPPFLAGS", f" {GCC_WARNING_FLAGS} "),
        EnvVar("LDFLAGS", f"-L{sysdeps}/lib "),
        # aotriton finds the sysdeps' liblzma through pkg-config, and its build runs tools
        # linked against them.
        EnvVar("PKG_CONFIG_PATH", f"{sysdeps}/lib/pkgconfig"),
        EnvVar("LD_LIBRARY_PATH", f"{sysdeps}/lib"),
    ]
    if request.triton:
        env += [
            # Triton must not pick up the SDK's LLVM from CMAKE_PREFIX_PATH (TheRock#1999).
            EnvVar("TRITON_APPEND_CMAKE_ARGS", "-DCMAKE_FIND_USE_CMAKE_ENVIRONMENT_PATH=FALSE"),
            EnvVar("TRITON_WHEEL_VERSION_SUFFIX", "+@{rocm_local}"),
            EnvVar("TRITON_WHEEL_NAME", TRITON_WHEEL_NAME),
        ]
    return env


def _sdk_steps(request: BuildRequest, requested: str, index: str, requirement: str) -> list[Step]:
    pip = (PYTHON, "-m", "pip")
    install: tuple[str, ...] = (*pip, "install", "--force-reinstall")
    if request.pre:
        install += ("--pre",)
    return [
        Step(
            name="sdk-resolve",
            description=f"ask {index} which rocm version --rocm-version {requested} means",
            action="resolve-sdk-version",
            args={
                "package": "rocm",
                "requested": requested,
                "index_url": index,
                "pre": request.pre,
                "variable": "rocm_version",
                "local_variable": "rocm_local",
                "local_prefix": backend.LOCAL_VERSION_PREFIX,
                "dev_local_prefix": backend.DEV_LOCAL_VERSION_PREFIX,
            },
            env=SDK_INDEX_ONLY,
            reference="install-rocm --rocm-sdk-version <spec> [--pre]",
            note="a bare X.Y is the newest X.Y.* that the index lists, chosen here and then "
            "pinned exactly, and pre-releases only with --pre (TheRock's default is --pre and "
            "a version range left to pip); a version the index lacks stops the build (exit 3) "
            "before anything is installed",
        ),
        Step(
            name="sdk-cache",
            description="forget a cached rocm sdist (it fixes its GPU target when built)",
            argv=(*pip, "cache", "remove", "rocm"),
            may_fail=True,
            reference="do_install_rocm: pip cache remove rocm",
        ),
        Step(
            name="sdk",
            description=f"install the ROCm SDK @{{rocm_version}} from {index}",
            argv=(*install, "--index-url", index, requirement),
            env=SDK_INDEX_ONLY,
            reference="do_install_rocm: pip install --force-reinstall rocm[libraries,devel,...]",
        ),
        Step(
            name="sdk-version",
            description="check that the installed SDK is the resolved version",
            action="check-output",
            args={"argv": ["rocm-sdk", "version"], "expected": "@{rocm_version}"},
            reference="get_rocm_sdk_version (python -m rocm_sdk version)",
        ),
        Step(
            name="sdk-libraries",
            description="check that the installed SDK knows and finds every library to preload",
            action="check-sdk-libraries",
            args={"preload": list(backend.PRELOAD_SHORTNAMES), "variable": "sdk_libraries"},
            note="not in the reference: an unknown preload name fails here, before hours of "
            "compiling, instead of at `import torch`",
        ),
        Step(
            name="sdk-paths",
            description="ask rocm-sdk for its paths (root, cmake prefix, bin)",
            action="resolve-paths",
            args={
                "variables": {
                    "rocm_root": ["rocm-sdk", "path", "--root"],
                    "rocm_cmake": ["rocm-sdk", "path", "--cmake"],
                    "rocm_bin": ["rocm-sdk", "path", "--bin"],
                }
            },
            reference="get_rocm_path(root|cmake|bin) and _setup_common_build_env",
        ),
        Step(
            name="sdk-sysdeps",
            description="check the SDK's sysdeps folder is there (includes, libraries)",
            action="check-output",
            args={
                "argv": [PYTHON, "-c", _IS_DIR, "@{rocm_root}/lib/rocm_sysdeps"],
                "expected": "yes",
            },
            reference="do_build_pytorch: assert sysdeps_dir.exists()",
        ),
    ]


#: Prints "yes" when argv[1] is a folder (a check-output step, no shell).
_IS_DIR = "import os, sys; print('yes' if os.path.isdir(sys.argv[1]) else 'no')"


def _triton_steps() -> list[Step]:
    triton = {"source": TRITON_SOURCE}
    return [
        Step(
            name="triton-checkout",
            description=f"fetch ROCm's triton at the pin in torch's {TRITON_PIN_FILE}",
            action="triton",
            args={**triton, "phase": "checkout", "repo": TRITON_REPO, "pin_file": TRITON_PIN_FILE},
            cwd=CONTAINER_TREE,
            reference="pytorch_triton_repo.py checkout",
        ),
        Step(
            name="triton-requirements",
            description="install triton's own build requirements",
            argv=(PYTHON, "-m", "pip", "install", "-r", f"{TRITON_SOURCE}/python/requirements.txt"),
            cwd=TRITON_SOURCE,
            reference="build_triton_linux: pip install -r python/requirements.txt",
        ),
        Step(
            name="triton-wheel",
            description="build the triton wheel (+rocm<exact> version suffix)",
            action="triton",
            args={**triton, "phase": "wheel"},
            reference="build_triton_linux: setup.py bdist_wheel",
        ),
        Step(
            name="triton-install",
            description="install the triton wheel before torch; torch pins its exact version",
            action="triton",
            args={
                **triton,
                "phase": "install",
                "wheel_name": TRITON_WHEEL_NAME,
                "wheel_dir": CONTAINER_DIST,
                "variable": "triton_requirement",
            },
            reference="build_triton_linux: pip install <wheel>; triton==<installed version>",
        ),
    ]


def _torch_steps() -> list[Step]:
    return [
        Step(
            name="rocm-init",
            description=f"write {ROCM_INIT}: preload the SDK's libraries through rocm_sdk",
            action="write-rocm-init",
            args={
                "path": ROCM_INIT,
                "version": "@{rocm_version}",
                "preload": list(backend.PRELOAD_SHORTNAMES),
            },
            cwd=CONTAINER_TREE,
            reference="get_rocm_init_contents (LINUX_LIBRARY_PRELOADS, check_version)",
        ),
        Step(
            name="torch-uninstall",
            description="remove any torch from the build environment",
            argv=(PYTHON, "-m", "pip", "uninstall", "-y", "torch"),
            reference="do_build_pytorch: pip uninstall torch -y",
        ),
        requirements_step(),
        Step(
            name="build-backend",
            description="install the build frontend and the tree's build backend",
            action="install-build-requirements",
            args={"packages": ["build"], "requirements": "requirements-build.txt"},
            cwd=CONTAINER_TREE,
            reference="do_build_pytorch: pip install build -r requirements-build.txt",
        ),
        Step(
            name="wheel",
            description="build the torch wheel (no build isolation: the SDK is in this env)",
            action="build-wheel",
            args={"outdir": CONTAINER_DIST, "force_include": [ROCM_INIT]},
            cwd=CONTAINER_TREE,
            reference="do_build_pytorch: python -m build --wheel --no-isolation "
            "[-Cwheel.force-include.torch/_rocm_init.py=... for scikit-build-core trees]",
        ),
    ]
