"""The part of pytest a conformance case module uses at import and in its body, for
reproducers that must run where pytest is not installed (embedded as the module `pytest`).

Markers and fixtures decorate nothing, `skip` raises `Skipped`, `raises` checks an
exception like pytest's. Anything else a case touches is a placeholder that fails loudly
when called, so a reproducer never runs a case it cannot run faithfully.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from types import TracebackType
from typing import Any


class Skipped(Exception):
    """A case skipped itself (pytest.skip): the reproducer reports the reason."""


def skip(reason: str = "", **_: Any) -> None:
    raise Skipped(reason)


skip.Exception = Skipped  # type: ignore[attr-defined]  # as pytest.skip.Exception


def importorskip(name: str, *_: Any, **__: Any) -> Any:
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise Skipped(f"could not import {name}: {exc}") from None


def _decorate(*args: Any, **_: Any) -> Any:
    if len(args) == 1 and callable(args[0]):  # used bare: @pytest.mark.slow
        return args[0]
    return lambda fn: fn


class _Marks:
    def __getattr__(self, name: str) -> Callable[..., Any]:
        return _decorate


mark = _Marks()


def fixture(*args: Any, **_: Any) -> Any:
    return _decorate(*args)


def param(*values: Any, **_: Any) -> tuple[Any, ...]:
    return values


class raises:  # pytest's name
    def __init__(self, expected: Any, *, match: str | None = None) -> None:
        self.expected = expected
        self.match = match
        self.value: BaseException | None = None

    def __enter__(self) -> raises:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        if value is None:
            raise AssertionError(f"DID NOT RAISE {self.expected}")
        if not isinstance(value, self.expected):
            return False
        if self.match is not None and not re.search(self.match, str(value)):
            raise AssertionError(f"{self.match!r} does not match {str(value)!r}")
        self.value = value
        return True


class _Unsupported:
    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, *_: Any, **__: Any) -> Any:
        raise RuntimeError(f"pytest.{self.name} is not available in a standalone reproducer")


def __getattr__(name: str) -> Any:
    # Type names in annotations (pytest.Config, ...) and anything else a case names.
    return _Unsupported(name)
