"""The peer rule (accelkit.suite.opinfo.peer) and its use by the compiled cases."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from accelkit.suite.opinfo import compiled, peer
from accelkit.suite.opinfo.comparison import Mismatch
from accelkit.suite.opinfo.op_db import op_db_by_name
from accelkit.suite.opinfo.running import seeded_samples
from accelkit.suite.run import outcome

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
    from accelkit.suite.run.request import RunRequest
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


# -- the CPU as the peer of a device case -------------------------------------------------


def test_a_cpu_case_has_no_device_peer_unless_the_cpu_plays_a_device() -> None:
    assert peer.device_peer("cpu", "exp/float32", "quick") is None
    with peer.cpu_plays_device():
        found = peer.device_peer("cpu", "exp/float32", "quick")
    assert found is not None and found.known_failure is None
    assert peer.device_peer("cpu", "exp/float32", "quick") is None  # the stand-in ended


def test_a_device_case_whose_cpu_case_is_a_known_failure_has_a_peer_that_rescues_nothing() -> None:
    # expectations/cpu.yaml lists special.ndtr's float32 case (the CPU's cancellation).
    with peer.cpu_plays_device():
        ndtr = peer.device_peer("cpu", "special.ndtr/float32", "quick")
    assert ndtr is not None and ndtr.known_failure is not None
    reference = torch.tensor([1.0], dtype=torch.float64)
    with pytest.raises(Mismatch, match="the CPU's own case is a known failure"):
        ndtr.rescue(
            AssertionError("outside the derived bound"),
            "0",
            reference,
            reference,
            torch.float32,
            True,
            lambda: pytest.fail("a known-failing peer is not even computed"),
            lambda answer: None,
        )
    assert ndtr.passed == [] and ndtr.note is None


def _rescue(device_peer: peer.DevicePeer, candidate: torch.Tensor, mine: torch.Tensor) -> None:
    reference = torch.tensor([1.0, -2.0], dtype=torch.float64)
    device_peer.rescue(
        AssertionError("outside the derived bound"),
        "3 in layout strided",
        candidate,
        reference,
        torch.float32,
        True,
        lambda: mine,
        lambda answer: None,  # the CPU meets the bound
    )


def test_a_device_answer_as_close_as_the_cpu_passes_and_the_note_says_so() -> None:
    device_peer = peer.DevicePeer()
    _rescue(device_peer, torch.tensor([1 + 8 * U, -2.0]), torch.tensor([1 + 4 * U, -2.0]))
    assert device_peer.passed == ["3 in layout strided"]
    assert device_peer.note is not None
    assert device_peer.note.startswith(peer.PEER_RULE_PREFIX)
    assert "sample 3 in layout strided" in device_peer.note and "the CPU" in device_peer.note


def test_a_device_answer_farther_than_the_rule_allows_fails_saying_by_how_much() -> None:
    device_peer = peer.DevicePeer()
    with pytest.raises(Mismatch, match=r"its error is [0-9.e+]+x what the peer rule allows"):
        _rescue(device_peer, torch.tensor([1.001, -2.0]), torch.tensor([1 + 4 * U, -2.0]))
    assert device_peer.passed == []


def test_a_cpu_that_misses_the_bound_too_rescues_nothing() -> None:
    reference = torch.tensor([1.0], dtype=torch.float64)

    def misses(answer: object) -> None:
        raise AssertionError("the CPU misses it too")

    with pytest.raises(Mismatch, match="the CPU at the same dtype misses the bound too"):
        peer.DevicePeer().rescue(
            AssertionError("outside"),
            "0",
            reference,
            reference,
            torch.float32,
            True,
            lambda: reference,
            misses,
        )


def test_without_a_peer_the_error_is_raised_as_it_was() -> None:
    error = AssertionError("outside the derived bound")
    with pytest.raises(AssertionError) as raised:
        peer.rescue(error, "0", None, None, torch.float32, True, lambda: None, lambda a: None)
    assert raised.value is error


def test_the_peer_sample_is_a_copy_on_the_cpu_at_the_same_dtype() -> None:
    _, sample = _exp_sample()
    mine = peer.peer_sample(sample, "cpu")
    assert mine.input.dtype == sample.input.dtype and mine.input.device.type == "cpu"
    assert mine.input is not sample.input and torch.equal(mine.input, sample.input)
