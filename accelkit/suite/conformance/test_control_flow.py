"""PyTorch 2.14 control flow: multi-branch switch, cond and while_loop, eager and compiled."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from accelkit.suite.reference import assert_matches_reference, make_input, reference

MODES = ["eager", "compiled"]


def _run(fn: Callable[..., Any], mode: str) -> Callable[..., Any]:
    if mode == "compiled":
        torch._dynamo.reset()
        return torch.compile(fn, backend="inductor", fullgraph=True)
    return fn


def _branches() -> tuple[Callable[..., Any], ...]:
    # Branches with different ops; each returns a tuple, as switch requires.
    return (
        lambda x: (x + 1.0,),
        lambda x: (x * x - 0.5,),
        lambda x: (torch.sin(x) * 2.0,),
        lambda x: (torch.softmax(x, dim=-1),),
    )


@pytest.mark.requires("switch")
@pytest.mark.parametrize("mode", MODES)
def test_switch(mode: str, device: str) -> None:
    from torch._higher_order_ops import switch

    def f(index: Any, x: torch.Tensor) -> Any:
        return switch(index, _branches(), (x,))

    run = _run(f, mode)
    x = make_input((8, 16), torch.float32, device)
    for index in range(4):
        want = reference(lambda t, i=index: _branches()[i](t), x)
        # The index as a Python int and as a 0-d integer tensor on the device.
        assert_matches_reference(run(index, x), want, torch.float32, what=f"branch {index} (int)")
        as_tensor = torch.tensor(index, device=device)
        assert_matches_reference(
            run(as_tensor, x), want, torch.float32, what=f"branch {index} (tensor)"
        )


@pytest.mark.requires("switch")
@pytest.mark.parametrize("mode", MODES)
def test_switch_clamps_out_of_range(mode: str, device: str) -> None:
    from torch._higher_order_ops import switch

    def f(index: Any, x: torch.Tensor) -> Any:
        return switch(index, _branches(), (x,))

    run = _run(f, mode)
    x = make_input((4, 8), torch.float32, device)
    last = reference(lambda t: _branches()[-1](t), x)
    first = reference(lambda t: _branches()[0](t), x)
    assert_matches_reference(
        run(torch.tensor(7, device=device), x), last, torch.float32, what="7 -> last"
    )
    assert_matches_reference(
        run(torch.tensor(-3, device=device), x), first, torch.float32, what="-3 -> first"
    )


@pytest.mark.requires("cond")
@pytest.mark.parametrize("mode", MODES)
def test_cond(mode: str, device: str) -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, lambda t: t.cos() * 3.0, lambda t: t.exp() - 1.0, (x,))

    run = _run(f, mode)
    for sign in (1.0, -1.0):
        x = make_input((6, 10), torch.float32, device, low=0.1, high=1.0) * sign
        assert_matches_reference(run(x), reference(f, x), torch.float32, what=f"pred {sign > 0}")


@pytest.mark.requires("while_loop")
@pytest.mark.parametrize("mode", MODES)
def test_while_loop(mode: str, device: str) -> None:
    def f(limit: torch.Tensor, x: torch.Tensor) -> Any:
        def cond_fn(i: torch.Tensor, acc: torch.Tensor) -> torch.Tensor:
            return i < limit

        def body_fn(i: torch.Tensor, acc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return i + 1, acc * 0.5 + torch.tanh(acc)

        return torch.while_loop(
            cond_fn, body_fn, (torch.zeros((), dtype=torch.int64, device=x.device), x)
        )

    run = _run(f, mode)
    x = make_input((5, 7), torch.float32, device)
    for steps in (0, 1, 6):
        limit = torch.tensor(steps, device=device)
        count, acc = run(limit, x)
        assert int(count) == steps, f"{steps} iterations expected, ran {int(count)}"
        want = reference(f, limit, x)[1]
        assert_matches_reference(acc, want, torch.float32, scale=4.0, what=f"{steps} iterations")
