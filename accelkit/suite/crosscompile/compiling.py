"""Compiling a corpus kernel for a GPU target with the real triton, on a machine without the
GPU, and checking what came out.

`compile_kernel(spec, cross)` calls `triton.compile(ASTSource(...), target=GPUTarget(...))`
exactly as triton's own ahead-of-time tools do; no driver is touched. `problems(...)` then
says what is wrong with the result: the binary's ELF must say it is built for the target
(the backend reads it: `Backend.binary_target`), the text assembly must name the target,
and every instruction check the kernel asks for must find its instructions
(`CrossTarget.isa`). `resolve_toolchain` checks, before anything compiles, that the
toolchain triton will use knows the target, so a run with an old ptxas fails with one line
that names its version and what it does know.

Example: with ptxas 13.5, `compile_kernel(BY_NAME["gemm_bf16"], cuda.cross_target("sm_107"))`
gives PTX with `.target sm_107a` and `tcgen05.mma.cta_group::1.kind::f16`, and a cubin whose
e_flags say SM 107: `problems(...) == []`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING

from accelkit.suite.crosscompile.corpus import BY_NAME, KernelSpec

if TYPE_CHECKING:
    from accelkit.backends.base import Backend, CrossTarget, Toolchain

#: LLVM's answer for a processor it does not know (triton's AMD backend).
_UNSUPPORTED = re.compile(r"unsupported target|not a recognized processor", re.IGNORECASE)
_MAX_MESSAGE = 600


class CompileFailed(Exception):
    """triton could not compile a kernel for the target; the message is one line."""


@dataclass(frozen=True)
class Compiled:
    assembly: str
    binary: bytes
    seconds: float


def compile_kernel(spec: KernelSpec, cross: CrossTarget) -> Compiled:
    """`spec` compiled by triton for `cross`; CompileFailed with triton's own reason."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from accelkit.suite.crosscompile import kernels

    source = ASTSource(
        fn=getattr(kernels, spec.kernel),
        signature=spec.signature_for(cross.fp8_type),
        constexprs=dict(spec.constants),
    )
    target = GPUTarget(cross.triton_backend, cross.triton_arch, cross.warp_size)
    started = time.perf_counter()
    failure: BaseException | None = None
    printed = ""
    with _output_captured() as output:
        try:
            kernel = triton.compile(source, target=target)
        except Exception as exc:
            failure, printed = exc, output.read()
    if failure is not None:
        # MLIR and LLVM print their diagnostics to the process's stderr, not into the
        # exception ("PassManager::run failed"): both go into the message.
        raise CompileFailed(
            f"triton {triton.__version__} could not compile {spec.name} for {cross.target}: "
            f"{error_summary(failure, printed)}"
        )
    seconds = time.perf_counter() - started
    assembly = kernel.asm.get(cross.assembly)
    binary = kernel.asm.get(cross.binary)
    if not isinstance(assembly, str) or not isinstance(binary, bytes):
        raise CompileFailed(
            f"triton compiled {spec.name} for {cross.target} but produced no "
            f"{cross.assembly} and {cross.binary} (it made {', '.join(kernel.asm)})"
        )
    return Compiled(assembly, binary, seconds)


def problems(
    compiled: Compiled,
    cross: CrossTarget,
    backend: Backend,
    *,
    name: str,
    checks: Sequence[str] = (),
) -> list[str]:
    """What is wrong with `compiled` (the kernel `name`) for `cross`, with the instruction
    `checks` it asks for (keys of `cross.isa`); empty: nothing."""
    found: list[str] = []
    built_for = backend.binary_target(compiled.binary)
    if built_for != cross.target:
        found.append(
            f"the {cross.binary} is built for {built_for or 'nothing its ELF header names'}, "
            f"not {cross.target}"
        )
    if not re.search(cross.assembly_target, compiled.assembly):
        found.append(f"the {cross.assembly} does not name {cross.target} as its target")
    for check in checks:
        isa = cross.isa.get(check)
        if isa is not None and not re.search(isa.pattern, compiled.assembly):
            found.append(f"no {isa.what} in the {cross.assembly} of {name}")
    return found


def verified(
    compiled: Compiled, cross: CrossTarget, backend: Backend, *, checks: Sequence[str] = ()
) -> str:
    """What `problems` found right in `compiled`, in one line: `cubin ELF for sm_107, ptx
    .target sm_107a, tcgen05.mma (5th-generation tensor cores)`."""
    said = [f"{cross.binary} ELF for {backend.binary_target(compiled.binary)}"]
    match = re.search(cross.assembly_target, compiled.assembly)
    if match:
        said.append(f"{cross.assembly} {match.group(0).strip()}")
    said += [cross.isa[check].what for check in checks if check in cross.isa]
    return ", ".join(said)


