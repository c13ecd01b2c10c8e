"""benchmarks/sweep_seeds.py: the evidence a rule change needs, on real cases and seeds."""

from __future__ import annotations

import sys
from types import ModuleType

import pytest

from tests.helpers import REPO, load_script

SCRIPT = REPO / "benchmarks" / "sweep_seeds.py"


@pytest.fixture(scope="module")
def sweep() -> ModuleType:
    return load_script(SCRIPT)


def test_a_correct_kernel_passes_and_a_planted_error_fails(sweep: ModuleType) -> None:
    case = sweep.parse_case("mul/float32/grad")
    assert sweep.run(case, 0, 0.0) == "pass"
    assert sweep.run(case, 0, 0.03).startswith("fail: mul grad of input")
    forward = sweep.parse_case("sum/bfloat16")
    assert sweep.run(forward, 1, 0.0) == "pass"
    assert sweep.run(forward, 1, 0.03).startswith("fail: sum sample")
    line = sweep.sweep(case, [0, 1], 0.03, verbose=False)
    assert line.startswith("mul/float32/grad: passed (missed) 0/2 seeds []")


def test_a_dropped_entry_is_gone_from_every_module_that_read_it(sweep: ModuleType) -> None:
    from accelkit.suite.opinfo import sample_rules, sample_tables

    key = "nn.functional.nll_loss"
    table = sample_tables.SAMPLE_TERMS
    readers = [m for m in list(sys.modules.values()) if getattr(m, "SAMPLE_TERMS", None) is table]
    try:
        sweep.drop_entries([key])
        assert key not in getattr(sample_rules, "SAMPLE_TERMS") and key in table
        sweep.drop_entries([key])  # a worker drops its entries once per case
    finally:
        for module in readers:
            setattr(module, "SAMPLE_TERMS", table)
        sweep._DROPPED.clear()


def test_a_dropped_known_skip_lets_its_case_run(sweep: ModuleType) -> None:
    from accelkit.suite.opinfo import planning, skips

    case = sweep.parse_case("logit/float32")  # any case; the skip below is what is dropped
    key = "nn.functional.multi_head_attention_forward/bfloat16/forward"
    table = skips.KNOWN_SKIPS
    assert any(sweep.skip_key(s) == key for s in table.values())
    try:
        sweep.drop_entries([key])
        dropped = planning.KNOWN_SKIPS
        assert len(dropped) == len(table) - 1
        assert not any(sweep.skip_key(s) == key for s in dropped.values())
        assert sweep.run(case, 0, 0.0) == "pass"
    finally:
        for module in list(sys.modules.values()):
            if getattr(module, "KNOWN_SKIPS", None) is planning.KNOWN_SKIPS:
                setattr(module, "KNOWN_SKIPS", table)
        sweep._DROPPED.clear()


def test_bad_input_is_one_line_and_exits(sweep: ModuleType) -> None:
    with pytest.raises(SystemExit, match="expected ranges like 0-40"):
        sweep.parse_seeds("0-x")
    with pytest.raises(SystemExit, match="is not OP/DTYPE"):
        sweep.parse_case("mul")
    with pytest.raises(SystemExit, match="unknown parts"):
        sweep.parse_case("mul/float32/gard")
    with pytest.raises(SystemExit, match="no table entry"):
        sweep.drop_entries(["no.such.op/grad"])
    with pytest.raises(SystemExit, match="no OpInfo named"):
        sweep.main(["no.such.op/float32"])
