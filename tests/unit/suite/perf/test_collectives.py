"""The host all_reduce ranks' shared CPU (accelkit.suite.perf.collectives)."""

from __future__ import annotations

import os
import threading

import pytest

from accelkit.suite.perf import collectives

pytestmark = pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs CPU affinity and at least 2 CPUs",
)


def test_the_shared_cpu_is_the_one_interleaved_samples_take() -> None:
    # lockstep.pin_cpu's choice, so both sides' ranks share the CPU their samples run on.
    assert collectives.shared_cpu() == max(os.sched_getaffinity(0))


def test_one_cpu_allowed_means_nothing_to_share(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3})
    assert collectives.shared_cpu() is None


def test_every_thread_started_before_the_block_runs_on_the_cpu_then_gets_its_own_back() -> None:
    before = os.sched_getaffinity(0)
    cpu = min(before)
    ready, release = threading.Event(), threading.Event()
    native: list[int] = []

    def worker() -> None:  # stands for the collective library's own threads
        native.append(threading.get_native_id())
        ready.set()
        release.wait(10)

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        assert ready.wait(10)
        with collectives.process_on_cpu(cpu):
            assert os.sched_getaffinity(0) == {cpu}
            assert os.sched_getaffinity(native[0]) == {cpu}
        assert os.sched_getaffinity(0) == before
        assert os.sched_getaffinity(native[0]) == before
    finally:
        release.set()
        thread.join()


def test_no_cpu_pins_nothing() -> None:
    before = os.sched_getaffinity(0)
    with collectives.process_on_cpu(None):
        assert os.sched_getaffinity(0) == before
