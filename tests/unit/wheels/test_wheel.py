"""The ROCm wheel validator against wheels with each defect a broken build gives them, and the
offload-bundle reader against bundles written byte by byte (plain, zlib and zstd compressed)."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest
import zstandard

from accelkit.backends import rocm as backend
from accelkit.incontainer.build_steps import rocm_init_text
from accelkit.wheels.offload import OffloadError, bundle_entries, gpu_code_objects
from accelkit.wheels.plan import WheelExpectation
from accelkit.wheels.recipes import plan
from accelkit.wheels.request import BuildRequest
from accelkit.wheels.wheel import init_module_call, validate_wheel
from tests.rocm_standin import make_wheel

EXACT = "7.14.0"
VALUES = {
    "rocm_version": EXACT,
    "rocm_local": f"rocm{EXACT}",
    "sdk_libraries": ",".join([*backend.PRELOAD_SHORTNAMES, "hsa-runtime64"]),
    "triton_requirement": "triton==3.8.0+rocm7.14.0",
}
VERSION = f"2.14.1+rocm{EXACT}"
TAG = "cp311-cp311-linux_x86_64"
PREFIX = "hipv4-amdgcn-amd-amdhsa--"


def code_object(mach: int, machine: int = backend.EM_AMDGPU) -> bytes:
    ident = b"\x7fELF" + bytes([2, 1, 1, 64, 3]) + bytes(7)
    return ident + struct.pack("<HHIQQQIHHHHHH", 3, machine, 1, 0, 0, 0, mach, 64, 0, 0, 64, 0, 0)


def bundle(entries: list[tuple[str, bytes]]) -> bytes:
    magic = b"__CLANG_OFFLOAD_BUNDLE__"
    offset = len(magic) + 8 + sum(24 + len(i) for i, _ in entries)
    table, blobs = b"", b""
    for entry_id, data in entries:
        table += struct.pack("<QQQ", offset, len(data), len(entry_id)) + entry_id.encode()
        blobs += data
        offset += len(data)
    return magic + struct.pack("<Q", len(entries)) + table + blobs


def ccob(data: bytes, *, version: int = 2, zstd: bool = False) -> bytes:
    packed = zstandard.ZstdCompressor().compress(data) if zstd else zlib.compress(data)
    method = 1 if zstd else 0
    if version == 3:
        return b"CCOB" + struct.pack("<HHQQQ", 3, method, 32 + len(packed), len(data), 0) + packed
    return b"CCOB" + struct.pack("<HHIIQ", 2, method, 24 + len(packed), len(data), 0) + packed


def elf_library(sections: dict[str, bytes]) -> bytes:
    """A 64-bit little-endian ELF file with the given sections (and .shstrtab)."""
    names = b"\0" + b"".join(n.encode() + b"\0" for n in [*sections, ".shstrtab"])
    body, headers, at = b"", [bytes(64)], 64
    name_at = 1
    for name, data in [*sections.items(), (".shstrtab", names)]:
        headers.append(
            struct.pack("<IIQQQQIIQQ", name_at, 1, 0, 0, at + len(body), len(data), 0, 0, 1, 0)
        )
        name_at += len(name) + 1
        body += data
    shoff = 64 + len(body)
    header = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    header += struct.pack(
        "<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, len(headers), len(headers) - 1
    )
    return header + body + b"".join(headers)


def fatbin(*targets: str, mach: dict[str, int] | None = None, compress: bool = True) -> bytes:
    machs = mach or backend.AMDGPU_MACH
    entries = [("host-x86_64-unknown-linux-gnu-", b"")]
    entries += [(f"{PREFIX}{t}:sramecc+:xnack-", code_object(machs[t])) for t in targets]
    data = bundle(entries)
    return elf_library({".text": b"\x90" * 16, ".hip_fatbin": ccob(data) if compress else data})


def expectation(*, triton: bool = False) -> WheelExpectation:
    request = BuildRequest.from_params(
        dict(
            backend="rocm",
            rocm_version="7.14",
            gfx="gfx942",
            torch_version="2.14.1",
            output=Path("/tmp/unused"),
            triton=triton,
        )
    )
    return plan(request).expect.resolved(VALUES)


def torch_wheel(directory: Path, **change: object) -> Path:
    """A wheel as a good build makes it, with `change` applied (each key one defect)."""
    directory.mkdir(parents=True, exist_ok=True)
    init = rocm_init_text(
        str(change.get("check_version", EXACT)),
        change.get("preload", list(backend.PRELOAD_SHORTNAMES)),
    )  # type: ignore[arg-type]
    files: dict[str, str | bytes] = {
        "torch/__init__.py": "",
        "torch/lib/libtorch_hip.so": change.get("library", fatbin("gfx942")),  # type: ignore[dict-item]
    }
    if not change.get("no_init"):
        files["torch/_rocm_init.py"] = init
    requires = change.get("requires", [f"rocm[libraries]=={EXACT}"])
    return make_wheel(
        directory,
        "torch",
        str(change.get("version", VERSION)),
        files,
        requires=requires,
        tag=str(change.get("tag", TAG)),
    )  # type: ignore[arg-type]


def test_a_good_wheel_passes(tmp_path: Path) -> None:
    report = validate_wheel(torch_wheel(tmp_path), expectation())
    assert report.ok, report.problems
    assert "GPU code objects" in report.checked


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"tag": "py3-none-any"}, "needs a platform tag"),
        ({"requires": ["rocm[libraries]==7.14"]}, "no Requires-Dist on rocm[libraries]==7.14.0"),
        ({"version": "2.14.1+rocm7.14"}, "version in the file name is 2.14.1+rocm7.14"),
        ({"no_init": True}, "torch/_rocm_init.py is missing"),
        ({"check_version": "7.14"}, "checks the SDK version '7.14', not '7.14.0'"),
        (
            {"preload": ["rocm_sysdeps_numa", "MIOpen", *backend.PRELOAD_SHORTNAMES]},
            "preloads rocm_sysdeps_numa, MIOpen, unknown to the SDK of the build",
        ),
        ({"preload": ["amdhip64", "miopen"]}, "does not preload amd_comgr, amd_smi"),
        ({"library": elf_library({".text": b"\x90"})}, "no GPU code objects"),
        ({"library": fatbin("gfx950")}, "no code objects for gfx942"),
        ({"library": fatbin("gfx942", mach={"gfx942": 0x4F})}, "are not gfx942 ELF files"),
    ],
)
def test_each_defect_is_found(change: dict[str, object], needle: str, tmp_path: Path) -> None:
    problems = validate_wheel(torch_wheel(tmp_path, **change), expectation()).problems
    assert any(needle in p for p in problems), problems


def test_a_targets_line_is_no_code_object(tmp_path: Path) -> None:
    # What the validator used to accept: a TARGETS line that the build writes itself.
    library = elf_library({".rodata": b"TARGETS = ['gfx942']"})
    problems = validate_wheel(torch_wheel(tmp_path, library=library), expectation()).problems
    assert any("no GPU code objects" in p for p in problems), problems


def test_the_triton_pin_is_checked(tmp_path: Path) -> None:
    expect = expectation(triton=True)
    problems = validate_wheel(torch_wheel(tmp_path / "a"), expect).problems
    assert list(problems) == ["no Requires-Dist on triton==3.8.0+rocm7.14.0"], problems
    pinned = [f"rocm[libraries]=={EXACT}", "triton==3.8.0+rocm7.14.0"]
    assert validate_wheel(torch_wheel(tmp_path / "b", requires=pinned), expect).ok


def test_init_module_call_reads_the_generated_file() -> None:
    preload, version = init_module_call(rocm_init_text(EXACT, ["amdhip64", "miopen"]))
    assert preload == ["amdhip64", "miopen"] and version == EXACT
    assert init_module_call("def initialize(): pass\n") == (None, None)


@pytest.mark.parametrize(
    "wrap",
    [
        lambda b: b,
        lambda b: ccob(b, version=2),
        lambda b: ccob(b, version=3),
        lambda b: ccob(b, version=2, zstd=True),
    ],
    ids=["plain", "zlib-v2", "zlib-v3", "zstd-v2"],
)
def test_offload_bundles(wrap: object) -> None:
    first = bundle(
        [(f"{PREFIX}gfx942", code_object(0x4C)), ("host-x86_64-unknown-linux-gnu-", b"")]
    )
    second = bundle([(f"{PREFIX}gfx90a:xnack+", code_object(0x3F))])
    section = wrap(first) + bytes(13) + wrap(second)  # type: ignore[operator]
    ids = [entry_id for entry_id, _ in bundle_entries(section)]
    assert ids == [f"{PREFIX}gfx942", "host-x86_64-unknown-linux-gnu-", f"{PREFIX}gfx90a:xnack+"]
    found = gpu_code_objects(elf_library({".hip_fatbin": section}), PREFIX)
    assert {t: [o.mach for o in objs] for t, objs in found.items()} == {
        "gfx942": [0x4C],
        "gfx90a": [0x3F],
    }


def test_broken_bundles_are_errors() -> None:
    whole = bundle([(f"{PREFIX}gfx942", code_object(0x4C))])
    with pytest.raises(OffloadError, match="runs past its section"):
        list(bundle_entries(whole[:-8]))
    with pytest.raises(OffloadError, match="zlib"):
        list(bundle_entries(b"CCOB" + struct.pack("<HHIIQ", 2, 0, 40, 99, 0) + b"not zlib" * 2))
    with pytest.raises(OffloadError, match="unknown method 7"):
        list(bundle_entries(b"CCOB" + struct.pack("<HHIIQ", 2, 7, 24, 0, 0)))


@pytest.mark.slow
def test_the_mach_table_matches_llvm() -> None:
    """Every target's EF_AMDGPU_MACH in backends/rocm.py is what LLVM writes: compiled here
    with triton's AMD backend (no GPU, no ROCm needed), read back with offload.code_object."""
    import triton  # installed with torch on Linux
    import triton.language as tl
    from triton.backends.compiler import GPUTarget

    from accelkit.wheels.offload import code_object as read_code_object

    @triton.jit
    def add_one(x, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
        i = tl.arange(0, BLOCK)
        tl.store(x + i, tl.load(x + i, mask=i < n) + 1, mask=i < n)

    source = triton.compiler.ASTSource(
        fn=add_one, signature={"x": "*fp32", "n": "i32"}, constexprs={"BLOCK": 64}
    )
    for gfx, mach in backend.AMDGPU_MACH.items():
        warp = 64 if gfx.startswith("gfx9") else 32
        hsaco = triton.compile(source, target=GPUTarget("hip", gfx, warp)).asm["hsaco"]
        found = read_code_object(hsaco)
        assert (found.machine, found.mach) == (backend.EM_AMDGPU, mach), gfx
