"""torch.compile: compile latency cold and warm, and compiled-vs-eager speedup.

- `compile/latency`: compile latency of a small graph in a fresh process with an empty
  TORCHINDUCTOR_CACHE_DIR (cold: codegen and the C++/Triton compiler run), then of the
  same graphs again after a Dynamo reset (warm: FX graph cache hits), checked by the
  cache's own hit counter (`accelkit.suite.perf.compile_worker`). One sample per graph.
  In an interleaved A/B pass (`--ab`) the worker takes the side's turns, one compile a
  turn, and compiles at least `MIN_PAIRS` graphs: the case runs in one pass only, so graph
  k of one side, compiled right after graph k of the other, is a pair of compare's paired
  mode (the metric's `sample_groups`).
- `compile/speedup/transformer_block`: a pre-norm transformer block (attention via SDPA,
  GELU MLP), inference, eager and compiled timed interleaved round by round, so both see
  the same machine conditions; the speedup's samples are the per-round ratios. The block
  is compiled once per run (`accelkit.suite.perf.speedup`): with several passes, one
  run-scoped worker process keeps it and every pass times it again.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import pytest

from accelkit.results.stats import MIN_PAIRS
from accelkit.suite.perf import speedup
from accelkit.suite.perf.compile_worker import WARM_REPEATS
from accelkit.suite.perf.fixtures import tier_of
from accelkit.suite.perf.harness import PerfContext
from accelkit.suite.perf.timing import Measurement
from accelkit.suite.session import lockstep, run_scoped

WORKER_TIMEOUT_S = 240.0


def _compile_in_fresh_process(
    perf: PerfContext, cache_dir: str, graphs: int, turns: lockstep.Handoff | None
) -> dict[str, Any]:
    env = dict(os.environ)
    env["TORCHINDUCTOR_CACHE_DIR"] = cache_dir
    env["TRITON_CACHE_DIR"] = os.path.join(cache_dir, "triton")
    if perf.tier.compile_threads is not None:
        env["TORCHINDUCTOR_COMPILE_THREADS"] = str(perf.tier.compile_threads)
    argv = [
        sys.executable,
        "-m",
        "accelkit.suite.perf.compile_worker",
        perf.device_type,
        str(graphs),
        "256",
    ]
    if perf.threads is not None:
        argv += ["--threads", str(perf.threads)]
    if turns is not None:
        argv += ["--turns", turns.encode()]
    proc = subprocess.run(
        argv, capture_output=True, text=True, env=env, timeout=WORKER_TIMEOUT_S, check=False
    )
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
        raise AssertionError(f"compile worker exited {proc.returncode}:\n{tail}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


# Its samples are compiles in a fresh process already, and it costs tens of seconds.
@pytest.mark.single_pass
@pytest.mark.requires("inductor")
def test_latency(perf: PerfContext, record_metric: Callable[..., None]) -> None:
    with (
        lockstep.relay() as turns,  # the worker takes this side's turns (--ab)
        tempfile.TemporaryDirectory(prefix="accelkit-inductor-") as cache_dir,
    ):
        count = perf.tier.compile_graphs
        if turns is not None:
            count = max(count, MIN_PAIRS)
        run = _compile_in_fresh_process(perf, cache_dir, count, turns)
    graphs = len(run["samples_s"])
    # What the two metrics claim: no cache hit while cold, one per compile while warm.
    assert run["cold_cache_hits"] == 0, f"cold compiles hit the cache {run['cold_cache_hits']}x"
    warm_compiles = len(run["warm_s"])
    assert run["warm_cache_hits"] >= warm_compiles, (
        f"{warm_compiles} warm compiles hit the FX graph cache {run['warm_cache_hits']}x"
    )
    # In lockstep each compile is one turn, right after the other side's compile of the
    # same graph: a graph is a pass pair for compare's paired mode (its warm repeats, one).
    cold_pairs: dict[str, list[int]] = {}
    warm_pairs: dict[str, list[int]] = {}
    if turns is not None:
        cold_pairs["sample_groups"] = list(range(graphs))
        warm_pairs["sample_groups"] = [g for g in range(graphs) for _ in range(WARM_REPEATS)]
    cold = Measurement(samples=tuple(run["samples_s"]), timer="perf_counter")
    perf.record_latency(
        record_metric, "cold", cold, first_compile_s=run["first_s"], graphs=graphs, **cold_pairs
    )
    warm = Measurement(samples=tuple(run["warm_s"]), timer="perf_counter")
    perf.record_latency(
        record_metric,
        "warm",
        warm,
        graphs=graphs,
        repeats=WARM_REPEATS,
        **warm_pairs,
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "block_case" not in metafunc.fixturenames:
        return
    tier = tier_of(metafunc.config)
    b, s, d, h = tier.block
    metafunc.parametrize(
        "block_case",
        [tier.block],
        ids=[f"transformer_block/{tier.activation_dtype}/b{b}s{s}d{d}h{h}"],
    )


@pytest.mark.requires("inductor")
def test_speedup(
    block_case: tuple[int, int, int, int], perf: PerfContext, record_metric: Callable[..., None]
) -> None:
    with lockstep.relay() as turns:  # the worker takes this side's turns (--ab)
        job = functools.partial(
            speedup.measure_pass,
            block_case=block_case,
            dtype=perf.tier.activation_dtype,
            device=perf.device_type,
            timer_device=perf.timer_device(),
            threads=perf.threads,
            rounds=max(perf.tier.timing.min_samples, perf.tier.timing.interleaved_rounds),
            min_block_time=perf.tier.timing.min_block_time,
            turns=turns,
        )
        key = f"compile-speedup-{perf.backend}"
        measured = run_scoped.call_or_here(key, job, timeout_s=WORKER_TIMEOUT_S)
    for name, measurement in measured.items():
        perf.record_latency(record_metric, name, measurement)
    perf.record_ratio(record_metric, "speedup", measured["eager"], measured["compiled"])
