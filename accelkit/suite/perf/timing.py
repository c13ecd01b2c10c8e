"""Device-aware timing: the one measurement loop every perf case uses.

Modelled on `torch.utils.benchmark.Timer.blocked_autorange` (torch/utils/benchmark/utils/
timer.py and common.py):

1. Warm up: call the function with the measured arguments (every rotated argument set at
   least once), so lazy initialisation, autotuning and allocator growth are not timed.
2. Choose the inner repetitions (`number`): time blocks of growing size until one block
   lasts at least `min_block_time` and the timer's own overhead (an empty block) is under
   `MAX_TIMER_OVERHEAD` of it. These blocks double as more warm-up.
3. Collect samples: each sample is one block's time divided by `number` (seconds per call).
   Keep at least `min_samples`, and continue while the total time is under `min_run_time`
   or while IQR/median is at or above `IQR_WARN_THRESHOLD`, up to `max_samples` samples or
   `max_run_time` seconds.

How a block is timed depends on the device. On the CPU: `time.perf_counter` around the
block. On an accelerator: device events (`torch.Event(device, enable_timing=True)`)
recorded on the current stream around the block, then the end event is synchronised, so
asynchronous kernels are timed on the device's own clock. Where the backend has no timing
events, the device is synchronised before and after the block and `perf_counter` is used.
Both the clock and the synchronise function can be swapped (`Timer(clock=..., synchronize=
...)`), so tests drive a fake clock and assert exact statistics.

Rotating inputs: pass `arg_sets=[(a0, b0), (a1, b1), ...]` and each call takes the next
set, cycling, so operands that would fit in a cache are not served from it on every call.

In an interleaved A/B pass (`accelkit test --ab`), the two sides take turns: each
measurement, and each sample, first calls `accelkit.suite.session.lockstep.turn()`, so the other
side's sample comes between two of ours (a no-op in any other run). After such a turn one
untimed block runs before the sample: the other side's turn left caches and TLB cold, and
a cold 1 ms block measured a 1 MiB copy at 14-25 GB/s where warm blocks give 40-46. The
sample and that block run pinned to the CPU both sides share (`lockstep.pinned()`). A side
stops sampling when both sides' rules have enough (`lockstep.turn(enough)`), so both take
the same number of samples; the other side can keep it going up to `max_samples` or
`LOCKSTEP_RUN_TIME_FACTOR` times `max_run_time`.

torch is imported lazily, only for accelerator devices: timing a plain Python callable on
the CPU needs no torch at all.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any, Protocol

from accelkit.results.noise import IQR_GROSS_WARN_THRESHOLD, IQR_WARN_THRESHOLD
from accelkit.suite.session import lockstep

Clock = Callable[[], float]
"""Returns seconds from an arbitrary origin; only differences are used."""
Synchronize = Callable[[], None]
"""Blocks until the device has finished all queued work."""

# The timer's overhead (an empty block: clock reads, synchronisation, event records) must be
# at most this fraction of one block (torch.utils.benchmark aims for under 0.1%).
MAX_TIMER_OVERHEAD = 1e-3
MAX_NUMBER = 2**31 - 1

DEFAULT_WARMUP_CALLS = 3
DEFAULT_MIN_BLOCK_TIME = 1e-3
DEFAULT_MIN_SAMPLES = 5
DEFAULT_MAX_SAMPLES = 100
DEFAULT_MIN_RUN_TIME = 0.1
DEFAULT_MAX_RUN_TIME = 2.0
LOCKSTEP_RUN_TIME_FACTOR = 2.0
"""In lockstep, a side samples on while the other side's rule wants more, up to this many
times its own `max_run_time` (or `max_samples`)."""

SECONDS = "s"
FLOP_PER_SECOND = "FLOP/s"
BYTES_PER_SECOND = "B/s"


def _no_synchronize() -> None:
    return None


# ---------------------------------------------------------------------------------------
# Statistics of one measurement
# ---------------------------------------------------------------------------------------


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks: numpy's and torch.quantile's default."""
    position = q * (len(sorted_values) - 1)
    below = math.floor(position)
    above = min(below + 1, len(sorted_values) - 1)
    fraction = position - below
    return sorted_values[below] + (sorted_values[above] - sorted_values[below]) * fraction


def spread(samples: Sequence[float]) -> tuple[float, float, float]:
    """(p25, median, p75) of the samples."""
    ordered = sorted(samples)
    return _quantile(ordered, 0.25), _quantile(ordered, 0.5), _quantile(ordered, 0.75)


