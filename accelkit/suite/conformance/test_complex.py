"""Experimental complex-tensor compilation (2.14): with
`torch._functorch.config.enable_complex_wrapper`, compiled graphs decompose complex ops into
real and imaginary parts. Compiled answers (complex64 on the device) are compared with the
same function evaluated eagerly in complex128 on the CPU.

Backends: `aot_eager` (the decomposition alone) and `inductor` (decomposition plus code
generation). Each function family is its own case so a failure names what broke.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from accelkit.suite.numerics.reference import assert_matches_reference, reference

pytestmark = pytest.mark.requires("complex_compile")

# name -> (function, roundings each output accumulates: its bound is sqrt(count) * eps
# times the reference's largest magnitude)
FUNCTIONS: dict[str, tuple[Callable[..., Any], int]] = {
    # mul, conj, abs, exp and a real-valued result
    "mul_conj_abs_exp": (lambda a, b: (a * b.conj()).abs() * torch.exp(a * 0.5).abs(), 8),
    "exp_chain": (lambda a, b: torch.exp(a * b) - a.conj() * b.abs(), 8),
    "matmul": (lambda a, b: (a @ b) * 1j - a.conj().T @ b, 24),
    "real_imag": (lambda a, b: torch.view_as_real(a * b).sum(-1) + (a.real * b.imag), 8),
    # complex + complex: a separate case (Inductor has its own complex add decomposition)
    "add": (lambda a, b: a + b * 2.0, 2),
}
BACKENDS = ("aot_eager", "inductor")


def _complex_input(shape: tuple[int, ...], device: str) -> torch.Tensor:
    real = torch.empty(shape).uniform_(-1.0, 1.0)
    imag = torch.empty(shape).uniform_(-1.0, 1.0)
    return torch.complex(real, imag).to(device)


# The compile backend is `compiler`, not `backend`: that name is the plugin's session fixture
# (the accelerator under test), which `device` depends on; a parameter of that name would
# shadow it and make `device` fail with a ScopeMismatch in a worker where this case asks
# for it first.
@pytest.mark.parametrize(
    ("name", "compiler"),
    [(n, b) for n in FUNCTIONS for b in BACKENDS],
    ids=[f"{n}/{b}" for n in FUNCTIONS for b in BACKENDS],
)
def test_complex(name: str, compiler: str, device: str, capability_table: dict[str, Any]) -> None:
    import torch._functorch.config as functorch_config

    if compiler == "inductor" and not capability_table.get("inductor", {}).get("available"):
        pytest.skip(f"inductor: {capability_table.get('inductor', {}).get('reason')}")
    fn, count = FUNCTIONS[name]
    a, b = _complex_input((6, 6), device), _complex_input((6, 6), device)
    want = reference(fn, a, b)
    torch._dynamo.reset()
    with functorch_config.patch(enable_complex_wrapper=True):
        got = torch.compile(fn, backend=compiler, fullgraph=True)(a, b)
    assert got.dtype == fn(a, b).dtype, f"{name}: compiled dtype {got.dtype}"
    assert_matches_reference(got, want, torch.complex64, count=count, what=f"{name} ({compiler})")
