"""Downloads an image build's install inputs from the host. Runs INSIDE a RUN step of a test
or builder Dockerfile (`python fetch_inputs.py URL FOLDER`), with the standard library only;
copied into the build context by accelkit.setup.image and accelkit.wheels.execute.

The inputs (the torch wheel, accelkit's wheel, install.py and its lists, the host's pip
settings) are not in the build context: accelkit serves them over HTTP on the host's
loopback while the build runs (accelkit.containers.build_inputs), and the RUN step that
downloads them installs from them and deletes them, so no image layer holds them. URL is
that server's address; its manifest (MANIFEST_NAME) lists every file with its size and
sha256, each checked here. Any problem exits 1 with one line naming it; nothing is left
half-written under FOLDER's files.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path, PurePosixPath
from typing import Any

#: The manifest the host serves beside the files: {"files": [{"path", "size", "sha256"}]}.
MANIFEST_NAME = "accelkit-inputs.json"
#: Seconds one request may stay silent (the server is on the same host).
TIMEOUT_S = 120.0
_CHUNK = 1 << 20


class FetchError(Exception):
    """A download that failed; its message is the one line the build log shows."""


def _opener() -> urllib.request.OpenerDirector:
    # No proxy: HTTP_PROXY in the build's environment must not take a loopback request.
    return urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _get(opener: urllib.request.OpenerDirector, url: str) -> Any:
    try:
        return opener.open(url, timeout=TIMEOUT_S)
    except urllib.error.HTTPError as exc:
        raise FetchError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise FetchError(
            f"{url}: {reason} (accelkit serves the inputs on the loopback of the host that "
            "runs the build, only while the build runs: the engine must build on that "
            "host with host networking)"
        ) from None


def safe_path(name: object) -> PurePosixPath:
    """The manifest's relative path `name`, refused if it could leave the folder."""
    if not isinstance(name, str) or not name:
        raise FetchError(f"malformed path in the manifest: {name!r}")
    path = PurePosixPath(name)
    if path.is_absolute() or any(part in ("", ".", "..") for part in name.split("/")):
        raise FetchError(f"refusing the manifest path {name!r} (outside the folder)")
    return path


def manifest(opener: urllib.request.OpenerDirector, base: str) -> list[dict[str, object]]:
    url = base + MANIFEST_NAME
    with _get(opener, url) as response:
        try:
            data = json.loads(response.read().decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            raise FetchError(f"{url}: not a JSON manifest") from None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list) or not all(isinstance(f, dict) for f in files):
        raise FetchError(f"{url}: the manifest lists no files")
    return files


def download(
    opener: urllib.request.OpenerDirector, base: str, entry: dict[str, object], folder: Path
) -> int:
    """One manifest entry into `folder`, its size and sha256 checked; returns its size."""
    relative = safe_path(entry.get("path"))
    size, digest = entry.get("size"), entry.get("sha256")
    if not isinstance(size, int) or not isinstance(digest, str):
        raise FetchError(f"malformed manifest entry for {relative}")
    url = base + urllib.parse.quote(str(relative))
    target = folder.joinpath(*relative.parts)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    sha = hashlib.sha256()
    got = 0
    try:
        with _get(opener, url) as response, open(partial, "wb") as out:
            while True:
                chunk = response.read(_CHUNK)
                if not chunk:
                    break
                sha.update(chunk)
                out.write(chunk)
                got += len(chunk)
    except OSError as exc:  # a dropped connection (http.client.IncompleteRead is one)
        partial.unlink(missing_ok=True)
        raise FetchError(f"{url}: the download broke off: {exc}") from None
    if got != size or sha.hexdigest() != digest:
        partial.unlink(missing_ok=True)
        raise FetchError(
            f"{url}: got {got} bytes (sha256 {sha.hexdigest()[:12]}), the manifest says "
            f"{size} bytes (sha256 {digest[:12]})"
        )
    os.replace(partial, target)
    return got


def fetch(base: str, folder: Path) -> tuple[int, int]:
    """Every file of the manifest at `base` into `folder`; returns (files, bytes)."""
    if not base.startswith(("http://", "https://")):
        raise FetchError(
            f"no inputs URL (got {base!r}): accelkit passes it as the build arg "
            "ACCELKIT_INPUTS_URL while it serves the inputs; build this image with "
            "`accelkit setup` or `accelkit build`, not plain `docker build`"
        )
    if not base.endswith("/"):
        base += "/"
    opener = _opener()
    folder.mkdir(parents=True, exist_ok=True)
    total = 0
    files = manifest(opener, base)
    for entry in files:
        total += download(opener, base, entry, folder)
    return len(files), total


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: fetch_inputs.py URL FOLDER", file=sys.stderr)
        return 2
    try:
        count, size = fetch(argv[0], Path(argv[1]))
    except FetchError as exc:
        print(f"fetch_inputs.py: cannot download the install inputs: {exc}", file=sys.stderr)
        return 1
    print(f"fetch_inputs.py: {count} files, {size / 1e6:.1f} MB into {argv[1]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
