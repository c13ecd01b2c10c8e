"""Compile-only conformance and required capabilities (issue 11).

Fast tests check the pure parts: ELF decoding, CUDA's compatibility rule, each backend's
cross-compile facts, the request checks and the required list. The toolchain tests ask
the real ptxas binaries on this machine (the nvidia-cuda-nvcc wheel's 13.5, which knows
sm_107, and triton's bundled 13.3, which does not). The slow tests compile with the real
triton; tests/integration/test_test_crosscompile.py runs `accelkit test --compile-only` end
to end. No toolchain is faked.
"""

from __future__ import annotations

import dataclasses
import os
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from accelkit import backends
from accelkit.backends import _elf
from accelkit.backends.cuda import arch_coverage_problem
from accelkit.errors import BadInput, Unavailable
from accelkit.results.io import load_results
from accelkit.suite.run import runner
from accelkit.suite.run.request import RunRequest, validate
from tests.helpers import REPO
from tests.toolchains import BUNDLED_BLACKWELL_PTXAS, triton_bin

CUDA = backends.get("cuda")
ROCM = backends.get("rocm")
REQUIRED_CASES = REPO / "tests" / "fixtures" / "requirements"


# --- ELF ---------------------------------------------------------------------------------


def _elf_file(machine: int, flags: int, abi: int, osabi: int, notes: bytes = b"") -> bytes:
    """A minimal 64-bit little-endian ELF: the header, and one SHT_NOTE section."""
    header = bytearray(64)
    header[:8] = b"\x7fELF\x02\x01\x01" + bytes([osabi])
    header[8] = abi
    struct.pack_into("<HHI", header, 16, 2, machine, 1)
    struct.pack_into("<I", header, 48, flags)
    if not notes:
        return bytes(header)
    notes_at = 64
    sections_at = notes_at + len(notes)
    struct.pack_into("<Q", header, 40, sections_at)
    struct.pack_into("<HHH", header, 58, 64, 2, 0)  # e_shentsize, e_shnum, e_shstrndx
    null = bytes(64)
    note_section = bytearray(64)
    struct.pack_into("<II", note_section, 0, 0, 7)  # name, SHT_NOTE
    struct.pack_into("<QQ", note_section, 24, notes_at, len(notes))
    return bytes(header) + notes + null + bytes(note_section)


def _note(name: bytes, kind: int, desc: bytes) -> bytes:
    def pad(data: bytes) -> bytes:
        return data + bytes(-len(data) % 4)

    return struct.pack("<III", len(name) + 1, len(desc), kind) + pad(name + b"\0") + pad(desc)


@pytest.mark.parametrize(
    ("flags", "abi", "expected"),
    [
        (0x09006B02, 8, "sm_107"),  # ptxas 13.5's sm_107a cubin (measured)
        (0x09005A04, 8, "sm_90"),  # ptxas 13.x's sm_90a cubin: SM in bits 8..15 too
        (0x06006402, 8, "sm_100"),
        (0x00000D5A, 7, "sm_90"),  # the old layout: the SM in the low byte
    ],
)
def test_a_cubin_says_its_sm_in_either_elf_layout(flags: int, abi: int, expected: str) -> None:
    assert CUDA.binary_target(_elf_file(190, flags, abi, 0x41)) == expected


def test_a_cubin_reader_refuses_what_is_not_a_cubin() -> None:
    assert CUDA.binary_target(b"not an elf at all" * 8) is None
    assert CUDA.binary_target(_elf_file(224, 0x4C, 3, 64)) is None  # an hsaco
    assert ROCM.binary_target(_elf_file(190, 0x09006B02, 8, 0x41)) is None


def test_an_hsaco_says_its_gfx_and_its_notes_must_agree() -> None:
    named = _note(b"AMDGPU", 32, b"\x81\xa6target\xb9amdgcn-amd-amdhsa--gfx942")
    assert ROCM.binary_target(_elf_file(224, 0x54C, 3, 64, named)) == "gfx942"
    other = _note(b"AMDGPU", 32, b"amdgcn-amd-amdhsa--gfx950")
    assert ROCM.binary_target(_elf_file(224, 0x54C, 3, 64, other)) == (
        "gfx942 (its notes say gfx950)"
    )
    assert ROCM.binary_target(_elf_file(224, 0x7E, 3, 64)) == "unknown mach 0x7e"


