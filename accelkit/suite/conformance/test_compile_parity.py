"""torch.compile (Inductor) parity on a small model zoo, forward and backward.

Each model runs compiled on the device and, as the reference, in float64 on the CPU (an
independent copy of the same weights). Outputs and the gradients of every parameter must
match within float32 tolerance. The compiled model must be captured as ONE graph with no
graph break, and calling it again with fresh inputs of the same shapes must not recompile
(a backend wrapper counts compiled graphs; dynamo's counters count graph breaks).

Models are tiny on purpose: Inductor's compile time, not the arithmetic, is the cost here.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from accelkit.suite.numerics.reference import assert_matches_reference, make_input
from accelkit.suite.zoo import ZOO

pytestmark = pytest.mark.requires("inductor")


class DecodeStep(nn.Module):
    """One decode step of a tiny transformer layer with a KV cache: the new token's key and
    value are written at `pos` (a tensor, so every position reuses one graph) and the query
    attends to the cache under a mask of the positions filled so far."""

    def __init__(self, dim: int = 32, heads: int = 4, max_len: int = 8) -> None:
        super().__init__()
        self.heads, self.max_len = heads, max_len
        self.qkv, self.out = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.norm, self.mlp = nn.LayerNorm(dim), nn.Linear(dim, dim)

    def forward(
        self, x: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, pos: torch.Tensor
    ) -> torch.Tensor:
        b, _, d = x.shape
        q, k, v = self.qkv(self.norm(x)).view(b, 1, 3, self.heads, d // self.heads).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (b, heads, 1, head_dim)
        k_cache.index_copy_(2, pos, k)
        v_cache.index_copy_(2, pos, v)
        mask = (torch.arange(self.max_len, device=x.device) <= pos).view(1, 1, 1, self.max_len)
        y = F.scaled_dot_product_attention(q, k_cache, v_cache, attn_mask=mask)
        h = x + self.out(y.transpose(1, 2).reshape(b, 1, d))
        return h + self.mlp(F.silu(h))


def _reference_module(module: nn.Module) -> nn.Module:
    return copy.deepcopy(module).to(device="cpu", dtype=torch.float64)


def _reference_inputs(inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(
        t.detach().cpu().to(torch.float64) if t.is_floating_point() else t.cpu() for t in inputs
    )


class GraphCount:
    """Counts the graphs dynamo hands to Inductor (a graph break or recompile adds one)
    and the graph breaks dynamo reports."""

    def __init__(self) -> None:
        from torch._dynamo.testing import CompileCounterWithBackend
        from torch._dynamo.utils import counters

        self.backend = CompileCounterWithBackend("inductor")
        self._counters = counters
        self._breaks_before = sum(counters["graph_break"].values())

    @property
    def graphs(self) -> int:
        return int(self.backend.frame_count)

    @property
    def breaks(self) -> dict[str, int]:
        return dict(self._counters["graph_break"])

    def assert_one_graph(self, what: str) -> None:
        breaks = sum(self._counters["graph_break"].values()) - self._breaks_before
        assert breaks == 0, f"{what}: {breaks} graph break(s): {self.breaks}"
        assert self.graphs == 1, (
            f"{what}: {self.graphs} graphs compiled, expected exactly 1 "
            "(0: not compiled at all; more: graph breaks or recompilations)"
        )


@pytest.mark.parametrize("model", list(ZOO))
def test_compile_parity(model: str, device: str) -> None:
    factory, make_inputs, length = ZOO[model]
    torch._dynamo.reset()
    module = factory().to(device)
    reference = _reference_module(module)
    count = GraphCount()
    compiled = torch.compile(module, backend=count.backend)
    for call in range(2):  # the second call, with fresh inputs, must reuse the graph
        inputs = make_inputs(device)
        module.zero_grad(set_to_none=True)
        reference.zero_grad(set_to_none=True)
        out = compiled(*inputs)
        out.square().sum().backward()
        want = reference(*_reference_inputs(inputs))
        want.square().sum().backward()
        what = f"{model} call {call}"
        assert_matches_reference(out, want, torch.float32, count=length, what=f"{what} forward")
        # A gradient sums terms as large as the largest gradient of the model, even where it
        # cancels to ~0 (the bias of a convolution followed by a batch norm): its terms are
        # the largest magnitude among all the reference's gradients, not its own.
        terms = max(_largest(p.grad) for p in reference.parameters() if p.grad is not None)
        for (name, param), ref_param in zip(
            module.named_parameters(), reference.parameters(), strict=True
        ):
            assert param.grad is not None, f"{what}: no gradient for {name}"
            assert_matches_reference(
                param.grad,
                ref_param.grad,
                torch.float32,
                terms=terms,
                count=length,
                what=f"{what} grad {name}",
            )
    count.assert_one_graph(model)


def _largest(x: torch.Tensor) -> float:
    return float(x.detach().abs().max()) if x.numel() else 0.0


def test_decode_step(device: str) -> None:
    """Inference decode with an in-place KV cache, three positions, one graph."""
    torch._dynamo.reset()
    module = DecodeStep().to(device).eval()
    reference = _reference_module(module)
    heads, max_len, head_dim = module.heads, module.max_len, 32 // module.heads
    cache_shape = (2, heads, max_len, head_dim)
    caches = [torch.zeros(cache_shape, device=device) for _ in range(2)]
    ref_caches = [torch.zeros(cache_shape, dtype=torch.float64) for _ in range(2)]
    count = GraphCount()
    compiled = torch.compile(module, backend=count.backend)
    with torch.no_grad():
        for step in range(3):
            x = make_input((2, 1, 32), torch.float32, device)
            pos = torch.tensor([step], device=device)
            out = compiled(x, *caches, pos)
            want = reference(*_reference_inputs((x,)), *ref_caches, pos.cpu())
            what = f"decode position {step}"
            # qkv and out (32 each), attention over 8 cached positions, the MLP (32)
            assert_matches_reference(out, want, torch.float32, count=104, what=what)
            for name, cache, ref_cache in zip(("k", "v"), caches, ref_caches, strict=True):
                assert_matches_reference(
                    cache, ref_cache, torch.float32, count=48, what=f"{what} {name}_cache"
                )
    count.assert_one_graph("decode_step")
