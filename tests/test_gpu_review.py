"""What the GPU review (docs/gpu-review.md) fixed, proved without a GPU: the numerics mode
restores both halves of cuBLAS's reduced-precision settings, the conditional-node graph
capability is off where torch compiles no conditional nodes, and the device-independent
known failure is expected on every backend."""

from __future__ import annotations

import pytest
import torch

from accelkit.backends import Availability, all_backends
from accelkit.probe import capabilities as caps
from accelkit.suite import numerics
from accelkit.suite.expectations import load_expectations

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
    with numerics.strict_numerics(tf32=tf32):
        assert (getattr(matmul, flag), getattr(matmul, f"{flag}_split_k")) == (False, False)
    assert (getattr(matmul, flag), getattr(matmul, f"{flag}_split_k")) == (False, False)


@pytest.mark.parametrize("flag", FLAGS)
def test_strict_numerics_switches_off_torchs_default_and_restores_it(matmul, flag: str) -> None:
    setattr(matmul, flag, (True, True))  # torch's default
    with numerics.strict_numerics(tf32=False):
        assert getattr(matmul, flag) is False
    assert (getattr(matmul, flag), getattr(matmul, f"{flag}_split_k")) == (True, True)


def test_strict_numerics_restores_after_an_error(matmul) -> None:
    setattr(matmul, FLAGS[1], (False, False))
    conv = torch.backends.cudnn.conv.fp32_precision
    with pytest.raises(RuntimeError), numerics.strict_numerics(tf32=True):
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

    assert numerics._reduction_setting(Old(), FLAGS[0]) is True


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
