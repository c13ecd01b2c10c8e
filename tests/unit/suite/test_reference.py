"""The derived tolerance model of the focused cases (accelkit.suite.numerics.reference), the
numerics
mode cases run in (accelkit.suite.numerics.mode), and the wrong kernels that prove detection
(tests/fixtures/faults/faults.py). In-process and fast; the fault matrix itself runs in
benchmarks/bench_detection.py and, a subset through the CLI, in
tests/integration/test_test_fault_injection.py."""

from __future__ import annotations

import sys

import pytest
import torch

from accelkit.suite.numerics import mode, reference
from tests.helpers import REPO

sys.path.insert(0, str(REPO / "tests" / "fixtures" / "faults"))
import faults


def _mm(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    a = (torch.rand(48, 200, generator=gen) * 4 - 2).to(dtype)
    b = (torch.rand(200, 40, generator=gen) * 4 - 2).to(dtype)
    return a, b, reference.reference(torch.mm, a, b), reference.absolute_terms(torch.mm, a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_a_correct_matmul_passes_and_one_off_by_the_fault_size_fails(dtype: torch.dtype) -> None:
    a, b, want, terms = _mm(dtype)
    got = torch.mm(a, b)
    reference.assert_matches_reference(got, want, dtype, terms=terms, count=200, what="mm")
    rel = faults.DEFAULT_REL[str(dtype).removeprefix("torch.")]
    wrong = (got.float() * (1 + rel)).to(dtype)
    with pytest.raises(AssertionError, match="beyond tolerance"):
        reference.assert_matches_reference(wrong, want, dtype, terms=terms, count=200, what="mm")


def test_rtol_is_never_scaled_by_the_accumulation_length() -> None:
    """The issue's example: bf16 sum over 1024 once passed at rtol ~51%."""
    rtol, _ = reference.tolerance(torch.bfloat16)
    assert rtol == torch.finfo(torch.bfloat16).eps
    # sqrt(K) eps(float32) * terms: K = 1024 terms of magnitude 1 -> 1.2e-4 absolute
    bound = reference.accumulation_atol(torch.bfloat16, 1024.0, 1024)
    assert bound == pytest.approx(32 * torch.finfo(torch.float32).eps * 1024)


def test_check_close_names_the_worst_element_and_honours_a_tensor_atol() -> None:
    want = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    got = torch.tensor([1.0, 2.1, 3.0])
    reference.check_close(got, want, rtol=0.0, atol=torch.tensor([0.0, 0.2, 0.0]), what="x")
    with pytest.raises(AssertionError, match=r"1 / 3 elements.*index \(1,\)"):
        reference.check_close(got, want, rtol=1e-3, atol=1e-3, what="x")
    nan = torch.tensor([float("nan")])
    reference.check_close(nan, nan.double(), rtol=0.0, atol=0.0, what="nan")
    with pytest.raises(AssertionError, match="shape"):
        reference.check_close(got[:2], want, rtol=0.0, atol=0.0, what="x")


def test_unsupported_dtypes_are_decided_from_the_case_ids_segments() -> None:
    table = {"float64": "MPS has no float64"}
    reason = mode.unsupported_dtype("conformance/linalg/svd/float64/4x4/well", table)
    assert reason == "float64: MPS has no float64"
    assert mode.unsupported_dtype("conformance/ops/matmul/float32", table) is None
    assert mode.unsupported_dtype("conformance/opinfo/float64ish/float32", table) is None


def test_strict_numerics_switches_tf32_and_reduced_reductions_off_and_restores_them() -> None:
    matmul = torch.backends.cuda.matmul
    before = matmul.allow_bf16_reduced_precision_reduction
    conv = torch.backends.cudnn.conv.fp32_precision
    with mode.strict_numerics(tf32=True):
        assert matmul.allow_bf16_reduced_precision_reduction is False
        assert torch.backends.cudnn.conv.fp32_precision == "ieee"
    assert matmul.allow_bf16_reduced_precision_reduction == before
    assert torch.backends.cudnn.conv.fp32_precision == conv


def test_a_tail_fault_drops_only_the_last_partial_tile() -> None:
    x = torch.ones(3, 70)  # 70 = 2 tiles of 32 + a partial tile of 6
    with faults.injected(faults.Fault("sum", ("float32",), "tail")) as mode:
        total = x.sum(-1)
        untouched = x.double().sum(-1)  # float64 is never faulted
    assert mode is not None and mode.hits == 1
    assert total.tolist() == [64.0] * 3
    assert untouched.tolist() == [70.0] * 3
    with faults.injected(faults.Fault("cumsum", ("float32",), "tail")):
        scan = x.cumsum(-1)
    assert scan[:, :64].equal(torch.arange(1, 65, dtype=torch.float32).expand(3, 64))
    assert scan[:, 64:].eq(64.0).all()


def test_scale_and_element_faults_touch_only_their_dtype() -> None:
    x = torch.full((4,), 2.0)
    with faults.injected(faults.parse("exp:bfloat16:scale")):
        assert torch.exp(x).equal(torch.exp(torch.full((4,), 2.0)))  # float32: untouched
    with faults.injected(faults.parse("exp:float32:element:0.5")):
        y = torch.exp(x)
    clean = torch.exp(x)
    assert y[:3].equal(clean[:3])
    assert float(y[3]) == pytest.approx(float(clean[3]) * 1.5)


def test_a_scale_fault_scales_a_complex_answer_whole() -> None:
    a = torch.tensor([[1.0 + 2.0j, -0.5j], [3.0 + 0.0j, 1.0 - 1.0j]], dtype=torch.complex64)
    with faults.injected(faults.parse("aten.mm.default:complex64:scale:1e-3")):
        wrong = a @ a
    clean = a @ a
    assert torch.allclose(wrong, clean * (1 + 1e-3), rtol=1e-6)  # its imaginary part too


def test_a_fault_spec_with_an_unknown_kind_is_an_error() -> None:
    with pytest.raises(ValueError, match="fault kind"):
        faults.parse("mm:float32:sometimes")


def test_reach_faults_touch_only_what_the_new_cases_reach() -> None:
    """ftz flushes subnormals (keeping their sign), long drops a sum's elements past 2 ** 16,
    neginf_rows turns a softmax's rows of -inf into 0; ordinary inputs pass untouched."""
    sub = torch.finfo(torch.float32).tiny / 4
    x = torch.tensor([sub, -sub, 1.5, 0.0])
    with faults.injected(faults.parse("aten.mul.Tensor:float32:ftz")) as mode:
        flushed = x * 1.0
        normal = torch.full((3,), 0.5) * 3.0
    assert mode is not None and mode.hits == 2
    assert flushed.tolist() == [0.0, 0.0, 1.5, 0.0] and flushed.signbit().tolist()[1]
    assert normal.tolist() == [1.5] * 3
    ones = torch.ones(2, faults.LONG + 5)
    with faults.injected(faults.parse("sum:float32:long")):
        assert ones.sum(-1).tolist() == [float(faults.LONG)] * 2
        assert ones[:, :1000].sum(-1).tolist() == [1000.0] * 2
    rows = torch.tensor([[-torch.inf] * 3, [0.0, -torch.inf, 0.0]])
    with faults.injected(faults.parse("softmax:float32:neginf_rows")):
        p = torch.softmax(rows, -1)
    assert p[0].tolist() == [0.0] * 3
    assert p[1].tolist() == [0.5, 0.0, 0.5]
