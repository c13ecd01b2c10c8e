"""`accelkit test` on the linalg.eig and linalg.eigvals OpInfo cases with a fault planted in
the kernel: eigenvalues off by a tenth of a percent fail, permuted and phase-rotated
eigenpairs pass."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from accelkit.results.io import load_results
from tests.helpers import REPO, run_cli

# The real suite with a planted fault (a pytest plugin in the suite's process, as in
# tests/fixtures/faults/perturb_plugin.py, written here: the fault is on complex outputs)
FAULT_PLUGIN = '''
"""Perturbs aten.linalg_eig's complex64 answers (never the complex128 reference)."""
import os

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode


class EigFault(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is not torch.ops.aten.linalg_eig.default or out[0].dtype != torch.complex64:
            return out
        values, vectors = out
        with torch.no_grad():
            if os.environ["ACCELKIT_EIG_FAULT"] == "values":  # 0.1% off
                return values * 1.001, vectors
            # A right answer: the eigenpairs permuted, each vector's phase rotated.
            n = values.shape[-1]
            order = torch.arange(n - 1, -1, -1, device=values.device)
            phase = torch.exp(1j * torch.arange(n, device=values.device) * 0.7)
            return values[..., order], vectors[..., order] * phase.to(vectors.dtype)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    with EigFault():
        return (yield)
'''


EIG_PARAMS = [
    f"{op}/{dtype}{grad}"
    for op in ("linalg.eig", "linalg.eigvals")
    for dtype in ("float32", "float64", "complex64")
    for grad in ("", "/grad")
]


def _run_with_fault(tmp_path: Path, fault: str) -> tuple[int, dict[str, tuple[str, str]]]:
    plugins = tmp_path / "plugins"
    plugins.mkdir(exist_ok=True)
    (plugins / "eig_fault_plugin.py").write_text(FAULT_PLUGIN, encoding="utf-8")
    results = tmp_path / f"{fault}.json"
    params = " or ".join(f"[{p}]" for p in EIG_PARAMS)
    keyword = f"opinfo and not opinfo_compiled and ({params})"
    env = {
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(plugins), str(REPO), os.environ.get("PYTHONPATH", "")) if p
        ),
        "PYTEST_PLUGINS": "eig_fault_plugin",
        "ACCELKIT_EIG_FAULT": fault,
    }
    # One process: twelve small cases gain nothing from workers that each import op_db.
    proc = run_cli(
        "test",
        "--device",
        "cpu",
        "--suite",
        "conformance",
        "-k",
        keyword,
        "--breadth",
        "full",
        "--workers",
        "0",
        "--json",
        str(results),
        env=env,
        timeout=240,
    )
    assert results.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    cases = {c.id: (str(c.status), c.message) for c in load_results(results).cases}
    assert set(cases) == {f"conformance/opinfo/{p}" for p in EIG_PARAMS}, sorted(cases)
    return proc.returncode, cases


@pytest.mark.slow
def test_eigenvalues_off_by_a_tenth_of_a_percent_fail(tmp_path: Path) -> None:
    code, cases = _run_with_fault(tmp_path, "values")
    assert code == 1, cases
    for param in EIG_PARAMS:
        status, message = cases[f"conformance/opinfo/{param}"]
        # float32 inputs have complex64 eigenvalues too; float64 is left alone.
        assert status == ("passed" if "float64" in param else "failed"), (param, message)
        if status == "failed":
            assert "eigenvalues" in message, (param, message)


@pytest.mark.slow
def test_permuted_phase_rotated_eigenpairs_pass(tmp_path: Path) -> None:
    code, cases = _run_with_fault(tmp_path, "reorder")
    assert code == 0, cases
    assert all(status == "passed" for status, _ in cases.values()), cases
