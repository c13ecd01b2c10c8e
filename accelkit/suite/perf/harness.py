"""What every perf case shares: sizes per device, the ceilings, measuring and recording.

Sizes scale with the device (`SIZE_TIERS`): small on a CPU, so the whole perf suite
finishes in minutes on a 2-core machine; large on a data-centre GPU, so a GEMM fills it
(8192^3 bfloat16 on an H100/H200). The tier is chosen from the torch device type and the
device's memory, once per process, at collection time (case ids carry the sizes).

All timing goes through `accelkit.suite.perf.timing` (one timing module). Each metric carries
`value` (median), `unit`, `higher_is_better`, `samples`, `iqr`, `iqr_over_median`,
`noisy`, the timer used, how it was measured (`method`: timer, threads, cache state:
rotated inputs or reused ones) and, where the device's ceiling is known, `peak`,
`peak_fraction` and `peak_source` ("table" or "measured", see `accelkit.backends.peaks`).

torch is imported inside functions only: collecting the suite on a machine without a
device must not initialise one.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from accelkit.backends.peaks import Ceilings
from accelkit.suite.perf.timing import Measurement, Timer
from accelkit.suite.run.environment import PERF_THREADS_ENV
from accelkit.suite.run.request import DEFAULT_CPU_THREADS

THREADS_ENV = PERF_THREADS_ENV
"""Intra-op threads for the perf cases, set by the runner from `accelkit test --threads`
(`RunRequest.perf_threads`): overrides the tier's default (`SizeTier.threads`, used when
pytest runs the cases directly); 0 means torch's own choice. On the CPU tier the default
is `DEFAULT_CPU_THREADS` (1; why: its docstring)."""

GIB = 1 << 30
MIB = 1 << 20
KIB = 1 << 10


@dataclass(frozen=True)
class TimingOptions:
    """`Timer.blocked_autorange` options for one tier."""

    min_samples: int = 10
    max_samples: int = 100
    min_run_time: float = 0.2
    max_run_time: float = 1.0
    min_block_time: float = 1e-3
    interleaved_rounds: int = 12


@dataclass(frozen=True)
class SizeTier:
    """The problem sizes of every perf case on one class of device."""

    name: str
    gemm_square: tuple[int, ...]
    gemm_llm: tuple[tuple[int, int, int], ...]
    """(m, n, k): m tokens through a k -> n projection."""
    gemv: tuple[tuple[int, int], ...]
    """(out_features, in_features) of a decode-step F.linear with batch 1."""
    stream_elements: int
    """float32 elements of each copy/triad/reduction operand."""
    rows_cols: tuple[int, int]
    """softmax / layer_norm input."""
    activation_dtype: str
    sdpa: tuple[int, int, int, int]
    """(batch, heads, sequence, head_dim)."""
    block: tuple[int, int, int, int]
    """transformer block: (batch, sequence, d_model, heads)."""
    compile_graphs: int
    """distinct graphs compiled per compile-latency process (one sample each)."""
    threads: int | None
    """torch intra-op threads for the cases (None: torch's default); see THREADS_ENV."""
    compile_threads: int | None
    """TORCHINDUCTOR_COMPILE_THREADS for compile-latency processes (None: Inductor's
    default). 1 on a small CPU: a pool of compile workers costs more than it saves there."""
    graph_chain: tuple[int, int]
    """graph replay: (ops per chain, elements per op)."""
    transfer_bytes: int
    all_reduce_bytes: tuple[int, ...]
    ceiling_gemm: int
    ceiling_copy_elements: int
    rotate_bytes: int
    """Rotate input sets until their total reaches this (caches cannot serve them)."""
    timing: TimingOptions
    rotate_past_llc: bool = False
    """Memory-bound cases rotate through at least 4x the host's last-level cache instead
    (`accelkit.suite.perf.rotation.memory_working_set`): the host tier."""


SIZE_TIERS: dict[str, SizeTier] = {
    # A small, shared CPU (2 cores here, and CI runners). Calls are kept short (tens to
    # hundreds of microseconds) and timed in short blocks: on a loaded machine a block
    # longer than the scheduler's time slice is nearly always stretched by other
    # processes, so long blocks make the median follow the machine's load; short ones keep
    # most samples clean (measured here: 128^3 GEMM IQR/median 1-2% with 0.1 ms blocks,
    # 7-12% with 1 ms blocks). Each call of a memory case moves 1-8 MiB, but its sets
    # rotate through 4x the last-level cache (`memory_working_set`), so it reads memory.
    "host": SizeTier(
        name="host",
        gemm_square=(128,),
        gemm_llm=((16, 512, 256),),
        gemv=((1024, 512), (2048, 512)),
        stream_elements=1 << 18,
        rows_cols=(128, 1024),
        activation_dtype="float32",
        sdpa=(1, 4, 128, 32),
        block=(1, 32, 128, 4),
        compile_graphs=3,
        threads=DEFAULT_CPU_THREADS,
        compile_threads=1,
        graph_chain=(32, 1024),
        transfer_bytes=64 * MIB,
        all_reduce_bytes=(16 * KIB, 256 * KIB, 4 * MIB),
        ceiling_gemm=768,
        ceiling_copy_elements=1 << 24,
        rotate_bytes=8 * MIB,
        rotate_past_llc=True,
        timing=TimingOptions(
            min_samples=20,
            max_samples=200,
            min_run_time=0.2,
            max_run_time=0.8,
            min_block_time=1e-4,
            interleaved_rounds=20,
        ),
    ),
    # Accelerators with less than 60 GiB: consumer GPUs, Arc B-series, Apple.
    "gpu-small": SizeTier(
        name="gpu-small",
        gemm_square=(4096,),
        gemm_llm=((2048, 11008, 4096),),
        gemv=((4096, 4096), (11008, 4096)),
        stream_elements=1 << 26,
        rows_cols=(8192, 4096),
        activation_dtype="bfloat16",
        sdpa=(4, 32, 2048, 128),
        block=(4, 512, 1024, 16),
        compile_graphs=6,
        threads=None,
        compile_threads=None,
        graph_chain=(64, 4096),
        transfer_bytes=256 * MIB,
        all_reduce_bytes=(1 * MIB, 16 * MIB, 64 * MIB),
        ceiling_gemm=4096,
        ceiling_copy_elements=1 << 26,
        rotate_bytes=256 * MIB,
        timing=TimingOptions(min_samples=20, min_run_time=0.3, max_run_time=2.0),
    ),
    # Data-centre GPUs (H100/H200/B200, MI300X+, Max 1550): big enough to fill them.
    "gpu-large": SizeTier(
        name="gpu-large",
        gemm_square=(8192,),
        gemm_llm=((4096, 28672, 8192),),
        gemv=((8192, 8192), (28672, 8192)),
        stream_elements=1 << 28,
        rows_cols=(16384, 8192),
        activation_dtype="bfloat16",
        sdpa=(8, 32, 4096, 128),
        block=(8, 1024, 2048, 16),
        compile_graphs=6,
        threads=None,
        compile_threads=None,
        graph_chain=(64, 4096),
        transfer_bytes=1 * GIB,
        all_reduce_bytes=(1 * MIB, 16 * MIB, 256 * MIB),
        ceiling_gemm=8192,
        ceiling_copy_elements=1 << 28,
        rotate_bytes=512 * MIB,
        timing=TimingOptions(min_samples=20, min_run_time=0.5, max_run_time=3.0),
    ),
}

LARGE_DEVICE_BYTES = 60 * GIB

DTYPE_NAMES = ("float32", "tfloat32", "bfloat16", "float16", "float8")


def torch_dtype(name: str) -> Any:
    """The torch dtype of a size-table dtype name (tfloat32 computes in float32)."""
    import torch

    if name == "tfloat32":
        return torch.float32
    if name == "float8":
        return torch.float8_e4m3fn  # see float8_dtype() for the one a device's GEMMs take
    return getattr(torch, name)


def element_size(name: str) -> int:
    return {"float32": 4, "tfloat32": 4, "bfloat16": 2, "float16": 2, "float8": 1}[name]


@functools.cache
def device_description(backend: str) -> tuple[str, str, int | None]:
    """(torch device type, device name, memory bytes) of `backend`'s first device; memory
    is None for a device in host memory."""
    from accelkit import backends

    spec = backends.get(backend)
    devices = spec.devices()
    if not devices:
        return spec.torch_device_type, backend, None
    memory = None if spec.host_memory else devices[0].memory_bytes
    return spec.torch_device_type, devices[0].name, memory


def tier_for(host_memory: bool, memory_bytes: int | None) -> SizeTier:
    """The sizes for a device: the host tier for the CPU, else by the device's memory."""
    if host_memory:
        return SIZE_TIERS["host"]
    if memory_bytes is not None and memory_bytes >= LARGE_DEVICE_BYTES:
        return SIZE_TIERS["gpu-large"]
    return SIZE_TIERS["gpu-small"]


@functools.cache
def tier_for_backend(backend: str) -> SizeTier:
    from accelkit import backends

    _, _, memory = device_description(backend)
    return tier_for(backends.get(backend).host_memory, memory)


def configure_threads(tier: SizeTier) -> int | None:
    """Apply `ACCELKIT_PERF_THREADS`, else the tier's default, to torch; returns the count
    set (None: torch's default was kept)."""
    value = os.environ.get(THREADS_ENV, "").strip()
    threads = int(value) if value else tier.threads
    if not threads or threads < 1:
        return None
    import torch

    torch.set_num_threads(threads)
    return threads


def metric_fields(metric: dict[str, Any]) -> tuple[float, str, bool, list[float], dict[str, Any]]:
    """Split a `Measurement.*_metric()` dict into record_metric's arguments."""
    rest = dict(metric)
    value = float(rest.pop("value"))
    unit = str(rest.pop("unit"))
    higher = bool(rest.pop("higher_is_better"))
    samples = [float(s) for s in rest.pop("samples")]
    return value, unit, higher, samples, rest


class PerfContext:
    """Per-worker state of the perf suite: device, sizes, ceilings, how to measure."""

    def __init__(self, backend: str, *, measure_ceilings: bool) -> None:
        from accelkit import backends

        self.backend = backend
        self.spec = backends.get(backend)
        """The backend's facts (accelkit.backends): collective backend, graph capture, ..."""
        self.device_type, self.device_name, self.memory_bytes = device_description(backend)
        self.tier = tier_for(self.spec.host_memory, self.memory_bytes)
        self.threads = configure_threads(self.tier)
        self.measure_ceilings = measure_ceilings
        self._table = backends.table_ceilings(self.device_name)
        self._measured_flops: dict[str, float | None] = {}
        self._measured_bandwidth: float | None = None

    # measuring --------------------------------------------------------------------------
    def timer(
        self,
        fn: Callable[..., object],
        *,
        args: Sequence[Any] = (),
        arg_sets: Sequence[Sequence[Any]] | None = None,
        on_host: bool = False,
    ) -> Timer:
        """A timer for `fn` on this device; `on_host`: work that runs on the host (the host
        canaries of `test_canary.py`), timed with the host clock on any device."""
        return Timer(fn, args=args, arg_sets=arg_sets, device=self.timer_device(on_host=on_host))

    def timer_device(self, *, on_host: bool = False) -> str | None:
        """The `Timer` device of this run's timers: None for the host clock."""
        return None if self.spec.host_memory or on_host else self.device_type

    def measure(
        self,
        fn: Callable[..., object],
        *,
        args: Sequence[Any] = (),
        arg_sets: Sequence[Sequence[Any]] | None = None,
        on_host: bool = False,
        **overrides: Any,
    ) -> Measurement:
        options = self.tier.timing
        kwargs: dict[str, Any] = {
            "min_samples": options.min_samples,
            "max_samples": options.max_samples,
            "min_run_time": options.min_run_time,
            "max_run_time": options.max_run_time,
            "min_block_time": options.min_block_time,
        }
        kwargs.update(overrides)
        timer = self.timer(fn, args=args, arg_sets=arg_sets, on_host=on_host)
        return timer.blocked_autorange(**kwargs)

    def method(self, measurement: Measurement) -> dict[str, Any]:
        """How `measurement` was taken, as the results file's `Metric.method` records it:
        its timer, the threads (None: torch's own choice) and whether the calls rotated
        through several input sets (cold caches) or reused one (warm)."""
        return {
            "timer": measurement.timer,
            "threads": self.threads,
            "cache": "rotated" if measurement.input_sets > 1 else "reused",
            "input_sets": measurement.input_sets,
            "input_bytes": measurement.input_bytes,
        }

    @property
    def scope(self) -> str:
        """Where the cases' work runs: "host" (a device in host memory) or "device"; recorded
        on throughput metrics with their `bound`, so `accelkit compare` can pick the canary
        of the same kind (`accelkit.results.canary`)."""
        return "host" if self.spec.host_memory else "device"

    def synchronize(self) -> None:
        from accelkit.suite.perf.timing import device_synchronize

        device_synchronize(self.device_type)()

    # ceilings ---------------------------------------------------------------------------
    @property
    def ceilings_source(self) -> str:
        return "measured" if self.measure_ceilings else "table"

    def _ceiling_keys(self) -> dict[str, Any]:
        if self.measure_ceilings:
            return {"peak_source": "measured"}
        return self._table.metric_keys()

    def peak_flops(self, dtype: str) -> tuple[float | None, dict[str, Any]]:
        if not self.measure_ceilings:
            return self._table.flops_for(dtype), self._ceiling_keys()
        if dtype not in self._measured_flops:
            self._measured_flops[dtype] = measure_gemm_ceiling(self, dtype)
        return self._measured_flops[dtype], self._ceiling_keys()

    def peak_bandwidth(self) -> tuple[float | None, dict[str, Any]]:
        if not self.measure_ceilings:
            return self._table.memory_bandwidth, self._ceiling_keys()
        if self._measured_bandwidth is None:
            self._measured_bandwidth = measure_copy_ceiling(self)
        return self._measured_bandwidth, self._ceiling_keys()

    @property
    def table(self) -> Ceilings:
        return self._table

    # recording --------------------------------------------------------------------------
    def emit(
        self,
        record_metric: Callable[..., None],
        name: str,
        metric: dict[str, Any],
        measurement: Measurement,
        **extra: Any,
    ) -> None:
        """Record one `Measurement.*_metric()` dict with the timer, thread count, how it
        was measured (`method`), noise warning and `extra` keys."""
        value, unit, higher, samples, rest = metric_fields(metric)
        rest["timer"] = measurement.timer
        if self.threads is not None:
            rest["threads"] = self.threads
        rest["method"] = self.method(measurement)
        if measurement.warning:
            rest["warning"] = measurement.warning
        rest.update(extra)
        record_metric(name, value, unit, higher, samples=samples, **rest)

    def record_latency(
        self, record_metric: Callable[..., None], name: str, measurement: Measurement, **extra: Any
    ) -> None:
        self.emit(record_metric, name, measurement.latency_metric(), measurement, **extra)

    def record_flops(
        self,
        record_metric: Callable[..., None],
        name: str,
        measurement: Measurement,
        flop_per_call: float,
        *,
        dtype: str | None,
        **extra: Any,
    ) -> None:
        peak, keys = self.peak_flops(dtype) if dtype else (None, {})
        metric = measurement.flops_metric(flop_per_call, peak=peak)
        if peak is not None:
            extra = {**keys, **extra}
        extra = {"bound": "compute", "scope": self.scope, **extra}
        self.emit(record_metric, name, metric, measurement, **extra)

    def record_ratio(
        self,
        record_metric: Callable[..., None],
        name: str,
        numerator: Measurement,
        denominator: Measurement,
        **extra: Any,
    ) -> None:
        """A speedup (unit "x", higher is better) from two interleaved measurements: its
        samples are the per-round ratios numerator[i] / denominator[i]."""
        ratios = tuple(a / b for a, b in zip(numerator.samples, denominator.samples, strict=True))
        metric = Measurement(samples=ratios, timer=numerator.timer).latency_metric()
        metric.update(unit="x", higher_is_better=True)
        metric.pop("calls_per_sample", None)
        value, unit, higher, samples, rest = metric_fields(metric)
        rest["method"] = self.method(numerator)
        rest.update(extra)
        record_metric(name, value, unit, higher, samples=samples, **rest)

    def record_bandwidth(
        self,
        record_metric: Callable[..., None],
        name: str,
        measurement: Measurement,
        bytes_per_call: float,
        *,
        against_memory_peak: bool = True,
        **extra: Any,
    ) -> None:
        peak, keys = self.peak_bandwidth() if against_memory_peak else (None, {})
        metric = measurement.bandwidth_metric(bytes_per_call, peak=peak)
        if peak is not None:
            extra = {**keys, **extra}
        if against_memory_peak:  # a transfer or a collective is not bound by this memory
            extra = {"bound": "memory", "scope": self.scope, **extra}
        self.emit(record_metric, name, metric, measurement, **extra)


# ---------------------------------------------------------------------------------------
# Operations shared by the cases and the ceilings


def gemm_operands(
    dtype: str, m: int, n: int, k: int, device: str, sets: int
) -> list[tuple[Any, ...]]:
    """Rotating operand sets for a (m x k) @ (k x n) GEMM of `dtype`."""
    import torch

    out: list[tuple[Any, ...]] = []
    for _ in range(sets):
        if dtype == "float8":
            f8 = float8_dtype(device)
            a = torch.randn(m, k, device=device).to(f8)
            # _scaled_mm wants the second operand column-major.
            b = torch.randn(n, k, device=device).to(f8).t()
            scale = torch.ones((), device=device)
            out.append((a, b, scale, scale))
        else:
            t = torch_dtype(dtype)
            out.append(
                (
                    torch.randn(m, k, device=device, dtype=t),
                    torch.randn(k, n, device=device, dtype=t),
                )
            )
    return out


FLOAT8_CANDIDATES = ("float8_e4m3fn", "float8_e4m3fnuz")
"""OCP e4m3 first; MI300-class (gfx942) GEMMs take the "fnuz" variant instead."""


@functools.cache
def float8_dtype(device_type: str) -> Any:
    """The e4m3 dtype `torch._scaled_mm` accepts on `device_type` (e4m3fn if none does)."""
    import torch

    for name in FLOAT8_CANDIDATES:
        dtype = getattr(torch, name, None)
        if dtype is None:
            continue
        try:
            a = torch.ones(16, 16, device=device_type).to(dtype)
            scale = torch.ones((), device=device_type)
            torch._scaled_mm(a, a.t(), scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16)
        except (RuntimeError, NotImplementedError, TypeError):
            continue
        return dtype
    return torch.float8_e4m3fn


def gemm_function(dtype: str) -> Callable[..., object]:
    import torch

    if dtype == "float8":

        def scaled(a: Any, b: Any, sa: Any, sb: Any) -> object:
            return torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)

        return scaled
    return torch.mm


