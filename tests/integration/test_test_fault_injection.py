"""The suite catches a backend that returns wrong numbers, and `--seed` replays a run.

Each test runs the real suite (`accelkit test --device cpu` in a subprocess, short -k
selections) with a fault injected by tests/fixtures/faults/perturb_plugin.py, a pytest
plugin loaded into the suite's pytest process through PYTHONPATH and PYTEST_PLUGINS
(pytest reads that variable even with plugin autoload off). The suite knows nothing
about it: this is a backend that is subtly wrong, as far as the suite can tell.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from accelkit.results.io import load_results
from tests.helpers import FAULTS, REPO, run_cli

pytestmark = pytest.mark.slow

# (exit code, {case id: (status, message)}, the seed the results file recorded)
RunOutcome = tuple[int, dict[str, tuple[str, str]], int]
# One run here took at most ~110 s on the loaded 2-core development machine.
RUN_TIMEOUT_S = 240

# The op_db cases of exp (perturbed) and of ops that never call aten.exp (must still pass).
EXP_CASES = ("exp/float32", "exp/float64")
UNRELATED_CASES = ("sin/float32", "cos/float32", "tanh/float32", "addmm/float32")
# test_ops has its own exp case (`conformance/ops/exp/float32`): it must fail too.


def _fault_env(tmp_path: Path, **faults: str) -> dict[str, str]:
    return {
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(FAULTS), str(REPO), os.environ.get("PYTHONPATH", "")) if p
        ),
        "PYTEST_PLUGINS": "perturb_plugin",
        # A fresh Inductor cache: a cached kernel compiled without the fault would hide it.
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor-cache"),
        **faults,
    }


def _run(
    tmp_path: Path, name: str, keyword: str, *extra: str, workers: int = 0, **faults: str
) -> RunOutcome:
    """One `accelkit test` run of the selection. One process (`workers` 0) unless asked:
    a few cases gain nothing from workers that each import torch and op_db again."""
    results = tmp_path / f"{name}.json"
    args = ["test", "--device", "cpu", "--suite", "conformance", "-k", keyword]
    args += ["--json", str(results), "--workers", str(workers), *extra]
    proc = run_cli(*args, env=_fault_env(tmp_path, **faults), timeout=RUN_TIMEOUT_S)
    assert results.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    loaded = load_results(results)
    cases = {case.id: (case.status, case.message) for case in loaded.cases}
    return proc.returncode, cases, loaded.run.seed


def _opinfo_keyword(*params: str) -> str:
    return "opinfo and not opinfo_compiled and (" + " or ".join(f"[{p}]" for p in params) + ")"


EXP_FAULT = {"ACCELKIT_FAULT_OP": "aten.exp.default"}
COMPILED_KEYWORD = "opinfo and [nn.functional.hardswish/float32]"


@pytest.fixture(scope="module")
def exp_run(tmp_path_factory: pytest.TempPathFactory) -> RunOutcome:
    """aten.exp perturbed, default seed, two workers: the plugin reaches xdist workers."""
    keyword = f"({_opinfo_keyword(*EXP_CASES, *UNRELATED_CASES)}) or test_ops[exp/float32]"
    return _run(tmp_path_factory.mktemp("exp"), "exp", keyword, workers=2, **EXP_FAULT)


def test_a_perturbed_operator_fails_its_cases_and_only_those(exp_run: RunOutcome) -> None:
    code, cases, _ = exp_run
    assert code == 1, cases
    assert cases["conformance/opinfo/exp/float32"][0] == "failed", cases
    assert "exp" in cases["conformance/opinfo/exp/float32"][1]
    assert cases["conformance/ops/exp/float32"][0] == "failed", cases
    # float64 is not perturbed (the fault is float32 only); the unrelated ops pass.
    assert cases["conformance/opinfo/exp/float64"][0] == "passed", cases
    for param in UNRELATED_CASES:
        assert cases[f"conformance/opinfo/{param}"][0] == "passed", (param, cases)


# A subset of the fault matrix (benchmarks/bench_detection.py runs all of it), in one run:
# each fault on its own op and dtype (tests/fixtures/faults/faults.py), so the same op in
# another dtype is a control inside the run: {case id: must fail}.
MATRIX_FAULTS = (
    "bmm:bfloat16:scale,layer_norm:float16:element,sum:float32:tail,softmax:float32:tail"
)
MATRIX_CASES = {
    "bmm/bfloat16": True,
    "bmm/float32": False,
    "layer_norm/float16": True,
    "layer_norm/bfloat16": False,
    "sum/float32": True,
    "sum/float16": False,
    "softmax/float32": True,  # its last tile is one element of 257: float32 sees any
    "softmax/float16": False,
}


def _ops_keyword(*params: str) -> str:
    return "test_ops and (" + " or ".join(f"[{p}]" for p in params) + ")"


def test_a_subset_of_the_fault_matrix_is_caught(tmp_path: Path) -> None:
    """Relative (1e-2 in 16-bit), single-element and last-partial-tile faults in one run."""
    keyword = _ops_keyword(*MATRIX_CASES)
    code, cases, _ = _run(tmp_path, "matrix", keyword, ACCELKIT_FAULTS=MATRIX_FAULTS)
    assert code == 1, cases
    for param, caught in MATRIX_CASES.items():
        status, message = cases[f"conformance/ops/{param}"]
        assert status == ("failed" if caught else "passed"), (param, message)


def test_the_same_run_without_a_fault_passes(tmp_path: Path) -> None:
    """The control: the plugin loaded, no fault configured, the same cases pass (those of
    every fault above: op_db's, test_ops' and the compiled ones)."""
    keyword = (
        f"{_opinfo_keyword(*EXP_CASES, *UNRELATED_CASES)} or {_ops_keyword(*MATRIX_CASES)}"
        f" or {_ops_keyword('exp/float32')} or ({COMPILED_KEYWORD})"
    )
    code, cases, _ = _run(tmp_path, "clean", keyword)
    assert code == 0, cases
    assert all(status == "passed" for status, _ in cases.values()), cases


# Faults that only the boundary sizes and the special values reach (issue 44), each on its
# own op in float32, in one run: {case id: must fail}. The op's other cases and the same case
# in another dtype are the controls inside the run; a second run without the faults is the
# control of the rest (benchmarks/bench_detection.py's reach rows run every dtype).
REACH_FAULTS = "aten.mul.Tensor:float32:ftz,sum:float32:long,softmax:float32:neginf_rows"
REACH_CASES = {
    "special_values/mul/float32": True,  # subnormals flushed
    "ops/mul/float32": False,
    "special_values/mul/bfloat16": False,
    "ops/boundary/sum/float32": True,  # 66001 elements, the sum stops at 2 ** 16
    "ops/sum/float32": False,
    "ops/boundary/sum/float16": False,
    "special_values/softmax/float32": True,  # a row of -inf gives 0, not nan
    "ops/softmax/float32": False,
    "ops/boundary/softmax/float32": False,
    "special_values/softmax/float16": False,
}


def test_faults_only_boundary_sizes_and_special_values_reach_are_caught(tmp_path: Path) -> None:
    params = sorted({"/".join(case.split("/")[-2:]) for case in REACH_CASES})
    keyword = "(test_ops or special_values) and (" + " or ".join(f"[{p}]" for p in params) + ")"
    expected = {f"conformance/{param}": caught for param, caught in REACH_CASES.items()}
    _caught_where_expected(tmp_path, "reach", keyword, REACH_FAULTS, expected)


def _caught_where_expected(
    tmp_path: Path, name: str, keyword: str, faults: str, expected: dict[str, bool]
) -> None:
    """The run of `keyword` with `faults` fails exactly the cases `expected` marks True, and
    the same run without them (the control) passes every case."""
    code, cases, _ = _run(tmp_path, name, keyword, ACCELKIT_FAULTS=faults)
    assert code == 1, cases
    for case_id, caught in expected.items():
        status, message = cases[case_id]
        assert status == ("failed" if caught else "passed"), (case_id, message)
    code, cases, _ = _run(tmp_path, f"{name}-clean", keyword)
    assert code == 0, cases
    assert all(status == "passed" for status, _ in cases.values()), cases


def test_a_perturbed_operator_fails_its_gradient_case(tmp_path: Path) -> None:
    # A perturbed aten.mul in float32: the backward of most ops multiplies, so the float32
    # gradient of a product fails, while its float64 gradient is untouched.
    keyword = _opinfo_keyword("mul/float32", "mul/float32/grad", "mul/float64")
    code, cases, _ = _run(tmp_path, "mul", keyword, ACCELKIT_FAULT_OP="aten.mul.Tensor")
    assert code == 1, cases
    assert cases["conformance/opinfo/mul/float32"][0] == "failed", cases
    assert cases["conformance/opinfo/mul/float32/grad"][0] == "failed", cases
    assert cases["conformance/opinfo/mul/float64"][0] == "passed", cases


# Wrong kernels on one path only (issue 44; tests/fixtures/faults/faults.py PATH_KINDS): a
# reduction and a GEMM wrong only for non-contiguous inputs, an elementwise op wrong only
# for an expanded one, and a norm's, a GEMM's and an activation's 16-bit backward 3% off.
# {case param: must fail}: each op's contiguous forward case never takes the path.
PATH_FAULTS = (
    "sum:float32:noncontiguous,mm:float32:noncontiguous,mul:float32:expanded,"
    "layer_norm_backward:float16:backward:3e-2,mm:float16:backward:3e-2,"
    "silu_backward:bfloat16:backward:3e-2"
)
PATH_CASES = {
    "sum/float32/noncontiguous": True,
    "sum/float32": False,
    "mm/float32/noncontiguous": True,
    "mm/float32": False,
    "mul/float32/noncontiguous": True,
    "mul/float32": False,
    "nn.functional.layer_norm/float16/grad": True,
    "nn.functional.layer_norm/float16": False,
    "mm/float16/grad": True,
    "mm/float16": False,
    "nn.functional.silu/bfloat16/grad": True,
    "nn.functional.silu/bfloat16": False,
}


def test_faults_on_strided_and_16_bit_backward_paths_are_caught(tmp_path: Path) -> None:
    """Each path fault fails the default run's case that takes the path, and only that;
    without the faults every one of these cases passes (the control)."""
    expected = {f"conformance/opinfo/{param}": caught for param, caught in PATH_CASES.items()}
    _caught_where_expected(tmp_path, "paths", _opinfo_keyword(*PATH_CASES), PATH_FAULTS, expected)


# Each wrong decomposition and the cases that must catch it: {decomposition: (-k selection,
# compiled case that fails, eager case of the same graphs that passes)}. The cases' graphs
# share none of these ops, so one run with all three faults still says which fault each case
# caught.
DECOMP_FAULTS = {
    "gelu": ("mark_dynamic", "conformance/dynamic_shapes/mark_dynamic", None),
    "softmax": (
        "(test_switch and not clamps)",
        "conformance/control_flow/switch/compiled",
        "conformance/control_flow/switch/eager",
    ),
    # an op outside the compile zoo: its compiled OpInfo case fails, its eager one passes
    "hardswish": (
        f"({COMPILED_KEYWORD})",
        "conformance/opinfo_compiled/nn.functional.hardswish/float32",
        "conformance/opinfo/nn.functional.hardswish/float32",
    ),
}


def test_a_wrong_inductor_decomposition_fails_compiled_cases(tmp_path: Path) -> None:
    keyword = " or ".join(selection for selection, _, _ in DECOMP_FAULTS.values())
    code, cases, _ = _run(
        tmp_path, "decomp", keyword, ACCELKIT_FAULT_DECOMP=",".join(DECOMP_FAULTS)
    )
    assert code == 1, cases
    for decomp, (_, compiled_case, eager_case) in DECOMP_FAULTS.items():
        assert cases[compiled_case][0] == "failed", (decomp, cases)
        if eager_case is not None:
            assert cases[eager_case][0] == "passed", (decomp, cases)


def test_a_seed_replays_the_inputs_and_another_seed_changes_them(
    tmp_path: Path, exp_run: RunOutcome
) -> None:
    """The failure message names the worst element and its values, which depend on the
    sampled inputs: the same seed gives the same message, another seed another one. The
    replay is what a user runs: the one failed case alone (-k), in one process, with the
    seed the results file recorded, after a run of several cases on two workers."""
    keyword = _opinfo_keyword("exp/float32")
    runs = {"a": exp_run}
    for name, seed in (("b", exp_run[2]), ("c", exp_run[2] + 1)):
        runs[name] = _run(tmp_path, name, keyword, "--seed", str(seed), **EXP_FAULT)
    messages = {}
    for name, (code, cases, seed) in runs.items():
        assert code == 1, cases
        status, message = cases["conformance/opinfo/exp/float32"]
        assert status == "failed", message
        messages[name] = message
        # the results file records the seed (the default is 0)
        assert seed == (1 if name == "c" else 0)
    assert messages["a"] == messages["b"]
    assert messages["a"] != messages["c"]
