"""Shared fixtures of accelkit's own tests.

Docker-backed tests skip with a reason where no engine answers; CI sets
ACCELKIT_REQUIRE_DOCKER=1 to turn that skip into a failure, so a missing engine can never
pass silently.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, NoReturn

import pytest

from accelkit.containers.engine import connect
from accelkit.containers.images import image_exists
from accelkit.errors import Unavailable

REQUIRE_DOCKER_ENV = "ACCELKIT_REQUIRE_DOCKER"
BASE_IMAGE_ENV = "ACCELKIT_BASE_IMAGE"
DEFAULT_BASE_IMAGE = "accelkit-base:bookworm"


def _docker_missing(reason: str) -> NoReturn:
    if os.environ.get(REQUIRE_DOCKER_ENV) == "1":
        pytest.fail(f"{reason} ({REQUIRE_DOCKER_ENV}=1: failing, not skipping)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    """A docker-py client of the engine that answers (DOCKER_HOST or the default socket)."""
    try:
        client = connect()
    except Unavailable as exc:
        _docker_missing(f"no Docker engine: {exc}")
    yield client
    client.close()


@pytest.fixture(scope="session")
def base_image(docker_client: Any) -> str:
    """The local base image Dockerfiles build FROM (made by .ci/run with mmdebstrap)."""
    name = os.environ.get(BASE_IMAGE_ENV) or DEFAULT_BASE_IMAGE
    if not image_exists(docker_client, name):
        _docker_missing(f"base image {name} is missing (.ci/run builds it)")
    return name


@pytest.fixture(scope="session")
def old_torch(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """torch 2.13.0+cpu installed once per test session into a site folder (the way
    `accelkit bisect` installs a build), shared by the triage tests that run a second torch:
    `.cache` is a bisect --cache folder holding it, `.site` the folder to put on PYTHONPATH.
    Installing the 190 MB wheel takes about a minute here; every test after the first
    reuses it."""
    from types import SimpleNamespace

    from accelkit.triage.bisect import Build
    from accelkit.triage.builds import SiteInstaller
    from tests.wheels import old_release_wheel

    wheel = old_release_wheel()
    cache = tmp_path_factory.mktemp("torch-builds")
    build = Build("2.13.0+cpu", wheel=wheel)
    site = SiteInstaller(cache=cache).prepare(build)
    return SimpleNamespace(cache=cache, site=site, wheel=wheel, build=build)