def _iqr_over_median(samples: Sequence[float]) -> float:
    p25, median, p75 = spread(samples)
    return (p75 - p25) / median if median > 0 else math.inf


@dataclass(frozen=True)
class Measurement:
    """Every sample of one timed function, in seconds per call, and their statistics."""

    samples: tuple[float, ...]
    """Seconds per call: one block's time divided by `number_per_sample`."""
    number_per_sample: int = 1
    """Calls in each timed block (the inner repetitions)."""
    warmup_calls: int = 0
    timer: str = ""
    """How the blocks were timed, e.g. "perf_counter" or "cuda events"."""
    input_sets: int = 1
    """Argument sets the calls rotated through (1: every call took the same arguments)."""
    input_bytes: int | None = None
    """Bytes of every set's array arguments together (None: none had `nbytes`)."""

    def __post_init__(self) -> None:
        if not self.samples:
            raise ValueError("a Measurement needs at least one sample")
        if self.number_per_sample < 1:
            raise ValueError(f"number_per_sample must be >= 1, got {self.number_per_sample}")

    @property
    def median(self) -> float:
        return spread(self.samples)[1]

    @property
    def mean(self) -> float:
        return math.fsum(self.samples) / len(self.samples)

    @property
    def p25(self) -> float:
        return spread(self.samples)[0]

    @property
    def p75(self) -> float:
        return spread(self.samples)[2]

    @property
    def iqr(self) -> float:
        p25, _, p75 = spread(self.samples)
        return p75 - p25

    @property
    def iqr_over_median(self) -> float:
        return _iqr_over_median(self.samples)

    @property
    def noisy(self) -> bool:
        """IQR/median at or above `IQR_WARN_THRESHOLD` (10%)."""
        return self.iqr_over_median >= IQR_WARN_THRESHOLD

    @property
    def grossly_noisy(self) -> bool:
        """IQR/median at or above `IQR_GROSS_WARN_THRESHOLD` (25%)."""
        return self.iqr_over_median >= IQR_GROSS_WARN_THRESHOLD

    @property
    def warning(self) -> str | None:
        """torch.utils.benchmark's warning text for a noisy measurement, else None."""
        ratio = self.iqr_over_median
        if ratio >= IQR_GROSS_WARN_THRESHOLD:
            cause = "This suggests significant environmental influence."
        elif ratio >= IQR_WARN_THRESHOLD:
            cause = "This could indicate system fluctuation."
        else:
            return None
        return f"Interquartile range is {ratio:.1%} of the median measurement. {cause}"

    def _spread_keys(self, samples: Sequence[float]) -> dict[str, Any]:
        p25, median, p75 = spread(samples)
        ratio = (p75 - p25) / median if median > 0 else math.inf
        return {
            "value": median,
            "samples": list(samples),
            "iqr": p75 - p25,
            "iqr_over_median": ratio,
            "noisy": ratio >= IQR_WARN_THRESHOLD,
            "calls_per_sample": self.number_per_sample,
        }

    def latency_metric(self) -> dict[str, Any]:
        """A results-file metric: seconds per call, lower is better."""
        metric = self._spread_keys(self.samples)
        metric.update(unit=SECONDS, higher_is_better=False)
        return metric

    def throughput_metric(
        self, work_per_call: float, unit: str, *, peak: float | None = None
    ) -> dict[str, Any]:
        """A results-file metric: `work_per_call / seconds` per sample, higher is better.

        `value` is the median of the per-sample rates. With `peak` (the device's ceiling in
        the same unit), `peak_fraction` is value / peak.
        """
        if work_per_call <= 0:
            raise ValueError(f"work_per_call must be positive, got {work_per_call}")
        rates = [work_per_call / sample for sample in self.samples]
        metric = self._spread_keys(rates)
        metric.update(unit=unit, higher_is_better=True, work_per_call=work_per_call)
        if peak is not None:
            if peak <= 0:
                raise ValueError(f"peak must be positive, got {peak}")
            metric.update(peak=peak, peak_fraction=metric["value"] / peak)
        return metric

    def flops_metric(self, flop_per_call: float, *, peak: float | None = None) -> dict[str, Any]:
        """FLOP/s; `peak` in FLOP/s."""
        return self.throughput_metric(flop_per_call, FLOP_PER_SECOND, peak=peak)

    def bandwidth_metric(
        self, bytes_per_call: float, *, peak: float | None = None
    ) -> dict[str, Any]:
        """Bytes per second; `peak` in B/s."""
        return self.throughput_metric(bytes_per_call, BYTES_PER_SECOND, peak=peak)


# ---------------------------------------------------------------------------------------
# Timing one block of calls
# ---------------------------------------------------------------------------------------


