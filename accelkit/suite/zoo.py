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

from accelkit.suite.reference import make_input


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


# name -> (model factory, input factory(device), tolerance scale)
ZOO: dict[str, tuple[Callable[[], nn.Module], Callable[[str], tuple[Any, ...]], float]] = {
    "mlp": (MLP, lambda dev: (make_input((4, 16), torch.float32, dev),), 16.0),
    "conv_block": (ConvBlock, lambda dev: (make_input((2, 3, 8, 8), torch.float32, dev),), 64.0),
    "attention_sdpa": (
        AttentionBlock,
        lambda dev: (make_input((2, 6, 32), torch.float32, dev),),
        32.0,
    ),
    "layernorm_embedding": (
        EmbeddingNorm,
        lambda dev: (torch.randint(0, 50, (3, 7)).to(dev),),
        32.0,
    ),
    "gru": (GRU, lambda dev: (make_input((3, 4, 8), torch.float32, dev),), 32.0),
}
