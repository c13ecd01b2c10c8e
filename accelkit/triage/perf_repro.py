"""What a perf case's reproducer needs: the case's op, sizes and timing, from the record.

`perf_spec` turns a perf case of a results file (its `Case.repro` record of kind "perf",
its case id and its metrics' tags) into the `perf` entry of the reproducer's CASE: which
op (`family` and its sizes and dtype), how many rotating input sets, the timing options of
the run's size tier (`accelkit.suite.perf.harness.SIZE_TIERS`), the timer's device, the
intra-op thread count the run recorded, and each recorded metric (median, samples, work per
call). The reproducer (`accelkit.triage.perf_replay`, embedded with
`accelkit.suite.perf.timing`) rebuilds the op from it and times it with `Timer.blocked_autorange`
and these options: the perf suite's own timing code.

Covered: GEMM, gemv, the memory kernels (copy, triad, sum, softmax, layer_norm), attention
and the canaries. Not covered (BadInput, exit 2, naming why): compile latency, collectives,
graph replay and transfers, which need other processes, ranks or capture machinery.
"""

from __future__ import annotations

from typing import Any

from accelkit.errors import BadInput
from accelkit.results.model import Case, Results

UNSUPPORTED: dict[str, str] = {
    "compile": (
        "compile latency is timed in fresh worker processes with cold compiler caches, "
        "which one reproducer file cannot recreate"
    ),
    "collectives": "collectives need several rank processes and a process group",
    "graphs": "graph replay needs the backend's graph capture around the timed chain",
    "transfer": (
        "host-device transfers are not reproduced standalone (they need pinned host "
        "buffers and a device outside host memory; on the CPU there is no transfer at all)"
    ),
}
"""Why the perf cases of a family (`perf/<family>/...`) have no standalone reproducer."""


def check_reproducible(case_id: str) -> None:
    """BadInput naming why, for a perf case of a family that cannot be timed standalone."""
    family = case_id.split("/")[1] if case_id.count("/") >= 1 else ""
    if family in UNSUPPORTED:
        raise BadInput(f"{case_id}: no standalone perf reproducer: {UNSUPPORTED[family]}")


def _tier(results: Results) -> Any:
    from accelkit import backends
    from accelkit.suite.perf.harness import tier_for

    try:
        spec = backends.get(results.run.device)
    except Exception as exc:  # an unknown backend name in the file
        raise BadInput(f"the run's device {results.run.device!r}: {exc}") from None
    memory = None
    entry = results.env.get("backends")
    if isinstance(entry, dict):
        mine = entry.get(results.run.device)
        if isinstance(mine, dict) and mine.get("devices"):
            value = mine["devices"][0].get("memory_bytes")
            memory = int(value) if isinstance(value, (int, float)) else None
    return spec, tier_for(spec.host_memory, memory)


def _tag(case: Case, key: str) -> Any:
    for metric in case.metrics.values():
        extra = metric.model_extra or {}
        if key in extra:
            return extra[key]
    return None


def _timing(options: Any) -> dict[str, Any]:
    return {
        "min_samples": options.min_samples,
        "max_samples": options.max_samples,
        "min_run_time": options.min_run_time,
        "max_run_time": options.max_run_time,
        "min_block_time": options.min_block_time,
    }


def _dtype_from_id(case_id: str, expected: str) -> str:
    if f"/{expected}/" not in case_id:
        raise BadInput(
            f"{case_id}: recorded with another size tier than this device's "
            f"({expected} expected in the id); not reproducible from this record"
        )
    return expected


def perf_spec(results: Results, case: Case) -> dict[str, Any]:
    """The `perf` entry of a perf case's reproducer; BadInput when it has none."""
    try:
        return _perf_spec(results, case)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise BadInput(
            f"{case.id}: the record or the metrics' tags lack what rebuilds the case "
            f"({type(exc).__name__}: {exc}); not reproducible from this results file"
        ) from None


def _perf_spec(results: Results, case: Case) -> dict[str, Any]:
    from accelkit.suite.perf.harness import SIZE_TIERS, element_size
    from accelkit.suite.perf.rotation import memory_rotation_count, rotation_count
    from accelkit.suite.session.params import decode_param

    record = case.repro
    assert record is not None
    check_reproducible(case.id)
    if not case.metrics:
        raise BadInput(f"{case.id}: the results file has no metrics for this case to compare")
    spec, tier = _tier(results)
    params = record.params
    shape = _tag(case, "shape")
    timing = _timing(tier.timing)
    on_host = False
    out: dict[str, Any] = {}
    function = record.function
    if function == "test_gemm":
        dtype = str(decode_param(params["gemm_case"])[0])
        m, n, k = (int(v) for v in shape)
        sets = rotation_count((m * k + k * n) * element_size(dtype), tier)
        out = {"family": "gemm", "dtype": dtype, "shape": [m, n, k], "sets": sets}
    elif function == "test_gemv":
        dtype = _dtype_from_id(case.id, tier.activation_dtype)
        _, n, k = (int(v) for v in shape)
        sets = memory_rotation_count(n * k * element_size(dtype), tier, cap=16)
        out = {"family": "gemv", "dtype": dtype, "shape": [1, n, k], "sets": sets}
    elif function == "test_stream":
        n = int(_tag(case, "elements"))
        kernel = str(params["stream_case"])
        sets = memory_rotation_count(2 * 4 * n, tier)
        out = {"family": "stream", "kernel": kernel, "dtype": "float32", "elements": n}
        out["sets"] = sets
    elif function == "test_rows":
        dtype = _dtype_from_id(case.id, tier.activation_dtype)
        rows, cols = (int(v) for v in shape)
        sets = memory_rotation_count(2 * rows * cols * element_size(dtype), tier)
        kernel = str(params["row_case"])
        out = {"family": "rows", "kernel": kernel, "dtype": dtype, "shape": [rows, cols]}
        out["sets"] = sets
    elif function == "test_sdpa":
        dtype = _dtype_from_id(case.id, tier.activation_dtype)
        causal = params.get("sdpa_mask") == "causal"
        out = {"family": "sdpa", "dtype": dtype, "shape": [int(v) for v in shape]}
        out["causal"] = causal
    elif function == "test_canary":
        canary = str(params["canary"])
        size = int(_tag(case, "size"))
        on_host = canary.startswith("host/")
        if on_host:
            timing = _timing(SIZE_TIERS["host"].timing)
        out = {"family": "canary", "kernel": canary, "size": size}
        if canary == "host/copy":
            out["sets"] = memory_rotation_count(2 * 4 * size, SIZE_TIERS["host"])
    else:
        raise BadInput(
            f"{case.id}: no standalone perf reproducer for {record.file}::{function} "
            "(covered: GEMM, gemv, memory, attention and canary cases)"
        )
    # The perf cases record the intra-op threads they set; none recorded: torch's default.
    threads = _tag(case, "threads")
    out.update(
        tier=tier.name,
        timing=timing,
        timer_device=None if spec.host_memory or on_host else spec.torch_device_type,
        threads=int(threads) if threads else None,
        metrics={
            name: {
                "value": metric.value,
                "unit": metric.unit,
                "higher_is_better": metric.higher_is_better,
                "samples": list(metric.samples),
                "work_per_call": (metric.model_extra or {}).get("work_per_call"),
            }
            for name, metric in case.metrics.items()
        },
    )
    return out