class BlockTimer(Protocol):
    """Times one block of work; `description` names how (it goes into the Measurement)."""

    @property
    def description(self) -> str: ...

    def time_block(self, run_block: Callable[[], None]) -> float:
        """Seconds that `run_block()` took on the device."""
        ...


@dataclass(frozen=True)
class HostClockTimer:
    """Synchronise, read the clock, run, synchronise, read the clock."""

    clock: Clock = time.perf_counter
    synchronize: Synchronize = _no_synchronize
    description: str = "perf_counter"

    def time_block(self, run_block: Callable[[], None]) -> float:
        self.synchronize()
        start = self.clock()
        run_block()
        self.synchronize()
        return self.clock() - start


@dataclass
class DeviceEventTimer:
    """Timing events recorded on the device's current stream around the block."""

    device: Any  # torch.device
    description: str = ""
    _events: tuple[Any, Any] = field(default=(None, None), repr=False)

    def __post_init__(self) -> None:
        import torch

        start = torch.Event(device=self.device, enable_timing=True)
        end = torch.Event(device=self.device, enable_timing=True)
        self._events = (start, end)
        if not self.description:
            self.description = f"{self.device.type} events"

    def time_block(self, run_block: Callable[[], None]) -> float:
        start, end = self._events
        start.record()
        run_block()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) / 1e3  # milliseconds


def on_host(device: Any) -> bool:
    """Whether `device` (a torch device or its name) is host memory, where work is done when
    the call returns: anything that is not torch's accelerator."""
    import torch

    accelerator = torch.accelerator.current_accelerator()
    return accelerator is None or torch.device(device).type != accelerator.type


def device_synchronize(device: Any) -> Synchronize:
    """A function that waits for all work queued on `device` (a torch device or its name;
    None: host memory, nothing to wait for)."""
    if device is None:
        return _no_synchronize
    import torch

    torch_device = torch.device(device)
    if on_host(torch_device):
        return _no_synchronize
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None and hasattr(accelerator, "synchronize"):

        def synchronize() -> None:
            accelerator.synchronize(torch_device)

        return synchronize
    module = getattr(torch, torch_device.type)

    def synchronize_module() -> None:
        module.synchronize()

    return synchronize_module


def block_timer_for(device: Any = None) -> BlockTimer:
    """The best block timer for `device` (a torch device type, `cuda:1`, or torch.device;
    None: host memory, timed without importing torch).

    Host memory: `perf_counter` alone. On an accelerator, device timing events when they work
    there, else synchronisation around `perf_counter`.
    """
    if device is None:
        return HostClockTimer()
    import torch

    torch_device = torch.device(device)
    if on_host(torch_device):
        return HostClockTimer()
    synchronize = device_synchronize(torch_device)
    try:
        timer = DeviceEventTimer(torch_device)
        synchronize()
        timer.time_block(_nothing)  # a backend without timing events fails here
    except (RuntimeError, AttributeError, NotImplementedError, TypeError, ValueError):
        return HostClockTimer(
            synchronize=synchronize, description=f"{torch_device.type} synchronize+perf_counter"
        )
    return timer


def _nothing() -> None:
    return None


# ---------------------------------------------------------------------------------------
# The timer
# ---------------------------------------------------------------------------------------


