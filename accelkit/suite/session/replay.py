"""The record `accelkit repro` rebuilds a case from (`Case.repro` in the results file).

The plugin calls `replay_record` in the worker for every failed conformance case and every
perf case, with what the failing check recorded on its error (`accelkit.suite.session.failures`).
The record names the case's module (relative to the cases folder), its function, its
parameters (JSON, `accelkit.suite.session.params`), its seed and the torch device type.
An OpInfo case (kind "opinfo") adds its op, dtype, gradient flag and the index of the
sample that failed (and, for a `noncontiguous` case, the `layout` it failed in); a check
with a tolerance adds `check` (the tolerance and the worst
element). For example, the float32 `exp` case whose sample 2 failed:

    {"kind": "opinfo", "seed": 1734, "device": "cpu", "file": "conformance/test_opinfo.py",
     "function": "test_opinfo", "params": {}, "op": "exp", "dtype": "float32",
     "grad": false, "sample": 2, "check": {"what": "exp sample 2 (...)", "rtol": 1.3e-06,
     "atol": 1e-05, "index": [17], "actual": 7.389, "expected": 7.382, "abs_diff": 0.007}}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from accelkit.suite.session.caseid import case_seed_of, suite_of
from accelkit.suite.session.params import encode_param


def _device_type(item: pytest.Item) -> str:
    device = getattr(item, "funcargs", {}).get("device")
    if isinstance(device, str):
        return device
    from accelkit import backends

    return backends.get(str(item.config.getoption("--accelkit-device"))).torch_device_type


def _seed(item: pytest.Item) -> int:
    seed = getattr(item, "funcargs", {}).get("_accelkit_seed")
    if isinstance(seed, int):
        return seed
    return case_seed_of(int(item.config.getoption("--accelkit-seed")), item.nodeid)


def replay_record(item: pytest.Item, info: dict[str, Any]) -> dict[str, Any] | None:
    """The `Case.repro` record of `item` (None for an item that is not a function)."""
    function = getattr(item, "function", None)
    if function is None:
        return None
    path = Path(str(item.path))
    try:
        file = path.relative_to(item.config.rootpath).as_posix()
    except ValueError:
        file = path.as_posix()
    record: dict[str, Any] = {
        "kind": "perf" if suite_of(item.nodeid) == "perf" else "function",
        "seed": _seed(item),
        "device": _device_type(item),
        "file": file,
        "function": function.__name__,
        "params": {},
    }
    callspec = getattr(item, "callspec", None)
    params: dict[str, Any] = dict(callspec.params) if callspec is not None else {}
    case = params.get("case")
    if (
        "sample" in info
        and case is not None
        and all(hasattr(case, a) for a in ("op", "dtype", "grad"))
    ):
        record.update(
            kind="opinfo",
            op=case.op,
            dtype=case.dtype,
            grad=bool(case.grad),
            sample=int(info["sample"]),
        )
        if info.get("layout"):
            record["layout"] = str(info["layout"])
        params.pop("case")
    unencoded: list[str] = []
    for name, value in params.items():
        try:
            record["params"][name] = encode_param(value)
        except ValueError:
            unencoded.append(name)
    if unencoded:
        record["unencoded_params"] = unencoded
    from accelkit import backends

    backend = backends.get(str(item.config.getoption("--accelkit-device")))
    # The backend facts a case may ask for (its `backend` fixture) and that its numerics
    # follow (TF32 off where the backend has it: accelkit.suite.numerics.mode).
    record["backend"] = {"name": backend.name, "tf32": bool(backend.tf32)}
    check = info.get("check")
    if isinstance(check, dict):
        record["check"] = json.loads(json.dumps(check, default=str))
    return record
