"""A trend in one line of text, and the range any drawing of a trend spreads over.

`sparkline([1.0, 1.0, 1.25, 1.25])` is `'▁▁██'`: one character per night between the
row's minimum and maximum, widened to at least ±3% of their middle (`MIN_RELATIVE_SPAN`) so
that night-to-night wobble stays flat; `·` marks a night without a value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

SPARKS = "▁▂▃▄▅▆▇█"
NO_VALUE = "·"
#: The smallest range a sparkline spreads over its height, relative to the middle of the
#: values (±3%, the compare threshold): night-to-night wobble below it stays flat instead of
#: filling the full height.
MIN_RELATIVE_SPAN = 0.06


def value_range(values: Sequence[float | None]) -> tuple[float, float]:
    """(low, high) a trend of `values` is drawn between: their range, widened to at least
    MIN_RELATIVE_SPAN of their middle."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return 0.0, 1.0
    low, high = min(finite), max(finite)
    middle = (low + high) / 2
    floor = MIN_RELATIVE_SPAN * abs(middle) or 1.0
    if high - low < floor:
        low, high = middle - floor / 2, middle + floor / 2
    return low, high


def sparkline(values: Sequence[float | None]) -> str:
    """One character per value between the row's (widened) minimum and maximum; `·` for
    none: `▁▁▁▁▁▁██████` is a step up of at least 3%, `▄▄▄▄▄▄` a flat trend."""
    low, high = value_range(values)
    out = []
    for value in values:
        if value is None or not math.isfinite(value):
            out.append(NO_VALUE)
        else:
            out.append(SPARKS[round((value - low) / (high - low) * (len(SPARKS) - 1))])
    return "".join(out)