class Timer:
    """Times `fn(*args, **kwargs)` the way torch.utils.benchmark.Timer does, device-aware.

    Either `args` (one argument set) or `arg_sets` (several, rotated per call). The timing
    method: `block_timer` if given; else a host clock when `clock` or `synchronize` is
    given (the device's synchronise function by default); else `block_timer_for(device)`.
    """

    def __init__(
        self,
        fn: Callable[..., object],
        *,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        arg_sets: Sequence[Sequence[Any]] | None = None,
        device: Any = None,
        clock: Clock | None = None,
        synchronize: Synchronize | None = None,
        block_timer: BlockTimer | None = None,
        disable_gc: bool = True,
    ) -> None:
        if arg_sets is not None and args:
            raise ValueError("pass either args or arg_sets, not both")
        if arg_sets is not None and len(arg_sets) == 0:
            raise ValueError("arg_sets must not be empty")
        self._fn = fn
        self._arg_sets: tuple[tuple[Any, ...], ...] = (
            tuple(tuple(s) for s in arg_sets) if arg_sets is not None else (tuple(args),)
        )
        self._kwargs: dict[str, Any] = dict(kwargs or {})
        self._cursor = 0
        self._disable_gc = disable_gc
        if block_timer is not None:
            self._block_timer: BlockTimer = block_timer
        elif clock is not None or synchronize is not None:
            if synchronize is None:
                synchronize = device_synchronize(device)
            self._block_timer = HostClockTimer(
                clock=clock or time.perf_counter, synchronize=synchronize, description="clock"
            )
        else:
            self._block_timer = block_timer_for(device)

    @property
    def timer_description(self) -> str:
        return self._block_timer.description

    @property
    def input_sets(self) -> int:
        """The argument sets the calls rotate through (1: the same arguments every call)."""
        return len(self._arg_sets)

    def input_bytes(self) -> int | None:
        """The bytes of the array arguments (torch tensors, numpy arrays: `nbytes`) of every
        argument set together: what rotating through them spreads over; None without any."""
        sizes = [getattr(a, "nbytes", None) for args in self._arg_sets for a in args]
        known = [int(size) for size in sizes if isinstance(size, int)]
        return sum(known) if known else None

    def _block(self, number: int) -> Callable[[], None]:
        """One block of `number` calls. Without keyword arguments the call is `fn(*args)`,
        and over `itertools.repeat`, as timeit's loop makes it: an empty `**kwargs` and
        `range` cost ~40 ns a call more here (92 against 53 ns for a no-op)."""
        fn, kwargs = self._fn, self._kwargs
        if len(self._arg_sets) == 1:
            args = self._arg_sets[0]

            def run_block() -> None:
                for _ in repeat(None, number):
                    fn(*args, **kwargs)

            def run_block_positional() -> None:
                for _ in repeat(None, number):
                    fn(*args)

            return run_block if kwargs else run_block_positional

        arg_sets, count = self._arg_sets, len(self._arg_sets)

        def run_rotating_block() -> None:
            cursor = self._cursor
            for _ in repeat(None, number):
                fn(*arg_sets[cursor], **kwargs)
                cursor = cursor + 1 if cursor + 1 < count else 0
            self._cursor = cursor

        def run_rotating_block_positional() -> None:
            cursor = self._cursor
            for _ in repeat(None, number):
                fn(*arg_sets[cursor])
                cursor = cursor + 1 if cursor + 1 < count else 0
            self._cursor = cursor

        return run_rotating_block if kwargs else run_rotating_block_positional

    def timeit(self, number: int) -> float:
        """Seconds taken by one block of `number` calls (no warm-up)."""
        if number < 0:
            raise ValueError(f"number must be >= 0, got {number}")
        gc_was_enabled = gc.isenabled()
        if self._disable_gc:
            gc.disable()  # like timeit: a collection inside one block is noise
        try:
            return self._block_timer.time_block(self._block(number))
        finally:
            if gc_was_enabled:
                gc.enable()

    def sample(self, number: int) -> float:
        """Seconds per call from one block of `number` calls: one sample.

        For callers that interleave several timers (eager and compiled, round by round).
        """
        if number < 1:
            raise ValueError(f"number must be >= 1, got {number}")
        return self.timeit(number) / number

    def warmup(self, calls: int = DEFAULT_WARMUP_CALLS) -> int:
        """Call the function `calls` times, and every rotated argument set at least once."""
        calls = max(calls, len(self._arg_sets))
        if calls > 0:
            self.timeit(calls)
        return calls

    def estimate_number(self, min_block_time: float = DEFAULT_MIN_BLOCK_TIME) -> int:
        """Inner repetitions that make one block last `min_block_time` and at least
        1/MAX_TIMER_OVERHEAD times the timer's own overhead.

        A block that reaches the target is timed twice more and the fastest of the three
        decides: one block that lost the CPU to another process (a 3-4 ms time slice on a
        loaded machine) would otherwise stop the growth early, and a 2 us call would be
        timed one call a block, at the timer's resolution (seen under a CPU hog in CI)."""
        overheads = sorted(self.timeit(0) for _ in range(5))
        target = max(min_block_time, overheads[2] / MAX_TIMER_OVERHEAD)
        number = 1
        while True:
            elapsed = self.timeit(number)
            if elapsed >= target:
                elapsed = min(elapsed, self.timeit(number), self.timeit(number))
            if elapsed >= target or number >= MAX_NUMBER:
                return number
            # Grow towards the target, at least 2x and at most 10x a step: short blocks are
            # noisy, so a single extrapolation could overshoot or undershoot a lot.
            wanted = math.ceil(number * target / max(elapsed, 1e-12) * 1.1)
            number = min(MAX_NUMBER, max(2 * number, min(10 * number, wanted)))

    def blocked_autorange(
        self,
        *,
        warmup_calls: int = DEFAULT_WARMUP_CALLS,
        number: int | None = None,
        min_block_time: float = DEFAULT_MIN_BLOCK_TIME,
        min_samples: int = DEFAULT_MIN_SAMPLES,
        max_samples: int = DEFAULT_MAX_SAMPLES,
        min_run_time: float = DEFAULT_MIN_RUN_TIME,
        max_run_time: float = DEFAULT_MAX_RUN_TIME,
    ) -> Measurement:
        """Warm up, choose `number` (unless given), then sample as the module docstring says."""
        if min_samples < 1 or max_samples < min_samples:
            raise ValueError(
                f"need 1 <= min_samples <= max_samples, got {min_samples} and {max_samples}"
            )
        lockstep.turn()
        warmed = self.warmup(warmup_calls)
        if number is None:
            number = self.estimate_number(min_block_time)
        elif number < 1:
            raise ValueError(f"number must be >= 1, got {number}")
        samples: list[float] = []
        total = 0.0
        enough = False
        while len(samples) < max_samples:
            step = lockstep.turn(enough)
            if enough and step.other_enough:
                break
            with lockstep.pinned():
                if step.taken:
                    self.timeit(number)  # the other side ran: warm caches and TLB up again
                elapsed = self.timeit(number)
            samples.append(elapsed / number)
            total += elapsed
            enough = _enough(samples, total, min_samples, min_run_time, max_run_time)
            if enough and not step.taken:
                break
            if total >= LOCKSTEP_RUN_TIME_FACTOR * max_run_time:
                break  # in lockstep, the other side's rule keeps us going up to here
        return Measurement(
            samples=tuple(samples),
            number_per_sample=number,
            warmup_calls=warmed,
            timer=self._block_timer.description,
            input_sets=self.input_sets,
            input_bytes=self.input_bytes(),
        )


