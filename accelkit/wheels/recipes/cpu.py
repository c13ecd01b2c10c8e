"""The CPU: PyTorch without any accelerator."""

from __future__ import annotations

from accelkit.backends import cpu as backend
from accelkit.wheels.plan import BuildPlan, EnvVar, WheelExpectation
from accelkit.wheels.recipes._common import (
    MANYLINUX_BASE_IMAGE,
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

#: The backend this recipe builds for (its registry key).
BACKEND = backend.BACKEND


def plan_build(request: BuildRequest) -> BuildPlan:
    accept(request)
    torch = torch_version(request)
    full_version = f"{torch}+cpu"
    env = [
        EnvVar("USE_CUDA", "0"),
        EnvVar("USE_ROCM", "0"),
        EnvVar("USE_XPU", "0"),
        *common_env(request, full_version),
    ]
    return BuildPlan(
        backend="cpu",
        inputs=inputs(request, torch_version=torch),
        builder=builder_image("cpu", "builder.Dockerfile", request, MANYLINUX_BASE_IMAGE),
        requirement=None,
        index_url=None,
        env=tuple(env),
        steps=(checkout_step(request), requirements_step(), wheel_step()),
        outputs=(f"torch-{full_version}-*.whl",),
        expect=WheelExpectation(version=full_version),
    )
