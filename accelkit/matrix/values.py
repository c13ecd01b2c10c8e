"""Generic checks of matrix values (`accelkit.matrix.parse` builds on them): keys, mappings,
strings held to a pattern, lists of strings, booleans and choices, each failing as a
ConfigError that names the file and line; `hint_for` adds "did you mean".
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from typing import Any, NoReturn

from accelkit.errors import ConfigError
from accelkit.matrix import rules
from accelkit.matrix.loader import LocatedList, LocatedMap


def kind(value: object) -> str:
    """How `value` reads in an error message: "a list", "the number 3.1", ..."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"the boolean {value}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"the string {value!r}"
    return type(value).__name__


def hint_for(word: str, choices: Iterable[str]) -> str:
    """` (did you mean 'x'?)` for a near miss, else an empty string."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


class Scope:
    """A setting looked up in an include item, then its entry, then `defaults`."""

    def __init__(self, *maps: LocatedMap | None) -> None:
        self.maps = [m for m in maps if m is not None]

    def find(self, key: str) -> tuple[Any, int] | None:
        for mapping in self.maps:
            if key in mapping:
                return mapping[key], mapping.line_of(key)
        return None

    @property
    def line(self) -> int:
        return self.maps[0].line


class ValueChecker:
    """Checks of one file's values; every failure is a ConfigError at `path`:line."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, message: str, line: int | None) -> NoReturn:
        raise ConfigError(message, path=self.path, line=line)

    # --- generic checks ------------------------------------------------------------------

    def check_keys(self, mapping: LocatedMap, allowed: Sequence[str], where: str) -> None:
        for key in mapping:
            if key not in allowed:
                hint = hint_for(key, allowed)
                if not hint:
                    hint = f" (allowed: {', '.join(allowed)})"
                self.fail(f"unknown key {key!r} in {where}{hint}", mapping.line_of(key))

    def mapping(self, value: object, line: int, what: str) -> LocatedMap:
        if not isinstance(value, LocatedMap):
            self.fail(f"{what} must be a mapping, not {kind(value)}", line)
        return value

    def string(
        self, value: object, line: int, what: str, pattern: re.Pattern[str], allowed: str
    ) -> str:
        if isinstance(value, float):
            self.fail(
                f"{what} must be a quoted string: write '{value}' in quotes "
                "(YAML reads an unquoted 3.10 as the number 3.1)",
                line,
            )
        if not isinstance(value, str):
            self.fail(f"{what} must be a string, not {kind(value)}", line)
        problem = rules.check_pattern(value, pattern, what, allowed)
        if problem is not None:
            self.fail(problem, line)
        return value

    def string_list(
        self,
        value: object,
        line: int,
        what: str,
        item: Any,
        *,
        scalar_ok: bool = True,
        empty_ok: bool = False,
    ) -> tuple[str, ...]:
        """A list of strings (or one string, as a list of one), each checked by `item`."""
        if isinstance(value, (str, float)) and scalar_ok:
            return (item(value, line),)
        if not isinstance(value, LocatedList):
            self.fail(f"{what} must be a list of strings, not {kind(value)}", line)
        if not value and not empty_ok:
            self.fail(f"{what} must not be empty", line)
        out: list[str] = []
        for index, element in enumerate(value):
            checked = item(element, value.line_of(index))
            if checked in out:
                self.fail(f"{what} lists {checked!r} twice", value.line_of(index))
            out.append(checked)
        return tuple(out)

    def boolean(self, value: object, line: int, what: str) -> bool:
        if not isinstance(value, bool):
            self.fail(f"{what} must be true or false, not {kind(value)}", line)
        return value

    def choice(self, value: object, line: int, what: str, choices: Sequence[str]) -> str:
        if not isinstance(value, str) or value not in choices:
            shown = value if isinstance(value, str) else kind(value)
            hint = hint_for(shown, choices) if isinstance(value, str) else ""
            self.fail(f"unknown {what} {shown!r}{hint}; valid: {', '.join(choices)}", line)
        return value
