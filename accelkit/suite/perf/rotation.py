"""How many input sets a perf case rotates through, so caches cannot serve them.

Compute-bound cases rotate through the size tier's `rotate_bytes` (`rotation_count`).
Memory-bound cases (stream, rows, gemv, the host copy canary) must read memory on every
call: on the host tier they rotate through `LLC_FACTOR` x the last-level cache
(`memory_working_set`); a device tier's `rotate_bytes` already exceeds its caches.

The bytes of a set are what its case passes: the copy and the canary count their two
arrays, gemv its weight; the triad, the sum and the rows count twice their input's size,
so their inputs span 6x (triad), 2x (sum) and 2x (rows) the cache: past it either way.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any

from accelkit.suite.perf.harness import GIB, KIB, MIB, SizeTier


def rotation_count(bytes_per_set: int, tier: SizeTier, *, cap: int = 8) -> int:
    """How many distinct input sets to rotate through so caches cannot serve them."""
    if bytes_per_set <= 0:
        return 1
    return max(1, min(cap, math.ceil(tier.rotate_bytes / bytes_per_set)))


LLC_FACTOR = 4
"""A host's memory-bound cases rotate through at least this many times its last-level
cache (STREAM's rule for its arrays), so every call reads memory, not a cache."""
DEFAULT_LLC_BYTES = 32 * MIB
"""Assumed where the host does not say (no sysfs cache description)."""
MAX_HOST_WORKING_SET = 1 * GIB
CPU0_CACHES = Path("/sys/devices/system/cpu/cpu0/cache")
"""Linux describes each cache CPU 0 sees in an index* folder here (type, size, level)."""


@functools.cache
def last_level_cache_bytes() -> int | None:
    """The size of the largest data cache that CPU 0 sees (Linux sysfs), None if unknown."""
    sizes = []
    for index in CPU0_CACHES.glob("index*"):
        try:
            if (index / "type").read_text().strip() == "Instruction":
                continue
            sizes.append(parse_cache_size((index / "size").read_text()))
        except (OSError, ValueError):
            continue
    return max(sizes) if sizes else None


def parse_cache_size(text: str) -> int:
    """sysfs's cache size ("32768K", "1M", "512") in bytes."""
    text = text.strip().upper()
    scale = {"K": KIB, "M": MIB, "G": GIB}.get(text[-1:], 1)
    return int(text[:-1] if scale != 1 else text) * scale


def memory_working_set(tier: SizeTier) -> int:
    """The bytes a memory-bound case rotates through: on the host tier, `LLC_FACTOR` x the
    last-level cache (at most `MAX_HOST_WORKING_SET`), at least the tier's `rotate_bytes`.

    Why (measured on a 2-core VM with a 32 MiB L3, `accelkit test --ab` A/A): with 8 MiB
    the sets sat partly in the cache, and the two sides, taking turns on one CPU, shared it;
    which of them kept its sets there depended on where each process's pages fell, so a
    gemv read 13 GB/s on one side and 48 on the other for a whole pass (a CI half-width of
    19-44%). Past the cache, each call reads memory: 0.5-4.6% in five whole-suite runs.
    """
    if not tier.rotate_past_llc:
        return tier.rotate_bytes
    llc = last_level_cache_bytes() or DEFAULT_LLC_BYTES
    return max(tier.rotate_bytes, min(MAX_HOST_WORKING_SET, LLC_FACTOR * llc))


def memory_rotation_count(bytes_per_set: int, tier: SizeTier, *, cap: int = 8) -> int:
    """Input sets of a memory-bound case (`memory_working_set`); `cap` bounds a device
    tier's count, whose `rotate_bytes` already exceeds the device's caches."""
    if bytes_per_set <= 0:
        return 1
    count = math.ceil(memory_working_set(tier) / bytes_per_set)
    return max(1, count if tier.rotate_past_llc else min(cap, count))


def rotating_sets(first: tuple[Any, ...], count: int) -> list[tuple[Any, ...]]:
    """`count` input sets: `first`, then copies of it, each at its own address (torch
    tensors or numpy arrays). Copying is a memory copy, about 3x as fast as drawing new
    random numbers (a host-tier case rotates through 64-128 MiB in every pass), and the
    values need not differ for the caches not to serve them."""
    return [first, *(tuple(_copy(a) for a in first) for _ in range(count - 1))]


def _copy(array: Any) -> Any:
    return array.clone() if hasattr(array, "clone") else array.copy()
