"""Intel XPU: PyTorch with SYCL kernels for the named GPUs and the XCCL c10d backend."""

from __future__ import annotations

from accelkit.backends import xpu as backend
from accelkit.wheels.plan import BuildPlan, EnvVar, WheelExpectation
from accelkit.wheels.recipes._common import (
    accept,
    builder_image,
    checkout_step,
    common_env,
    inputs,
    requirements_step,
    torch_version,
    wheel_step,
)
from accelkit.wheels.request import BuildRequest

#: Intel's oneAPI Deep Learning Essentials (compilers, oneDNN, oneCCL): PyTorch's XPU CI base.
XPU_BUILDER_BASE = "intel/deep-learning-essentials:{version}-devel-ubuntu24.04"
DEFAULT_ONEAPI_VERSION = "2025.3"


#: The backend this recipe builds for (its registry key).
BACKEND = backend.BACKEND


def plan_build(request: BuildRequest) -> BuildPlan:
    accept(request, "--oneapi-version", "--arch")
    version = backend.ONEAPI_VERSION.check(
        request.version or DEFAULT_ONEAPI_VERSION, flag="--oneapi-version"
    )
    targets = request.targets or ("pvc", "bmg")
    for arch in targets:
        backend.BACKEND.check_target(arch, version, flag="--arch")
    torch = torch_version(request)
    full_version = f"{torch}+xpu"
    env = [
        EnvVar("USE_XPU", "1"),
        EnvVar("USE_XCCL", "1"),
        EnvVar("USE_CUDA", "0"),
        EnvVar("USE_ROCM", "0"),
        # torch-xpu-ops takes a comma-separated list of AOT targets.
        EnvVar("TORCH_XPU_ARCH_LIST", ",".join(targets)),
        *common_env(request, full_version),
    ]
    steps = (checkout_step(request), requirements_step(), wheel_step())
    return BuildPlan(
        backend="xpu",
        inputs=inputs(request, torch_version=torch, oneapi_version=version),
        builder=builder_image(
            "xpu", "builder.Dockerfile", request, XPU_BUILDER_BASE.format(version=version)
        ),
        requirement=None,
        index_url=None,
        env=tuple(env),
        steps=steps,
        outputs=(f"torch-{full_version}-*.whl",),
        expect=WheelExpectation(version=full_version),
        notes=("the builder base must put oneAPI on PATH (Deep Learning Essentials does)",),
    )
