"""Serving an image build's install inputs over HTTP from the host while the build runs.

The test and builder Dockerfiles build in one stage: what their install step needs (the
torch wheel, accelkit's wheel, the install script and lists, the host's pip settings with
an index URL that may carry credentials, and its CA bundle) is not in the build context,
where `COPY` would keep it in a layer. `serve_inputs(folder)` serves that folder on
127.0.0.1 at an ephemeral port under an unguessable path (`secrets.token_urlsafe`), GET
only, files only (no directory listing), plus a manifest of every file with its size and
sha256 (accelkit.incontainer.fetch_inputs.MANIFEST_NAME); the Dockerfile gets the URL as
the build arg ACCELKIT_INPUTS_URL, and one RUN step downloads the files, installs from
them and deletes them. Builds use the host's network (`build_image`), so that step reaches
the host's loopback. The server stops when the `with` block ends, on error and Ctrl-C too;
the URL left in the image's history then answers nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import secrets
import shutil
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, BinaryIO

from accelkit.errors import BadInput
from accelkit.incontainer.fetch_inputs import MANIFEST_NAME

#: The build arg that carries the server's URL into the Dockerfiles.
INPUTS_URL_ARG = "ACCELKIT_INPUTS_URL"
#: The fetch script's name in a build context (the Dockerfiles COPY it).
FETCH_SCRIPT = "fetch_inputs.py"
_HOST = "127.0.0.1"
_CHUNK = 1 << 20


def fetch_script() -> Path:
    """accelkit/incontainer/fetch_inputs.py, which a build context carries as FETCH_SCRIPT."""
    return Path(__file__).resolve().parent.parent / "incontainer" / "fetch_inputs.py"


def manifest(folder: Path) -> dict[str, Any]:
    """Every regular file under `folder` (symbolic links are not followed) with its size
    and sha256, by its path relative to `folder`, in a stable order."""
    files = []
    for directory, subdirs, names in os.walk(folder):
        subdirs.sort()
        for name in sorted(names):
            path = Path(directory, name)
            if path.is_symlink() or not path.is_file():
                continue
            digest = hashlib.sha256()
            with open(path, "rb") as handle:
                for chunk in iter(lambda: handle.read(_CHUNK), b""):
                    digest.update(chunk)
            files.append(
                {
                    "path": path.relative_to(folder).as_posix(),
                    "size": path.stat().st_size,
                    "sha256": digest.hexdigest(),
                }
            )
    return {"files": files}


class _Handler(BaseHTTPRequestHandler):
    """GET of a file under the server's prefix; 404 for everything else (HEAD, POST and
    the other methods get http.server's 501)."""

    server: _InputsServer

    def do_GET(self) -> None:
        target = self.server.resolve(self.path)
        if target is None:
            self.send_error(404)
            return
        with contextlib.ExitStack() as stack:
            if isinstance(target, bytes):
                source: BinaryIO = io.BytesIO(target)
                size = len(target)
            else:
                source = stack.enter_context(open(target, "rb"))
                size = os.fstat(source.fileno()).st_size
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(size))
            self.end_headers()
            # A client that goes away fails its download on its side.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                shutil.copyfileobj(source, self.wfile, _CHUNK)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the build log says what was fetched; the URL stays out of accelkit's output


class _InputsServer(ThreadingHTTPServer):
    daemon_threads = True  # a transfer in flight never holds up the end of the build

    def __init__(self, root: Path, prefix: str, manifest_bytes: bytes) -> None:
        self.root = root
        self.prefix = prefix
        self.manifest_bytes = manifest_bytes
        super().__init__((_HOST, 0), _Handler)

    def resolve(self, raw_path: str) -> Path | bytes | None:
        """The file (or the manifest's bytes) a request path names; None for anything
        outside the prefix, outside the folder, a directory or a missing file."""
        path = urllib.parse.urlsplit(raw_path).path
        if not path.startswith(self.prefix):
            return None
        relative = urllib.parse.unquote(path[len(self.prefix) :])
        if relative == MANIFEST_NAME:
            return self.manifest_bytes
        parts = relative.split("/")
        if not relative or any(part in ("", ".", "..") or "\\" in part for part in parts):
            return None
        target = self.root.joinpath(*parts)
        if target.is_symlink() or not target.is_file():
            return None
        try:
            target.resolve(strict=True).relative_to(self.root)
        except (OSError, ValueError):
            return None
        return target


@contextmanager
def serve_inputs(folder: Path) -> Iterator[str]:
    """Serve the files under `folder` until the block ends; yields the URL to fetch them
    from (`http://127.0.0.1:PORT/TOKEN/`, ending in a slash)."""
    root = Path(folder).resolve()
    if not root.is_dir():
        raise BadInput(f"build inputs folder is not a directory: {folder}")
    prefix = f"/{secrets.token_urlsafe(24)}/"
    body = json.dumps(manifest(root), indent=1).encode("utf-8")
    server = _InputsServer(root, prefix, body)
    thread = threading.Thread(
        target=server.serve_forever,
        kwargs={"poll_interval": 0.2},
        name="accelkit-build-inputs",
        daemon=True,
    )
    thread.start()
    try:
        yield f"http://{_HOST}:{server.server_address[1]}{prefix}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
