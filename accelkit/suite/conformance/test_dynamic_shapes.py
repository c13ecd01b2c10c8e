"""Dynamic shapes: 2.14's @dynamic_spec and the classic mark_dynamic path."""

from __future__ import annotations

import pytest
import torch

from accelkit.suite.reference import assert_matches_reference, make_input, reference

SIZES = (3, 5, 17, 64)


@pytest.mark.requires("dynamic_spec")
def test_dynamic_spec_compile(device: str) -> None:
    from torch.fx.experimental.dynamic_spec import STATIC, ShapeVar, TensorSpec, dynamic_spec

    @dynamic_spec({"x": TensorSpec([ShapeVar("B"), STATIC])})
    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x @ x.T).sum(dim=1) + x.mean()

    torch._dynamo.reset()
    compiled = torch.compile(f, backend="inductor", fullgraph=True)
    x = make_input((SIZES[0], 8), torch.float32, device)
    assert_matches_reference(compiled(x), reference(f, x), torch.float32, scale=8.0, what="B=3")
    # Sizes inside the spec must reuse the first graph: any recompilation is a failure.
    with torch._dynamo.config.patch(error_on_recompile=True):
        for batch in SIZES[1:]:
            x = make_input((batch, 8), torch.float32, device)
            assert_matches_reference(
                compiled(x), reference(f, x), torch.float32, scale=8.0, what=f"B={batch}"
            )


def test_mark_dynamic(device: str) -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x).cumsum(dim=0)

    torch._dynamo.reset()
    compiled = torch.compile(f, backend="inductor", fullgraph=True)
    x = make_input((SIZES[0], 4), torch.float32, device)
    torch._dynamo.mark_dynamic(x, 0)
    assert_matches_reference(compiled(x), reference(f, x), torch.float32, scale=8.0, what="n=3")
    with torch._dynamo.config.patch(error_on_recompile=True):
        for n in SIZES[1:]:
            x = make_input((n, 4), torch.float32, device)
            torch._dynamo.mark_dynamic(x, 0)
            assert_matches_reference(
                compiled(x), reference(f, x), torch.float32, scale=8.0, what=f"n={n}"
            )
