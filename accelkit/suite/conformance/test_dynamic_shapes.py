"""Dynamic shapes: 2.14's @dynamic_spec (TensorSpec/ShapeVar/IntVar) with torch.compile,
torch.export and make_fx, and the classic mark_dynamic path.

Dims a spec marks dynamic become unbacked symbols: one compiled graph (or one exported
program, or one traced graph) must serve every size inside the spec's range.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from accelkit.suite.numerics.reference import (
    absolute_terms,
    assert_matches_reference,
    make_input,
    reference,
)

SIZES = (3, 5, 17, 64)
SCALES = (1, 4, 0, 9)  # values of the IntVar argument, paired with SIZES


def _body(x: torch.Tensor, y: torch.Tensor, n: Any) -> torch.Tensor:
    return (torch.relu(x @ x.T).sum(dim=1) + (x * y).mean(dim=1)) * n


def _spec() -> Any:
    from torch.fx.experimental.dynamic_spec import STATIC, IntVar, ShapesSpec, ShapeVar, TensorSpec

    batch = ShapeVar("B", min=2, max=128)
    by_input = {
        "x": TensorSpec([batch, STATIC]),
        "y": TensorSpec([batch, 8]),
        "n": IntVar("n", min=0, max=100),
    }
    return ShapesSpec(by_input)


def _check(got: torch.Tensor, x: torch.Tensor, y: torch.Tensor, n: Any, what: str) -> None:
    """_body's answer: row b sums B products of 8 terms (x @ x.T, relu, sum) and 8 more."""
    terms = absolute_terms(_body, x, y, n)
    count = 8 * x.shape[0] + 8
    assert_matches_reference(
        got, reference(_body, x, y, n), torch.float32, terms=terms, count=count, what=what
    )


def _check_cumulative(got: torch.Tensor, f: Any, x: torch.Tensor, what: str) -> None:
    """A cumulative sum along dim 0: element i sums i + 1 terms."""
    terms = absolute_terms(f, x)
    assert_matches_reference(
        got, reference(f, x), torch.float32, terms=terms, count=x.shape[0], what=what
    )


def _inputs(batch: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    x = make_input((batch, 8), torch.float32, device)
    y = make_input((batch, 8), torch.float32, device)
    return x, y


@pytest.mark.requires("dynamic_spec")
def test_dynamic_spec_compile(device: str) -> None:
    from torch._dynamo.testing import CompileCounterWithBackend
    from torch.fx.experimental.dynamic_spec import dynamic_spec

    @dynamic_spec(_spec())
    def f(x: torch.Tensor, y: torch.Tensor, n: Any) -> torch.Tensor:
        return _body(x, y, n)

    torch._dynamo.reset()
    counter = CompileCounterWithBackend("inductor")
    compiled = torch.compile(f, backend=counter, fullgraph=True)
    # Sizes and scalars inside the spec must reuse the first graph: a recompile fails.
    with torch._dynamo.config.patch(error_on_recompile=True):
        for batch, n in zip(SIZES, SCALES, strict=True):
            x, y = _inputs(batch, device)
            _check(compiled(x, y, n), x, y, n, f"B={batch} n={n}")
    assert counter.frame_count == 1, f"{counter.frame_count} graphs for one spec, expected 1"


@pytest.mark.requires("dynamic_spec")
def test_dynamic_spec_compile_call_site(device: str) -> None:
    """The same spec passed as torch.compile(dynamic_shapes=...); not with `dynamic=`, and
    not together with the decorator."""
    from torch._dynamo.testing import CompileCounter
    from torch.fx.experimental.dynamic_spec import dynamic_spec

    torch._dynamo.reset()
    counter = CompileCounter()  # tracing only: the Inductor path is covered above
    compiled = torch.compile(_body, backend=counter, fullgraph=True, dynamic_shapes=_spec())
    for batch, n in zip(SIZES, SCALES, strict=True):
        x, y = _inputs(batch, device)
        _check(compiled(x, y, n), x, y, n, f"B={batch} n={n}")
    assert counter.frame_count == 1, f"{counter.frame_count} graphs for one spec, expected 1"
    with pytest.raises(ValueError, match="dynamic"):
        torch.compile(_body, dynamic=True, dynamic_shapes=_spec())
    decorated = dynamic_spec(_spec())(lambda x, y, n: _body(x, y, n))
    with pytest.raises(ValueError, match="dynamic_spec"):
        torch.compile(decorated, dynamic_shapes=_spec())(*_inputs(3, device), 1)


class _Body(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor, n: Any) -> torch.Tensor:
        return _body(x, y, n)


@pytest.mark.requires("dynamic_spec")
def test_dynamic_spec_export(device: str) -> None:
    program = torch.export.export(_Body(), (*_inputs(4, device), 3), dynamic_shapes=_spec())
    module = program.module()
    for batch, n in zip(SIZES, SCALES, strict=True):
        x, y = _inputs(batch, device)
        _check(module(x, y, n), x, y, n, f"exported, B={batch} n={n}")
    # Outside the spec's range the program's runtime assertions must reject the input.
    with pytest.raises(Exception, match=r"(?i)assert|range|constraint|expected|guard"):
        module(*_inputs(1, device), 3)  # B below min=2
    with pytest.raises(Exception, match=r"(?i)assert|range|constraint|expected|guard"):
        module(*_inputs(4, device), 101)  # n above max=100


@pytest.mark.requires("dynamic_spec")
def test_dynamic_spec_make_fx(device: str) -> None:
    from torch.fx.experimental.proxy_tensor import make_fx

    graph = make_fx(_body, tracing_mode="fake", dynamic_shapes=_spec())(*_inputs(4, device), 3)
    placeholders = [n for n in graph.graph.nodes if n.op == "placeholder"]
    assert len(placeholders) == 3, f"traced graph has {len(placeholders)} inputs, expected 3"
    for batch, n in zip(SIZES, SCALES, strict=True):
        x, y = _inputs(batch, device)
        _check(graph(x, y, n), x, y, n, f"make_fx graph, B={batch} n={n}")


def test_mark_dynamic(device: str) -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x).cumsum(dim=0)

    torch._dynamo.reset()
    compiled = torch.compile(f, backend="inductor", fullgraph=True)
    x = make_input((SIZES[0], 4), torch.float32, device)
    torch._dynamo.mark_dynamic(x, 0)
    _check_cumulative(compiled(x), f, x, "n=3")
    with torch._dynamo.config.patch(error_on_recompile=True):
        for n in SIZES[1:]:
            x = make_input((n, 4), torch.float32, device)
            torch._dynamo.mark_dynamic(x, 0)
            _check_cumulative(compiled(x), f, x, f"n={n}")
