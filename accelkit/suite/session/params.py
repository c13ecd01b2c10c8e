"""Case parameters as JSON, for the results file (`Case.repro.params`) and reproducers.

A parametrized case's values go into its record and come back when a reproducer calls the
case function: scalars, strings, lists and string-keyed dicts as themselves, tuples tagged
(`("float32", (4, 8))` is `{"__tuple__": ["float32", {"__tuple__": [4, 8]}]}`). Standard
library only: reproducers embed it.
"""

from __future__ import annotations

from typing import Any

TUPLE_KEY = "__tuple__"


def encode_param(value: Any) -> Any:
    """`value` as JSON; ValueError if it has no JSON form (an object, a dtype, ...)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, tuple):
        return {TUPLE_KEY: [encode_param(v) for v in value]}
    if isinstance(value, list):
        return [encode_param(v) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: encode_param(v) for k, v in value.items()}
    raise ValueError(f"{type(value).__name__} has no JSON form")


def decode_param(value: Any) -> Any:
    """The inverse of `encode_param`."""
    if isinstance(value, list):
        return [decode_param(v) for v in value]
    if isinstance(value, dict):
        if set(value) == {TUPLE_KEY}:
            return tuple(decode_param(v) for v in value[TUPLE_KEY])
        return {k: decode_param(v) for k, v in value.items()}
    return value
