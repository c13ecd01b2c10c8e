"""Reading the GPU code objects out of a built library: ELF sections, clang offload bundles.

hipcc puts a translation unit's device code into the host object's `.hip_fatbin` section as a
clang offload bundle, one entry per target:

    __CLANG_OFFLOAD_BUNDLE__ | u64 count | count x (u64 offset, u64 size, u64 id length, id)
    | the entries' bytes, each at its offset from the bundle's start

with ids such as `host-x86_64-unknown-linux-gnu-` and `hipv4-amdgcn-amd-amdhsa--gfx942` (a
target may carry features: `gfx942:sramecc+:xnack-`). With `--offload-compress` (PyTorch's ROCm
build uses it) each bundle is wrapped, compressed, in a `CCOB` header:

    CCOB | u16 version | u16 method (0 zlib, 1 zstd) | v2: u32 total size, v3: u64 |
    u32 (v1, v2) or u64 (v3) uncompressed size | u64 hash | compressed bundle

All little-endian (clang's OffloadBundler.cpp). Each entry of an AMDGPU target is an ELF code
object whose header names its GPU: e_machine EM_AMDGPU and the low byte of e_flags.

Worked example: a libtorch_hip.so built with PYTORCH_ROCM_ARCH=gfx942 yields
`{"gfx942": [CodeObject(machine=224, mach=0x4c)]}` from `gpu_code_objects(data, prefix)`.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
COMPRESSED_MAGIC = b"CCOB"
FATBIN_SECTION = ".hip_fatbin"
ZLIB, ZSTD = 0, 1
#: The low byte of an AMDGPU code object's e_flags is its GPU (EF_AMDGPU_MACH).
MACH_MASK = 0xFF


class OffloadError(ValueError):
    """Bytes that are not the ELF file, section or bundle they claim to be."""


@dataclass(frozen=True)
class CodeObject:
    machine: int  # ELF e_machine (224: EM_AMDGPU); 0 when the entry is not an ELF file
    mach: int  # e_flags & 0xff


def elf_sections(data: bytes) -> dict[str, bytes]:
    """The named sections of a 64-bit little-endian ELF file."""
    if data[:4] != b"\x7fELF":
        raise OffloadError("not an ELF file")
    if data[4] != 2 or data[5] != 1:
        raise OffloadError("not a 64-bit little-endian ELF file")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if shoff == 0 or shnum == 0:
        return {}
    if shoff + shnum * shentsize > len(data) or shstrndx >= shnum:
        raise OffloadError("truncated ELF section table")

    def header(index: int) -> tuple[int, int, int, int]:
        name, kind, _flags, _addr, offset, size = struct.unpack_from(
            "<IIQQQQ", data, shoff + index * shentsize
        )
        return name, kind, offset, size

    _, _, names_offset, names_size = header(shstrndx)
    names = data[names_offset : names_offset + names_size]
    sections = {}
    for index in range(shnum):
        name_at, kind, offset, size = header(index)
        end = names.find(b"\0", name_at)
        name = names[name_at : end if end >= 0 else None].decode("ascii", errors="replace")
        sh_nobits = 8  # .bss: no bytes in the file
        sections[name] = b"" if kind == sh_nobits else data[offset : offset + size]
    return sections


def code_object(entry: bytes) -> CodeObject:
    """The GPU an offload entry's ELF header names (machine 0 when it is no ELF file)."""
    if entry[:4] != b"\x7fELF" or len(entry) < 0x34:
        return CodeObject(0, 0)
    (machine,) = struct.unpack_from("<H", entry, 0x12)
    (flags,) = struct.unpack_from("<I", entry, 0x30)
    return CodeObject(machine, flags & MACH_MASK)