def test_notes_are_read_from_every_note_section() -> None:
    blob = _elf_file(224, 0x4C, 3, 64, _note(b"A", 1, b"xy") + _note(b"NVIDIA Corp", 2, b""))
    assert [(n.name, n.type, n.desc) for n in _elf.notes(blob)] == [
        ("A", 1, b"xy"),
        ("NVIDIA Corp", 2, b""),
    ]


# --- CUDA's compatibility rule -------------------------------------------------------------


@pytest.mark.parametrize(
    ("arch_list", "runs"),
    [
        (["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"], True),  # torch 2.14.1+cu130
        (["sm_107"], True),
        (["sm_100f"], True),
        (["sm_90", "compute_90"], True),  # PTX the driver JIT-compiles
        (["sm_100a"], False),  # arch-specific: sm_100 only
        (["sm_90", "sm_120"], False),
        (["compute_120"], False),
        ([], False),
    ],
)
def test_torch_covers_sm_107_by_cubin_family_or_ptx(arch_list: list[str], runs: bool) -> None:
    problem = arch_coverage_problem(arch_list, "sm_107")
    assert (problem is None) is runs, problem
    if not runs:
        assert problem is not None and "cannot run sm_107 code" in problem


# --- what each backend says about its targets ---------------------------------------------


@pytest.mark.parametrize(
    ("backend", "target", "mma", "fp8_type", "lacks"),
    [
        ("cuda", "sm_75", None, None, {"fp8", "tma", "warp_specialize"}),
        ("cuda", "sm_80", "mma.sync", None, {"fp8", "tma", "warp_specialize"}),
        ("cuda", "sm_89", "mma.sync", "fp8e4nv", {"tma", "warp_specialize"}),
        ("cuda", "sm_90", "wgmma.mma_async", "fp8e4nv", set()),
        ("cuda", "sm_100", "tcgen05.mma", "fp8e4nv", set()),
        ("cuda", "sm_107", "tcgen05.mma", "fp8e4nv", set()),
        ("cuda", "sm_120", "mma.sync", "fp8e4nv", set()),
        ("rocm", "gfx942", "v_mfma", "fp8e4b8", {"tma", "warp_specialize", "inductor"}),
        ("rocm", "gfx950", "v_mfma", "fp8e4nv", {"tma", "warp_specialize", "inductor"}),
        ("rocm", "gfx1100", "v_wmma", None, {"fp8", "tma", "warp_specialize", "inductor"}),
        ("rocm", "gfx1030", None, None, {"fp8", "tma", "warp_specialize", "inductor"}),
    ],
)
def test_each_target_says_how_it_compiles_and_what_its_code_must_hold(
    backend: str, target: str, mma: str | None, fp8_type: str | None, lacks: set[str]
) -> None:
    cross = backends.get(backend).cross_target(target)
    assert cross is not None and cross.target == target
    assert (cross.isa["mma"].what.split()[0] if "mma" in cross.isa else None) == mma
    assert cross.fp8_type == fp8_type
    assert set(cross.lacks) == lacks
    assert ("mma_fp8" in cross.isa) == (fp8_type is not None)


def test_every_gpu_target_can_be_cross_compiled_and_others_cannot() -> None:
    for backend in (CUDA, ROCM):
        for target in backend.targets:
            assert backend.cross_target(target) is not None, target
    assert backends.get("xpu").cross_target("pvc") is None
    with pytest.raises(BadInput, match="'gfx942' is not a cuda target"):
        CUDA.cross_target("gfx942")


# --- the toolchain, asked for real ---------------------------------------------------------


