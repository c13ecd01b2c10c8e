"""The samples in other layouts (accelkit.suite.opinfo.layouts) and the cases that run them."""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing._internal.opinfo.core import SampleInput

from accelkit.suite.opinfo import layouts, planning
from accelkit.suite.opinfo.comparison import Mismatch
from accelkit.suite.opinfo.op_db import op_db_by_name
from accelkit.suite.opinfo.running import run_case, seeded_samples


def _sample() -> SampleInput:
    x = torch.randn(3, 4, 5, 6, requires_grad=True)
    return SampleInput(x, args=(torch.randn(5, 6), 2), kwargs={"scale": torch.tensor(2.0)})


@pytest.mark.parametrize("layout", ["strided", "transposed", "channels_last", "expanded"])
def test_a_variant_keeps_the_values_and_changes_the_strides(layout: str) -> None:
    sample = _sample()
    made = layouts.variant(sample, layout)
    assert made is not None
    x, y = made.input, made.args[0]
    assert not x.is_contiguous()
    assert x.is_leaf and x.requires_grad  # a leaf that needs a gradient, as the sample's
    if layout == "expanded":  # every row is the first row, in stride 0
        assert x.stride()[0] == 0
        assert torch.equal(x, sample.input[:1].expand_as(x))
    else:
        assert torch.equal(x, sample.input)
    assert made.args[1] == 2 and torch.equal(made.kwargs["scale"], torch.tensor(2.0))
    if layout == "channels_last":  # only 4-D and 5-D tensors change
        assert y.is_contiguous()


def test_strided_tensors_read_nan_between_their_elements() -> None:
    x = layouts.variant(SampleInput(torch.arange(6.0)), "strided").input
    assert x.stride() == (2,)
    buffer = torch.as_strided(x, (12,), (1,), x.storage_offset() - 1)
    assert all(math.isnan(v) for v in buffer[0::2].tolist())
    assert torch.equal(x, torch.arange(6.0))


def test_a_sample_no_layout_changes_has_no_variant() -> None:
    scalar = SampleInput(torch.tensor(1.5), args=(torch.tensor([2.0]),))
    assert layouts.variant(scalar, "transposed") is None
    assert layouts.variant(scalar, "channels_last") is None
    assert layouts.variant(SampleInput(torch.ones(1, 3)), "expanded") is None


def test_only_elementwise_ops_and_reductions_take_an_expanded_input() -> None:
    db = op_db_by_name()
    assert layouts.applies(db["mul"], "expanded")
    assert layouts.applies(db["sum"], "expanded")
    assert not layouts.applies(db["linalg.cholesky"], "expanded")
    assert layouts.applies(db["linalg.cholesky"], "transposed")


def test_std_gradients_skip_the_layout_that_makes_every_reduced_element_equal() -> None:
    # Expanded, the sample is constant: var 0, where std has no derivative. The forward and
    # the other layouts stay; var's gradient 2 (x - mean) / n exists there and stays too.
    std, var = op_db_by_name()["std.unbiased"], op_db_by_name()["var"]
    sample = SampleInput(torch.arange(10.0).reshape(5, 2).requires_grad_())
    assert "expanded" not in [layout for layout, _ in layouts.variants(std, sample, grad=True)]
    assert "expanded" in [layout for layout, _ in layouts.variants(std, sample)]
    assert "strided" in [layout for layout, _ in layouts.variants(std, sample, grad=True)]
    assert "expanded" in [layout for layout, _ in layouts.variants(var, sample, grad=True)]


def test_a_selection_is_an_answer_of_input_values_only() -> None:
    x = torch.tensor([[1.0, -0.0, math.nan], [2.5, 3.0, 4.0]])
    assert layouts.is_selection((x,), x.flip(0))
    assert layouts.is_selection((x,), (x.amax(1), x[:, :2]))
    assert not layouts.is_selection((x,), x * 2)
    assert not layouts.is_selection((x,), -x)  # -1.0, -2.5: new bit patterns
    # Zeros are no evidence: a product with a zero factor is +-0 by its order of products
    # (prod/complex64/noncontiguous at seed 707070: -0j transposed, 0j contiguous).
    assert not layouts.is_selection((x,), torch.zeros(2) * -1)
    z = torch.tensor([[0.0j, 2.0 + 1.0j], [1.0, 3.0]], dtype=torch.complex64)
    assert not layouts.is_selection((z,), z.prod())


