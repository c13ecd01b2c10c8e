"""Intel XPU: PyTorch with SYCL kernels for the named GPUs and the XCCL c10d backend."""

from __future__ import annotations

from accelkit.backends import xpu as backend
from accelkit.errors import BadInput
from accelkit.wheels.plan import BuildPlan, BuildRequest, EnvVar, WheelExpectation
from accelkit.wheels.recipes import recipe
from accelkit.wheels.recipes._common import (
    builder_image,
    checkout_step,
    common_env,
    inputs,
    reject,
    requirements_step,
    torch_version,
    wheel_step,
)

#: Intel's oneAPI Deep Learning Essentials (compilers, oneDNN, oneCCL): PyTorch's XPU CI base.
XPU_BUILDER_BASE = "intel/deep-learning-essentials:{version}-devel-ubuntu24.04"
DEFAULT_ONEAPI_VERSION = "2025.3"


@recipe("xpu")
def xpu_plan(request: BuildRequest) -> BuildPlan:
    reject(request, "xpu", family="--family", index_url="--index-url")
    version = request.version or DEFAULT_ONEAPI_VERSION
    targets = request.targets or ("pvc", "bmg")
    for arch in targets:
        if arch not in backend.XpuBackend.targets:
            valid = ", ".join(backend.XpuBackend.targets)
            raise BadInput(f"--arch: unknown XPU target {arch!r}; valid: {valid}")
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
