"""Build recipes, one module per backend, found through a small registry.

A recipe turns a checked `BuildRequest` into a `BuildPlan`. The facts it needs about its
accelerator (targets, families, index URLs, toolkit minimums) live in the backend module;
the recipe arranges them into an environment and steps.
"""

from __future__ import annotations

from collections.abc import Callable

from accelkit.errors import BadInput
from accelkit.wheels.plan import BuildPlan
from accelkit.wheels.request import BuildRequest

Recipe = Callable[[BuildRequest], BuildPlan]

_RECIPES: dict[str, Recipe] = {}


def recipe(backend: str) -> Callable[[Recipe], Recipe]:
    def decorate(function: Recipe) -> Recipe:
        if backend in _RECIPES:
            raise ValueError(f"build recipe for {backend!r} registered twice")
        _RECIPES[backend] = function
        return function

    return decorate


def names() -> list[str]:
    _load_all()
    return sorted(_RECIPES)


def plan(request: BuildRequest) -> BuildPlan:
    """The plan of `request`; BadInput for a backend without a recipe or bad flags."""
    from accelkit import backends

    backends.get(request.backend, flag="backend")
    _load_all()
    try:
        make = _RECIPES[request.backend]
    except KeyError:
        raise BadInput(
            f"accelkit build: {request.backend} has no build recipe; valid: {', '.join(names())}"
        ) from None
    return make(request)


def _load_all() -> None:
    from accelkit.wheels.recipes import cpu, cuda, rocm, xpu  # noqa: F401
