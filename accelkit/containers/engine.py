"""Connecting to the Docker engine."""

from __future__ import annotations

from typing import Any

from accelkit.errors import Unavailable


def connect(*, timeout: float = 600.0) -> Any:
    """A docker-py client for the engine of the environment (DOCKER_HOST, the socket).

    Raises Unavailable (exit 3) when no engine answers.
    """
    import docker  # lazy: docker-py costs start-up time

    try:
        client = docker.from_env(version="auto", timeout=int(timeout))
        client.ping()
    except Exception as exc:
        raise Unavailable(f"Docker engine unreachable: {api_error_text(exc)}") from None
    return client


def engine_version(*, timeout: float = 3.0) -> str | None:
    """The engine's version when one answers within `timeout` seconds, else None."""
    try:
        client = connect(timeout=timeout)
    except Unavailable:
        return None
    try:
        return str(client.version().get("Version")) or None
    except Exception:
        return None
    finally:
        client.close()


def api_error_text(exc: BaseException) -> str:
    """The first line of what the engine said about a failed request (docker.errors.APIError
    carries it in `explanation`)."""
    explanation = getattr(exc, "explanation", None)
    text = str(explanation or exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
