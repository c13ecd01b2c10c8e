"""The device peaks: each backend's rows, joined by the registry into one table in which the
first match wins (the perf suite's `peak_source: "table"` ceilings)."""

from __future__ import annotations

import pytest

from accelkit import backends
from accelkit.backends import PEAK_TABLE, device_peak, table_ceilings


@pytest.mark.parametrize(
    ("device_name", "entry"),
    [
        ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM"),
        ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe"),
        ("NVIDIA H100 NVL", "NVIDIA H100 NVL"),
        ("NVIDIA H200", "NVIDIA H200 SXM"),
        ("NVIDIA H200 NVL", "NVIDIA H200 NVL"),
        ("NVIDIA B200", "NVIDIA B200"),
        ("AMD Instinct MI300X", "AMD Instinct MI300X"),
        ("AMD Instinct MI325X", "AMD Instinct MI325X"),
        ("AMD Instinct MI355X", "AMD Instinct MI355X"),
        ("Intel(R) Data Center GPU Max 1550", "Intel Data Center GPU Max 1550"),
        ("Intel(R) Data Center GPU Max 1100", "Intel Data Center GPU Max 1100"),
        ("Intel(R) Arc(TM) B580 Graphics", "Intel Arc B580"),
        ("Intel(R) Arc(TM) B570 Graphics", "Intel Arc B570"),
        ("Apple M2 Max", "Apple M2 Max"),
        ("Apple M2", "Apple M2"),
        ("Apple M1 Ultra", "Apple M1 Ultra"),
        ("Apple M4 Pro", "Apple M4 Pro"),
    ],
)
def test_peak_lookup(device_name: str, entry: str) -> None:
    row = device_peak(device_name)
    assert row is not None and row.name == entry


def test_peak_table_is_sane() -> None:
    assert device_peak("AMD EPYC 7763 64-Core Processor") is None
    assert device_peak("NVIDIA GB200") is None  # not a B200 (different power and clocks)
    for row in PEAK_TABLE:
        assert row.source, row.name
        assert row.memory_bandwidth is None or 5e10 <= row.memory_bandwidth <= 3e13, row.name
        for dtype, flops in row.flops.items():
            assert dtype in {"float32", "tfloat32", "bfloat16", "float16", "float8"}
            assert 1e12 <= flops <= 1e16, (row.name, dtype)
        # Dense tensor-core rates: TF32 < BF16 <= FP8 where all are listed.
        f = row.flops
        if "tfloat32" in f and "bfloat16" in f:
            assert f["tfloat32"] < f["bfloat16"], row.name
        if "float8" in f and "bfloat16" in f:
            assert f["float8"] >= f["bfloat16"], row.name
    h200 = table_ceilings("NVIDIA H200")
    assert h200.flops_for("bfloat16") == pytest.approx(989.4e12)
    assert h200.memory_bandwidth == pytest.approx(4.8e12)
    assert h200.metric_keys() == {"peak_source": "table", "peak_entry": "NVIDIA H200 SXM"}
    rubin = table_ceilings("NVIDIA Rubin")
    assert rubin.preliminary and rubin.metric_keys()["peak_preliminary"] is True


def test_each_backend_holds_its_devices_peaks() -> None:
    vendor = {"cuda": "NVIDIA", "rocm": "AMD", "xpu": "Intel", "mps": "Apple"}
    for backend in backends.all_backends():
        assert all(row.name.startswith(vendor[backend.name]) for row in backend.peaks)
    assert backends.get("cpu").peaks == ()
    # One table in the registry's order: NVIDIA, AMD, Intel, Apple.
    assert tuple(row for b in backends.all_backends() for row in b.peaks) == PEAK_TABLE
