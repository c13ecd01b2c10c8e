"""Compile-only conformance: the suite's Triton kernels compiled for the run's GPU target
with the real triton and its real back end (ptxas for NVIDIA, its AMDGPU LLVM for AMD), on a
machine that need not have that GPU, and the result checked: the binary's ELF says it is
built for the target, the assembly names the target, and the matrix, TMA and warp
specialization instructions the target should use are there.

Two kinds of case, both `conformance/cross_compile/<target>/...`:
- `<kernel>`: the hand-written corpus (`accelkit.suite.crosscompile.corpus`): elementwise,
  reductions, softmax, layer norm, fp16/bf16/fp8 GEMMs, persistent, TMA and
  warp-specialized GEMMs;
- `inductor_<model>`: the Triton kernels Inductor generates for the forward of each model
  of the suite's compile cases, generated for the target's stand-in device and compiled
  with every launch configuration Inductor gives them (`crosscompile.inductor` says how
  far that goes).

`accelkit test --device cuda --target sm_107 --compile-only` runs these cases only; a run
with a target and a device runs them beside the rest.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from accelkit.suite.crosscompile import inductor
from accelkit.suite.crosscompile.compiling import (
    CompileFailed,
    compile_kernel,
    environment,
    fresh_cache,
    problems,
    resolve_toolchain,
    verified,
)
from accelkit.suite.crosscompile.corpus import CORPUS, KernelSpec

pytestmark = pytest.mark.cross_compile

INDUCTOR = "inductor_"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "kernel" not in metafunc.fixturenames:
        return
    target = metafunc.config.getoption("--accelkit-target", default=None)
    # Without a target the plugin deselects these cases; the one placeholder left is dropped.
    names = [spec.name for spec in CORPUS] + [INDUCTOR + m for m in inductor.models()]
    names = names if target else []
    metafunc.parametrize("kernel", names, ids=[f"{target}/{name}" for name in names])


@pytest.fixture(scope="session")
def cross(backend: Any, accelkit_target: str | None) -> Any:
    if accelkit_target is None:
        pytest.skip("the run has no GPU target (--target)")
    cross = backend.cross_target(accelkit_target)
    if cross is None:
        pytest.skip(f"the {backend.name} backend cannot compile for {accelkit_target} here")
    return cross


@pytest.fixture(scope="session")
def toolchain(backend: Any, cross: Any) -> Any:
    """The toolchain triton will use for the target (asked once per worker)."""
    return resolve_toolchain(backend, cross, os.environ)


@pytest.fixture
def pointed_at(toolchain: Any) -> Iterator[None]:
    """triton pointed at the toolchain, with a cache of its own, for one case: every kernel
    is compiled, none is loaded from an earlier run, and the device cases of the same
    worker keep their own settings."""
    with environment(toolchain.environment), fresh_cache():
        yield


def test_cross_compile(
    kernel: str,
    cross: Any,
    toolchain: Any,
    backend: Any,
    pointed_at: None,
    record_note: Callable[[str], None],
) -> None:
    if toolchain.problem is not None:
        pytest.fail(toolchain.problem, pytrace=False)
    if kernel.startswith(INDUCTOR):
        note = _inductor_model(kernel.removeprefix(INDUCTOR), cross, backend)
    else:
        note = _corpus_kernel(next(s for s in CORPUS if s.name == kernel), cross, backend)
    # A passed case says what it verified, and with what (its message in the results).
    record_note(f"{note}; {toolchain.name} {toolchain.version}")


def _corpus_kernel(spec: KernelSpec, cross: Any, backend: Any) -> str:
    lacking = [cross.lacks[need] for need in spec.needs if need in cross.lacks]
    if lacking:
        pytest.skip(lacking[0])
    try:
        compiled = compile_kernel(spec, cross)
    except CompileFailed as exc:
        pytest.fail(str(exc), pytrace=False)
    found = problems(compiled, cross, backend, name=spec.name, checks=spec.checks)
    if found:
        pytest.fail(f"{spec.name} for {cross.target}: " + "; ".join(found), pytrace=False)
    return verified(compiled, cross, backend, checks=spec.checks)


def _inductor_model(model: str, cross: Any, backend: Any) -> str:
    if cross.fake_device is None:
        pytest.skip(cross.lacks.get("inductor", "no stand-in device for the target"))
    if model in inductor.NOT_GENERATED:
        pytest.skip(f"{model}: {inductor.NOT_GENERATED[model]}")
    try:
        kernels = inductor.generate(cross, model)
    except inductor.GenerationFailed as exc:
        pytest.fail(str(exc), pytrace=False)
    if not kernels:
        pytest.fail(f"Inductor generated no Triton kernel for {model}", pytrace=False)
    props = cross.fake_device.properties
    capability = f"cc={int(props['major']) * 10 + int(props['minor'])}"
    found: list[str] = []
    compiled: list[Any] = []
    for kernel in kernels:
        if capability not in kernel.source:
            found.append(f"{kernel.name} was not generated for {capability}")
        try:
            binaries = inductor.compile_generated(kernel, cross)
        except CompileFailed as exc:
            pytest.fail(str(exc), pytrace=False)
        for binary in binaries:
            found += problems(binary, cross, backend, name=kernel.name)
        compiled += binaries
    if found or not compiled:
        why = "; ".join(found) or "triton made no binary"
        pytest.fail(f"Inductor's {model} for {cross.target}: {why}", pytrace=False)
    return (
        f"Inductor kernels: {len(kernels)} generated for {capability}, {len(compiled)} "
        f"launch configurations compiled; {verified(compiled[0], cross, backend)}"
    )
