"""The suite's small model zoo: what `conformance/compile_parity` compiles on the device and
checks against a float64 reference, and what a compile-only run has Inductor generate
Triton kernels from for a GPU target (`accelkit.suite.crosscompile.inductor`).

Models are tiny on purpose: Inductor's compile time, not the arithmetic, is the cost here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from accelkit.suite.numerics.reference import make_input


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(16, 32), nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class ConvBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv, self.norm = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.max_pool2d(F.relu(self.norm(self.conv(x))), 2)


class AttentionBlock(nn.Module):
    def __init__(self, dim: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.qkv, self.out = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, t, d)) + x


class EmbeddingNorm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed, self.norm, self.head = nn.Embedding(50, 16), nn.LayerNorm(16), nn.Linear(16, 50)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.embed(ids)))


class GRU(nn.Module):
    """A GRU cell unrolled over the sequence (nn.GRU itself is not traced by dynamo:
    `torch._dynamo.config.allow_rnn` is False, so it would silently run eagerly)."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.GRUCell(8, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.new_zeros(x.shape[0], 16)
        for step in range(x.shape[1]):
            h = self.cell(x[:, step], h)
        return h


# name -> (model factory, input factory(device), count): the most terms any output or
# gradient element accumulates along its longest chain of sums (a layer's fan-in, a norm's
# or a batch reduction's length, summed over the layers and steps it passes through), so
# its bound is sqrt(count) * eps times the reference's largest magnitude.
ZOO: dict[str, tuple[Callable[[], nn.Module], Callable[[str], tuple[Any, ...]], int]] = {
    # fc1 (16) + fc2 (32), gradients summed over the batch of 4 at each layer
    "mlp": (MLP, lambda dev: (make_input((4, 16), torch.float32, dev),), 16 + 32 + 2 * 4),
    # conv fan-in 27, batch statistics over 2 * 8 * 8 = 128, weight gradients over 128 pixels
    "conv_block": (
        ConvBlock,
        lambda dev: (make_input((2, 3, 8, 8), torch.float32, dev),),
        27 + 128 + 128,
    ),
    # qkv (32), attention over 6 positions, out (32), weight gradients over 12 tokens
    "attention_sdpa": (
        AttentionBlock,
        lambda dev: (make_input((2, 6, 32), torch.float32, dev),),
        32 + 6 + 32 + 12,
    ),
    # layer norm (16), head (16), gradients over 21 tokens and 50 classes
    "layernorm_embedding": (
        EmbeddingNorm,
        lambda dev: (torch.randint(0, 50, (3, 7)).to(dev),),
        16 + 16 + 21 + 50,
    ),
    # 4 steps of a GRU cell (fan-in 8 + 16 per step), gradients over the batch and steps
    "gru": (GRU, lambda dev: (make_input((3, 4, 8), torch.float32, dev),), 4 * 24 + 3 * 4),
}
