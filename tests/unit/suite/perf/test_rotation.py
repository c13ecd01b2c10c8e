"""How many input sets the perf cases rotate through (accelkit.suite.perf.rotation)."""

from __future__ import annotations

from typing import Any

import pytest

from accelkit.suite.perf import rotation
from accelkit.suite.perf.harness import MIB, SIZE_TIERS
from accelkit.suite.perf.rotation import (
    LLC_FACTOR,
    MAX_HOST_WORKING_SET,
    memory_rotation_count,
    memory_working_set,
    parse_cache_size,
    rotating_sets,
    rotation_count,
)


def test_compute_bound_cases_rotate_through_the_tier_bytes() -> None:
    tier = SIZE_TIERS["host"]
    assert rotation_count(tier.rotate_bytes * 2, tier) == 1
    assert rotation_count(1, tier) == 8
    assert rotation_count(0, tier) == 1


@pytest.mark.parametrize(
    ("text", "size"), [("32768K\n", 32 * MIB), ("1M", MIB), ("512", 512), ("2G", 2 << 30)]
)
def test_sysfs_cache_sizes_parse(text: str, size: int) -> None:
    assert parse_cache_size(text) == size


def test_the_last_level_cache_is_the_largest_data_cache(cpu0_caches: Any) -> None:
    cpu0_caches([("Data", "48K"), ("Instruction", "64M"), ("Unified", "1024K"), ("Unified", "32M")])
    assert rotation.last_level_cache_bytes() == 32 * MIB
    # STREAM's rule: the memory cases' sets span 4x that, so each call reads memory.
    tier = SIZE_TIERS["host"]
    assert memory_working_set(tier) == LLC_FACTOR * 32 * MIB
    assert memory_rotation_count(2 * MIB, tier) == 64
    # No cap on the host tier: the count follows the cache, not the tier's cap.
    assert memory_rotation_count(2 * MIB, tier, cap=8) == 64


def test_a_host_without_a_cache_description_assumes_a_default(cpu0_caches: Any) -> None:
    cpu0_caches([])
    assert rotation.last_level_cache_bytes() is None
    working_set = memory_working_set(SIZE_TIERS["host"])
    assert working_set == LLC_FACTOR * rotation.DEFAULT_LLC_BYTES


def test_a_huge_cache_is_bounded(cpu0_caches: Any) -> None:
    cpu0_caches([("Unified", "1G")])
    assert memory_working_set(SIZE_TIERS["host"]) == MAX_HOST_WORKING_SET


def test_device_tiers_keep_their_bytes_and_cap() -> None:
    tier = SIZE_TIERS["gpu-large"]
    assert not tier.rotate_past_llc
    assert memory_working_set(tier) == tier.rotate_bytes
    assert memory_rotation_count(1 << 30, tier) == 1
    assert memory_rotation_count(MIB, tier, cap=16) == 16


def test_rotating_sets_are_copies_at_their_own_addresses() -> None:
    torch = pytest.importorskip("torch")
    np = pytest.importorskip("numpy")
    first = (torch.empty(4), torch.randn(4))
    sets = rotating_sets(first, 3)
    assert len(sets) == 3 and sets[0] is first
    pointers = {s[1].data_ptr() for s in sets}
    assert len(pointers) == 3
    assert all(torch.equal(s[1], first[1]) for s in sets)
    arrays = rotating_sets((np.arange(3.0),), 2)
    assert arrays[1][0] is not arrays[0][0] and (arrays[1][0] == arrays[0][0]).all()