def _enough(
    samples: list[float], total: float, min_samples: int, min_run_time: float, max_run_time: float
) -> bool:
    """The stopping rule of `blocked_autorange` (the module docstring's step 3)."""
    if len(samples) < min_samples:
        return False
    if total >= max_run_time:
        return True
    return total >= min_run_time and _iqr_over_median(samples) < IQR_WARN_THRESHOLD


def measure_interleaved(
    timers: Mapping[str, Timer],
    *,
    rounds: int = 20,
    samples_per_round: int = 1,
    warmup_calls: int = DEFAULT_WARMUP_CALLS,
    min_block_time: float = DEFAULT_MIN_BLOCK_TIME,
) -> dict[str, Measurement]:
    """Measure several timers round by round (A, B, C, A, B, C, ...).

    Every timer then sees the same mix of machine conditions (another process's burst, a
    frequency change), spread over the whole measurement instead of hitting one timer's
    window: what eager-vs-compiled speedups need, and what keeps run-to-run drift of a
    shared machine inside the samples' spread rather than between two runs' medians.
    """
    if rounds < 1 or samples_per_round < 1:
        raise ValueError("rounds and samples_per_round must be >= 1")
    numbers: dict[str, int] = {}
    warmed: dict[str, int] = {}
    lockstep.turn()
    for name, timer in timers.items():
        warmed[name] = timer.warmup(warmup_calls)
        numbers[name] = timer.estimate_number(min_block_time)
    samples: dict[str, list[float]] = {name: [] for name in timers}
    # A fixed count: this side has enough once it takes its last sample (the other side's
    # stopping rule may wait for that word; see lockstep.turn).
    left = rounds * len(timers) * samples_per_round
    for _ in range(rounds):
        for name, timer in timers.items():
            for _ in range(samples_per_round):
                left -= 1
                step = lockstep.turn(enough=left == 0)
                with lockstep.pinned():
                    if step.taken:
                        timer.timeit(numbers[name])  # warm up again after the other side
                    samples[name].append(timer.sample(numbers[name]))
    return {
        name: Measurement(
            samples=tuple(samples[name]),
            number_per_sample=numbers[name],
            warmup_calls=warmed[name],
            timer=timer.timer_description,
            input_sets=timer.input_sets,
            input_bytes=timer.input_bytes(),
        )
        for name, timer in timers.items()
    }


def measure(
    fn: Callable[..., object],
    *,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    arg_sets: Sequence[Sequence[Any]] | None = None,
    device: Any = None,
    **options: Any,
) -> Measurement:
    """`Timer(fn, ...).blocked_autorange(**options)` in one call."""
    timer = Timer(fn, args=args, kwargs=kwargs, arg_sets=arg_sets, device=device)
    return timer.blocked_autorange(**options)
