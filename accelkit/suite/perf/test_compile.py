"""torch.compile: compile latency cold and warm, and compiled-vs-eager speedup.

- `compile/latency`: compile latency of a small graph in fresh processes, first with an
  empty TORCHINDUCTOR_CACHE_DIR (cold: codegen and the C++/Triton compiler run), then
  with the same directory again (warm: FX graph cache hits). One sample per graph.
- `compile/speedup/transformer_block`: a pre-norm transformer block (attention via SDPA,
  GELU MLP), inference, eager and compiled timed interleaved round by round, so both see
  the same machine conditions; the speedup's samples are the per-round ratios.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import pytest

from accelkit.suite.perf.fixtures import tier_of
from accelkit.suite.perf.harness import PerfContext, torch_dtype
from accelkit.suite.timing import Measurement, measure_interleaved

WORKER_TIMEOUT_S = 240.0


def _compile_in_fresh_process(perf: PerfContext, cache_dir: str) -> dict[str, Any]:
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
        str(perf.tier.compile_graphs),
        "256",
    ]
    proc = subprocess.run(
        argv, capture_output=True, text=True, env=env, timeout=WORKER_TIMEOUT_S, check=False
    )
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
        raise AssertionError(f"compile worker exited {proc.returncode}:\n{tail}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


# Every sample is its own compile process already, and a pass costs tens of seconds.
@pytest.mark.single_pass
@pytest.mark.requires("inductor")
def test_latency(perf: PerfContext, record_metric: Callable[..., None]) -> None:
    with tempfile.TemporaryDirectory(prefix="accelkit-inductor-") as cache_dir:
        cold = _compile_in_fresh_process(perf, cache_dir)
        warm = _compile_in_fresh_process(perf, cache_dir)
    for name, run in (("cold", cold), ("warm", warm)):
        measurement = Measurement(samples=tuple(run["samples_s"]), timer="perf_counter")
        perf.record_latency(
            record_metric,
            name,
            measurement,
            first_compile_s=run["first_s"],
            graphs=len(run["samples_s"]),
        )


def _block(d_model: int, heads: int) -> Any:
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1 = nn.LayerNorm(d_model)
            self.qkv = nn.Linear(d_model, 3 * d_model)
            self.proj = nn.Linear(d_model, d_model)
            self.ln2 = nn.LayerNorm(d_model)
            self.fc1 = nn.Linear(d_model, 4 * d_model)
            self.fc2 = nn.Linear(4 * d_model, d_model)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, s, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    return Block()


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
    import torch

    batch, seq, d_model, heads = block_case
    dtype = torch_dtype(perf.tier.activation_dtype)
    block = _block(d_model, heads).to(device=perf.device_type, dtype=dtype).eval()
    compiled = torch.compile(block)
    x = torch.randn(batch, seq, d_model, device=perf.device_type, dtype=dtype)

    def eager_step(x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return block(x)  # type: ignore[no-any-return]

    def compiled_step(x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return compiled(x)  # type: ignore[no-any-return]

    with torch.no_grad():
        torch.testing.assert_close(compiled(x), block(x), rtol=5e-2, atol=5e-2)
    timers = {
        "eager": perf.timer(eager_step, args=(x,)),
        "compiled": perf.timer(compiled_step, args=(x,)),
    }
    rounds = max(perf.tier.timing.min_samples, perf.tier.timing.interleaved_rounds)
    measured = measure_interleaved(
        timers, rounds=rounds, min_block_time=perf.tier.timing.min_block_time
    )
    for name, measurement in measured.items():
        perf.record_latency(record_metric, name, measurement)
    perf.record_ratio(record_metric, "speedup", measured["eager"], measured["compiled"])
