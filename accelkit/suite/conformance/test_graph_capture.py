"""Graph capture: CUDA graphs (capture, replay, make_graphed_callables), torch.cond and
torch.while_loop captured as CUDA graph conditional nodes, Intel XPU graphs, and the generic
torch.accelerator.Graph.

Replays run on *new* data copied into the captured (static) inputs, and every answer is
compared with the same computation in float64 on the CPU on that new data: a replay that
reran stale work, or a conditional node whose branch/trip count was frozen at capture time,
fails. ROCm devices are `cuda` devices here (HIP graphs sit behind torch.cuda.CUDAGraph).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from accelkit.suite.numerics.reference import (
    absolute_terms,
    assert_matches_reference,
    iteration_atol,
    make_input,
    reference,
)


def _work(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x @ w) * 2.0 + x.sum(dim=1, keepdim=True)


def _check_work(got: torch.Tensor, x: torch.Tensor, w: torch.Tensor, what: str) -> None:
    """_work's answer: x @ w and x.sum(dim=1) each sum 32 terms (TF32 is off: conftest.py)."""
    terms = absolute_terms(_work, x, w)
    assert_matches_reference(
        got, reference(_work, x, w), torch.float32, terms=terms, count=64, what=what
    )


def _warm_up(fn: Callable[[], Any], stream: Any) -> None:
    """Run `fn` a few times on a side stream before capture (allocator and library
    handles warm; the pattern torch.cuda.graphs documents)."""
    stream.wait_stream(torch.accelerator.current_stream())
    with stream:
        for _ in range(3):
            fn()
    torch.accelerator.current_stream().wait_stream(stream)


def _replay_checks(
    replay: Callable[[], None],
    static_x: torch.Tensor,
    w: torch.Tensor,
    static_out: Any,
    device: str,
) -> None:
    for trial in range(3):
        static_x.copy_(make_input(tuple(static_x.shape), torch.float32, device))
        replay()
        torch.accelerator.synchronize()
        _check_work(static_out, static_x, w, f"replay {trial}")


@pytest.mark.requires("cuda_graph")
def test_cuda_graph_capture_replay(device: str) -> None:
    static_x = make_input((16, 32), torch.float32, device)
    w = make_input((32, 32), torch.float32, device, low=-0.2, high=0.2)
    _warm_up(lambda: _work(static_x, w), torch.cuda.Stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = _work(static_x, w)
    _replay_checks(graph.replay, static_x, w, static_out, device)


@pytest.mark.requires("cuda_graph")
def test_cuda_graph_make_graphed_callables(device: str) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 8))
    model = model.to(device)
    ref_params = [p.detach().cpu().double().requires_grad_() for p in model.parameters()]
    sample = make_input((4, 32), torch.float32, device).requires_grad_()
    graphed = torch.cuda.make_graphed_callables(model, (sample,))
    for trial in range(2):
        x = make_input((4, 32), torch.float32, device).requires_grad_()
        model.zero_grad(set_to_none=True)
        out = graphed(x)
        out.square().sum().backward()
        torch.cuda.synchronize()
        # Reference: the same layers applied functionally in float64 on the CPU.
        x_ref = x.detach().cpu().double()
        w1, b1, w2, b2 = ref_params
        for p in ref_params:
            p.grad = None
        want = torch.nn.functional.linear(
            torch.nn.functional.gelu(torch.nn.functional.linear(x_ref, w1, b1)), w2, b2
        )
        want.square().sum().backward()
        # Linear(32) and Linear(64); gradients sum over the batch of 4 at each layer.
        count = 32 + 64 + 2 * 4
        assert_matches_reference(out, want, torch.float32, count=count, what=f"forward {trial}")
        for (name, p), ref in zip(model.named_parameters(), ref_params, strict=True):
            assert_matches_reference(
                p.grad, ref.grad, torch.float32, count=count, what=f"grad {name} {trial}"
            )


