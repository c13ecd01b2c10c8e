"""Inductor targets and GEMM backends in 2.14: the Rubin target (sm_107), NVGEMM autotuning,
and the compute/communication overlap default.

Arch-flag generation and Inductor's arch mapping are pure functions of configuration, so
they run on the CPU; code generation for sm_107 and NVGEMM need an NVIDIA GPU (the latter
also the CUTLASS DSL) and skip with the capability table's reason otherwise.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

import pytest
import torch

from accelkit.backends.base import Backend
from accelkit.suite.numerics.reference import (
    absolute_terms,
    assert_matches_reference,
    make_input,
    reference,
)

SM_107 = "-gencode=arch=compute_107,code=sm_107"
PTX_107 = "-gencode=arch=compute_107,code=compute_107"


@contextlib.contextmanager
def _arch_list(value: str) -> Iterator[None]:
    previous = os.environ.get("TORCH_CUDA_ARCH_LIST")
    os.environ["TORCH_CUDA_ARCH_LIST"] = value
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("TORCH_CUDA_ARCH_LIST", None)
        else:
            os.environ["TORCH_CUDA_ARCH_LIST"] = previous


# TORCH_CUDA_ARCH_LIST -> (flags that must be there, flags that must not)
ARCH_LISTS: dict[str, tuple[set[str], set[str]]] = {
    "Rubin": ({SM_107, PTX_107}, set()),
    "10.7": ({SM_107}, {PTX_107}),
    "10.7+PTX": ({SM_107, PTX_107}, set()),
    "10.7a": ({"-gencode=arch=compute_107a,code=sm_107a"}, {SM_107}),
    "9.0;Rubin": ({SM_107, PTX_107, "-gencode=arch=compute_90,code=sm_90"}, set()),
}


@pytest.mark.requires("sm_107")
@pytest.mark.parametrize(
    "arch_list", list(ARCH_LISTS), ids=[a.replace(";", "+") for a in ARCH_LISTS]
)
def test_sm_107_arch_flags(arch_list: str) -> None:
    from torch.utils.cpp_extension import _get_cuda_arch_flags

    before = os.environ.get("TORCH_CUDA_ARCH_LIST")
    with _arch_list(arch_list):
        flags = set(_get_cuda_arch_flags())
    assert os.environ.get("TORCH_CUDA_ARCH_LIST") == before, "TORCH_CUDA_ARCH_LIST not restored"
    wanted, unwanted = ARCH_LISTS[arch_list]
    assert wanted <= flags, f"TORCH_CUDA_ARCH_LIST={arch_list}: missing {wanted - flags} in {flags}"
    assert not (unwanted & flags), (
        f"TORCH_CUDA_ARCH_LIST={arch_list}: unexpected {unwanted & flags}"
    )


@pytest.mark.requires("sm_107")
def test_sm_107_inductor_arch() -> None:
    """torch._inductor.config.cuda.arch = "107" is accepted and compiles for sm_107a (the
    arch-specific variant CUTLASS kernels need), in every spelling of the arch."""
    import torch._inductor.config as inductor_config
    from torch._inductor.codegen.cuda import compile_utils, cuda_env

    for spelling in ("107", "sm_107", "10.7", "107a"):
        got = compile_utils._cuda_arch_with_compile_suffix(spelling)
        assert got == "107a", f"_cuda_arch_with_compile_suffix({spelling!r}) = {got!r}"
    try:
        cuda_env.get_cuda_arch.cache_clear()  # cached per process: see the finally
        with inductor_config.patch({"cuda.arch": "107"}):
            assert cuda_env.get_cuda_arch() == "107", cuda_env.get_cuda_arch()
            assert compile_utils._nvcc_arch_as_compile_option() == "107a"
            assert compile_utils._aoti_cuda_target_arch() == "107a"
            gencode = [o for o in compile_utils._nvcc_compiler_options() if "gencode" in o]
            assert gencode == ["-gencode=arch=compute_107a,code=[sm_107a,compute_107a]"], gencode
    finally:
        cuda_env.get_cuda_arch.cache_clear()


@pytest.mark.requires("sm_107", "cuda")
def test_sm_107_compiled_kernels(backend: Backend, device: str) -> None:
    if "sm_107" not in backend.targets:
        pytest.skip(f"sm_107 is not a {backend.name} target")
    capability = torch.cuda.get_device_capability()
    if capability != (10, 7):
        pytest.skip(f"needs an sm_107 (Rubin) GPU; device 0 is sm_{capability[0]}{capability[1]}")
    if "sm_107" not in torch.cuda.get_arch_list():
        pytest.skip(f"this torch has no sm_107 code: built for {torch.cuda.get_arch_list()}")

    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x @ w).softmax(dim=-1) + x.mean()

    torch._dynamo.reset()
    x = make_input((64, 128), torch.float32, device)
    w = make_input((128, 128), torch.float32, device, low=-0.1, high=0.1)
    got = torch.compile(f, backend="inductor", fullgraph=True)(x, w)
    assert_matches_reference(
        got, reference(f, x, w), torch.float32, count=128 + 64 * 128, what="sm_107"
    )


# --------------------------------------------------------------------------------------
# NVGEMM

NVGEMM_CHOICE_ADDERS = (
    "add_nv_universal_gemm_choices",
    "add_nv_universal_addmm_choices",
    "add_nv_universal_scaled_gemm_choices",
)


@contextlib.contextmanager
def _nvgemm_only() -> Iterator[dict[str, int]]:
    """Autotune GEMMs with NVGEMM alone, counting the NVGEMM choices Inductor generated."""
    import torch._inductor.config as inductor_config
    from torch._inductor.codegen import nv_universal_gemm

    added: dict[str, int] = {}

    def counting(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(choices: list[Any], *args: Any, **kwargs: Any) -> Any:
            before = len(choices)
            result = original(choices, *args, **kwargs)
            added[name] = added.get(name, 0) + len(choices) - before
            return result

        return wrapper

    with contextlib.ExitStack() as stack:
        for name in NVGEMM_CHOICE_ADDERS:
            original = getattr(nv_universal_gemm, name)
            stack.enter_context(
                mock.patch.object(nv_universal_gemm, name, counting(name, original))
            )
        autotune_with_nvgemm = {
            "max_autotune_gemm": True,
            "max_autotune_gemm_backends": "NVGEMM",
            "nvgemm_max_profiling_configs": 2,
        }
        stack.enter_context(inductor_config.patch(autotune_with_nvgemm))
        torch._dynamo.reset()
        yield added


@pytest.mark.requires("nvgemm")
@pytest.mark.parametrize("op", ["mm", "addmm_relu"])
def test_nvgemm(op: str, device: str) -> None:
    a = make_input((128, 256), torch.bfloat16, device, low=-1.0, high=1.0)
    b = make_input((256, 192), torch.bfloat16, device, low=-1.0, high=1.0)
    bias = make_input((192,), torch.bfloat16, device)

    def mm(x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return x @ y

    def addmm_relu(x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return torch.relu(torch.addmm(z, x, y)) * 0.5  # epilogue: bias, relu, scale

    fn = mm if op == "mm" else addmm_relu
    with _nvgemm_only() as added:
        got = torch.compile(fn, backend="inductor", fullgraph=True)(a, b, bias)
    assert sum(added.values()) > 0, f"NVGEMM generated no {op} choice (max_autotune_gemm on)"
    # bfloat16 products accumulated in float32 over K = 256: the bound is bfloat16's rounding
    # of the output and sqrt(257) * eps(float32) * sum|a b| (a kernel 1% off fails).
    terms = absolute_terms(fn, a, b, bias)
    assert_matches_reference(
        got, reference(fn, a, b, bias), torch.bfloat16, terms=terms, count=257, what=op
    )


@pytest.mark.requires("nvgemm")
def test_nvgemm_scaled_mm(device: str) -> None:
    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("float8 scaled mm needs sm_89 or newer")
    a_hp = make_input((128, 256), torch.float32, device, low=-1.0, high=1.0)
    b_hp = make_input((192, 256), torch.float32, device, low=-1.0, high=1.0)
    a8 = a_hp.to(torch.float8_e4m3fn)
    b8 = b_hp.to(torch.float8_e4m3fn).t()  # column-major, as _scaled_mm requires
    scale_a = torch.tensor(0.5, device=device)
    scale_b = torch.tensor(2.0, device=device)

    def scaled(x: torch.Tensor, y: torch.Tensor, sx: torch.Tensor, sy: torch.Tensor) -> Any:
        return torch._scaled_mm(x, y, scale_a=sx, scale_b=sy, out_dtype=torch.bfloat16)

    with _nvgemm_only() as added:
        got = torch.compile(scaled, backend="inductor", fullgraph=True)(a8, b8, scale_a, scale_b)
    if not added.get("add_nv_universal_scaled_gemm_choices"):
        capability = torch.cuda.get_device_capability()
        pytest.skip(
            f"NVGEMM offers no per-tensor float8 kernel on sm_{capability[0]}{capability[1]}"
        )
    # Reference: the dequantised float8 values, multiplied in float64 on the CPU.
    want = (a8.double().cpu() * 0.5) @ (b8.double().cpu() * 2.0)
    terms = (a8.double().cpu().abs() * 0.5) @ (b8.double().cpu().abs() * 2.0)
    assert_matches_reference(got, want, torch.bfloat16, terms=terms, count=256, what="scaled mm")


# --------------------------------------------------------------------------------------
# Compute/communication overlap default


@pytest.fixture
def single_rank_group(tmp_path: Any) -> Iterator[Any]:
    """A one-rank gloo process group in this process, destroyed afterwards."""
    import torch.distributed as dist

    if dist.is_initialized():
        pytest.fail("a process group is already initialised in this worker", pytrace=False)
    store = tmp_path / "store"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    try:
        yield dist.group.WORLD
    finally:
        dist.destroy_process_group()


def _schedule(fn: Callable[..., Any], *args: Any) -> list[str]:
    """The kernel and collective calls of Inductor's generated code for `fn`, in order."""
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    _, codes = run_and_get_code(torch.compile(fn, backend="inductor", fullgraph=True), *args)
    calls = ("torch.ops._c10d_functional.", "extern_kernels.", "cpp_fused_", "triton_")
    return [
        line.strip()
        for code in codes
        for line in code.splitlines()
        if line.strip().startswith(calls) and "async_compile" not in line and " = " not in line
    ]


