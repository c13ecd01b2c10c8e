"""OpInfo under the compiler: each op's forward samples through
`torch.compile(backend="inductor")`, compared with the float64 reference (and, where that
fails, with eager on the same device).

Case ids: `conformance/opinfo_compiled/<op>/<dtype>`. `--breadth quick` (the default)
compiles the ops of `QUICK_COMPILED_OPS` in float32, together, once per worker; `--breadth
full` compiles every op in every dtype, each op's samples as one graph. What runs, what is
shared and what cannot compile: `accelkit.suite.opinfo.compiled`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from accelkit.suite import opinfo
from accelkit.suite.opinfo import compiled

pytestmark = pytest.mark.requires("inductor")


def _breadth(config: pytest.Config) -> str:
    return str(config.getoption("--accelkit-breadth", default="quick") or "quick")


def _device_type(config: pytest.Config) -> str:
    from accelkit import backends

    backend = str(config.getoption("--accelkit-device", default="cpu") or "cpu")
    return backends.get(backend).torch_device_type


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.function.__name__ != "test_opinfo_compiled":
        return
    try:
        opinfo.op_db_by_name()
    except ImportError:  # the `requires("opinfo")` marker skips it with the reason
        metafunc.parametrize("case", [None], ids=["op_db"])
        return
    cases = compiled.plan_compiled(_device_type(metafunc.config), _breadth(metafunc.config))
    metafunc.parametrize("case", cases, ids=[case.param_id for case in cases])


@pytest.mark.requires("opinfo")
def test_opinfo_compiled(
    case: opinfo.OpinfoCase | None,
    device: str,
    request: Any,
    record_note: Callable[[str], None],
) -> None:
    assert case is not None  # the capability marker skips the placeholder
    op = opinfo.op_db_by_name()[case.op]
    breadth = _breadth(request.config)
    reason = compiled.compiled_skip_reason(op, case, device, breadth)
    if reason is not None:
        pytest.skip(reason)
    seed = int(request.config.getoption("--accelkit-seed", default=0) or 0)
    ran = compiled.run_compiled_case(op, case, device, breadth, seed)
    if ran.compared == 0:
        pytest.skip(f"OpInfo: {case.op} has no {case.dtype} sample inputs on {device} to compare")
    if ran.note is not None:
        record_note(ran.note)
