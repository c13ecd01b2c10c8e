"""What a failing case attaches to its error, for the results file and `accelkit repro`.

A check that fails deep inside a case knows things the case's message rounds or leaves out:
the exact tolerance, the worst element, the index of the sample that failed, where each rank
of a distributed case stopped. It records them on the AssertionError it raises
(`add_failure_info(error, sample=3)`), each level adding what it knows on the way up; the
suite's plugin reads them off the error (`failure_info`) into the case's record
(`repro.check`, `repro.sample`, `hang`). Standard library only: reproducers embed it.

    try:
        compare(...)
    except AssertionError as error:
        add_failure_info(error, sample=index)
        raise
"""

from __future__ import annotations

from typing import Any

FAILURE_ATTRIBUTE = "accelkit_failure"


def failure_info(error: BaseException) -> dict[str, Any]:
    """What was recorded on `error` (empty if nothing)."""
    info = getattr(error, FAILURE_ATTRIBUTE, None)
    return dict(info) if isinstance(info, dict) else {}


def add_failure_info(error: BaseException, **info: Any) -> None:
    """Record `info` on `error`; keys already recorded are kept (the innermost level knows
    best: the first check that failed, not a later wrapper)."""
    setattr(error, FAILURE_ATTRIBUTE, {**info, **failure_info(error)})
