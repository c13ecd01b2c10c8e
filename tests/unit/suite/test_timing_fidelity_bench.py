"""benchmarks/bench_timing_fidelity.py: its table logic, on given medians (no timing here;
the script itself prints the measured table)."""

from __future__ import annotations

from types import ModuleType

import pytest

from tests.helpers import REPO, load_script

SCRIPT = REPO / "benchmarks" / "bench_timing_fidelity.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script(SCRIPT)


def test_row_takes_medians_over_rounds_and_ratios_per_reference(bench: ModuleType) -> None:
    row = bench.build_row(
        "gemm/float32/128x128x128",
        [10e-6, 11e-6, 30e-6],  # one disturbed round: the median ignores it
        [[10e-6, 10e-6, 10e-6], [10.5e-6, 11e-6, 12e-6]],
    )
    assert row.accelkit == pytest.approx(11e-6)
    assert row.references == pytest.approx((10e-6, 11e-6))
    assert row.ratios == pytest.approx((1.1, 1.0))
    assert row.spread == pytest.approx((1.0, 3.0))
    assert not row.within  # 10% off the first reference


def test_a_sample_pairs_reference_is_judged_against_accelkit_beside_it(bench: ModuleType) -> None:
    """Its ratio is accelkit's blocks beside it over its own, not the separate measurement's
    median over it (the machine moved between the two)."""
    row = bench.build_row(
        "sum/float32/262144",
        [26e-6, 27e-6, 28e-6],
        [[20e-6, 20e-6, 20e-6], [19.8e-6, 20.0e-6, 20.4e-6]],
        [None, [20.1e-6, 20.2e-6, 20.5e-6]],
    )
    assert row.ratios == pytest.approx((27 / 20, 20.2 / 20.0))
    assert not row.within
    with pytest.raises(ValueError, match="median"):
        bench.build_row("x", [1.0], [[1.0]], [[1.0, 2.0]])


def test_within_means_every_reference_within_three_percent(bench: ModuleType) -> None:
    close = bench.build_row("a", [1.0], [[0.975], [1.029]])
    assert close.within
    assert not bench.build_row("b", [1.0], [[0.96], [1.0]]).within


def test_a_control_reference_is_shown_but_not_judged(bench: ModuleType) -> None:
    """The torch A/A control (torch's second measurement over its first) measures the
    machine, not accelkit: 8% apart there does not make the case fail."""
    row = bench.build_row(
        "gemv/float32/1x1024x512",
        [10e-6, 10e-6],
        [[10.1e-6, 10.2e-6], [10e-6, 10e-6]],
        [None, [10.8e-6, 10.8e-6]],
        [True, False],
    )
    assert row.ratios == pytest.approx((10 / 10.15, 1.08))
    assert row.within
    text = bench.format_table([row], ["blocked", "torch A/A"])
    assert text.splitlines()[-1] == (
        "1 of 1 cases within 3% of every judged reference (not torch A/A)"
    )
    with pytest.raises(ValueError, match="one flag per reference"):
        bench.build_row("x", [1.0], [[1.0]], None, [True, False])
    assert {"torch A/A"} == bench.CONTROLS


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [([], [[1.0]]), ([1.0], []), ([1.0, 2.0], [[1.0]]), ([0.0], [[1.0]]), ([1.0], [[-1.0]])],
)
def test_row_refuses_mismatched_or_non_positive_medians(
    bench: ModuleType, ours: list[float], theirs: list[list[float]]
) -> None:
    with pytest.raises(ValueError, match="median"):
        bench.build_row("x", ours, theirs)


def test_table_has_a_line_per_case_and_the_count_within(bench: ModuleType) -> None:
    rows = [
        bench.build_row("copy/float32/262144", [20e-6], [[20.2e-6], [20.1e-6]]),
        bench.build_row("sum/float32/262144", [20e-6], [[28e-6], [20.3e-6]]),
    ]
    text = bench.format_table(rows, ["blocked", "same-blocks"])
    lines = text.splitlines()
    assert "blocked us" in lines[0] and "same-blocks us" in lines[0] and "within 3%?" in lines[0]
    copy_line = next(line for line in lines if line.startswith("copy/"))
    assert "20.00" in copy_line and "0.990" in copy_line and copy_line.endswith("yes")
    sum_line = next(line for line in lines if line.startswith("sum/"))
    assert "0.714" in sum_line and sum_line.endswith("NO")
    assert lines[-2] == "within 3% of each reference: blocked 1, same-blocks 2 of 2"
    assert lines[-1] == "1 of 2 cases within 3% of every judged reference"


@pytest.mark.parametrize("kwargs", [None, {"k": 0}])
def test_timer_blocks_call_alike_with_and_without_keywords(kwargs: dict[str, int] | None) -> None:
    """The timer's blocks call `fn(*args)` when there are no keyword arguments (timeit's
    per-call cost), `fn(*args, **kwargs)` otherwise; both rotate argument sets alike."""
    from accelkit.suite.perf.timing import Timer

    seen: list[tuple[tuple[object, ...], dict[str, object]]] = []

    def work(*args: object, **kw: object) -> None:
        seen.append((args, kw))

    Timer(work, arg_sets=[(1,), (2,), (3,)], kwargs=kwargs).timeit(4)
    Timer(work, args=(9,), kwargs=kwargs).timeit(2)
    expected = dict(kwargs or {})
    assert seen == [((n,), expected) for n in (1, 2, 3, 1, 9, 9)]