def test_without_a_choice_the_ptxas_that_knows_sm_107_is_found_and_triton_pointed_at_it() -> None:
    cross = CUDA.cross_target("sm_107")
    assert cross is not None
    environ = {
        k: v for k, v in os.environ.items() if not k.startswith("TRITON_PTXAS")
    }  # the user chose none
    toolchain = CUDA.cross_toolchain(cross, environ)
    assert toolchain.problem is None, toolchain.problem
    assert toolchain.knows is not None and "sm_107a" in toolchain.knows
    assert tuple(int(p) for p in toolchain.version.split(".")) >= (13, 4)
    assert dict(toolchain.environment) == {
        "TRITON_PTXAS_PATH": toolchain.path,
        "TRITON_PTXAS_BLACKWELL_PATH": toolchain.path,
    }


def test_a_ptxas_that_does_not_know_the_target_is_one_line_naming_its_version_and_archs() -> None:
    cross = CUDA.cross_target("sm_107")
    assert cross is not None
    environ = {"TRITON_PTXAS_BLACKWELL_PATH": str(BUNDLED_BLACKWELL_PTXAS)}
    toolchain = CUDA.cross_toolchain(cross, environ)
    assert toolchain.problem is not None
    assert "\n" not in toolchain.problem
    assert toolchain.problem.startswith(f"ptxas 13.3 ({BUNDLED_BLACKWELL_PTXAS}) does not know")
    assert "sm_107a" in toolchain.problem and "sm_100a" in toolchain.problem
    assert "TRITON_PTXAS_BLACKWELL_PATH" in toolchain.problem
    # A variable naming no ptxas: triton silently uses its own copy, and the message says so.
    broken = CUDA.cross_toolchain(cross, {"TRITON_PTXAS_BLACKWELL_PATH": "/no/ptxas"})
    assert broken.problem is not None and "/no/ptxas is not a working ptxas" in broken.problem


def test_the_older_targets_use_the_other_variable() -> None:
    cross = CUDA.cross_target("sm_90")
    assert cross is not None
    toolchain = CUDA.cross_toolchain(cross, {"TRITON_PTXAS_PATH": str(triton_bin("ptxas"))})
    assert toolchain.problem is None, toolchain.problem  # ptxas 12.9 knows sm_90a
    assert toolchain.version == "12.9" and dict(toolchain.environment) == {}


# --- requests and the required list ---------------------------------------------------------


@pytest.mark.parametrize(
    ("request_", "needle"),
    [
        (RunRequest(device="cuda", compile_only=True), "--compile-only needs --target"),
        (RunRequest(device="cuda", target="sm_99"), "--target: 'sm_99' is not a cuda target"),
        (
            RunRequest(device="rocm", target="gfx94X-dcgpu", compile_only=True),
            "'gfx94X-dcgpu' is not a rocm target",
        ),
        (
            RunRequest(device="xpu", target="pvc", compile_only=True),
            "the xpu backend cannot compile for pvc",
        ),
        (
            RunRequest(device="cuda", target="sm_107", compile_only=True, suite="perf"),
            "not --suite perf",
        ),
        (RunRequest(device="cpu", target="sm_90"), "the cpu backend has no GPU targets"),
        (
            RunRequest(device="cpu", compile_only=True),
            "the cpu backend compiles for no GPU target without its device",
        ),
        (
            RunRequest(device="cuda", compile_only=True),
            "--compile-only needs --target, one of sm_75, sm_80, sm_86, sm_89, sm_90, sm_100",
        ),
        (RunRequest(require="cuda_grph"), "unknown capability 'cuda_grph' (did you mean"),
        (RunRequest(require="nvgemm", waive="nvgemm"), "both name nvgemm"),
    ],
)
def test_bad_targets_and_capabilities_are_bad_input(request_: RunRequest, needle: str) -> None:
    with pytest.raises(BadInput, match=None) as raised:
        validate(request_)
    assert needle in str(raised.value)


def test_a_compile_only_run_takes_conformance_only() -> None:
    request = RunRequest(device="cuda", target="sm_107", compile_only=True)
    validate(request)
    assert request.suites == ("conformance",)


