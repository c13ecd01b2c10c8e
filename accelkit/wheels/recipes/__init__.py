"""Build recipes, one module per backend, in an explicit registry keyed by the backend each
module serves (`BACKEND`, the backend's own instance, so no backend is named here).

A recipe turns a checked `BuildRequest` into a `BuildPlan`. The facts it needs about its
accelerator (targets, families, index URLs, toolkit minimums) live in the backend module;
the recipe arranges them into an environment and steps.
"""

from __future__ import annotations

from collections.abc import Callable

from accelkit.errors import BadInput
from accelkit.wheels.plan import BuildPlan
from accelkit.wheels.recipes import cpu, cuda, rocm, xpu
from accelkit.wheels.request import BuildRequest

Recipe = Callable[[BuildRequest], BuildPlan]

_RECIPES: dict[str, Recipe] = {
    module.BACKEND.name: module.plan_build for module in (cpu, cuda, rocm, xpu)
}


def names() -> list[str]:
    return sorted(_RECIPES)


def plan(request: BuildRequest) -> BuildPlan:
    """The plan of `request`; BadInput for a backend without a recipe or bad flags."""
    from accelkit import backends

    backends.get(request.backend, flag="backend")
    try:
        make = _RECIPES[request.backend]
    except KeyError:
        raise BadInput(
            f"accelkit build: {request.backend} has no build recipe; valid: {', '.join(names())}"
        ) from None
    return make(request)
