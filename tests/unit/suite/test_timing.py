"""accelkit.suite.perf.timing: exact statistics with a fake clock, then one real torch smoke test.

Durations are powers of two, so sums and differences of fake-clock readings are exact.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable, Iterator

import numpy as np
import pytest

from accelkit.results.model import Metric
from accelkit.results.noise import IQR_GROSS_WARN_THRESHOLD, IQR_WARN_THRESHOLD
from accelkit.suite.perf import timing
from accelkit.suite.perf.timing import HostClockTimer, Measurement, Timer

UNIT = 2.0**-12  # ~244 us


class FakeClock:
    """Time advances only when the fake work says so (plus an optional cost per reading)."""

    def __init__(self, read_cost: float = 0.0) -> None:
        self.now = 0.0
        self.read_cost = read_cost
        self.reads = 0
        self.syncs = 0

    def __call__(self) -> float:
        value = self.now
        self.now += self.read_cost
        self.reads += 1
        return value

    def synchronize(self) -> None:
        self.syncs += 1


class ScriptedWork:
    """A callable whose n-th call takes durations[n] fake seconds (the last one repeats)."""

    def __init__(self, clock: FakeClock, durations: Iterable[float]) -> None:
        self.clock = clock
        self._durations: Iterator[float] = iter(durations)
        self._last = 0.0
        self.calls: list[tuple[object, ...]] = []

    def __call__(self, *args: object) -> None:
        self._last = next(self._durations, self._last)
        self.clock.now += self._last
        self.calls.append(args)


def constant(duration: float) -> Iterator[float]:
    while True:
        yield duration


# ---------------------------------------------------------------------------------------
# Measurement statistics
# ---------------------------------------------------------------------------------------


def test_measurement_statistics_are_exact() -> None:
    m = Measurement(samples=(5.0, 1.0, 4.0, 2.0, 3.0))
    assert m.median == 3.0
    assert (m.p25, m.p75) == (2.0, 4.0)
    assert m.iqr == 2.0
    assert m.mean == 3.0
    assert m.iqr_over_median == pytest.approx(2.0 / 3.0)
    assert m.noisy and m.grossly_noisy
    assert m.warning is not None and "environmental influence" in m.warning


def test_quantiles_match_numpy_linear_interpolation() -> None:
    rng = np.random.default_rng(7)
    for n in (1, 2, 3, 4, 7, 10, 31):
        samples = rng.lognormal(0.0, 0.1, n)
        m = Measurement(samples=tuple(samples.tolist()))
        p25, median, p75 = np.percentile(samples, [25, 50, 75])
        assert m.median == pytest.approx(median, rel=1e-12)
        assert m.p25 == pytest.approx(p25, rel=1e-12)
        assert m.p75 == pytest.approx(p75, rel=1e-12)


def test_noise_thresholds_follow_torch_utils_benchmark() -> None:
    assert (IQR_WARN_THRESHOLD, IQR_GROSS_WARN_THRESHOLD) == (0.10, 0.25)
    quiet = Measurement(samples=(1.0, 1.0, 1.02, 1.04, 1.04))  # IQR/median 4%
    assert not quiet.noisy and quiet.warning is None
    mild = Measurement(samples=(0.9, 0.95, 1.0, 1.1, 1.2))  # 15%
    assert mild.noisy and not mild.grossly_noisy
    assert mild.warning is not None and "system fluctuation" in mild.warning


def test_measurement_rejects_empty_samples() -> None:
    with pytest.raises(ValueError, match="at least one sample"):
        Measurement(samples=())


def test_latency_metric_is_a_valid_results_metric() -> None:
    m = Measurement(samples=(4 * UNIT, 2 * UNIT, 3 * UNIT), number_per_sample=8)
    metric = m.latency_metric()
    assert metric["value"] == 3 * UNIT
    assert metric["unit"] == "s"
    assert metric["higher_is_better"] is False
    assert metric["samples"] == [4 * UNIT, 2 * UNIT, 3 * UNIT]
    assert metric["iqr"] == pytest.approx(UNIT)
    assert metric["noisy"] is True
    assert metric["calls_per_sample"] == 8
    parsed = Metric.model_validate(metric)
    assert parsed.value == 3 * UNIT and parsed.samples == metric["samples"]


def test_throughput_metric_is_computed_per_sample_with_peak_fraction() -> None:
    m = Measurement(samples=(0.5, 0.25, 2.0, 1.0))
    metric = m.flops_metric(1e9, peak=8e9)
    assert metric["samples"] == [2e9, 4e9, 0.5e9, 1e9]
    assert metric["value"] == 1.5e9  # median of the rates, not 1e9 / median(times)
    assert metric["unit"] == "FLOP/s"
    assert metric["higher_is_better"] is True
    assert metric["peak"] == 8e9
    assert metric["peak_fraction"] == pytest.approx(1.5 / 8)
    bandwidth = m.bandwidth_metric(4096)
    assert bandwidth["unit"] == "B/s" and "peak_fraction" not in bandwidth
    Metric.model_validate(metric)
    with pytest.raises(ValueError):
        m.throughput_metric(0, "FLOP/s")
    with pytest.raises(ValueError):
        m.throughput_metric(1, "FLOP/s", peak=0)


# ---------------------------------------------------------------------------------------
# The timer with a fake clock
# ---------------------------------------------------------------------------------------


def test_fixed_number_gives_exact_samples_and_statistics() -> None:
    clock = FakeClock()
    # One warm-up call, then one call per sample (number=1).
    work = ScriptedWork(clock, [100 * UNIT] + [u * UNIT for u in (5, 1, 4, 2, 3)] + [3 * UNIT])
    timer = Timer(work, clock=clock, synchronize=clock.synchronize)
    m = timer.blocked_autorange(
        warmup_calls=1, number=1, min_samples=5, max_samples=5, min_run_time=0.0
    )
    assert m.samples == (5 * UNIT, UNIT, 4 * UNIT, 2 * UNIT, 3 * UNIT)
    assert m.median == 3 * UNIT
    assert m.iqr == 2 * UNIT
    assert m.number_per_sample == 1
    assert m.warmup_calls == 1
    assert m.timer == "clock"
    assert len(work.calls) == 6
    # The device is synchronised before and after every timed block (warm-up included).
    assert clock.syncs == 2 * 6


def test_autorange_picks_inner_repetitions_for_the_minimum_block_time() -> None:
    clock = FakeClock()
    work = ScriptedWork(clock, constant(UNIT / 4))  # 61 us per call
    timer = Timer(work, clock=clock)
    m = timer.blocked_autorange(min_block_time=16 * UNIT, min_run_time=0.0)
    # 1 call takes UNIT/4, so 64 calls reach 16 * UNIT. Steps grow 2x..10x towards 1.1x the
    # target: 1, 10, then ceil(10 * 6.4 * 1.1) = 71.
    assert m.number_per_sample == 71
    assert m.number_per_sample * UNIT / 4 >= 16 * UNIT
    assert set(m.samples) == {UNIT / 4}
    assert len(m.samples) == 5  # quiet: the minimum is enough
    assert m.iqr == 0.0


def test_autorange_makes_timer_overhead_negligible() -> None:
    read_cost = 2.0**-20  # ~1 us per clock reading: an empty block costs that
    clock = FakeClock(read_cost=read_cost)
    work = ScriptedWork(clock, constant(2.0**-17))  # ~7.6 us per call
    timer = Timer(work, clock=clock)
    number = timer.estimate_number(min_block_time=1e-9)
    block = number * 2.0**-17
    assert read_cost / block <= timing.MAX_TIMER_OVERHEAD
    assert block < 20 * read_cost / timing.MAX_TIMER_OVERHEAD  # and not absurdly long


def test_one_preempted_block_does_not_stop_the_growth() -> None:
    clock = FakeClock()
    # The first single-call block lost the CPU for a 4 ms time slice; the calls take 2 us.
    work = ScriptedWork(clock, [4e-3, 2e-6])  # the last duration repeats
    timer = Timer(work, clock=clock)
    number = timer.estimate_number(min_block_time=1e-3)
    assert number * 2e-6 >= 1e-3  # grown to the target, not stopped at 1 call


def test_sample_count_grows_while_noisy() -> None:
    clock = FakeClock()
    quiet = ScriptedWork(clock, constant(UNIT))
    m_quiet = Timer(quiet, clock=clock).blocked_autorange(
        number=1, min_samples=5, max_samples=40, min_run_time=0.0
    )
    assert len(m_quiet.samples) == 5

    noisy_durations = [UNIT, 2 * UNIT, UNIT, 3 * UNIT, UNIT / 2] * 100
    noisy = ScriptedWork(clock, [UNIT, *noisy_durations])
    m_noisy = Timer(noisy, clock=clock).blocked_autorange(
        number=1, min_samples=5, max_samples=40, min_run_time=0.0, max_run_time=1e9
    )
    assert len(m_noisy.samples) == 40
    assert m_noisy.noisy


def test_noisy_sampling_stops_at_the_time_budget() -> None:
    clock = FakeClock()
    noisy = ScriptedWork(clock, [UNIT, UNIT, 4 * UNIT] * 1000)
    m = Timer(noisy, clock=clock).blocked_autorange(
        warmup_calls=0, number=1, min_samples=5, max_samples=1000, max_run_time=64 * UNIT
    )
    # Stops at the first sample that takes the total to or past 64 units (>= 5 samples).
    assert 5 <= len(m.samples) < 1000
    assert sum(m.samples) >= 64 * UNIT
    assert sum(m.samples[:-1]) < 64 * UNIT


def test_min_run_time_collects_more_than_the_minimum() -> None:
    clock = FakeClock()
    work = ScriptedWork(clock, constant(UNIT))
    m = Timer(work, clock=clock).blocked_autorange(
        number=1, min_samples=5, max_samples=1000, min_run_time=32 * UNIT
    )
    assert len(m.samples) == 32


def test_rotating_argument_sets_cycle_per_call() -> None:
    clock = FakeClock()
    work = ScriptedWork(clock, constant(UNIT))
    sets = [("a",), ("b",), ("c",)]
    timer = Timer(work, arg_sets=sets, clock=clock)
    m = timer.blocked_autorange(warmup_calls=1, number=2, min_samples=4, min_run_time=0.0)
    # Warm-up touches every set once, then 4 blocks of 2 calls continue the cycle.
    assert m.warmup_calls == 3
    names = [args[0] for args in work.calls]
    assert names == ["a", "b", "c"] * 3 + ["a", "b"]
    assert len(m.samples) == 4


def test_a_measurement_says_what_its_calls_rotated_through() -> None:
    """`Metric.method`'s cache state: the sets and the bytes of their arrays."""
    clock = FakeClock()
    sets = [(np.zeros(256, dtype=np.float32), np.zeros(64, dtype=np.float64)) for _ in range(8)]
    rotated = Timer(ScriptedWork(clock, constant(UNIT)), arg_sets=sets, clock=clock)
    m = rotated.blocked_autorange(warmup_calls=1, number=1, min_samples=2, min_run_time=0.0)
    assert (m.input_sets, m.input_bytes) == (8, 8 * (256 * 4 + 64 * 8))
    reused = Timer(ScriptedWork(clock, constant(UNIT)), args=("no array",), clock=clock)
    m = reused.blocked_autorange(warmup_calls=1, number=1, min_samples=2, min_run_time=0.0)
    assert (m.input_sets, m.input_bytes) == (1, None)


