"""Compiled-vs-eager timing of a transformer block, for `test_compile.py::test_speedup`.

`measure_pass` runs where the run puts it (accelkit.suite.session.run_scoped): with several
measurement passes, in one worker process for the whole run, so the block is compiled once
per run (the first pass) and every pass times eager against the same compiled block;
otherwise in the pass's own process. Either way each pass takes its own interleaved samples,
and in an interleaved A/B pass they take the side's turns (`lockstep.taking_turns`).
"""

from __future__ import annotations

from typing import Any

from accelkit.suite.perf.harness import torch_dtype
from accelkit.suite.perf.timing import Measurement, Timer, measure_interleaved
from accelkit.suite.session import lockstep


def block(d_model: int, heads: int) -> Any:
    """A pre-norm transformer block (attention via SDPA, GELU MLP)."""
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
            out: torch.Tensor = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
            return out

    return Block()


class _Compiled:
    """The block, its compiled form and an input, built on first use and kept."""

    def __init__(
        self, block_case: tuple[int, int, int, int], dtype: Any, device: str, threads: int | None
    ) -> None:
        import torch

        if threads is not None:
            torch.set_num_threads(threads)
        batch, seq, d_model, heads = block_case
        self.eager = block(d_model, heads).to(device=device, dtype=dtype).eval()
        self.compiled = torch.compile(self.eager)
        self.x = torch.randn(batch, seq, d_model, device=device, dtype=dtype)


def measure_pass(
    state: dict[str, Any],
    *,
    block_case: tuple[int, int, int, int],
    dtype: str,
    device: str,
    timer_device: str | None,
    threads: int | None,
    rounds: int,
    min_block_time: float,
    turns: lockstep.Handoff | None = None,
) -> dict[str, Measurement]:
    """Check the compiled block against eager, then time both interleaved (`rounds`
    rounds); `state` keeps the compiled block between calls. `timer_device`: None to time
    with the host clock, else the device whose events time the calls. `turns`: the
    case's `lockstep.relay()` (an interleaved A/B pass), whose turns the rounds take."""
    import torch

    key = ("block", block_case, dtype, device)
    built = state.get(str(key))
    if built is None:
        built = state[str(key)] = _Compiled(block_case, torch_dtype(dtype), device, threads)

    def eager_step(x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return built.eager(x)  # type: ignore[no-any-return]

    def compiled_step(x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return built.compiled(x)  # type: ignore[no-any-return]

    with torch.no_grad():
        torch.testing.assert_close(
            built.compiled(built.x), built.eager(built.x), rtol=5e-2, atol=5e-2
        )
    timers = {
        "eager": Timer(eager_step, args=(built.x,), device=timer_device),
        "compiled": Timer(compiled_step, args=(built.x,), device=timer_device),
    }
    with lockstep.taking_turns(turns):
        return measure_interleaved(timers, rounds=rounds, min_block_time=min_block_time)