@pytest.mark.requires("comm_overlap_default", "gloo", "inductor")
def test_overlap_default(single_rank_group: Any) -> None:
    """2.14 overlaps communication with compute by default: Inductor's scheduler issues a
    collective early and sinks its wait past independent compute (`aten_distributed_
    optimizations.enable_simple_overlap`). Checked on what the compiler does with the
    default configuration, against the same program with the pass switched off."""
    import torch._inductor.config as inductor_config
    import torch.distributed._functional_collectives as funcol

    def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        reduced = funcol.all_reduce(x * 2, "sum", single_rank_group)
        independent = torch.sin(torch.relu(y @ y)) @ y  # needs nothing from the collective
        return reduced + independent

    x = make_input((64, 64), torch.float32, "cpu")
    y = make_input((64, 64), torch.float32, "cpu", low=-0.1, high=0.1)

    def between(calls: list[str]) -> list[str]:
        issued = next(i for i, c in enumerate(calls) if "_c10d_functional.all_reduce" in c)
        waited = next(i for i, c in enumerate(calls) if "_c10d_functional.wait_tensor" in c)
        return calls[issued + 1 : waited]

    overlapped = _schedule(step, x, y)
    assert between(overlapped), f"no compute between the collective and its wait: {overlapped}"
    with inductor_config.patch({"aten_distributed_optimizations.enable_simple_overlap": False}):
        serial = _schedule(step, x, y)
    # The control: without the pass the wait follows the collective at once, so the
    # overlap above is the pass's doing, not the program's order.
    assert between(serial) == [], f"the control overlapped without the pass: {serial}"
