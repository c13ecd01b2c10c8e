"""`accelkit.suite.opinfo.draws`: the reference of an op that draws random numbers inside
itself draws what the device draws (torch's low-rank SVD's test matrix R)."""

from __future__ import annotations

from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from accelkit.suite.opinfo.draws import draw_dtype, same_draws


def _drawn(dtype: torch.dtype, seed: int = 42) -> torch.Tensor:
    torch.manual_seed(seed)
    return torch.randn(4, 2, dtype=dtype)


def test_complex64_and_complex128_streams_differ_so_the_reference_needs_this() -> None:
    # The fact the module rests on: one seed, two streams far apart (not rounding).
    assert (
        float((_drawn(torch.complex64).to(torch.complex128) - _drawn(torch.complex128)).abs().max())
        > 0.1
    )


def test_the_reference_draws_in_the_cases_dtype_and_converts_exactly() -> None:
    device = _drawn(torch.complex64)
    with same_draws("svd_lowrank", torch.complex64, "cpu"):
        reference = _drawn(torch.complex128)
        assert _drawn(torch.complex64).equal(device)  # the device's own draws are untouched
        torch.manual_seed(42)
        real = torch.rand(3, dtype=torch.float64)  # a real draw in a complex case: float32
    assert reference.dtype == torch.complex128
    assert reference.equal(device.to(torch.complex128))
    torch.manual_seed(42)
    assert real.equal(torch.rand(3, dtype=torch.float32).to(torch.float64))
    with same_draws("pca_lowrank/grad", torch.float32, "cpu"):
        rounded = _drawn(torch.float64)
    assert rounded.equal(_drawn(torch.float32).to(torch.float64))


def test_other_ops_and_reference_dtype_cases_are_left_alone() -> None:
    exact = _drawn(torch.float64)
    with same_draws("linalg.svd", torch.float32, "cpu"):
        assert _drawn(torch.float64).equal(exact)
    with same_draws("svd_lowrank", torch.float64, "cpu"):
        assert _drawn(torch.float64).equal(exact)
    assert _drawn(torch.float64).equal(exact)  # nothing stays patched after the block


def test_the_low_rank_svds_reference_factorises_from_the_devices_r() -> None:
    """With q below the rank the randomized range finder does not converge: from another R
    the reference computes another approximation (seed 1's svd_lowrank sample 11: a
    full-rank 4 x 4 with singular values 280, 118, 18.7, 2.8, q = 2)."""
    torch.manual_seed(0)
    u, _ = torch.linalg.qr(torch.randn(4, 4, dtype=torch.complex128))
    v, _ = torch.linalg.qr(torch.randn(4, 4, dtype=torch.complex128))
    a = u @ torch.diag(torch.tensor([280.0, 118.0, 18.7, 2.8], dtype=torch.complex128)) @ v.mH

    def polar(x: torch.Tensor) -> torch.Tensor:
        torch.manual_seed(42)
        left, _, right = torch.svd_lowrank(x, q=2)
        return left @ right.mH

    device = polar(a.to(torch.complex64)).to(torch.complex128)
    apart = float((polar(a) - device).abs().max())
    with same_draws("svd_lowrank", torch.complex64, "cpu"):
        together = float((polar(a) - device).abs().max())
    assert together < 1e-5 < apart


def test_draw_dtype_keeps_the_wanted_kind() -> None:
    assert draw_dtype(torch.complex64, torch.float64) == torch.float32
    assert draw_dtype(torch.float32, torch.complex128) == torch.complex64
    assert draw_dtype(torch.bfloat16, torch.float64) == torch.bfloat16


class _Recorder(TorchFunctionMode):
    """Below same_draws on the mode stack: records where each draw asks to be made, and makes
    it on the CPU (the "meta" device stands in for an accelerator, whose draws this machine
    cannot make)."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[tuple[torch.device, torch.dtype]] = []

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is torch.randn:
            self.asked.append((torch.device(kwargs.get("device") or "cpu"), kwargs["dtype"]))
            kwargs = {**kwargs, "device": "cpu"}
        return func(*args, **kwargs)


def test_the_reference_draws_on_the_cases_device() -> None:
    """A CUDA generator's stream is not the CPU's: the reference, on the CPU, asks the case's
    device for R and converts it to the CPU in float64; the device's own draw is as asked."""
    with _Recorder() as recorder, same_draws("svd_lowrank", torch.float64, "meta"):
        drawn = torch.randn(2, 2, dtype=torch.float64, device="cpu")
        torch.randn(2, 2, dtype=torch.float64, device="meta")
    assert recorder.asked == [
        (torch.device("meta"), torch.float64),
        (torch.device("meta"), torch.float64),
    ]
    assert drawn.device == torch.device("cpu") and drawn.dtype == torch.float64