def test_the_required_list_is_the_backends_plus_require_less_waive() -> None:
    def required(**kwargs: object) -> tuple[str, ...]:
        return runner.required_capabilities(RunRequest(**kwargs), kwargs.get("target"))  # type: ignore[arg-type]

    assert required(device="cuda", target="sm_107") == (
        "cuda_graph",
        "sm_107",
        "cuda_graph_while_loop",
    )
    assert required(device="cuda", target="sm_90") == ("cuda_graph",)
    assert required(device="cuda", target="sm_107", waive="cuda_graph_while_loop") == (
        "cuda_graph",
        "sm_107",
    )
    assert required(device="rocm") == ("gfx_in_arch_list",)
    assert required(device="xpu") == ("xpu_graph",)
    assert required(device="cpu", require="inductor,gloo") == ("inductor", "gloo")
    assert required(device="cuda", target="sm_107", compile_only=True) == ()


@pytest.mark.slow
def test_a_cuda_run_with_a_required_capability_missing_fails_that_case(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `--device cuda` run on a machine without the GPU: the device check is the only
    thing bypassed. cuda_graph is required on every CUDA leg, so the case needing it fails
    with the probe's reason; xpu_graph is not required there, so its case is skipped."""
    monkeypatch.setattr(runner, "check_device", lambda request: None)
    results = tmp_path / "r.json"
    request = RunRequest(
        device="cuda",
        suite="conformance",
        cases_dir=REQUIRED_CASES,
        json_path=results,
        workers=0,
    )
    outcome = runner.run(request)
    by_id = {case.id: case for case in outcome.results.cases}
    needs_cuda = by_id["conformance/required/needs_cuda_graph"]
    assert needs_cuda.status == "failed"
    reason = load_results(results).capabilities["cuda_graph"].reason
    assert needs_cuda.message == f"required capability missing: cuda_graph: {reason}"
    assert by_id["conformance/required/needs_xpu_graph"].status == "skipped"
    # No target (no GPU here to take it from): the cross_compile case is left out.
    assert "conformance/required/compiles_for_the_target" not in by_id
    assert load_results(results).run.required == ["cuda_graph"]
    assert int(outcome.exit_code) == 1


@pytest.mark.slow
def test_waiving_the_requirement_makes_the_case_skip_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner, "check_device", lambda request: None)
    results = tmp_path / "r.json"
    request = RunRequest(
        device="cuda",
        suite="conformance",
        cases_dir=REQUIRED_CASES,
        json_path=results,
        workers=0,
        waive="cuda_graph",
    )
    outcome = runner.run(request)
    assert {case.status for case in outcome.results.cases} == {"skipped"}
    loaded = load_results(results)
    assert loaded.run.required is None and loaded.run.waived == ["cuda_graph"]


# --- compiling for real ------------------------------------------------------------------


@pytest.mark.slow
def test_the_checks_reject_a_kernel_built_for_another_target() -> None:
    from accelkit.suite.crosscompile import compiling
    from accelkit.suite.crosscompile.corpus import BY_NAME

    sm_90, sm_107 = CUDA.cross_target("sm_90"), CUDA.cross_target("sm_107")
    assert sm_90 is not None and sm_107 is not None
    spec = BY_NAME["gemm_bf16"]
    with compiling.fresh_cache():
        built = compiling.compile_kernel(spec, sm_90)
    assert compiling.problems(built, sm_90, CUDA, name=spec.name, checks=spec.checks) == []
    found = compiling.problems(built, sm_107, CUDA, name=spec.name, checks=spec.checks)
    assert found == [
        "the cubin is built for sm_90, not sm_107",
        "the ptx does not name sm_107 as its target",
        "no tcgen05.mma (5th-generation tensor cores) in the ptx of gemm_bf16",
    ]
    stripped = dataclasses.replace(built, assembly=built.assembly.replace("wgmma", "mma"))
    assert compiling.problems(stripped, sm_90, CUDA, name=spec.name, checks=spec.checks) == [
        "no wgmma.mma_async (Hopper warpgroup MMA) in the ptx of gemm_bf16"
    ]


@pytest.mark.slow
def test_an_amd_target_the_compiler_does_not_know_names_the_ones_it_does() -> None:
    from accelkit.suite.crosscompile import compiling

    gfx942 = ROCM.cross_target("gfx942")
    assert gfx942 is not None
    unknown = dataclasses.replace(gfx942, target="gfx9999", triton_arch="gfx9999")
    toolchain = compiling.resolve_toolchain(ROCM, unknown, os.environ)
    assert toolchain.problem is not None
    assert toolchain.problem.startswith("triton's AMDGPU LLVM 3.")
    assert "does not know gfx9999; it knows gfx1010, " in toolchain.problem
    assert "gfx942, gfx950" in toolchain.problem