def gemm_unsupported(dtype: str, device_type: str, *, tf32: bool) -> str | None:
    """Why `dtype` GEMMs cannot run on `device_type` with this torch, else None; `tf32`:
    whether the backend has a TF32 mode (`Backend.tf32`)."""
    import torch

    if dtype == "tfloat32" and not tf32:
        return (
            f"TF32 is a tensor-core mode (torch.backends.cuda.matmul.allow_tf32); "
            f"device {device_type} runs float32 GEMMs as float32 (see the float32 case)"
        )
    if dtype == "float8":
        if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
            return f"torch {torch.__version__} has no torch._scaled_mm / float8_e4m3fn"
        try:
            ((a, b, sa, sb),) = gemm_operands("float8", 16, 16, 16, device_type, 1)
            gemm_function("float8")(a, b, sa, sb)
        except (RuntimeError, NotImplementedError, TypeError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            return f"torch._scaled_mm (float8 e4m3) unsupported on {device_type}: {first[:200]}"
    return None


@contextlib.contextmanager
def tf32_mode(dtype: str) -> Iterator[None]:
    """Allow TF32 GEMMs inside the block when `dtype` is tfloat32; restore after."""
    if dtype != "tfloat32":
        yield
        return
    import torch

    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous


def measure_gemm_ceiling(ctx: PerfContext, dtype: str) -> float | None:
    """FLOP/s of a large square GEMM of `dtype` here (None where it cannot run)."""
    if gemm_unsupported(dtype, ctx.device_type, tf32=ctx.spec.tf32):
        return None
    n = ctx.tier.ceiling_gemm
    operands = gemm_operands(dtype, n, n, n, ctx.device_type, 1)
    with tf32_mode(dtype):
        m = ctx.measure(
            gemm_function(dtype),
            args=operands[0],
            min_samples=5,
            max_run_time=min(2.0, ctx.tier.timing.max_run_time),
        )
    # The best sustained block, not the median: a ceiling is what the device can do.
    return 2.0 * n**3 / min(m.samples)


def measure_copy_ceiling(ctx: PerfContext) -> float:
    """B/s of a large device-to-device copy here (read + write counted)."""
    import torch

    n = ctx.tier.ceiling_copy_elements
    src = torch.randn(n, device=ctx.device_type)
    dst = torch.empty_like(src)
    m = ctx.measure(
        dst.copy_, args=(src,), min_samples=5, max_run_time=min(2.0, ctx.tier.timing.max_run_time)
    )
    return 2.0 * 4 * n / min(m.samples)
