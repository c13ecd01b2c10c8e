"""Metric values for people: SI prefixes where they read better.

Rates (units ending in `/s`) from 1e3 up get k, M, G, T or P; seconds below one get m, µ or
n. `format_value(1.234e-3, "s")` is `'1.234 ms'`, `format_value(4.5e12, "FLOP/s")` is
`'4.5 TFLOP/s'`; `format_bytes(8 << 20)` is `'8 MiB'`. `axis_scale` picks one prefix for a
whole plot axis from its largest value.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

_RATE_PREFIXES: tuple[tuple[float, str], ...] = (
    (1e15, "P"),
    (1e12, "T"),
    (1e9, "G"),
    (1e6, "M"),
    (1e3, "k"),
)
_SECOND_PREFIXES: tuple[tuple[float, str], ...] = ((1e-3, "m"), (1e-6, "µ"), (1e-9, "n"))


def format_value(value: float | None, unit: str) -> str:
    """A number with an SI prefix where it reads better: 1.23 ms, 4.5 TFLOP/s; None is -."""
    if value is None:
        return "-"
    magnitude = abs(value)
    scales: tuple[tuple[float, str], ...] = ()
    if unit.endswith("/s") and magnitude >= 1e3:
        scales = _RATE_PREFIXES
    elif unit == "s" and 0.0 < magnitude < 1.0:
        scales = _SECOND_PREFIXES
    for scale, prefix in scales:
        if magnitude >= scale or scale == scales[-1][0]:
            return f"{value / scale:.4g} {prefix}{unit}"
    return f"{value:.4g} {unit}".rstrip()


def axis_scale(values: Iterable[float], unit: str) -> tuple[float, str]:
    """The divisor and prefixed unit for an axis showing `values` (1.0 and `unit` when no
    prefix fits)."""
    finite = [abs(v) for v in values if math.isfinite(v)]
    top = max(finite) if finite else 0.0
    if unit.endswith("/s"):
        for scale, prefix in _RATE_PREFIXES:
            if top >= scale:
                return scale, f"{prefix}{unit}"
    if unit == "s" and 0 < top < 1:
        for scale, prefix in _SECOND_PREFIXES:
            if top >= scale:
                return scale, f"{prefix}s"
    return 1.0, unit


_BYTE_PREFIXES: tuple[tuple[int, str], ...] = ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))


def format_bytes(count: int | None) -> str:
    """A size in binary units, as memory is sized: 8388608 is `'8 MiB'`; None is -."""
    if count is None:
        return "-"
    for scale, unit in _BYTE_PREFIXES:
        if count >= scale:
            return f"{count / scale:.4g} {unit}"
    return f"{count} B"
