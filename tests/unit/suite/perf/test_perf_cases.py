"""The perf suite: the size tiers and a metric's peak keys (fast; the peak table itself:
tests/unit/backends/test_peaks.py), and the perf cases of the session's one real CPU run of
the whole suite (slow, `cpu_suite_run` in tests/conftest.py): every
case passes or skips with a reason, every metric carries samples, a unit and a direction.
How long the perf suite takes: benchmarks/bench_perf_suite.py (budget: 3 minutes)."""

from __future__ import annotations

import math
import os
from typing import Any

import pytest

from accelkit.backends import table_ceilings
from accelkit.suite.perf.harness import SIZE_TIERS, PerfContext, tier_for
from accelkit.suite.perf.timing import Measurement
from tests.helpers import SUITE_RUN_PASSES, SUITE_TESTS_TIMEOUT_S, SuiteRun


def test_size_tiers() -> None:
    assert tier_for(True, None).name == "host"
    assert tier_for(False, 141 * (1 << 30)).name == "gpu-large"
    assert tier_for(False, 12 * (1 << 30)).name == "gpu-small"
    assert tier_for(False, None).name == "gpu-small"
    assert SIZE_TIERS["gpu-large"].gemm_square == (8192,)
    tier = SIZE_TIERS["host"]
    assert tier.timing.min_block_time <= 1e-4  # short blocks: see the tier's comment


def test_recorded_metric_keys_with_a_table_peak() -> None:
    perf = PerfContext("cpu", measure_ceilings=False)
    perf._table = table_ceilings("NVIDIA H100 80GB HBM3")
    recorded: dict[str, dict[str, Any]] = {}

    def record_metric(
        name: str,
        value: float,
        unit: str,
        higher: bool,
        samples: list[float] | None = None,
        **extra: Any,
    ) -> None:
        recorded[name] = {
            "value": value,
            "unit": unit,
            "higher_is_better": higher,
            "samples": samples,
            **extra,
        }

    m = Measurement(samples=(1e-3, 2e-3, 4e-3), timer="fake")
    perf.record_flops(record_metric, "flops", m, 989.4e9, dtype="bfloat16")
    perf.record_latency(record_metric, "latency", m)
    flops = recorded["flops"]
    assert flops["unit"] == "FLOP/s" and flops["higher_is_better"] is True
    assert flops["value"] == pytest.approx(989.4e9 / 2e-3)
    assert flops["peak_fraction"] == pytest.approx(0.5)
    assert flops["peak_source"] == "table" and flops["peak_entry"] == "NVIDIA H100 SXM"
    assert flops["noisy"] is True and "warning" in flops
    assert flops["bound"] == "compute" and flops["scope"] == "host"  # for compare's canaries
    latency = recorded["latency"]
    assert latency["unit"] == "s" and latency["higher_is_better"] is False
    assert "peak_fraction" not in latency


# --------------------------------------------------------------------------------------
# One real run of the whole perf suite on the CPU


@pytest.fixture(scope="module")
def perf_run(cpu_suite_run: SuiteRun) -> dict[str, Any]:
    """The results file of the shared run, with only its perf cases."""
    run = cpu_suite_run
    assert run.returncode == 0, (run.stdout[-3000:], run.stderr[-3000:])
    results = run.data()
    results["cases"] = [c for c in results["cases"] if c["suite"] == "perf"]
    return results


