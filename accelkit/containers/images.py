"""Building images from Dockerfiles, and content-hash tags that let unchanged builds be skipped.

Builds go through docker-py's low-level `client.api.build(..., decode=True)` so each log line
reaches the caller while the build runs (`client.images.build` returns only at the end).
The engine is the classic builder: Dockerfiles must not use BuildKit syntax (`RUN --mount`).
Dockerfiles take their base image as a build argument (`ARG BASE_IMAGE` then
`FROM ${BASE_IMAGE}`) so tests and CI can point them at a locally made base image; nothing
is ever pulled.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import os
import re
import shutil
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelkit.containers.engine import api_error_text
from accelkit.containers.run import MANAGED_LABEL, LineCallback
from accelkit.errors import BadInput, Failed, Unavailable

#: Build argument that carries the base image into `FROM ${BASE_IMAGE}`.
BASE_IMAGE_ARG = "BASE_IMAGE"

#: HTTP timeout of a build request, in seconds. It bounds the silence between two log
#: chunks, not the whole build; docker-py's default of 60 s is far too short for a compile
#: step that prints nothing for minutes.
DEFAULT_BUILD_TIMEOUT_S = 4 * 60 * 60

#: Log lines kept for the message of a failed build.
FAILED_BUILD_TAIL_LINES = 30

#: Changing the way tags are hashed must change every tag: bump this.
_HASH_SCHEME = b"accelkit-image-tag-v1"


class BuildFailed(Failed):
    """A `docker build` step failed; `log_tail` holds the last lines of its log."""

    def __init__(self, tag: str, error: str, log_tail: Iterable[str]) -> None:
        self.tag = tag
        self.error = error
        self.log_tail = tuple(log_tail)
        tail = "".join(f"\n  | {line}" for line in self.log_tail)
        super().__init__(f"docker build of {tag} failed: {error}{tail}")


@dataclass(frozen=True)
class EnsuredImage:
    tag: str
    built: bool  # False when an image with this content tag existed already


def image_exists(client: Any, tag: str) -> bool:
    """Whether the engine has an image called `tag` (name:tag or an id)."""
    import docker.errors

    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def content_tag(
    dockerfile: Path,
    build_args: Mapping[str, str] | None = None,
    inputs: Iterable[Path] = (),
    *,
    root: Path | None = None,
    length: int = 16,
) -> str:
    """A short hex tag from sha256 over the Dockerfile, the build args and the input files.

    Directories in `inputs` count with every file below them. Files are named relative to
    `root` (default: the Dockerfile's directory), so the tag is the same in any checkout;
    a file's executable bit counts because `COPY` keeps it.
    """
    digest = hashlib.sha256(_HASH_SCHEME)

    def put(kind: bytes, data: bytes) -> None:
        digest.update(kind + len(data).to_bytes(8, "big") + data)

    dockerfile = Path(dockerfile)
    if not dockerfile.is_file():
        raise BadInput(f"Dockerfile not found: {dockerfile}")
    root = Path(root) if root is not None else dockerfile.parent
    put(b"dockerfile", dockerfile.read_bytes())
    for name, value in sorted((build_args or {}).items()):
        put(b"arg", name.encode())
        put(b"value", value.encode())
    files = sorted(
        {Path(os.path.relpath(path, root)).as_posix(): path for path in _walk(inputs)}.items()
    )
    for name, path in files:
        put(b"file", name.encode())
        put(b"executable", b"1" if os.access(path, os.X_OK) else b"0")
        put(b"content", path.read_bytes())
    return digest.hexdigest()[:length]


def build_image(
    client: Any,
    context_dir: Path,
    tag: str,
    *,
    dockerfile: Path | str = "Dockerfile",
    build_args: Mapping[str, str] | None = None,
    on_line: LineCallback | None = None,
    network_mode: str = "host",
    timeout: float = DEFAULT_BUILD_TIMEOUT_S,
    no_cache: bool = False,
    labels: Mapping[str, str] | None = None,
) -> str:
    """Build `context_dir` with `dockerfile` (relative to the context, or any path) as `tag`.

    Each log line goes to `on_line`. Returns the image id; raises BuildFailed with the last
    log lines when a step fails. RUN steps use the host's network by default (package
    indexes); the CI engine has no bridge network.
    """
    import docker.errors
    import requests.exceptions

    context_dir = Path(context_dir)
    if not context_dir.is_dir():
        raise BadInput(f"build context is not a directory: {context_dir}")
    dockerfile_path = context_dir / dockerfile
    if not dockerfile_path.is_file():
        raise BadInput(f"Dockerfile not found: {dockerfile_path}")

    tail: collections.deque[str] = collections.deque(maxlen=FAILED_BUILD_TAIL_LINES)
    image_id: str | None = None
    try:
        chunks = client.api.build(
            path=str(context_dir),
            dockerfile=str(dockerfile_path.absolute()),
            tag=tag,
            buildargs=dict(build_args or {}),
            decode=True,
            rm=True,
            forcerm=True,  # also remove the container of a failed step
            pull=False,  # nothing is pulled: base images are made locally
            nocache=no_cache,
            network_mode=network_mode,
            labels={MANAGED_LABEL: "1", **(labels or {})},
            timeout=int(timeout),
        )
        pending = ""
        for chunk in chunks:
            text = chunk.get("stream", chunk.get("status"))
            if isinstance(text, str):
                *complete, pending = (pending + text).split("\n")
                for line in complete:
                    _keep(line.rstrip("\r"), tail, on_line)
            if "error" in chunk:
                _keep(pending, tail, on_line)
                error = str(chunk["error"]).strip().splitlines()
                raise BuildFailed(tag, error[0] if error else "unknown error", tail)
            aux = chunk.get("aux")
            if isinstance(aux, dict) and "ID" in aux:
                image_id = str(aux["ID"])
        _keep(pending, tail, on_line)
    except docker.errors.APIError as exc:
        raise BuildFailed(tag, api_error_text(exc), tail) from None
    except requests.exceptions.ConnectionError as exc:  # ReadTimeout is one
        reason = f"lost the engine or no output for {timeout:.0f} s: {exc}"
        raise BuildFailed(tag, reason, tail) from None
    if image_id is None:
        try:
            image_id = str(client.images.get(tag).id)
        except docker.errors.ImageNotFound:
            raise BuildFailed(tag, "the engine reported no image", tail) from None
    return image_id


def build_from_base(
    client: Any,
    base_image: str,
    context_dir: Path,
    tag: str,
    *,
    dockerfile: Path | str = "Dockerfile",
    build_args: Mapping[str, str] | None = None,
    on_line: LineCallback | None = None,
    network_mode: str = "host",
    timeout: float = DEFAULT_BUILD_TIMEOUT_S,
    inputs: Path | None = None,
) -> str:
    """`build_image` of a Dockerfile that starts `ARG BASE_IMAGE` / `FROM ${BASE_IMAGE}`.

    `inputs`: a folder the build's install step downloads while it runs, never part of the
    context (accelkit.containers.build_inputs): the fetch script goes into the context and
    the server's URL into the build args. Raises Unavailable when `base_image` is not on the
    engine (it is never pulled).
    """
    if not image_exists(client, base_image):
        raise Unavailable(f"base image {base_image} is not present on the Docker engine")
    args = {**(build_args or {}), BASE_IMAGE_ARG: base_image}
    with contextlib.ExitStack() as stack:
        if inputs is not None:
            from accelkit.containers.build_inputs import (
                FETCH_SCRIPT,
                INPUTS_URL_ARG,
                fetch_script,
                serve_inputs,
            )

            shutil.copyfile(fetch_script(), Path(context_dir) / FETCH_SCRIPT)
            args[INPUTS_URL_ARG] = stack.enter_context(serve_inputs(inputs))
        return build_image(
            client,
            context_dir,
            tag,
            dockerfile=dockerfile,
            build_args=args,
            on_line=on_line,
            network_mode=network_mode,
            timeout=timeout,
        )


def ensure_image(
    client: Any,
    repository: str,
    context_dir: Path,
    *,
    dockerfile: Path | str = "Dockerfile",
    build_args: Mapping[str, str] | None = None,
    inputs: Iterable[Path] | None = None,
    base_image: str | None = None,
    on_line: LineCallback | None = None,
    network_mode: str = "host",
    timeout: float = DEFAULT_BUILD_TIMEOUT_S,
) -> EnsuredImage:
    """Build `repository:<content tag>` unless the engine has it already.

    The tag hashes the Dockerfile, the build args, `inputs` (default: the whole context)
    and, with `base_image`, the base image's id, so rebuilding the base invalidates it.
    """
    import docker.errors

    context_dir = Path(context_dir)
    dockerfile_path = context_dir / dockerfile
    args = dict(build_args or {})
    hashed_args = dict(args)
    if base_image is not None:
        try:
            base_id = str(client.images.get(base_image).id)
        except docker.errors.ImageNotFound:
            raise Unavailable(
                f"base image {base_image} is not present on the Docker engine"
            ) from None
        args[BASE_IMAGE_ARG] = base_image
        hashed_args[BASE_IMAGE_ARG] = base_id
    tag = f"{repository}:" + content_tag(
        dockerfile_path,
        hashed_args,
        [context_dir] if inputs is None else inputs,
        root=context_dir,
    )
    if image_exists(client, tag):
        return EnsuredImage(tag=tag, built=False)
    build_image(
        client,
        context_dir,
        tag,
        dockerfile=dockerfile,
        build_args=args,
        on_line=on_line,
        network_mode=network_mode,
        timeout=timeout,
    )
    return EnsuredImage(tag=tag, built=True)


def _walk(inputs: Iterable[Path]) -> Iterator[Path]:
    for item in inputs:
        path = Path(item)
        if path.is_dir():
            for directory, subdirs, names in os.walk(path):
                subdirs.sort()
                for name in sorted(names):
                    yield Path(directory, name)
        elif path.is_file():
            yield path
        else:
            raise BadInput(f"image input not found: {path}")


#: The colour codes the classic builder wraps a RUN step's stderr in.
_SGR = re.compile(r"\x1b\[[0-9;]*m")


def _keep(line: str, tail: collections.deque[str], on_line: LineCallback | None) -> None:
    line = _SGR.sub("", line)
    if not line:
        return
    tail.append(line)
    if on_line is not None:
        on_line(line)