#: The other targets CI compiles for, in this process (one pytest run of the CLI costs
#: ~20 s of start-up; the compiles are what matters): target -> kernels it must skip.
CI_TARGETS = {
    ("cuda", "sm_90"): set(),
    ("cuda", "sm_100"): set(),
    ("rocm", "gfx942"): {"gemm_tma", "gemm_warp_specialized"},
}


@pytest.fixture(scope="module")
def triton_cache() -> Iterator[None]:
    from accelkit.suite.crosscompile import compiling

    with compiling.fresh_cache():
        yield


def _corpus_names() -> list[str]:
    from accelkit.suite.crosscompile.corpus import CORPUS

    return [spec.name for spec in CORPUS]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("device", "target", "kernel"),
    [(d, t, k) for (d, t) in CI_TARGETS for k in _corpus_names()],
    ids=[f"{t}/{k}" for (_, t) in CI_TARGETS for k in _corpus_names()],
)
def test_the_corpus_compiles_for_each_ci_target(
    device: str, target: str, kernel: str, triton_cache: None
) -> None:
    from accelkit.suite.crosscompile import compiling
    from accelkit.suite.crosscompile.corpus import BY_NAME

    backend = backends.get(device)
    cross = backend.cross_target(target)
    assert cross is not None
    spec = BY_NAME[kernel]
    lacking = [need for need in spec.needs if need in cross.lacks]
    assert bool(lacking) == (kernel in CI_TARGETS[(device, target)]), lacking
    if lacking:
        return
    toolchain = compiling.resolve_toolchain(backend, cross, os.environ)
    assert toolchain.problem is None, toolchain.problem
    with compiling.environment(toolchain.environment):
        built = compiling.compile_kernel(spec, cross)
    assert compiling.problems(built, cross, backend, name=spec.name, checks=spec.checks) == []


def test_unavailable_is_what_an_unknown_toolchain_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_PTXAS_BLACKWELL_PATH", str(BUNDLED_BLACKWELL_PTXAS))
    with pytest.raises(Unavailable, match="does not know sm_107a"):
        runner.run_context(RunRequest(device="cuda", target="sm_107", compile_only=True))


def test_an_image_with_the_cutlass_dsl_must_autotune_with_nvgemm(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from accelkit.backends import cuda

    monkeypatch.setattr(cuda, "_installed", lambda name: name == "nvidia-cutlass-dsl")
    assert CUDA.required_capabilities("sm_107")[-1] == "nvgemm"
    assert CUDA.required_capabilities(None) == ("cuda_graph", "nvgemm")
    monkeypatch.setattr(cuda, "_installed", lambda name: False)
    assert "nvgemm" not in CUDA.required_capabilities("sm_107")


@pytest.mark.slow
def test_inductor_kernels_compile_for_a_stand_in_sm_107(triton_cache: None) -> None:
    """The zoo model with the most generated kernels (7: softmax parts, residual adds),
    beside the CLI run's mlp; every model is a case of every compile-only run."""
    from accelkit.suite.crosscompile import compiling, inductor

    cross = CUDA.cross_target("sm_107")
    assert cross is not None
    kernels = inductor.generate(cross, "attention_sdpa")
    assert len(kernels) >= 5, [kernel.name for kernel in kernels]
    assert kernels and all("cc=107" in kernel.source for kernel in kernels)
    toolchain = compiling.resolve_toolchain(CUDA, cross, os.environ)
    with compiling.environment(toolchain.environment):
        for kernel in kernels:
            for built in inductor.compile_generated(kernel, cross):
                assert compiling.problems(built, cross, CUDA, name=kernel.name) == []


def test_amd_targets_have_no_inductor_stand_in() -> None:
    gfx942 = ROCM.cross_target("gfx942")
    assert gfx942 is not None and gfx942.fake_device is None
    assert "ROCm build of torch" in gfx942.lacks["inductor"]