def bundle_entries(section: bytes) -> Iterator[tuple[str, bytes]]:
    """(id, bytes) of every entry of every bundle in a `.hip_fatbin` section, compressed
    bundles decompressed (OffloadError for one that cannot be read)."""
    position = 0
    while True:
        found = (section.find(magic, position) for magic in (BUNDLE_MAGIC, COMPRESSED_MAGIC))
        starts = [at for at in found if at >= 0]
        if not starts:
            return
        position = min(starts)
        if section.startswith(COMPRESSED_MAGIC, position):
            bundle, consumed = _decompress(section, position)
            yield from _entries(bundle)
        else:
            entries, consumed = _entries_and_size(section, position)
            yield from entries
        position += max(consumed, 1)


def gpu_code_objects(library: bytes, prefix: str) -> dict[str, list[CodeObject]]:
    """Per target, the code objects in `library`'s `.hip_fatbin` bundles whose id starts
    with `prefix` (hipv4-amdgcn-amd-amdhsa--); the target drops its features (gfx942:xnack-)."""
    section = elf_sections(library).get(FATBIN_SECTION)
    found: dict[str, list[CodeObject]] = {}
    if not section:
        return found
    for entry_id, data in bundle_entries(section):
        if entry_id.startswith(prefix):
            target = entry_id[len(prefix) :].split(":", 1)[0]
            found.setdefault(target, []).append(code_object(data))
    return found


def _entries(bundle: bytes) -> list[tuple[str, bytes]]:
    if not bundle.startswith(BUNDLE_MAGIC):
        raise OffloadError("a compressed bundle that holds no offload bundle")
    entries, _ = _entries_and_size(bundle, 0)
    return entries


def _entries_and_size(data: bytes, start: int) -> tuple[list[tuple[str, bytes]], int]:
    at = start + len(BUNDLE_MAGIC)
    try:
        (count,) = struct.unpack_from("<Q", data, at)
        at += 8
        if count > 4096:
            raise OffloadError(f"offload bundle claims {count} entries")
        entries, end = [], at
        for _ in range(count):
            offset, size, id_size = struct.unpack_from("<QQQ", data, at)
            at += 24
            entry_id = data[at : at + id_size].decode("ascii", errors="replace")
            at += id_size
            if start + offset + size > len(data):
                raise OffloadError(f"offload bundle entry {entry_id} runs past its section")
            entries.append((entry_id, data[start + offset : start + offset + size]))
            end = max(end, start + offset + size)
    except struct.error:
        raise OffloadError("truncated offload bundle") from None
    return entries, max(end, at) - start


def _decompress(data: bytes, start: int) -> tuple[bytes, int]:
    try:
        version, method = struct.unpack_from("<HH", data, start + 4)
        if version == 1:
            header, total = 20, 0
        elif version == 2:
            header, total = 24, struct.unpack_from("<I", data, start + 8)[0]
        elif version == 3:
            header, total = 32, struct.unpack_from("<Q", data, start + 8)[0]
        else:
            raise OffloadError(f"compressed offload bundle of unknown version {version}")
    except struct.error:
        raise OffloadError("truncated compressed offload bundle") from None
    payload = data[start + header : start + total] if total else data[start + header :]
    if method == ZLIB:
        inflater = zlib.decompressobj()
        try:
            bundle = inflater.decompress(payload)
        except zlib.error as exc:
            raise OffloadError(f"compressed offload bundle (zlib): {exc}") from None
        consumed = total or header + len(payload) - len(inflater.unused_data)
        return bundle, consumed
    if method == ZSTD:
        return _zstd(payload), total or header + len(payload)
    raise OffloadError(f"compressed offload bundle with unknown method {method}")


def _zstd(payload: bytes) -> bytes:
    try:
        import zstandard
    except ImportError:  # pragma: no cover - a dependency of accelkit
        raise OffloadError("a zstd-compressed offload bundle needs the zstandard package") from None
    try:
        return bytes(zstandard.ZstdDecompressor().decompressobj().decompress(payload))
    except zstandard.ZstdError as exc:
        raise OffloadError(f"compressed offload bundle (zstd): {exc}") from None
