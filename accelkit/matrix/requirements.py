"""A matrix leg's `require` and `waive` settings: capabilities the leg must have besides its
backend's, and those it does without, each with the reason.

    require: [nvgemm]
    waive: {cuda_graph_while_loop: "driver 590 on the Rubin runners lacks conditional nodes"}

Names are checked against the capability registry (`accelkit doctor` lists them); a reason
is one line of text, kept with the leg and never put on a command line. Expansion passes
the names to `accelkit test` as `--require=...` and `--waive=...`.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any, NoReturn, Protocol

from accelkit.matrix.loader import LocatedMap


class _Parser(Protocol):
    def fail(self, message: str, line: int | None) -> NoReturn: ...

    def mapping(self, value: object, line: int, what: str) -> LocatedMap: ...

    def string_list(
        self,
        value: object,
        line: int,
        what: str,
        item: Callable[[Any, int], str],
        *,
        scalar_ok: bool = True,
        empty_ok: bool = False,
    ) -> tuple[str, ...]: ...


def capability(parser: _Parser, value: object, line: int, what: str) -> str:
    """`value` when it names a registered capability; else a located error with a hint."""
    from accelkit.probe.capabilities import names

    known = names()
    if not isinstance(value, str):
        parser.fail(f"{what}: a capability name is a string, not {type(value).__name__}", line)
    if value not in known:
        close = difflib.get_close_matches(value, known, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        parser.fail(f"{what}: unknown capability {value!r}{hint}", line)
    return value


def requirements(
    parser: _Parser,
    require_found: tuple[Any, int] | None,
    waive_found: tuple[Any, int] | None,
) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """The (require, waive) of a leg's settings, each found value with its line or None."""
    require: tuple[str, ...] = ()
    if require_found is not None:
        value, line = require_found
        require = parser.string_list(
            value,
            line,
            "require",
            lambda v, at: capability(parser, v, at, "require"),
            empty_ok=True,
        )
    waive: list[tuple[str, str]] = []
    if waive_found is not None:
        raw = parser.mapping(waive_found[0], waive_found[1], "waive ({capability: reason})")
        for name, reason in raw.items():
            at = raw.line_of(name)
            capability(parser, name, at, "waive")
            if not isinstance(reason, str) or not reason.strip() or "\n" in reason.strip():
                parser.fail(f"waive {name}: give the reason as one line of text", at)
            if name in require:
                parser.fail(f"waive {name}: the same leg requires it", at)
            waive.append((name, reason.strip()))
    return require, tuple(waive)