def test_args_and_kwargs_are_passed() -> None:
    seen: list[tuple[tuple[object, ...], dict[str, object]]] = []

    def work(*args: object, **kwargs: object) -> None:
        seen.append((args, kwargs))

    Timer(work, args=(1, 2), kwargs={"k": 3}).timeit(2)
    assert seen == [((1, 2), {"k": 3})] * 2
    with pytest.raises(ValueError, match="either args or arg_sets"):
        Timer(work, args=(1,), arg_sets=[(2,)])
    with pytest.raises(ValueError, match="must not be empty"):
        Timer(work, arg_sets=[])


def test_gc_is_disabled_inside_blocks_and_restored() -> None:
    import gc

    states: list[bool] = []
    Timer(lambda: states.append(gc.isenabled())).timeit(1)
    assert states == [False]
    assert gc.isenabled()


def test_custom_block_timer_is_used() -> None:
    class Ticks:
        description = "ticks"

        def time_block(self, run_block: object) -> float:
            run_block()  # type: ignore[operator]
            return 0.5

    m = Timer(lambda: None, block_timer=Ticks()).blocked_autorange(
        number=4, min_samples=3, min_run_time=0.0
    )
    assert m.samples == (0.125,) * 3 and m.timer == "ticks"


def test_plain_python_callable_on_the_real_clock_without_torch() -> None:
    code = (
        "import sys\n"
        "from accelkit.suite.perf.timing import measure\n"
        "m = measure(lambda: sum(range(200)), min_run_time=0.02)\n"
        "assert m.median > 0 and len(m.samples) >= 5 and m.timer == 'perf_counter', m\n"
        "assert 'torch' not in sys.modules\n"
        "print(m.number_per_sample)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) > 1  # a microsecond callable needs inner repetitions


def test_cpu_block_timer_needs_no_torch() -> None:
    timer = timing.block_timer_for("cpu")
    assert isinstance(timer, HostClockTimer) and timer.description == "perf_counter"


@pytest.mark.slow
def test_real_torch_cpu_measurement() -> None:
    torch = pytest.importorskip("torch")
    n = 64
    sets = [(torch.randn(n, n), torch.randn(n, n)) for _ in range(3)]
    timer = Timer(torch.mm, arg_sets=sets, device=torch.device("cpu"))
    assert timer.timer_description == "perf_counter"
    m = timer.blocked_autorange(min_run_time=0.05)
    # How fast is not asserted here (the machine is shared); the fake-clock tests above pin
    # the statistics and the choice of inner repetitions exactly.
    assert len(m.samples) >= timing.DEFAULT_MIN_SAMPLES
    assert m.median > 0 and m.number_per_sample >= 1
    flops = m.flops_metric(2 * n**3)
    # The median of the per-sample rates (not the rate of the median sample).
    rates = sorted(2 * n**3 / sample for sample in m.samples)
    assert rates[0] <= flops["value"] <= rates[-1] and flops["unit"] == "FLOP/s"
    Metric.model_validate(flops)


def test_measure_interleaved_alternates_timers_round_by_round() -> None:
    clock = FakeClock()
    order: list[str] = []

    def work(name: str, duration: float) -> ScriptedWork:
        scripted = ScriptedWork(clock, constant(duration))

        def call() -> None:
            order.append(name)
            scripted()

        return call  # type: ignore[return-value]

    timers = {
        "eager": Timer(work("eager", UNIT), clock=clock),
        "compiled": Timer(work("compiled", UNIT / 2), clock=clock),
    }
    results = timing.measure_interleaved(timers, rounds=3, warmup_calls=1, min_block_time=2 * UNIT)
    # 1 call is under the 2-unit block: next try 1.1x the extrapolation, rounded up.
    assert results["eager"].number_per_sample == 3
    assert results["compiled"].number_per_sample == 5
    assert results["eager"].samples == (UNIT,) * 3
    assert results["compiled"].samples == (UNIT / 2,) * 3
    # After warm-up and block-size estimation, the timed blocks alternate.
    timed = order[-(3 * (3 + 5)) :]
    assert timed == (["eager"] * 3 + ["compiled"] * 5) * 3
    with pytest.raises(ValueError):
        timing.measure_interleaved(timers, rounds=0)
