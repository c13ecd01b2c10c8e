"""What the GPU review (docs/gpu-review.md) fixed, proved without a GPU: the numerics mode
restores both halves of cuBLAS's reduced-precision settings, the conditional-node graph
capability is off where torch compiles no conditional nodes, the device-independent known
failure is expected on every backend, and OpInfo index outputs that a tie decides are
compared by the values they point at."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from accelkit.backends import Availability, all_backends
from accelkit.probe import capabilities as caps
from accelkit.suite.expectations import load_expectations
from accelkit.suite.numerics import mode
from accelkit.suite.opinfo import ties
from accelkit.suite.opinfo.comparison import Mismatch

FLAGS = ("allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction")


@pytest.fixture
def matmul():
    """torch.backends.cuda.matmul, its reduced-precision settings restored afterwards."""
    m = torch.backends.cuda.matmul
    saved = {f: (getattr(m, f), getattr(m, f"{f}_split_k")) for f in FLAGS}
    yield m
    for flag, value in saved.items():
        setattr(m, flag, value)


@pytest.mark.parametrize("flag", FLAGS)
@pytest.mark.parametrize("tf32", [False, True])
def test_strict_numerics_restores_the_split_k_half(matmul, flag: str, tf32: bool) -> None:
    # (allow, split_k) = (False, False): the user switched split-K off too. Writing the flag
    # back as a bool would switch split-K on again.
    setattr(matmul, flag, (False, False))
    with mode.strict_numerics(tf32=tf32):
        assert (getattr(matmul, flag), getattr(matmul, f"{flag}_split_k")) == (False, False)
    assert (getattr(matmul, flag), getattr(matmul, f"{flag}_split_k")) == (False, False)


@pytest.mark.parametrize("flag", FLAGS)
def test_strict_numerics_switches_off_torchs_default_and_restores_it(matmul, flag: str) -> None:
    setattr(matmul, flag, (True, True))  # torch's default
    with mode.strict_numerics(tf32=False):
        assert getattr(matmul, flag) is False
    assert (getattr(matmul, flag), getattr(matmul, f"{flag}_split_k")) == (True, True)


def test_strict_numerics_restores_after_an_error(matmul) -> None:
    setattr(matmul, FLAGS[1], (False, False))
    conv = torch.backends.cudnn.conv.fp32_precision
    with pytest.raises(RuntimeError), mode.strict_numerics(tf32=True):
        assert torch.backends.cudnn.conv.fp32_precision == "ieee"
        raise RuntimeError("a case failed")
    assert torch.backends.cudnn.conv.fp32_precision == conv
    assert matmul.allow_bf16_reduced_precision_reduction is False
    assert matmul.allow_bf16_reduced_precision_reduction_split_k is False


def test_a_torch_without_split_k_gets_plain_bools() -> None:
    class Old:  # torch < 2.8: the flag is a bool, no _split_k attribute
        allow_fp16_reduced_precision_reduction = True

        def __getattr__(self, name: str) -> object:
            raise AttributeError(name)

    assert mode._reduction_setting(Old(), FLAGS[0]) is True


@pytest.fixture
def fresh():
    caps.reset()
    yield
    caps.reset()


def test_conditional_nodes_are_off_on_rocm_builds(fresh, monkeypatch) -> None:
    monkeypatch.setattr(torch.version, "hip", "7.1.0", raising=False)
    result = caps.capability("cuda_graph_while_loop")
    assert result == Availability(
        False, "HIP graphs have no conditional nodes in torch (CUDA >= 12.4 builds only)"
    )


def test_conditional_nodes_are_off_before_cuda_12_4(fresh, monkeypatch) -> None:
    monkeypatch.setattr(torch.version, "hip", None, raising=False)
    monkeypatch.setattr(torch.version, "cuda", "12.2", raising=False)
    result = caps.capability("cuda_graph_while_loop")
    assert result == Availability(
        False, "torch built with CUDA 12.2: conditional nodes need CUDA >= 12.4"
    )


def test_conditional_nodes_on_cuda_12_4_depend_on_a_device(fresh, monkeypatch) -> None:
    monkeypatch.setattr(torch.version, "hip", None, raising=False)
    monkeypatch.setattr(torch.version, "cuda", "12.4", raising=False)
    result = caps.capability("cuda_graph_while_loop")
    if not torch.cuda.is_available():
        assert not result.available and "12.4" not in result.reason and "HIP" not in result.reason


def test_the_device_independent_failure_is_expected_on_every_backend() -> None:
    # Inductor's complex add decomposition fails before any device code runs.
    case = "conformance/complex/add/inductor"
    for backend in all_backends():
        assert case in load_expectations(backend.name), backend.name


# --- index outputs decided by ties (accelkit.suite.opinfo.ties) ----------------------------


def _sample(x: torch.Tensor, *args: object, **kwargs: object) -> SimpleNamespace:
    return SimpleNamespace(input=x, args=args, kwargs=kwargs)


TIED = torch.tensor([[1.0, 2.0, 1.0, 0.5], [3.0, 3.0, 3.0, -1.0]], dtype=torch.float64)


def test_a_different_order_of_equal_elements_compares_equal() -> None:
    ref = _sample(TIED, -1)
    cpu = torch.sort(TIED, dim=-1, stable=True)
    # Another device's valid answer: the tied 1.0s and 3.0s in the other order.
    other = torch.return_types.sort((cpu.values, cpu.indices[:, [0, 2, 1, 3]]))
    assert not torch.equal(cpu.indices, other.indices)
    got = ties.indices_as_values("sort", ref, other, "sort")
    want = ties.indices_as_values("sort", ref, cpu, "sort")
    assert torch.equal(got.indices, want.indices) and torch.equal(got.values, want.values)


def test_an_index_of_a_different_element_still_differs() -> None:
    ref = _sample(TIED, 2, 1, False)
    right = torch.kthvalue(TIED, 2, 1)
    wrong = torch.return_types.kthvalue((right.values, torch.tensor([1, 3])))
    got = ties.indices_as_values("kthvalue", ref, wrong, "kthvalue")
    want = ties.indices_as_values("kthvalue", ref, right, "kthvalue")
    assert got.indices.shape == (2,)  # keepdim=False: the dim is reduced
    assert not torch.equal(got.indices, want.indices)


def test_an_index_out_of_range_is_a_mismatch() -> None:
    with pytest.raises(Mismatch, match="index out of range"):
        ties.indices_as_values("argsort", _sample(TIED), torch.tensor([[0, 1, 2, 4]] * 2), "x")


def test_keepdim_and_keyword_dims_are_honoured() -> None:
    x = TIED.T.contiguous()  # ties along dim 0
    out = torch.mode(x, dim=0, keepdim=True)
    got = ties.indices_as_values("mode", _sample(x, dim=0, keepdim=True), out, "mode")
    assert torch.equal(got.indices, got.values)  # each index points at the mode itself
    top = torch.topk(x, 2, 0)
    got = ties.indices_as_values("topk", _sample(x, 2, 0), top, "topk")
    assert torch.equal(got.indices, top.values)


def test_outputs_without_indices_are_left_alone() -> None:
    whole = torch.median(TIED)  # no dim: one value, no indices
    assert ties.indices_as_values("median", _sample(TIED), whole, "median") is whole
    assert ties.indices_as_values("add", _sample(TIED), TIED, "add") is TIED
    scalar = torch.tensor(2.0, dtype=torch.float64)
    pair = torch.sort(scalar)
    assert ties.indices_as_values("sort", _sample(scalar), pair, "sort") is pair


# --- dtypes an XPU device lacks (XpuBackend.unsupported_dtypes) ----------------------------


def _fake_xpu_torch(has_fp64: bool) -> SimpleNamespace:
    properties = SimpleNamespace(has_fp64=has_fp64)
    xpu = SimpleNamespace(
        is_available=lambda: True,
        current_device=lambda: 0,
        get_device_properties=lambda index: properties,
    )
    return SimpleNamespace(xpu=xpu)


@pytest.mark.parametrize("has_fp64", [False, True])
def test_xpu_devices_without_fp64_skip_float64_cases(monkeypatch, has_fp64: bool) -> None:
    from accelkit.backends import get as get_backend
    from accelkit.backends import xpu as xpu_module

    monkeypatch.setattr(xpu_module, "torch_or_none", lambda: _fake_xpu_torch(has_fp64))
    table = get_backend("xpu").unsupported_dtypes
    linalg = mode.unsupported_dtype("conformance/linalg/svd/float64/4x4/well", table)
    opinfo = mode.unsupported_dtype("conformance/opinfo/add/complex128", table)
    kept = mode.unsupported_dtype("conformance/opinfo/add/float32", table)
    if has_fp64:
        assert (linalg, opinfo, kept) == (None, None, None)
    else:
        assert linalg is not None and linalg.startswith("float64: ")
        assert opinfo is not None and opinfo.startswith("complex128: ")
        assert kept is None


def test_xpu_dtypes_without_a_device_are_all_supported(monkeypatch) -> None:
    from accelkit.backends import get as get_backend
    from accelkit.backends import xpu as xpu_module

    broken = SimpleNamespace(xpu=SimpleNamespace(is_available=lambda: 1 / 0))
    monkeypatch.setattr(xpu_module, "torch_or_none", lambda: broken)
    assert dict(get_backend("xpu").unsupported_dtypes) == {}
    monkeypatch.setattr(xpu_module, "torch_or_none", lambda: None)
    assert dict(get_backend("xpu").unsupported_dtypes) == {}
