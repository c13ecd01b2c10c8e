"""ROCm: PyTorch built against TheRock's pip-installable SDK (build_prod_wheels.py, simplified;
see ../shared/notes/therock.md).

The SDK is `rocm[libraries,devel,device-<gfx>...]` from the multi-arch index (or
`rocm[libraries,devel]` from a legacy per-family index); `rocm-sdk path` tells where it
unpacked. The wheel does not bundle ROCm: it requires `rocm[libraries]==<version>` and
preloads the libraries through rocm_sdk from a generated `torch/_rocm_init.py`.
"""

from __future__ import annotations

from accelkit.backends import rocm as backend
from accelkit.errors import BadInput
from accelkit.inputs import check_url
from accelkit.wheels.plan import (
    CONTAINER_DIST,
    CONTAINER_TREE,
    BuildPlan,
    EnvVar,
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
    wheel_step,
)
from accelkit.wheels.request import BuildRequest

#: ROCm's triton fork, built at the pin in torch's tree, before torch.
TRITON_REPO = "https://github.com/ROCm/triton.git"
TRITON_PIN_FILE = ".ci/docker/ci_commit_pins/triton.txt"
ROCM_INIT = "torch/_rocm_init.py"


#: The backend this recipe builds for (its registry key).
BACKEND = backend.BACKEND


def plan_build(request: BuildRequest) -> BuildPlan:
    accept(request, "--rocm-version", "--gfx", "--family", "--index-url", "--triton")
    if request.version is None:
        raise BadInput("accelkit build rocm needs --rocm-version (e.g. 7.14)")
    version = backend.SDK_VERSION.check(request.version, flag="--rocm-version")
    if not request.targets:
        raise BadInput(
            f"accelkit build rocm needs --gfx (valid: {', '.join(backend.ROCM_TARGETS)})"
        )
    backend.check_gfx(request.targets, request.family)
    if request.family is not None and request.index_url is not None:
        raise BadInput("--family and --index-url are alternatives: give one")

    if request.family is not None:
        # Legacy scheme: the family's index carries the device libraries itself.
        index = backend.family_index_url(request.family)
        extras = ["libraries", "devel"]
    else:
        index = check_url("--index-url", request.index_url or backend.MULTI_ARCH_INDEX_URL)
        # Always name the device extras: on a GPU-less builder the sdist would guess.
        extras = ["libraries", "devel", *(f"device-{gfx}" for gfx in request.targets)]
    requirement = f"rocm[{','.join(extras)}]=={version}"
    torch = torch_version(request)
    full_version = f"{torch}+rocm{version}"
    runtime_requirement = f"rocm[libraries]=={version}"

    sdk_root = ("rocm-sdk", "path", "--root")
    env = [
        EnvVar("USE_ROCM", "ON"),
        EnvVar("USE_CUDA", "OFF"),
        EnvVar("USE_KINETO", "ON"),
        EnvVar("USE_GLOO", "ON"),
        # Always explicit: the `rocm-sdk targets` fallback picks too many.
        EnvVar("PYTORCH_ROCM_ARCH", semicolons(request.targets)),
        *common_env(request, full_version),
        EnvVar("PYTORCH_EXTRA_INSTALL_REQUIREMENTS", runtime_requirement),
        # Triton must not pick up the SDK's LLVM from CMAKE_PREFIX_PATH.
        EnvVar("TRITON_APPEND_CMAKE_ARGS", "-DCMAKE_FIND_USE_CMAKE_ENVIRONMENT_PATH=FALSE"),
        EnvVar("CMAKE_PREFIX_PATH", command=("rocm-sdk", "path", "--cmake")),
        EnvVar("ROCM_HOME", command=sdk_root),
        EnvVar("ROCM_PATH", command=sdk_root),
        EnvVar("HIP_DEVICE_LIB_PATH", command=sdk_root, suffix="/lib/llvm/amdgcn/bitcode"),
        EnvVar("PATH", command=("rocm-sdk", "path", "--bin"), prepend=True),
    ]
    steps = [
        Step(
            name="sdk-cache",
            description="forget a cached rocm sdist (it fixes its GPU target when built)",
            argv=(PYTHON, "-m", "pip", "cache", "remove", "rocm"),
            may_fail=True,
        ),
        Step(
            name="sdk",
            description=f"install the ROCm SDK {version} from {index}",
            argv=(PYTHON, "-m", "pip", "install", "--pre", "--index-url", index, requirement),
        ),
        Step(
            name="sdk-version",
            description="check the SDK's version",
            action="check-output",
            args={"argv": ["rocm-sdk", "version"], "expected": version},
        ),
        Step(
            name="sdk-env",
            description="ask rocm-sdk for its paths (CMAKE_PREFIX_PATH, ROCM_HOME, PATH, ...)",
            action="resolve-env",
        ),
        checkout_step(request),
        Step(
            name="hipify",
            description="translate the CUDA sources to HIP",
            argv=(PYTHON, "tools/amd_build/build_amd.py"),
            cwd=CONTAINER_TREE,
        ),
        requirements_step(),
    ]
    outputs = [f"torch-{full_version}-*.whl"]
    notes = []
    if request.triton:
        steps.append(
            Step(
                name="triton",
                description="build ROCm's triton at the pin in torch's tree",
                action="build-triton",
                args={
                    "repo": TRITON_REPO,
                    "pin_file": TRITON_PIN_FILE,
                    "subdirectory": "python",
                    "wheel_dir": CONTAINER_DIST,
                },
                cwd=CONTAINER_TREE,
            )
        )
        outputs.append("triton-*.whl")
    else:
        notes.append("triton is not built (--no-triton): install a matching one at test time")
    steps += [
        Step(
            name="rocm-init",
            description=f"write {ROCM_INIT}: preload ROCm through rocm_sdk at import",
            action="write-rocm-init",
            args={
                "path": ROCM_INIT,
                "version": version,
                "preload": list(backend.PRELOAD_SHORTNAMES),
                "targets": list(request.targets),
            },
            cwd=CONTAINER_TREE,
        ),
        wheel_step(),
    ]
    builder = builder_image("rocm", "rocm.Dockerfile", request, MANYLINUX_BASE_IMAGE)
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
            requires=(runtime_requirement,),
            files=(ROCM_INIT,),
            forbidden_library_prefixes=backend.BUNDLED_LIBRARY_PREFIXES,
            targets=request.targets,
            targets_file=ROCM_INIT,
        ),
        notes=tuple(notes),
    )
