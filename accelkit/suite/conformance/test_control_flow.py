"""PyTorch 2.14 control flow: multi-branch switch, cond and while_loop, each eager, under
torch.compile (Inductor) and through torch.export (the exported program's module is run).

Every answer is compared with the branch (or loop) evaluated directly in float64 on the CPU.
Compiled functions are kept per pytest worker (module-level cache) so that the cases of one
feature share Inductor's compile cost instead of paying it per case.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from accelkit.suite.numerics.reference import (
    assert_matches_reference,
    iteration_atol,
    make_input,
    reference,
)

MODES = ["eager", "compiled", "export"]


def _branches() -> tuple[Callable[..., Any], ...]:
    # Four branches with different ops; each returns a tuple, as switch requires.
    return (
        lambda x: (x + 1.0,),
        lambda x: (x * x - 0.5,),
        lambda x: (torch.sin(x) * 2.0,),
        lambda x: (torch.softmax(x, dim=-1),),
    )


def _switch_fn(index: Any, x: torch.Tensor) -> Any:
    from torch._higher_order_ops import switch

    return switch(index, _branches(), (x,))


def _cond_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.cond(x.sum() > 0, lambda t: t.cos() * 3.0, lambda t: t.exp() - 1.0, (x,))


def _while_fn(limit: torch.Tensor, x: torch.Tensor) -> Any:
    def cond_fn(i: torch.Tensor, acc: torch.Tensor) -> torch.Tensor:
        return i < limit

    def body_fn(i: torch.Tensor, acc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return i + 1, acc * 0.5 + torch.tanh(acc)

    return torch.while_loop(
        cond_fn, body_fn, (torch.zeros((), dtype=torch.int64, device=x.device), x)
    )


def _loop_atol(steps: int, x: torch.Tensor, want: torch.Tensor) -> float:
    """The rounding of `steps` steps of acc * 0.5 + tanh(acc): each rounds three values of
    at most max|acc|, and the step's derivative 0.5 + sech(acc) ** 2 is at most 1.5."""
    largest = max(float(x.detach().abs().max()), float(want.abs().max()))
    return iteration_atol(torch.float32, steps, 3, 1.5, largest)


class _AsModule(torch.nn.Module):
    """torch.export takes modules: a thin one around a function."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any) -> Any:
        return self.fn(*args)


_COMPILED: dict[str, Callable[..., Any]] = {}


def _compiled(fn: Callable[..., Any]) -> Callable[..., Any]:
    name = fn.__name__
    if name not in _COMPILED:
        _COMPILED[name] = torch.compile(fn, backend="inductor", fullgraph=True)
    return _COMPILED[name]


def _exported(fn: Callable[..., Any], example: tuple[Any, ...]) -> Callable[..., Any]:
    program = torch.export.export(_AsModule(fn), example)
    return program.module()  # type: ignore[no-any-return]


def _expected_branch(index: int, x: torch.Tensor) -> Any:
    clamped = min(max(index, 0), len(_branches()) - 1)
    return reference(lambda t: _branches()[clamped](t), x)


def _switch_runner(mode: str, device: str, x: torch.Tensor) -> Callable[..., Any]:
    if mode == "compiled":
        return _compiled(_switch_fn)
    if mode == "export":
        # A tensor index keeps every branch in the exported graph.
        return _exported(_switch_fn, (torch.tensor(1, device=device), x))
    return _switch_fn


@pytest.mark.requires("switch")
@pytest.mark.parametrize("mode", MODES)
def test_switch(mode: str, device: str) -> None:
    x = make_input((8, 16), torch.float32, device)
    run = _switch_runner(mode, device, x)
    for index in range(len(_branches())):
        want = _expected_branch(index, x)
        as_tensor = torch.tensor(index, device=device)
        assert_matches_reference(
            run(as_tensor, x), want, torch.float32, what=f"branch {index} (0-d tensor index)"
        )
        if mode != "export":  # an exported int index is a constant: see test_switch_int_export
            assert_matches_reference(
                run(index, x), want, torch.float32, what=f"branch {index} (int)"
            )


@pytest.mark.requires("switch")
@pytest.mark.parametrize("mode", MODES)
def test_switch_clamps_out_of_range(mode: str, device: str) -> None:
    x = make_input((8, 16), torch.float32, device)
    run = _switch_runner(mode, device, x)
    for index in (-3, -1, 4, 7):
        want = _expected_branch(index, x)
        got = run(torch.tensor(index, device=device), x)
        what = f"tensor index {index} -> branch {min(max(index, 0), 3)}"
        assert_matches_reference(got, want, torch.float32, what=what)
        if mode != "export":
            assert_matches_reference(run(index, x), want, torch.float32, what=f"int index {index}")


@pytest.mark.requires("switch")
def test_switch_int_export(device: str) -> None:
    """An int index is specialised at export: the program computes that branch only."""
    x = make_input((8, 16), torch.float32, device)
    module = _exported(_switch_fn, (2, x))
    assert_matches_reference(module(2, x), _expected_branch(2, x), torch.float32, what="int 2")


@pytest.mark.requires("cond")
@pytest.mark.parametrize("mode", MODES)
def test_cond(mode: str, device: str) -> None:
    positive = make_input((6, 10), torch.float32, device, low=0.1, high=1.0)
    if mode == "compiled":
        run = _compiled(_cond_fn)
    elif mode == "export":
        run = _exported(_cond_fn, (positive,))
    else:
        run = _cond_fn
    for sign in (1.0, -1.0):
        x = positive * sign
        branch = (lambda t: t.cos() * 3.0) if sign > 0 else (lambda t: t.exp() - 1.0)
        want = reference(branch, x)
        assert_matches_reference(run(x), want, torch.float32, what=f"pred {sign > 0}")


@pytest.mark.requires("while_loop")
@pytest.mark.parametrize("mode", MODES)
def test_while_loop(mode: str, device: str) -> None:
    x = make_input((5, 7), torch.float32, device)
    if mode == "compiled":
        run = _compiled(_while_fn)
    elif mode == "export":
        run = _exported(_while_fn, (torch.tensor(3, device=device), x))
    else:
        run = _while_fn
    for steps in (0, 1, 6):
        count, acc = run(torch.tensor(steps, device=device), x)
        assert int(count) == steps, f"{steps} iterations expected, ran {int(count)}"
        want = x.detach().cpu().double()
        for _ in range(steps):
            want = want * 0.5 + torch.tanh(want)
        assert_matches_reference(
            acc, want, torch.float32, atol=_loop_atol(steps, x, want), what=f"{steps} iterations"
        )
