"""Compile-only conformance: the suite's Triton kernels compiled for the run's GPU target
with the real triton and its real back end (ptxas for NVIDIA, its AMDGPU LLVM for AMD), on a
machine that need not have that GPU, and the result checked: the binary's ELF says it is
built for the target, the assembly names the target, and the matrix, TMA and warp
specialization instructions the target should use are there.

`accelkit test --device cuda --target sm_107 --compile-only` runs these cases only; a run
with a target and a device runs them beside the rest. One case per corpus kernel:
`conformance/cross_compile/<target>/<kernel>` (`accelkit.suite.crosscompile.corpus`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from accelkit.suite.crosscompile.compiling import (
    CompileFailed,
    compile_kernel,
    environment,
    fresh_cache,
    problems,
    resolve_toolchain,
)
from accelkit.suite.crosscompile.corpus import CORPUS, KernelSpec

pytestmark = pytest.mark.cross_compile


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "kernel" not in metafunc.fixturenames:
        return
    target = metafunc.config.getoption("--accelkit-target", default=None)
    # Without a target the plugin deselects these cases; the one placeholder left is dropped.
    specs = list(CORPUS) if target else []
    metafunc.parametrize("kernel", specs, ids=[f"{target}/{spec.name}" for spec in specs])


@pytest.fixture(scope="session")
def cross(backend: Any, accelkit_target: str | None) -> Any:
    if accelkit_target is None:
        pytest.skip("the run has no GPU target (--target)")
    cross = backend.cross_target(accelkit_target)
    if cross is None:
        pytest.skip(f"the {backend.name} backend cannot compile for {accelkit_target} here")
    return cross


@pytest.fixture(scope="session")
def toolchain(backend: Any, cross: Any) -> Iterator[Any]:
    """The toolchain for the target, with triton pointed at it and a cache of its own: every
    kernel of the run is compiled, none is loaded from an earlier run's cache."""
    found = resolve_toolchain(backend, cross, os.environ)
    with environment(found.environment), fresh_cache():
        yield found


def test_cross_compile(kernel: KernelSpec, cross: Any, toolchain: Any, backend: Any) -> None:
    if toolchain.problem is not None:
        pytest.fail(toolchain.problem, pytrace=False)
    lacking = [cross.lacks[need] for need in kernel.needs if need in cross.lacks]
    if lacking:
        pytest.skip(lacking[0])
    try:
        compiled = compile_kernel(kernel, cross)
    except CompileFailed as exc:
        pytest.fail(str(exc), pytrace=False)
    found = problems(compiled, kernel, cross, backend)
    if found:
        pytest.fail(f"{kernel.name} for {cross.target}: " + "; ".join(found), pytrace=False)
