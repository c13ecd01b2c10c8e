"""Reading the ELF header and notes of a GPU kernel binary (a cubin, an hsaco): enough to
say which GPU it is built for, with no vendor tool.

Example: a cubin for sm_107 that ptxas 13.5 wrote starts with e_machine 190 (EM_CUDA),
EI_ABIVERSION 8 and e_flags 0x09006b02, whose bits 8..15 (0x6b) are the SM number 107;
`read_header(blob).flags >> 8 & 0xff == 107`. The vendors' layouts of e_flags are read by
the backend modules (cuda.py, rocm.py); this module knows only ELF itself (the System V
gABI: 64-bit little-endian header, section headers, SHT_NOTE records).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

ELF_MAGIC = b"\x7fELF"
_ELFCLASS64 = 2
_ELFDATA2LSB = 1
_SHT_NOTE = 7


@dataclass(frozen=True)
class ElfHeader:
    osabi: int
    abi_version: int
    machine: int
    flags: int
    section_offset: int
    section_size: int
    section_count: int


def read_header(blob: bytes) -> ElfHeader | None:
    """The header of a 64-bit little-endian ELF file; None for anything else."""
    if len(blob) < 64 or not blob.startswith(ELF_MAGIC):
        return None
    if blob[4] != _ELFCLASS64 or blob[5] != _ELFDATA2LSB:
        return None
    (machine,) = struct.unpack_from("<H", blob, 18)
    (flags,) = struct.unpack_from("<I", blob, 48)
    (section_offset,) = struct.unpack_from("<Q", blob, 40)
    section_size, section_count = struct.unpack_from("<HH", blob, 58)
    return ElfHeader(
        osabi=blob[7],
        abi_version=blob[8],
        machine=machine,
        flags=flags,
        section_offset=section_offset,
        section_size=section_size,
        section_count=section_count,
    )


@dataclass(frozen=True)
class ElfNote:
    name: str
    type: int
    desc: bytes


def notes(blob: bytes) -> Iterator[ElfNote]:
    """The notes of every SHT_NOTE section (a malformed table ends the iteration)."""
    header = read_header(blob)
    if header is None or header.section_size < 64:
        return
    for index in range(header.section_count):
        start = header.section_offset + index * header.section_size
        if start + 64 > len(blob):
            return
        (kind,) = struct.unpack_from("<I", blob, start + 4)
        if kind != _SHT_NOTE:
            continue
        offset, size = struct.unpack_from("<QQ", blob, start + 24)
        yield from _section_notes(blob[offset : offset + size])


def _section_notes(section: bytes) -> Iterator[ElfNote]:
    position = 0
    while position + 12 <= len(section):
        name_size, desc_size, kind = struct.unpack_from("<III", section, position)
        position += 12
        name = section[position : position + name_size].rstrip(b"\0")
        position += _aligned(name_size)
        desc = section[position : position + desc_size]
        position += _aligned(desc_size)
        if len(desc) != desc_size:
            return
        yield ElfNote(name.decode("ascii", "replace"), kind, desc)


def _aligned(size: int) -> int:
    return (size + 3) & ~3
