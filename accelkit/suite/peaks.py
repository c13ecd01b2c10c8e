"""Peak dense FLOP/s per dtype and peak memory bandwidth of known accelerators.

The perf suite reports each throughput metric as a fraction of the device's ceiling
(`peak_fraction`). The ceilings come from this table (`peak_source: "table"`), looked up by
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


def _nvidia_hopper(fp32: float, tf32: float, half: float, fp8: float) -> dict[str, float]:
    return {"float32": fp32, "tfloat32": tf32, "bfloat16": half, "float16": half, "float8": fp8}


# Order matters: the first matching row wins, so specific names precede general ones
# ("H100 NVL" and "H100 PCIe" before the SXM row that matches any "H100").
PEAK_TABLE: tuple[DevicePeak, ...] = (
    # ---- NVIDIA ------------------------------------------------------------------------
    # NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100/, "H100 NVL"
    # column): TF32 835, BF16/FP16 1,671, FP8 3,341 TFLOPS with sparsity; FP32 60 TFLOPS;
    # 94 GB HBM3 at 3.9 TB/s.
    DevicePeak(
        name="NVIDIA H100 NVL",
        pattern=r"H100.*NVL",
        flops=_nvidia_hopper(60 * T, 417.5 * T, 835.5 * T, 1670.5 * T),
        memory_bandwidth=3.9 * TB_S,
        source="NVIDIA H100 datasheet (H100 NVL column), sparse figures halved",
    ),
    # Same datasheet, "H100 PCIe" column: FP32 51 TFLOPS; TF32 756, BF16/FP16 1,513,
    # FP8 3,026 TFLOPS with sparsity; 80 GB HBM2e at 2 TB/s.
    DevicePeak(
        name="NVIDIA H100 PCIe",
        pattern=r"H100.*PCIe",
        flops=_nvidia_hopper(51 * T, 378 * T, 756.5 * T, 1513 * T),
        memory_bandwidth=2.0 * TB_S,
        source="NVIDIA H100 datasheet (H100 PCIe column), sparse figures halved",
    ),
    # Same datasheet, "H100 SXM" column: FP32 67 TFLOPS; TF32 989, BF16/FP16 1,979,
    # FP8 3,958 TFLOPS with sparsity; 80 GB HBM3 at 3.35 TB/s. The H100 whitepaper's
    # dense figures are 494.7 / 989.4 / 1,978.9 TFLOPS.
    DevicePeak(
        name="NVIDIA H100 SXM",
        pattern=r"H100",
        flops=_nvidia_hopper(66.9 * T, 494.7 * T, 989.4 * T, 1978.9 * T),
        memory_bandwidth=3.35 * TB_S,
        source="NVIDIA H100 datasheet (H100 SXM column) / Hopper whitepaper dense rates",
    ),
    # NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200/), "H200
    # NVL" column: FP32 60 TFLOPS; TF32 835, BF16/FP16 1,671, FP8 3,341 TFLOPS with
    # sparsity; 141 GB HBM3e at 4.8 TB/s.
    DevicePeak(
        name="NVIDIA H200 NVL",
        pattern=r"H200.*NVL",
        flops=_nvidia_hopper(60 * T, 417.5 * T, 835.5 * T, 1670.5 * T),
        memory_bandwidth=4.8 * TB_S,
        source="NVIDIA H200 datasheet (H200 NVL column), sparse figures halved",
    ),
    # Same datasheet, "H200 SXM" column: the H100 SXM compute (same GH100 die and clocks)
    # with 141 GB HBM3e at 4.8 TB/s.
    DevicePeak(
        name="NVIDIA H200 SXM",
        pattern=r"H200",
        flops=_nvidia_hopper(66.9 * T, 494.7 * T, 989.4 * T, 1978.9 * T),
        memory_bandwidth=4.8 * TB_S,
        source="NVIDIA H200 datasheet (H200 SXM column), sparse figures halved",
    ),
    # NVIDIA HGX B200 / DGX B200 datasheets (nvidia.com/en-us/data-center/hgx/): per GPU
    # FP32 75 TFLOPS; TF32 2.2, FP16/BF16 4.5, FP8 9 PFLOPS with sparsity; 180 GB HBM3e,
    # 64 TB/s per 8-GPU system = 8 TB/s per GPU.
    DevicePeak(
        name="NVIDIA B200",
        pattern=r"\bB200\b",
        flops=_nvidia_hopper(75 * T, 1.1 * P, 2.25 * P, 4.5 * P),
        memory_bandwidth=8.0 * TB_S,
        source="NVIDIA HGX/DGX B200 datasheet, per GPU, sparse figures halved",
    ),
    # NVIDIA Vera Rubin announcements (GTC 2025 keynote, CES 2026 press release): Rubin GPU
    # with 288 GB HBM4 at up to 22 TB/s, 50 PFLOPS NVFP4 inference. No dense BF16/FP8
    # figure is published yet, so no FLOP/s entry; revisit with the final datasheet.
    DevicePeak(
        name="NVIDIA Rubin",
        pattern=r"Rubin|\bR200\b|VR200",
        flops={},
        memory_bandwidth=22.0 * TB_S,
        source="NVIDIA Vera Rubin announcement (CES 2026): HBM4 up to 22 TB/s",
        preliminary=True,
        note="preliminary: announced figures; no dense BF16/FP8 rate published",
    ),
    # ---- AMD ---------------------------------------------------------------------------
    # AMD Instinct MI325X data sheet (amd.com/en/products/accelerators/instinct/mi300/
    # mi325x.html): FP32 vector 163.4 TFLOPS, TF32 matrix 653.7, FP16/BF16 1,307.4,
    # FP8 2,614.9 TFLOPS (dense); 256 GB HBM3E at 6 TB/s.
    DevicePeak(
        name="AMD Instinct MI325X",
        pattern=r"MI325X",
        flops=_nvidia_hopper(163.4 * T, 653.7 * T, 1307.4 * T, 2614.9 * T),
        memory_bandwidth=6.0 * TB_S,
        source="AMD Instinct MI325X data sheet",
    ),
    # AMD Instinct MI300X data sheet (amd.com/en/products/accelerators/instinct/mi300/
    # mi300x.html): same compute as MI325X (dense); 192 GB HBM3 at 5.3 TB/s.
    DevicePeak(
        name="AMD Instinct MI300X",
        pattern=r"MI300X",
        flops=_nvidia_hopper(163.4 * T, 653.7 * T, 1307.4 * T, 2614.9 * T),
        memory_bandwidth=5.3 * TB_S,
        source="AMD Instinct MI300X data sheet",
    ),
    # AMD Instinct MI355X data sheet (amd.com/en/products/accelerators/instinct/mi350/
    # mi355x.html): FP32 vector 157.3 TFLOPS, FP16/BF16 2.5 PFLOPS, FP8 5.0 PFLOPS (dense;
    # 2x with sparsity); 288 GB HBM3E at 8 TB/s. CDNA 4 has no TF32 matrix rate.
    DevicePeak(
        name="AMD Instinct MI355X",
        pattern=r"MI355X",
        flops={"float32": 157.3 * T, "bfloat16": 2.5 * P, "float16": 2.5 * P, "float8": 5.0 * P},
        memory_bandwidth=8.0 * TB_S,
        source="AMD Instinct MI355X data sheet",
    ),
    # ---- Intel -------------------------------------------------------------------------
    # Intel ark, Data Center GPU Max 1550 (ark.intel.com product 232873) and the Max Series
    # product brief: 128 Xe cores at 1.6 GHz, FP32 52 TFLOPS, TF32 419 TFLOPS, BF16/FP16
    # 839 TFLOPS (XMX, no sparsity); 128 GB HBM2e at 3.2768 TB/s.
    DevicePeak(
        name="Intel Data Center GPU Max 1550",
        pattern=r"Max 1550",
        flops={
            "float32": 52.4 * T,
            "tfloat32": 419.4 * T,
            "bfloat16": 838.9 * T,
            "float16": 838.9 * T,
        },
        memory_bandwidth=3.2768 * TB_S,
        source="Intel ark / Data Center GPU Max Series product brief",
    ),
    # Intel ark, Data Center GPU Max 1100 (ark.intel.com product 232876): 56 Xe cores at
    # 1.55 GHz, FP32 22.2 TFLOPS; 48 GB HBM2e at 1.2288 TB/s. XMX rates derived with the
    # Max 1550's per-core rate (4,096 BF16 FLOP/clock/Xe core): 56 x 1.55 GHz x 4,096.
    DevicePeak(
        name="Intel Data Center GPU Max 1100",
        pattern=r"Max 1100",
        flops={
            "float32": 22.2 * T,
            "tfloat32": 177.8 * T,
            "bfloat16": 355.5 * T,
            "float16": 355.5 * T,
        },
        memory_bandwidth=1.2288 * TB_S,
        source="Intel ark (Max 1100); XMX rates derived from Xe-core count and clock",
        note="tfloat32/bfloat16/float16 derived, not printed by Intel",
    ),
    # Intel Arc B580 product page / ark: 20 Xe2 cores, 233 INT8 TOPS (XMX), 12 GB GDDR6
    # 192-bit at 19 Gbps = 456 GB/s. FP16/BF16 XMX rate is half the INT8 rate; FP32 =
    # 20 cores x 128 lanes x 2 x 2.67 GHz.
    DevicePeak(
        name="Intel Arc B580",
        pattern=r"B580",
        flops={"float32": 13.7 * T, "bfloat16": 116.5 * T, "float16": 116.5 * T},
        memory_bandwidth=456 * GB_S,
        source="Intel Arc B580 product page (233 INT8 TOPS, 456 GB/s)",
        note="float16/bfloat16 = INT8 TOPS / 2; float32 from core count and clock",
    ),
    # Intel Arc B570 product page / ark: 18 Xe2 cores, 203 INT8 TOPS, 10 GB GDDR6 160-bit
    # at 19 Gbps = 380 GB/s.
    DevicePeak(
        name="Intel Arc B570",
        pattern=r"B570",
        flops={"float32": 11.5 * T, "bfloat16": 101.5 * T, "float16": 101.5 * T},
        memory_bandwidth=380 * GB_S,
        source="Intel Arc B570 product page (203 INT8 TOPS, 380 GB/s)",
        note="float16/bfloat16 = INT8 TOPS / 2; float32 from core count and clock",
    ),
    # ---- Apple -------------------------------------------------------------------------
    # Apple newsroom launch posts and tech specs pages. Apple prints GPU FP32 TFLOPS for
    # M1/M2 chips only; for M3/M4 only the unified memory bandwidth. Apple GPUs run FP16
    # at the FP32 rate (no separate matrix units before M5), but only FP32 is printed.
    DevicePeak(
        name="Apple M1 Ultra",
        pattern=r"M1 Ultra",
        flops={"float32": 21 * T},
        memory_bandwidth=800 * GB_S,
        source="Apple newsroom, 'Apple unveils M1 Ultra' (2022-03)",
    ),
    DevicePeak(
        name="Apple M1 Max",
        pattern=r"M1 Max",
        flops={"float32": 10.4 * T},
        memory_bandwidth=400 * GB_S,
        source="Apple newsroom, 'Introducing M1 Pro and M1 Max' (2021-10)",
    ),
    DevicePeak(
        name="Apple M1 Pro",
        pattern=r"M1 Pro",
        flops={"float32": 5.2 * T},
        memory_bandwidth=200 * GB_S,
        source="Apple newsroom, 'Introducing M1 Pro and M1 Max' (2021-10)",
    ),
    DevicePeak(
        name="Apple M1",
        pattern=r"\bM1\b",
        flops={"float32": 2.6 * T},
        memory_bandwidth=68.25 * GB_S,
        source="Apple M1 announcement (2020-11): 2.6 TFLOPS; LPDDR4X-4266 128-bit",
    ),
    DevicePeak(
        name="Apple M2 Ultra",
        pattern=r"M2 Ultra",
        flops={"float32": 27.2 * T},
        memory_bandwidth=800 * GB_S,
        source="Apple newsroom, 'Apple introduces M2 Ultra' (2023-06)",
    ),
    DevicePeak(
        name="Apple M2 Max",
        pattern=r"M2 Max",
        flops={"float32": 13.6 * T},
        memory_bandwidth=400 * GB_S,
        source="Apple newsroom, 'Apple unveils M2 Pro and M2 Max' (2023-01)",
    ),
    DevicePeak(
        name="Apple M2 Pro",
        pattern=r"M2 Pro",
        flops={"float32": 6.8 * T},
        memory_bandwidth=200 * GB_S,
        source="Apple newsroom, 'Apple unveils M2 Pro and M2 Max' (2023-01)",
    ),
    DevicePeak(
        name="Apple M2",
        pattern=r"\bM2\b",
        flops={"float32": 3.6 * T},
        memory_bandwidth=100 * GB_S,
        source="Apple newsroom, 'Apple unveils M2' (2022-06)",
    ),
    DevicePeak(
        name="Apple M3 Ultra",
        pattern=r"M3 Ultra",
        flops={},
        memory_bandwidth=819 * GB_S,
        source="Apple Mac Studio (2025) tech specs",
    ),
    DevicePeak(
        name="Apple M3 Max",
        pattern=r"M3 Max",
        flops={},
        memory_bandwidth=400 * GB_S,
        source="Apple MacBook Pro (Nov 2023) tech specs (40-core GPU; 300 GB/s binned)",
    ),
    DevicePeak(
        name="Apple M3 Pro",
        pattern=r"M3 Pro",
        flops={},
        memory_bandwidth=150 * GB_S,
        source="Apple MacBook Pro (Nov 2023) tech specs",
    ),
    DevicePeak(
        name="Apple M3",
        pattern=r"\bM3\b",
        flops={},
        memory_bandwidth=100 * GB_S,
        source="Apple MacBook Pro (Nov 2023) tech specs",
    ),
    DevicePeak(
        name="Apple M4 Max",
        pattern=r"M4 Max",
        flops={},
        memory_bandwidth=546 * GB_S,
        source="Apple newsroom, M4 Pro and M4 Max (2024-10) (40-core GPU; 410 GB/s binned)",
    ),
    DevicePeak(
        name="Apple M4 Pro",
        pattern=r"M4 Pro",
        flops={},
        memory_bandwidth=273 * GB_S,
        source="Apple newsroom, M4 Pro and M4 Max (2024-10)",
    ),
    DevicePeak(
        name="Apple M4",
        pattern=r"\bM4\b",
        flops={},
        memory_bandwidth=120 * GB_S,
        source="Apple newsroom, iMac/Mac mini with M4 (2024-10)",
    ),
)


def lookup(device_name: str, table: tuple[DevicePeak, ...] = PEAK_TABLE) -> DevicePeak | None:
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


def table_ceilings(device_name: str) -> Ceilings:
    """The table's ceilings for `device_name` (empty when the device is not listed)."""
    row = lookup(device_name)
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
