"""Stable case ids from pytest node ids.

`conformance/test_control_flow.py::test_switch[eager]` becomes
`conformance/control_flow/switch/eager`: the suite (the top folder), the module without
`test_`, the function without `test_` (left out when it repeats the module's name), and the
parameter id. Tests choose parameter ids that read well in a path (`add/float32`).
"""

from __future__ import annotations

import zlib

from accelkit.results.names import SUITES


def case_id(nodeid: str) -> str:
    path, _, name = nodeid.partition("::")
    parts = [p for p in path.split("/") if p]
    suite = suite_of(nodeid)
    if parts and parts[0] == suite:
        parts = parts[1:]
    if parts:
        stem = parts[-1]
        stem = stem[:-3] if stem.endswith(".py") else stem
        parts[-1] = stem[5:] if stem.startswith("test_") else stem
    func, _, param = name.partition("[")
    func = func.replace("::", "/")
    func = func[5:] if func.startswith("test_") else func
    pieces = [suite, *parts]
    if func and func != pieces[-1]:
        pieces.append(func)
    if param:
        pieces.append(param.rstrip("]"))
    return "/".join(pieces)


def suite_of(nodeid: str) -> str:
    """The suite a node belongs to: the first folder named like a suite, else conformance."""
    path = nodeid.partition("::")[0]
    for part in path.split("/"):
        if part in SUITES:
            return part
    return "conformance"


def case_seed_of(base: int, nodeid: str) -> int:
    """The seed of the case `nodeid` in a run with `--seed base`: the suite seeds torch,
    random and numpy with it as the case starts, so a case replays from the two."""
    return (base * 1_000_003 + zlib.crc32(nodeid.encode())) % (2**31)
