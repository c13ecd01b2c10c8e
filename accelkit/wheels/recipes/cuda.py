"""CUDA: PyTorch for a list of NVIDIA targets, sm_107 (Rubin) included from CUDA 13.4."""

from __future__ import annotations

from accelkit.backends import cuda as backend
from accelkit.backends.base import release_tuple
from accelkit.wheels.plan import BuildPlan, EnvVar, WheelExpectation
from accelkit.wheels.recipes._common import (
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

#: The backend this recipe builds for (its registry key).
BACKEND = backend.BACKEND


def plan_build(request: BuildRequest) -> BuildPlan:
    accept(request, "--cuda-version", "--arch")
    version = backend.CUDA_VERSION.check(
        request.version or backend.DEFAULT_CUDA_VERSION, flag="--cuda-version"
    )
    cuda = release_tuple(version)
    targets = request.targets or ("sm_90", "sm_100", "sm_107")
    for arch in targets:
        backend.BACKEND.check_target(arch, version, flag="--arch")
    torch = torch_version(request)
    full_version = f"{torch}+cu{cuda[0]}{cuda[1]}"
    env = [
        EnvVar("USE_CUDA", "1"),
        EnvVar("USE_ROCM", "0"),
        EnvVar("USE_NCCL", "1"),
        EnvVar("CUDA_HOME", "/usr/local/cuda"),
        EnvVar("TORCH_CUDA_ARCH_LIST", semicolons(backend.arch_list_entry(a) for a in targets)),
        *common_env(request, full_version),
    ]
    steps = (checkout_step(request), requirements_step(), wheel_step())
    base = f"nvidia/cuda:{backend.image_version(version)}-devel-ubuntu24.04"
    return BuildPlan(
        backend="cuda",
        inputs=inputs(request, torch_version=torch, cuda_version=version),
        builder=builder_image("cuda", "builder.Dockerfile", request, base),
        requirement=None,
        index_url=None,
        env=tuple(env),
        steps=steps,
        outputs=(f"torch-{full_version}-*.whl",),
        expect=WheelExpectation(version=full_version),
    )
