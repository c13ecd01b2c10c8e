"""The capability registry: named checks, each run at most once per process, in a stable
order. The checks themselves are in accelkit/probe/capabilities.py.

A check returns an `Availability` whose reason says precisely why not (empty when the
capability is there); a check that raises is unavailable with the exception as the reason.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from accelkit.backends import Availability
from accelkit.torch_import import torch_import_error, torch_or_none

CheckFn = Callable[[], Availability]


@dataclass(frozen=True)
class _Registered:
    check: CheckFn
    needs_torch: bool


_CHECKS: dict[str, _Registered] = {}
_CACHE: dict[str, Availability] = {}
_LOCK = threading.RLock()


def capability_check(name: str, *, needs_torch: bool = True) -> Callable[[CheckFn], CheckFn]:
    """Register the decorated function as the check for capability `name`.

    With `needs_torch` (the default) the check is not called when torch cannot be imported:
    the capability is then unavailable with the import error as the reason.
    """

    def decorate(check: CheckFn) -> CheckFn:
        with _LOCK:
            if name in _CHECKS:
                raise ValueError(f"capability {name!r} registered twice")
            _CHECKS[name] = _Registered(check, needs_torch)
        return check

    return decorate


def names() -> list[str]:
    """Every registered capability, in registration (= display) order."""
    with _LOCK:
        return list(_CHECKS)


def capability(name: str) -> Availability:
    """Whether capability `name` is available here; computed once per process.

    Raises KeyError for a name no check is registered for.
    """
    with _LOCK:
        cached = _CACHE.get(name)
        if cached is not None:
            return cached
        registered = _CHECKS[name]  # KeyError for unknown names, on purpose
        result = _run(registered)
        _CACHE[name] = result
        return result


def capabilities() -> dict[str, Availability]:
    """Every capability, in a stable order: backends first, then features."""
    return {name: capability(name) for name in names()}


def reset() -> None:
    """Forget cached answers (tests; or after the environment changed)."""
    with _LOCK:
        _CACHE.clear()


@contextlib.contextmanager
def override(name: str, availability: Availability) -> Iterator[None]:
    """Pretend capability `name` is `availability` inside the block (tests)."""
    with _LOCK:
        if name not in _CHECKS:
            raise KeyError(name)
        previous = _CACHE.get(name)
        _CACHE[name] = availability
    try:
        yield
    finally:
        with _LOCK:
            if previous is None:
                _CACHE.pop(name, None)
            else:
                _CACHE[name] = previous


@contextlib.contextmanager
def isolated_registry() -> Iterator[None]:
    """An empty registry and cache inside the block, the real ones restored after (tests)."""
    with _LOCK:
        saved_checks = dict(_CHECKS)
        saved_cache = dict(_CACHE)
        _CHECKS.clear()
        _CACHE.clear()
    try:
        yield
    finally:
        with _LOCK:
            _CHECKS.clear()
            _CHECKS.update(saved_checks)
            _CACHE.clear()
            _CACHE.update(saved_cache)


def _run(registered: _Registered) -> Availability:
    if registered.needs_torch and torch_or_none() is None:
        return Availability(False, torch_import_error())
    try:
        # Probing may make torch warn (CUDA init, missing headers): the answer is the
        # reason we return, not noise on stderr.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = registered.check()
    except Exception as exc:
        return Availability(False, f"check failed: {type(exc).__name__}: {exc}")
    if not isinstance(result, Availability):
        return Availability(False, f"check failed: returned {type(result).__name__}")
    return result