def error_summary(exc: BaseException, stderr: str = "") -> str:
    """One line from a compiler error: its first line and the lines that say error/fatal,
    in the exception or in what the compiler printed (ptxas: `ptxas fatal : Value 'sm_107a'
    is not defined for option 'gpu-name'`; LLVM: `error: unsupported target: 'gfx9999'`)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    keep = [lines[0] if lines else type(exc).__name__]
    for line in [*lines[1:], *(ln.strip() for ln in stderr.splitlines())]:
        line = re.sub(r"^\S+:\d+:\d+: ", "", line)  # file:line:col of the kernel
        said = any(line in kept for kept in keep)
        if not said and re.search(r"\b(error|fatal)\b", line, re.IGNORECASE):
            keep.append(line)
    return " | ".join(keep)[:_MAX_MESSAGE]


class _Captured:
    def __init__(self, file: IO[bytes]) -> None:
        self._file = file

    def read(self) -> str:
        _flush()
        self._file.seek(0)
        return self._file.read().decode("utf-8", "replace")


@contextlib.contextmanager
def _output_captured() -> Iterator[_Captured]:
    """File descriptors 1 and 2 into one temporary file for the block: LLVM writes its
    diagnostics to stderr, and triton prints a failed ptxas run's whole PTX to stdout."""
    with tempfile.TemporaryFile() as file:
        _flush()
        saved = [os.dup(1), os.dup(2)]
        try:
            os.dup2(file.fileno(), 1)
            os.dup2(file.fileno(), 2)
            yield _Captured(file)
        finally:
            _flush()  # what Python itself wrote goes to the file, not after the block
            for fd, copy in zip((1, 2), saved, strict=True):
                os.dup2(copy, fd)
                os.close(copy)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


@contextlib.contextmanager
def fresh_cache() -> Iterator[str]:
    """A new, empty triton cache for the block: every kernel is really compiled (a cached
    one would hide a toolchain that cannot compile it)."""
    with (
        tempfile.TemporaryDirectory(prefix="accelkit-triton-") as folder,
        environment({"TRITON_CACHE_DIR": folder}),
    ):
        yield folder


@contextlib.contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    """`values` set in this process's environment for the block (triton reads its knobs
    from the environment when it compiles)."""
    previous = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


TRITON_MISSING = "--compile-only compiles with triton, which is not installed here"


def target_toolchain(backend: Backend, cross: CrossTarget, environ: Mapping[str, str]) -> Toolchain:
    """What `accelkit test --target T --compile-only` checks before anything compiles, and
    what doctor's target rows (sm_107) check: triton is installed and its toolchain for
    `cross` knows the target (`problem` says why not, with the toolchain's version and the
    fix)."""
    import importlib.util

    if importlib.util.find_spec("triton") is None:
        return _no_triton(cross)
    return resolve_toolchain(backend, cross, environ)


def _no_triton(cross: CrossTarget) -> Toolchain:
    from accelkit.backends.base import Toolchain

    return Toolchain("triton", "unknown", "", cross.target, None, {}, TRITON_MISSING)


def resolve_toolchain(
    backend: Backend, cross: CrossTarget, environ: Mapping[str, str]
) -> Toolchain:
    """The toolchain triton will use for `cross`, with `problem` set when it cannot compile
    for it. A toolchain with no list of what it knows (triton's AMDGPU LLVM) is asked by
    compiling the smallest kernel of the corpus."""
    toolchain = backend.cross_toolchain(cross, environ)
    if toolchain.problem is not None or toolchain.knows is not None:
        return toolchain
    reason = _probe(cross, toolchain.environment)
    if reason is None:
        return toolchain
    if _UNSUPPORTED.search(reason):
        known = [
            target
            for target in backend.targets
            if target != cross.target and _probe(_retarget(backend, target), {}) is None
        ]
        problem = (
            f"{toolchain.describe()} does not know {cross.target}; it knows "
            f"{', '.join(known) or 'none of the ' + backend.name + ' targets'}"
        )
    else:
        problem = f"{toolchain.describe()} cannot compile for {cross.target}: {reason}"
    return dataclasses.replace(toolchain, problem=problem)


def _retarget(backend: Backend, target: str) -> CrossTarget:
    cross = backend.cross_target(target)
    if cross is None:  # pragma: no cover - a backend answers for all its targets or none
        raise ValueError(f"{backend.name} cannot compile for {target}")
    return cross


def _probe(cross: CrossTarget, values: Mapping[str, str]) -> str | None:
    """None when the smallest corpus kernel compiles for `cross`, else why not."""
    with environment(values), fresh_cache():
        try:
            compile_kernel(BY_NAME["elementwise"], cross)
        except CompileFailed as exc:
            return str(exc)
    return None