def test_a_selection_must_match_the_contiguous_answer_bit_for_bit() -> None:
    answer = torch.tensor([1.0, -0.0, math.nan])
    layouts.assert_selection_exact(answer.clone(), answer, "flip")
    with pytest.raises(Mismatch, match="differs in 1 of 3 elements, first at flat index 1"):
        layouts.assert_selection_exact(torch.tensor([1.0, 0.0, math.nan]), answer, "flip")
    layouts.assert_selection_exact(torch.ones(0, 3), torch.ones(0, 3), "split")  # empty
    # a complex element differs where either part does, and is named by its own index
    z = torch.tensor([1.0 + 2.0j, 3.0 - 1.0j])
    with pytest.raises(Mismatch, match="differs in 1 of 2 elements, first at flat index 1"):
        layouts.assert_selection_exact(torch.tensor([1.0 + 2.0j, 3.0 + 1.0j]), z, "flip")


def test_quick_breadth_plans_noncontiguous_twins_and_16_bit_gradients() -> None:
    ids = {case.param_id for case in planning.plan("cpu", "quick")}
    assert {"mul/float32/noncontiguous", "sum/float32/noncontiguous"} <= ids
    assert "mul/bfloat16/noncontiguous" not in ids  # quick: float32 twins only
    assert {"nn.functional.layer_norm/bfloat16/grad", "mm/float16/grad"} <= ids
    grads = {i.removesuffix("/noncontiguous") for i in ids if "float32/grad" in i}
    assert all(f"{g}/noncontiguous" in ids for g in grads)
    full = {case.param_id for case in planning.plan("cpu", "full")}
    assert "mul/bfloat16/grad/noncontiguous" in full


def test_ops_defined_by_their_layout_skip_only_their_twins() -> None:
    db = op_db_by_name()
    twin = planning.OpinfoCase("as_strided", "float32", noncontiguous=True)
    assert "storage" in (planning.skip_reason(db["as_strided"], twin, "cpu") or "")
    assert (
        planning.skip_reason(db["as_strided"], planning.OpinfoCase("as_strided", "float32"), "cpu")
        is None
    )


def test_a_twin_runs_the_first_samples_a_layout_changes() -> None:
    """sum's first three samples are scalars: the quick twin takes the first three that a
    layout changes, each in every layout that changes it."""
    op = op_db_by_name()["sum"]
    first = [s for _, s in seeded_samples(op, "cpu", torch.float32, 3, 0)]
    assert all(layouts.variant(s, "strided") is None for s in first)
    case = planning.OpinfoCase("sum", "float32", noncontiguous=True)
    assert run_case(op, case, "cpu", 3, 0) >= 3


def test_a_failing_variant_records_its_sample_and_layout() -> None:
    from accelkit.suite.session.failures import failure_info

    op = op_db_by_name()["mul"]
    case = planning.OpinfoCase("mul", "float32", noncontiguous=True)

    class Wrong(torch.utils._python_dispatch.TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            out = func(*args, **(kwargs or {}))
            strided = any(isinstance(a, torch.Tensor) and not a.is_contiguous() for a in args)
            if func is torch.ops.aten.mul.Tensor and out.dtype == torch.float32 and strided:
                return out * 1.01
            return out

    with Wrong(), pytest.raises(AssertionError) as raised:
        run_case(op, case, "cpu", 3, 0)
    info = failure_info(raised.value)
    assert info["layout"] in layouts.LAYOUTS and isinstance(info["sample"], int)
    assert f"in layout {info['layout']}" in str(raised.value)


def test_an_op_that_writes_its_inputs_changed_them() -> None:
    """embedding's max_norm renormalises the weight's rows in place: its answer then reads
    as a selection of the written inputs, which the layout check must not take it for."""
    weight = torch.tensor([[3.0, 4.0], [0.1, 0.2]])
    before = (weight.clone(), torch.tensor([0, 1]))
    after = (weight, torch.tensor([0, 1]))
    assert layouts.unchanged(before, after)
    torch.nn.functional.embedding(torch.tensor([0]), weight, max_norm=1.0)
    assert not layouts.unchanged(before, after)
    assert layouts.unchanged((torch.tensor([math.nan]),), (torch.tensor([math.nan]),))
