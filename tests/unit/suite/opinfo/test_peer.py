"""The peer rule (accelkit.suite.opinfo.peer) and its use by the compiled cases."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from accelkit.suite import outcome
from accelkit.suite.opinfo import compiled, peer
from accelkit.suite.opinfo.comparison import Mismatch
from accelkit.suite.opinfo.op_db import op_db_by_name
from accelkit.suite.opinfo.running import seeded_samples

U = torch.finfo(torch.float32).eps / 2


def test_a_candidate_as_close_as_its_peer_is_within() -> None:
    reference = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64)
    peer_answer = reference + torch.tensor([4 * U, 0.0, -6 * U]) * reference.abs()
    twice = reference + torch.tensor([8 * U, 0.0, -12 * U]) * reference.abs()
    verdict = peer.judge(twice, peer_answer, reference, torch.float32, elementwise=True)
    assert verdict.within and verdict.ratio <= 1.0
    # 3x the peer's error at an element the peer got nearly right: not within
    worse = reference + torch.tensor([12 * U, 0.0, 0.0]) * reference.abs()
    assert not peer.judge(worse, peer_answer, reference, torch.float32, elementwise=True).within
    # ... but normwise, where the op's bound is normwise, it is the largest errors that count
    assert peer.judge(worse, peer_answer, reference, torch.float32, elementwise=False).within


def test_a_wrong_answer_or_another_special_value_is_never_within() -> None:
    reference = torch.tensor([1.0, float("inf"), float("nan")], dtype=torch.float64)
    right = reference.clone()
    off = torch.tensor([1.001, float("inf"), float("nan")], dtype=torch.float64)
    assert not peer.judge(off, right, reference, torch.float32, elementwise=True).within
    nan_for_inf = torch.tensor([1.0, float("nan"), float("nan")], dtype=torch.float64)
    assert not peer.judge(nan_for_inf, right, reference, torch.float32, elementwise=True).within


def test_the_prefix_is_the_one_the_run_summary_counts() -> None:
    assert peer.PEER_RULE_PREFIX == outcome.PEER_RULE_PREFIX


def _exp_sample() -> tuple[Any, Any]:
    op = op_db_by_name()["exp"]
    (_, sample), *_ = seeded_samples(op, "cpu", torch.float32, 1, 0)
    return op, sample


def _strict_for(target: torch.Tensor, monkeypatch: pytest.MonkeyPatch) -> None:
    """The derived bound made to reject `target` (the compiled answer) only: a stand-in for a
    correct compiled kernel that rounds outside the model while eager meets it."""
    real = compiled.compare_with_steps

    def compare(op: Any, name: str, dtype: Any, ref: Any, actual: Any, *rest: Any) -> None:
        if actual is target:
            raise AssertionError("outside the derived bound")
        real(op, name, dtype, ref, actual, *rest)

    monkeypatch.setattr(compiled, "compare_with_steps", compare)


def test_a_compiled_answer_outside_the_bound_passes_by_the_peer_rule_when_eager_is_as_far(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    op, sample = _exp_sample()
    eager = op(sample.input).clone()
    _strict_for(eager, monkeypatch)
    checked = compiled.check_compiled_sample(op, "exp", "cpu", torch.float32, 0, sample, eager)
    assert checked == compiled.PEER
    run = compiled.CompiledRun(compared=1, by_peer=(0,))
    assert run.note is not None and run.note.startswith(peer.PEER_RULE_PREFIX)


def test_a_wrong_compiled_answer_fails_with_how_far_it_missed_the_peer_rule(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    op, sample = _exp_sample()
    wrong = op(sample.input) * (1 + 1e-3)
    _strict_for(wrong, monkeypatch)
    with pytest.raises(Mismatch, match=r"the compiled code is wrong \(its error is [0-9.e+]+x"):
        compiled.check_compiled_sample(op, "exp", "cpu", torch.float32, 0, sample, wrong)


def test_the_run_summary_counts_the_cases_the_peer_rule_passed_per_op() -> None:
    from types import SimpleNamespace

    from rich.console import Console

    from accelkit.cli.test import _summary
    from accelkit.suite.request import RunRequest
    from tests.factories import case, results

    note = f"{peer.PEER_RULE_PREFIX}sample 2 outside the derived bound"
    run = results(
        [
            case("conformance/opinfo_compiled/exp/float32", message=note),
            case("conformance/opinfo_compiled/exp/float16", message=note),
            case("conformance/opinfo_compiled/sin/float32"),
        ]
    )
    console = Console(record=True, width=200)
    outcome = SimpleNamespace(results=run, exit_code=0, log_path=None)
    _summary(console, outcome, 1.0, RunRequest())
    text = console.export_text()
    assert "2 cases passed a sample by the peer rule only" in text and "exp (2)" in text
