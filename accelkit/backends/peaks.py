"""Peak dense FLOP/s per dtype and peak memory bandwidth of known accelerators: the record
(`DevicePeak`), the lookup and the ceilings it gives. The rows live with their backend
(`Backend.peaks`: NVIDIA's in cuda.py, AMD's in rocm.py, Intel's in xpu.py, Apple's in mps.py);
the registry joins them into one table (`accelkit.backends.PEAK_TABLE`, in the registry's
order) and looks a device up in it (`accelkit.backends.table_ceilings`).

The perf suite reports each throughput metric as a fraction of the device's ceiling
(`peak_fraction`). The ceilings come from the table (`peak_source: "table"`), looked up by
the device name torch reports, or are measured on the spot with `--measure-ceilings`
(`peak_source: "measured"`, see `accelkit.suite.perf.fixtures`).

Conventions of the table:
- FLOP/s are DENSE tensor-core / matrix-core rates (no 2:4 structured sparsity). NVIDIA's
  datasheets since Hopper print the sparse figure with an asterisk; those are halved here.
- "float32" is the non-tensor-core (vector FMA) rate: what a float32 GEMM reaches when TF32
  is off; "tfloat32" is the TF32 tensor-core rate (float32 GEMM with TF32 allowed).
- "float8" is the e4m3/e5m2 rate (`torch._scaled_mm`).
- Bandwidth is bytes/s of the device memory (HBM/GDDR/unified LPDDR), decimal units
  (1 TB/s = 1e12 B/s), as vendors print it.
- A dtype a device has no published (or no hardware) rate for is left out: no fraction is
  reported then, rather than a made-up one. Entries derived from published unit counts and
  clocks say so in their `note`.
- Several SKUs share one device name (Apple's binned GPUs; M3 Max 30/40-core GPU): the
  table holds the highest published figure for the name, so a fraction may read low there.

Everything here is plain data: no torch import, no device access.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

PeakSource = Literal["table", "measured"]

T = 1e12
P = 1e15
TB_S = 1e12
GB_S = 1e9


@dataclass(frozen=True)
class DevicePeak:
    """One row of the table: which devices it matches and their published ceilings."""

    name: str
    pattern: str
    """A case-insensitive regular expression searched in the device name."""
    flops: Mapping[str, float]
    """Dense FLOP/s by torch dtype name (float32, tfloat32, bfloat16, float16, float8)."""
    memory_bandwidth: float | None
    """Bytes per second."""
    source: str
    """Where the numbers come from (a vendor datasheet)."""
    preliminary: bool = False
    """Announced, not yet confirmed by a final datasheet."""
    note: str = ""
    _regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "flops", MappingProxyType(dict(self.flops)))
        object.__setattr__(self, "_regex", re.compile(self.pattern, re.IGNORECASE))

    def matches(self, device_name: str) -> bool:
        return self._regex.search(device_name) is not None


def dense_rates(fp32: float, tf32: float, half: float, fp8: float) -> dict[str, float]:
    """The dense FLOP/s of a device with float32 (vector), TF32, bfloat16 = float16 and FP8
    rates (NVIDIA Hopper and Blackwell, AMD CDNA 3)."""
    return {"float32": fp32, "tfloat32": tf32, "bfloat16": half, "float16": half, "float8": fp8}


def lookup(device_name: str, table: tuple[DevicePeak, ...]) -> DevicePeak | None:
    """The first table row whose pattern matches `device_name`, or None."""
    for row in table:
        if row.matches(device_name):
            return row
    return None


@dataclass(frozen=True)
class Ceilings:
    """The ceilings the perf cases divide by, and where they came from."""

    source: PeakSource
    device_name: str
    flops: Mapping[str, float] = field(default_factory=dict)
    memory_bandwidth: float | None = None
    entry: str | None = None
    """The table row's name (source "table"), else None."""
    preliminary: bool = False

    def flops_for(self, dtype: str) -> float | None:
        return self.flops.get(dtype)

    def metric_keys(self) -> dict[str, object]:
        """Keys every metric with a peak carries, so readers know which peak was used."""
        keys: dict[str, object] = {"peak_source": self.source}
        if self.entry is not None:
            keys["peak_entry"] = self.entry
        if self.preliminary:
            keys["peak_preliminary"] = True
        return keys


def table_ceilings(device_name: str, table: tuple[DevicePeak, ...]) -> Ceilings:
    """The ceilings of `table` for `device_name` (empty when the device is not listed)."""
    row = lookup(device_name, table)
    if row is None:
        return Ceilings(source="table", device_name=device_name)
    return Ceilings(
        source="table",
        device_name=device_name,
        flops=dict(row.flops),
        memory_bandwidth=row.memory_bandwidth,
        entry=row.name,
        preliminary=row.preliminary,
    )
