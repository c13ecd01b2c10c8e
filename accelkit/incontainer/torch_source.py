"""Where the torch under test came from, recorded beside it. Standard library only: it runs
inside test images (from image_install.py) and on runners without a container.

After installing torch, the installer writes `<venv>/accelkit-torch-source.json`:

    {"kind": "index", "channel": "nightly", "index": "https://download.pytorch.org/whl/nightly/cpu",
     "spec": "torch", "pre": true, "version": "2.15.0.dev20261201+cpu"}
    {"kind": "wheel", "wheel": "torch-2.14.0+rocm7.14.0-cp313-cp313-linux_x86_64.whl",
     "sha256": "...", "version": "2.14.0+rocm7.14.0"}
    {"kind": "base", "base_image": "accelkit-base:trixie-torch", "version": "2.6.0+debian"}

(`base`: the torch the base image already had, `accelkit setup --torch-from-base`.)

`version` is what pip resolved and installed, read from the installed distribution, so a
channel becomes an exact version. `accelkit doctor` and every results file carry the record
as `env.torch.source` (accelkit.probe.fingerprint reads it from `sys.prefix`).

On a runner without a container (MPS), the workflow records what it installed:

    python -m accelkit.incontainer.torch_source --kind index --channel nightly --index URL
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import os
import sys
from pathlib import Path
from typing import Any

RECORD_NAME = "accelkit-torch-source.json"
KINDS = ("index", "wheel", "base")


def record_path(prefix: str | None = None) -> Path:
    return Path(prefix if prefix is not None else sys.prefix, RECORD_NAME)


def installed_version(distribution: str = "torch") -> str | None:
    """The installed version of `distribution` in this interpreter, or None."""
    importlib.invalidate_caches()
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def write_record(source: dict[str, Any], prefix: str | None = None) -> dict[str, Any]:
    """Write `source` plus the installed torch's version; returns what was written."""
    if source.get("kind") not in KINDS:
        raise ValueError(f"source kind must be one of {', '.join(KINDS)}: {source!r}")
    record = {**source, "version": installed_version()}
    path = record_path(prefix)
    temp = path.with_name(path.name + ".tmp")
    temp.write_text(json.dumps(record, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(temp, path)
    return record


def read_record(prefix: str | None = None) -> dict[str, Any] | None:
    """The record of this environment (None when torch was not installed by accelkit)."""
    try:
        value = json.loads(record_path(prefix).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m accelkit.incontainer.torch_source",
        description="Record where this environment's torch came from.",
    )
    parser.add_argument("--kind", choices=KINDS, required=True)
    parser.add_argument("--channel", default=None)
    parser.add_argument("--index", default=None)
    parser.add_argument("--spec", default=None)
    parser.add_argument("--wheel", default=None)
    parser.add_argument("--base-image", default=None)
    args = parser.parse_args(argv)
    source = {key: value for key, value in vars(args).items() if value}
    record = write_record(source)
    if record["version"] is None:
        print("torch_source: torch is not installed in this environment", file=sys.stderr)
        return 1
    print(json.dumps(record, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