@pytest.mark.slow
@pytest.mark.timeout(SUITE_TESTS_TIMEOUT_S)
def test_every_perf_case_passes_or_skips_with_a_reason(perf_run: dict[str, Any]) -> None:
    cases = perf_run["cases"]
    assert cases
    for case in cases:
        assert case["status"] in ("passed", "skipped"), (case["id"], case["message"])
        if case["status"] == "skipped":
            assert len(case["message"]) > 10, case["id"]
        else:
            assert case["metrics"], case["id"]
    ids = {c["id"] for c in cases}
    for expected in (
        "perf/gemm/float32/128x128x128",
        "perf/gemm/bfloat16/16x512x256",
        "perf/gemv/float32/1x1024x512",
        "perf/memory/stream/copy/float32/262144",
        "perf/memory/stream/triad/float32/262144",
        "perf/attention/sdpa/float32/b1h4s128d32/causal",
        "perf/compile/latency",
        "perf/collectives/all_reduce",
        "perf/graphs/replay_overhead",
        "perf/transfer/h2d/pinned/67108864",
        "perf/canary/host/copy",
        "perf/canary/host/gemm",
    ):
        assert expected in ids, expected
    assert not any(i.startswith("perf/canary/device/") for i in ids)  # the CPU is the host
    # The canaries run first in each pass, and carry the kind they calibrate.
    assert [c["id"] for c in cases[:2]] == ["perf/canary/host/copy", "perf/canary/host/gemm"]
    by_id = {c["id"]: c for c in cases}
    assert by_id["perf/canary/host/copy"]["metrics"]["bandwidth"]["canary"] == "memory"
    assert by_id["perf/canary/host/gemm"]["metrics"]["flops"]["canary"] == "compute"
    copy = by_id["perf/memory/stream/copy/float32/262144"]["metrics"]["bandwidth"]
    assert (copy["bound"], copy["scope"]) == ("memory", "host")
    # Host ranks measure on one CPU (collectives.shared_cpu), and say so.
    if len(os.sched_getaffinity(0)) > 1:
        for name, metric in by_id["perf/collectives/all_reduce"]["metrics"].items():
            assert metric["rank_cpus"] == 1, name
    skipped = {c["id"]: c["message"] for c in cases if c["status"] == "skipped"}
    assert "no graph replay" in skipped["perf/graphs/replay_overhead"]
    assert "cpu" in skipped["perf/transfer/h2d/pinned/67108864"]


@pytest.mark.slow
@pytest.mark.timeout(SUITE_TESTS_TIMEOUT_S)
def test_every_metric_has_samples_unit_and_direction(perf_run: dict[str, Any]) -> None:
    for case in perf_run["cases"]:
        for name, metric in case["metrics"].items():
            where = f"{case['id']}:{name}"
            assert metric["unit"] in ("s", "FLOP/s", "B/s", "x"), where
            assert isinstance(metric["higher_is_better"], bool), where
            assert metric["higher_is_better"] == (metric["unit"] != "s"), where
            samples = metric["samples"]
            minimum = 3 if case["id"] == "perf/compile/latency" else 10
            assert len(samples) >= minimum, where
            assert all(math.isfinite(s) and s > 0 for s in samples), where
            assert "iqr" in metric and isinstance(metric["noisy"], bool), where
            # Every pass is a sample group; the compile-latency case runs in the first only.
            passes = 1 if case["id"] == "perf/compile/latency" else SUITE_RUN_PASSES
            assert len(set(metric["sample_groups"])) == passes, where
            if metric["unit"] in ("FLOP/s", "B/s") and "peak_fraction" in metric:
                assert metric["peak_source"] == "measured", where
                assert metric["peak_fraction"] > 0, where
    assert perf_run["run"]["passes"] == SUITE_RUN_PASSES


@pytest.mark.slow
@pytest.mark.timeout(SUITE_TESTS_TIMEOUT_S)
def test_measured_ceilings_give_peak_fractions(perf_run: dict[str, Any]) -> None:
    by_id = {c["id"]: c for c in perf_run["cases"]}
    gemm = by_id["perf/gemm/float32/128x128x128"]["metrics"]["flops"]
    copy = by_id["perf/memory/stream/copy/float32/262144"]["metrics"]["bandwidth"]
    for metric in (gemm, copy):
        assert metric["peak_source"] == "measured"
        assert 0 < metric["peak_fraction"] < 20  # a noisy machine can beat its own ceiling
