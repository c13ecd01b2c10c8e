"""The real torch releases the triage tests run on, found through pip's own sources.

`wheel("torch==2.13.0+cpu")` is the wheel file pip would install for a requirement: where
pip's sources are local files (this machine's and CI's package store), nothing is copied;
otherwise pip downloads it into a cache folder. `.ci/run` calls this module first, so a
missing wheel fails the setup phase, not a test deep into the run:

    python -m tests.wheels   # prints the wheel files, one a line
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import unquote, urlparse

OLD_RELEASE = "torch==2.13.0+cpu"
"""A release older than the installed one: `switch` does not exist in it (2.14 added it)."""
OLD_RELEASE_ENV = "ACCELKIT_TORCH_OLD_WHEEL"
HOST_RELEASE_ENV = "ACCELKIT_TORCH_HOST_WHEEL"


def host_requirement() -> str:
    """The installed torch's release as a requirement (its local version left out)."""
    from importlib.metadata import version

    return f"torch=={version('torch').split('+')[0]}"


def wheel(requirement: str, env_var: str | None = None) -> Path:
    """The wheel file of `requirement` (see the module doc); `env_var` may name it."""
    given = os.environ.get(env_var or "")
    if given:
        return Path(given)
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        argv = [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps"]
        argv += ["--ignore-installed", "--quiet", "--report", str(report), requirement]
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"pip cannot find {requirement}: {proc.stderr.strip()[-500:]}")
        (item,) = json.loads(report.read_text())["install"]
    url = urlparse(item["download_info"]["url"])
    if url.scheme == "file":
        return Path(unquote(url.path))
    cache = Path(tempfile.gettempdir()) / "accelkit-test-wheels"
    cache.mkdir(exist_ok=True)
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(cache)]
    subprocess.run([*argv, requirement], check=True)
    name = unquote(Path(url.path).name)
    return cache / name


def old_release_wheel() -> Path:
    return wheel(OLD_RELEASE, OLD_RELEASE_ENV)


def host_release_wheel() -> Path:
    return wheel(host_requirement(), HOST_RELEASE_ENV)


if __name__ == "__main__":
    for path in (old_release_wheel(), host_release_wheel()):
        if not path.is_file():
            raise SystemExit(f"missing wheel: {path}")
        print(path)
