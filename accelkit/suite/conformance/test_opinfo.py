"""Operator breadth: every OpInfo in PyTorch's `op_db`, per dtype, against float64 on the CPU.

Case ids: `conformance/opinfo/<op>/<dtype>` (forward values, and the in-place variant where
the op has one), `conformance/opinfo/<op>/<dtype>/grad` (backward), and each one's
`.../noncontiguous` twin (the same samples strided, transposed, channels_last and expanded:
`accelkit.suite.opinfo.layouts`). What each case runs,
what is skipped and why, and the tolerances: the package `accelkit.suite.opinfo`.

`--breadth quick` (the default) runs the first samples of each op and float32 gradients for
every QUICK_GRAD_EVERY-th op; `--breadth full` runs every sample, dtype and gradient
(`accelkit.suite.opinfo.planning`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from accelkit.suite import opinfo
from accelkit.suite.opinfo import peer


def _breadth(config: pytest.Config) -> str:
    value = config.getoption("--accelkit-breadth", default="quick")
    return str(value or "quick")


def _device_type(config: pytest.Config) -> str:
    from accelkit import backends

    backend = str(config.getoption("--accelkit-device", default="cpu") or "cpu")
    return backends.get(backend).torch_device_type


def _capability_missing() -> bool:
    """No op_db (no expecttest, or a torch without it): one case skips with the reason."""
    try:
        opinfo.op_db_by_name()
    except ImportError:
        return True
    return False


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.function.__name__ != "test_opinfo":
        return
    if _capability_missing():
        # The `requires("opinfo")` marker skips this with the capability table's reason.
        metafunc.parametrize("case", [None], ids=["op_db"])
        return
    cases = opinfo.plan(_device_type(metafunc.config), _breadth(metafunc.config))
    metafunc.parametrize("case", cases, ids=[case.param_id for case in cases])


@pytest.mark.requires("opinfo")
def test_opinfo(
    case: opinfo.OpinfoCase | None,
    device: str,
    case_seed: int,
    request: Any,
    record_note: Callable[[str], None],
) -> None:
    assert case is not None  # the capability marker skips the placeholder
    op = opinfo.op_db_by_name()[case.op]
    breadth = _breadth(request.config)
    reason = opinfo.skip_reason(op, case, device, breadth)
    if reason is not None:
        pytest.skip(reason)
    limit = opinfo.sample_limit(case, breadth)
    # A device case's peer is the CPU at the same dtype (`opinfo.peer`).
    cpu = peer.device_peer(device, case.param_id, breadth)
    ran = opinfo.run_case(
        op, case, device, limit, case_seed, opinfo.max_elements(case, breadth), cpu
    )
    if cpu is not None and cpu.note is not None:
        record_note(cpu.note)
    if ran == 0 and case.noncontiguous:
        pytest.skip(
            f"OpInfo: no {case.dtype} sample of {case.op} on {device} has a tensor that "
            "another layout changes (all are scalars or have one element per dimension)"
        )
    if ran == 0:
        pytest.skip(
            f"OpInfo: {case.op} has no {case.dtype} sample inputs on {device}"
            + (" that need a gradient" if case.grad else "")
        )