def _while_fn(limit: torch.Tensor, x: torch.Tensor) -> Any:
    def cond_fn(i: torch.Tensor, acc: torch.Tensor) -> torch.Tensor:
        return i < limit  # a 0-d bool tensor on the device, as conditional nodes require

    def body_fn(i: torch.Tensor, acc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return i + 1, acc * 0.5 + torch.tanh(acc)

    return torch.while_loop(cond_fn, body_fn, (torch.zeros_like(limit), x))


def _while_reference(steps: int, x: torch.Tensor) -> torch.Tensor:
    acc = x.detach().cpu().double()
    for _ in range(steps):
        acc = acc * 0.5 + torch.tanh(acc)
    return acc


def _loop_atol(steps: int, x: torch.Tensor, want: torch.Tensor) -> float:
    """The rounding of `steps` steps of acc * 0.5 + tanh(acc) (three roundings per step, the
    step's derivative at most 1.5)."""
    largest = max(float(x.detach().abs().max()), float(want.abs().max()))
    return iteration_atol(torch.float32, steps, 3, 1.5, largest)


def _cond_fn(pred: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return torch.cond(pred, lambda t: t.cos() * 3.0, lambda t: t.exp() - 1.0, (x,))


def _capture_with_conditional_nodes(fn: Callable[[], Any]) -> tuple[Any, Any]:
    """Warm up every branch/body, then capture `fn` with control flow as conditional nodes."""
    from torch._higher_order_ops.cudagraph_conditional_nodes import (
        ControlFlowOpWarmupDispatchMode,
        CUDAGraphCaptureControlFlowOpDispatchMode,
    )

    with ControlFlowOpWarmupDispatchMode():
        fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), CUDAGraphCaptureControlFlowOpDispatchMode():
        out = fn()
    return graph, out


@pytest.mark.requires("cuda_graph_while_loop")
def test_cuda_graph_while_loop(device: str) -> None:
    limit = torch.tensor(2, dtype=torch.int64, device=device)
    x = make_input((8, 8), torch.float32, device)
    graph, (count, acc) = _capture_with_conditional_nodes(lambda: _while_fn(limit, x))
    # The trip count is read on the device at replay: change it after capture.
    for steps in (0, 1, 5, 2):
        limit.fill_(steps)
        x.copy_(make_input((8, 8), torch.float32, device))
        graph.replay()
        torch.cuda.synchronize()
        assert int(count) == steps, f"replay ran {int(count)} iterations, expected {steps}"
        want = _while_reference(steps, x)
        atol = _loop_atol(steps, x, want)
        assert_matches_reference(acc, want, torch.float32, atol=atol, what=f"{steps} iterations")


@pytest.mark.requires("cuda_graph_while_loop")
def test_cuda_graph_cond(device: str) -> None:
    pred = torch.tensor(True, device=device)
    x = make_input((8, 8), torch.float32, device)
    graph, out = _capture_with_conditional_nodes(lambda: _cond_fn(pred, x))
    for taken in (False, True, False):
        pred.fill_(taken)
        x.copy_(make_input((8, 8), torch.float32, device))
        graph.replay()
        torch.cuda.synchronize()
        branch = (lambda t: t.cos() * 3.0) if taken else (lambda t: t.exp() - 1.0)
        want = reference(branch, x)
        assert_matches_reference(out, want, torch.float32, what=f"pred {taken}")


@pytest.mark.requires("cuda_graph_while_loop")
def test_cuda_graph_while_loop_compiled(device: str) -> None:
    """torch.compile(backend="cudagraphs") enters the conditional-node modes by itself."""
    torch._dynamo.reset()
    compiled = torch.compile(_while_fn, backend="cudagraphs", fullgraph=True)
    for steps in (3, 0, 4):
        limit = torch.tensor(steps, dtype=torch.int64, device=device)
        x = make_input((8, 8), torch.float32, device)
        count, acc = compiled(limit, x)
        torch.cuda.synchronize()
        assert int(count) == steps, f"ran {int(count)} iterations, expected {steps}"
        want = _while_reference(steps, x)
        atol = _loop_atol(steps, x, want)
        assert_matches_reference(acc, want, torch.float32, atol=atol, what=f"{steps} iterations")


@pytest.mark.requires("xpu_graph")
def test_xpu_graph_capture_replay(device: str) -> None:
    static_x = make_input((16, 32), torch.float32, device)
    w = make_input((32, 32), torch.float32, device, low=-0.2, high=0.2)
    _warm_up(lambda: _work(static_x, w), torch.xpu.Stream())
    graph = torch.xpu.XPUGraph()
    with torch.xpu.graph(graph, pool=torch.xpu.graph_pool_handle()):
        static_out = _work(static_x, w)
    _replay_checks(graph.replay, static_x, w, static_out, device)


@pytest.mark.requires("xpu_graph")
def test_xpu_graph_make_graphed_callables(device: str) -> None:
    w = make_input((32, 32), torch.float32, device, low=-0.2, high=0.2)

    def fn(x: torch.Tensor) -> torch.Tensor:
        return _work(x, w)

    graphed = torch.xpu.make_graphed_callables(fn, (make_input((16, 32), torch.float32, device),))
    for trial in range(3):
        x = make_input((16, 32), torch.float32, device)
        out = graphed(x)
        torch.xpu.synchronize()
        _check_work(out, x, w, f"call {trial}")


@pytest.mark.requires("accelerator_graph")
def test_accelerator_graph(device: str) -> None:
    static_x = make_input((16, 32), torch.float32, device)
    w = make_input((32, 32), torch.float32, device, low=-0.2, high=0.2)
    stream = torch.Stream(device=device)
    _warm_up(lambda: _work(static_x, w), stream)
    graph = torch.accelerator.Graph()
    with stream, graph:
        static_out = _work(static_x, w)
    _replay_checks(graph.replay, static_x, w, static_out, device)
