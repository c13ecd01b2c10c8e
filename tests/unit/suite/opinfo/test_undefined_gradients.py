"""A gradient element the float64 reference leaves NaN, at a sample whose inputs and forward
outputs are all finite, is undefined there and not compared (`running.undefined_as_reference`).

Found by exploratory seed 7001 (docs/results/2026-12-06-explore-seed-7001.md): masked.std's
gradient in the `expanded` layout, where every element of the reduction is equal. The exact
variance is 0, std = sqrt(var) is not differentiable there, and the float64 chain rule gives
(x - mean) / ((n - 1) std) = 0 / 0; the float32 mean of five copies of 7.77 is not 7.77, so
the float32 variance is 2.8e-13 and its gradient finite (0). Before, that failed the case.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch.testing._internal.opinfo.core import SampleInput

from accelkit.suite.opinfo.op_db import op_db_by_name
from accelkit.suite.opinfo.running import (
    all_finite,
    check_grad_sample,
    undefined_as_reference,
)

STD_KWARGS = {"mask": None, "dim": 0, "unbiased": True, "keepdim": True}


def _std_sample(x: torch.Tensor) -> Any:
    return SampleInput(x.requires_grad_(), kwargs=dict(STD_KWARGS))  # type: ignore[no-untyped-call]


def _leaf_sample(x: torch.Tensor) -> Any:
    return SampleInput(x.clone().requires_grad_())  # type: ignore[no-untyped-call]


def _check(sample: Any, layout: str | None = None, op: Any = None) -> bool:
    torch.manual_seed(0)  # the random weights of the outputs
    name = "masked.std" if op is None else "std"  # op_db's name: its tables, none for std
    op = op_db_by_name()["masked.std"] if op is None else op
    return check_grad_sample(op, name, "cpu", torch.float32, 0, sample, layout)


def _composite_std(x: torch.Tensor) -> torch.Tensor:
    d = x - x.mean(0, keepdim=True)
    return (d * d).sum(0, keepdim=True).div(x.shape[0] - 1).sqrt()


class _CompositeStd:
    """std over dim 0 as its graph: as masked.std, 0 / 0 in the float64 backward where a
    column is constant; unlike masked.std, whose graph counts the elements in an integer
    tensor (`magnitudes` takes that count's value for its error: a bound of the gradient's
    size, reported in docs/results/2026-12-06-explore-seed-7001.md), a graph bound as tight
    as the roundings, so a 0.1% error of the gradient fails."""

    op = staticmethod(_composite_std)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _composite_std(*args, **kwargs)

    @staticmethod
    def gradcheck_wrapper(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)


def _planted(change: Callable[[torch.Tensor], torch.Tensor]) -> Callable[..., Any]:
    """torch.autograd.grad with `change` applied to its float32 gradients (the device's; the
    float64 reference's are left alone)."""
    grad = torch.autograd.grad

    def planted(*args: Any, **kwargs: Any) -> Any:
        found = grad(*args, **kwargs)
        return tuple(
            change(g) if isinstance(g, torch.Tensor) and g.dtype == torch.float32 else g
            for g in found
        )

    return planted


def test_std_of_equal_values_has_no_gradient_to_compare() -> None:
    x = torch.tensor([7.77]).expand(5)
    # What the rule is for: the float32 gradient is finite, the float64 one NaN.
    y = torch.masked.std(x.clone().requires_grad_(), **STD_KWARGS)
    assert 0 < y.item() < 1e-6  # the variance of equal values, from the mean's rounding
    leaf = x.clone().requires_grad_()
    assert (
        torch.autograd.grad(torch.masked.std(leaf, **STD_KWARGS), leaf, torch.ones(1))[0]
        .isfinite()
        .all()
    )
    exact = x.double().clone().requires_grad_()
    out = torch.masked.std(exact, **STD_KWARGS)
    assert torch.autograd.grad(out, exact, torch.ones(1, dtype=torch.float64))[0].isnan().all()

    assert _check(_std_sample(x.clone()), "expanded")  # the layout of the finding
    assert _check(_std_sample(x.contiguous()))  # the same values contiguous: the same rule


def test_the_defined_elements_are_still_compared(monkeypatch: pytest.MonkeyPatch) -> None:
    """Column 0 is constant (its gradient undefined), column 1 is not: a 0.1% error of the
    gradient still fails on column 1."""
    torch.manual_seed(1)
    x = torch.stack([torch.full((5,), 7.77), torch.randn(5)], dim=1)
    exact = x.double().requires_grad_()
    out = _composite_std(exact)
    gradient = torch.autograd.grad(out, exact, torch.ones_like(out))[0]
    assert gradient[:, 0].isnan().all() and gradient[:, 1].isfinite().all()
    assert _check(_leaf_sample(x), op=_CompositeStd())
    monkeypatch.setattr(torch.autograd, "grad", _planted(lambda g: g * 1.001))
    with pytest.raises(AssertionError, match=r"index \(\d, 1\)"):
        _check(_leaf_sample(x), op=_CompositeStd())


def test_a_nan_that_an_input_carries_must_still_be_matched(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A NaN input makes the forward NaN and the gradient NaN by propagation: a device that
    drops it (0 where the reference is NaN) fails, as before."""
    x = torch.tensor([[1.0, 2.0], [math.nan, 3.0], [4.0, 5.5], [2.5, 1.0], [0.5, -1.0]])
    assert _check(_leaf_sample(x), op=_CompositeStd())
    monkeypatch.setattr(torch.autograd, "grad", _planted(torch.nan_to_num))
    with pytest.raises(AssertionError, match="nan at index"):
        _check(_leaf_sample(x), op=_CompositeStd())


def test_only_the_reference_nans_take_the_reference_value() -> None:
    grad = torch.tensor([1.0, 2.0, 3.0])
    ref = torch.tensor([1.0, math.nan, 3.5], dtype=torch.float64)
    got = undefined_as_reference(grad, ref)
    assert got[0] == 1.0 and got[1].isnan() and got[2] == 3.0 and got.dtype == torch.float32
    z = torch.tensor([1 + 1j, 2 + 2j], dtype=torch.complex64)
    zref = torch.tensor([complex(math.nan, 4.0), 1 + 1j], dtype=torch.complex128)
    zgot = undefined_as_reference(z, zref)
    assert zgot[0].real.isnan() and zgot[0].imag == 4.0 and zgot[1] == 2 + 2j
    assert undefined_as_reference(grad, ref[:2].clone().fill_(1.0)) is grad  # shape differs


def test_finite_means_every_floating_value() -> None:
    assert all_finite(([torch.ones(2)], {"p": 2.0, "n": 3, "mask": torch.tensor([True])}))
    assert not all_finite((torch.tensor([1.0, math.inf]),))
    assert not all_finite({"eps": math.nan})
    assert not all_finite([torch.tensor([complex(1.0, math.nan)])])
