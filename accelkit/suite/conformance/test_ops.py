"""Operator numerics against a float64 CPU reference, per dtype the device supports."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from accelkit.suite.reference import assert_matches_reference, make_input, reference

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _binary(fn: Callable[..., Any]) -> Callable[[torch.dtype, str], tuple[Any, ...]]:
    return lambda dt, dev: (fn, (make_input((64, 96), dt, dev), make_input((64, 96), dt, dev)), 1.0)


# name -> builder(dtype, device) -> (function, inputs, tolerance scale)
OPS: dict[str, Callable[[torch.dtype, str], tuple[Any, ...]]] = {
    "add": _binary(torch.add),
    "mul": _binary(torch.mul),
    "exp": lambda dt, dev: (torch.exp, (make_input((4096,), dt, dev),), 1.0),
    "tanh": lambda dt, dev: (torch.tanh, (make_input((4096,), dt, dev),), 1.0),
    "softmax": lambda dt, dev: (
        lambda x: torch.softmax(x, dim=-1),
        (make_input((32, 257), dt, dev, low=-8, high=8),),
        2.0,
    ),
    "sum": lambda dt, dev: (
        lambda x: x.sum(dim=-1),
        (make_input((16, 1024), dt, dev),),
        math.sqrt(1024),
    ),
    "matmul": lambda dt, dev: (
        torch.matmul,
        (make_input((48, 128), dt, dev), make_input((128, 40), dt, dev)),
        math.sqrt(128),
    ),
    "layer_norm": lambda dt, dev: (
        lambda x, w, b: F.layer_norm(x, (96,), w, b),
        (make_input((32, 96), dt, dev), make_input((96,), dt, dev), make_input((96,), dt, dev)),
        4.0,
    ),
}


@pytest.mark.parametrize(
    ("op", "dtype_name"),
    [(op, dt) for op in OPS for dt in DTYPES],
    ids=[f"{op}/{dt}" for op in OPS for dt in DTYPES],
)
def test_ops(op: str, dtype_name: str, device: str) -> None:
    dtype = DTYPES[dtype_name]
    fn, inputs, scale = OPS[op](dtype, device)
    actual = fn(*inputs)
    assert actual.dtype == dtype, f"{op} returned {actual.dtype} for {dtype} inputs"
    assert_matches_reference(actual, reference(fn, *inputs), dtype, scale=scale, what=op)
