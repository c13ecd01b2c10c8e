"""The device peer rule with a stand-in device (issue 45, "Peer rule"): the CPU plays the
device (`accelkit.suite.opinfo.peer.cpu_plays_device`), its kernels planted by a
TorchDispatchMode (tests/fixtures/faults/kernel_variants.py), its peer the CPU at the same
dtype without them.

- A correct kernel that rounds otherwise where the derived bound is tight: special.entr in
  float16 with 1.9x the CPU's own rounding error (`kernel_variants.amplified`; its first
  quick sample's largest CPU error is close to the bound, so 1.9x of it is outside). Without
  the peer the case fails; as a device it passes by the peer rule, and its message says so.
- A wrong kernel (entr 1% off, tests/fixtures/faults/faults.py) fails, saying by how much it
  missed the rule.
- Each rounding variant of kernel_variants.py, planted on the cases that reach it (the
  quick breadth's cases of the ops it replaces), fails no case that passes without it.
- The whole way through `accelkit test` (tests/fixtures/faults/stand_in_plugin.py): the
  case's message and the run summary's count per op.

Every case runs through the suite's own code (`opinfo.run_case`, as `test_opinfo` runs it);
nothing of the verdict is mocked.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from accelkit.results.io import load_results
from accelkit.suite.opinfo import peer
from tests.helpers import FAULTS, REPO, run_cli

sys.path.insert(0, str(FAULTS))

from faults import Fault, FaultMode
from kernel_variants import Planted, amplified, variants
from stand_in import judge, param_case

pytestmark = pytest.mark.slow

ENTR = "special.entr/float16"
ENTR_KERNEL = "special_entr.default"


def _entr(factor: float) -> Planted:
    return Planted(amplified((torch.ops.aten.special_entr.default,), factor))


def test_a_correct_kernel_outside_the_bound_passes_by_the_peer_rule_and_says_so() -> None:
    case = param_case(ENTR)
    assert judge(case, device_like=True).outcome == "passed"  # the CPU as itself
    on_cpu = judge(case, device_like=False, modes=(_entr(1.9),))
    assert on_cpu.outcome.startswith("failed"), on_cpu  # the derived bound is too tight
    mode = _entr(1.9)
    as_device = judge(case, device_like=True, modes=(mode,))
    assert mode.hits > 0
    assert as_device.outcome == "peer", as_device
    assert as_device.note is not None and as_device.note.startswith(peer.PEER_RULE_PREFIX)
    assert "sample 0" in as_device.note and "the CPU at the same dtype" in as_device.note


def test_a_wrong_kernel_fails_though_the_cpu_is_its_peer() -> None:
    mode = FaultMode(Fault("aten.special_entr.default", ("float16",), "scale"))
    judged = judge(param_case(ENTR), device_like=True, modes=(mode,))
    assert mode.hits > 0
    assert judged.outcome.startswith("failed"), judged
    assert "x what the peer rule allows" in judged.message


def test_a_kernel_with_more_than_twice_the_cpus_error_fails() -> None:
    judged = judge(param_case(ENTR), device_like=True, modes=(_entr(6.0),))
    assert judged.outcome.startswith("failed"), judged


# The quick breadth's cases of the ops each variant replaces (float32, and a 16-bit case
# where the variant changes 16-bit answers), all of which pass without it.
VARIANT_CASES: dict[str, tuple[str, ...]] = {
    "faithful_transcendentals": ("exp/float32", "tanh/float32", "sigmoid/float32/grad"),
    "thread_sum_order": ("sum/float32", "mean/float32", "sum/float32/noncontiguous"),
    "split_k_gemm": ("mm/float32", "addmm/float32", "bmm/float16", "mm/bfloat16/grad"),
    "fma_contraction": ("addcmul/float32", "lerp/float32", "addcdiv/float32"),
    "reciprocal_division": ("div.no_rounding_mode/float32", "true_divide/float32"),
    "online_softmax": ("softmax/float32", "log_softmax/float32", "softmax/float16"),
    "blocked_scan": ("cumsum/float32", "cumsum/float32/noncontiguous"),
    "split_channels_conv": ("nn.functional.conv2d/float32", "nn.functional.conv1d/float32"),
}


@pytest.mark.parametrize("name", sorted(VARIANT_CASES))
def test_a_kernel_that_rounds_otherwise_raises_no_false_alarm(name: str) -> None:
    variant = variants()[name]
    for param_id in VARIANT_CASES[name]:
        case = param_case(param_id)
        assert judge(case, device_like=False).outcome == "passed", param_id
        mode = Planted(variant)
        judged = judge(case, device_like=True, modes=(mode,))
        assert mode.hits > 0, f"{param_id} never reached {name}"
        assert judged.passed, (param_id, judged)


def _stand_in_run(tmp_path: Path, stand_in: str, **extra: str) -> tuple[int, Any, str]:
    results = tmp_path / "results.json"
    env = {
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(FAULTS), str(REPO), os.environ.get("PYTHONPATH", "")) if p
        ),
        "PYTEST_PLUGINS": "stand_in_plugin,perturb_plugin",
        "ACCELKIT_STAND_IN": stand_in,
        **extra,
    }
    keyword = f"opinfo and not opinfo_compiled and [{ENTR}]"
    args = ["test", "--device", "cpu", "--suite", "conformance", "-k", keyword]
    proc = run_cli(*args, "--json", str(results), "--workers", "0", env=env, timeout=240)
    assert results.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.returncode, load_results(results), proc.stdout


def test_accelkit_test_with_a_stand_in_device_names_and_counts_the_peer_passes(
    tmp_path: Path,
) -> None:
    code, results, stdout = _stand_in_run(tmp_path, f"amplified:{ENTR_KERNEL}:1.9")
    (case,) = [c for c in results.cases if c.id == f"conformance/opinfo/{ENTR}"]
    assert code == 0 and case.status == "passed", (case, stdout[-2000:])
    assert (case.message or "").startswith(peer.PEER_RULE_PREFIX)
    assert "passed a sample by the peer rule only" in stdout and "special.entr (1)" in stdout


def test_accelkit_test_with_a_wrong_stand_in_device_fails(tmp_path: Path) -> None:
    wrong = {"ACCELKIT_FAULTS": "aten.special_entr.default:float16:scale"}
    code, results, _ = _stand_in_run(tmp_path, "device", **wrong)
    (case,) = [c for c in results.cases if c.id == f"conformance/opinfo/{ENTR}"]
    assert code == 1 and case.status == "failed", case
    assert "x what the peer rule allows" in (case.message or "")
