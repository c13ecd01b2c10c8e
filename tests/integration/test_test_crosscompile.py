"""`accelkit test --compile-only --target ...` through the CLI: a real compile-only run for
sm_107, and the one-line refusal when only Triton's own ptxas is there."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from accelkit.results.io import load_results
from tests.helpers import assert_one_line_error, run_cli
from tests.toolchains import BUNDLED_BLACKWELL_PTXAS


@pytest.mark.slow
def test_compile_only_reports_real_compiled_cases_for_sm_107(tmp_path: Path) -> None:
    """The issue's definition of done, as a user types it (no TRITON_PTXAS_* set: accelkit
    finds the ptxas that knows sm_107 and points triton at it)."""
    from accelkit.suite.crosscompile.corpus import CORPUS

    environ = {k: v for k, v in os.environ.items() if not k.startswith("TRITON_PTXAS")}
    results = tmp_path / "r.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "accelkit",
            "test",
            "--device",
            "cuda",
            "--target",
            "sm_107",
            "--compile-only",
            "--json",
            str(results),
            # Inductor's kernels cost ~15 s of generation per model: two of them here, one
            # more in test_inductor_kernels_compile_for_a_stand_in_sm_107.
            "-k",
            "not inductor_ or inductor_mlp or inductor_gru",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=environ,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    loaded = load_results(results)
    prefix = "conformance/cross_compile/sm_107/"
    assert {case.id: case.status for case in loaded.cases} == {
        **{prefix + spec.name: "passed" for spec in CORPUS},
        # Inductor's kernels for a compile case, generated for a stand-in sm_107 device.
        prefix + "inductor_mlp": "passed",
        prefix + "inductor_gru": "skipped",
    }
    # A passed case says what it verified: the ELF's arch, the PTX target, the instructions.
    messages = {case.id.removeprefix(prefix): case.message for case in loaded.cases}
    bf16 = messages["gemm_bf16"]
    assert bf16.startswith("cubin ELF for sm_107, ptx .target sm_107a, tcgen05.mma"), bf16
    assert re.search(r"; ptxas 13\.\d+$", bf16), bf16
    assert "generated for cc=107" in messages["inductor_mlp"]
    assert loaded.run.target == "sm_107" and loaded.run.compile_only is True
    assert loaded.run.toolchain is not None and loaded.run.toolchain.startswith("ptxas 13.")
    assert loaded.run.required is None
    assert json.loads(results.read_text())["run"]["suites"] == ["conformance"]


@pytest.mark.slow
def test_compile_only_with_tritons_own_ptxas_fails_in_one_line_and_writes_nothing(
    tmp_path: Path,
) -> None:
    results = tmp_path / "r.json"
    proc = run_cli(
        "test",
        "--device",
        "cuda",
        "--target",
        "sm_107",
        "--compile-only",
        "--json",
        str(results),
        env={"TRITON_PTXAS_BLACKWELL_PATH": str(BUNDLED_BLACKWELL_PTXAS)},
    )
    assert_one_line_error(proc, 3, f"ptxas 13.3 ({BUNDLED_BLACKWELL_PTXAS}) does not know")
    assert "does not know sm_107a; it knows sm_75, " in proc.stderr
    assert not results.exists()
