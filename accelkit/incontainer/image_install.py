"""Installs torch and accelkit into a test image's venv. Runs INSIDE a throw-away build stage
(`python install.py CONTEXT`), with the standard library only; copied there by testimage.py.

Reads CONTEXT/install.json:
  torch_wheels:   wheel files (names in CONTEXT/torch/) to install with --no-deps, followed
                  by CONTEXT/torch-requirements.txt (their requirements, GPU runtimes a CPU
                  image does not need left out), or else
  torch_index:    an index URL and torch_spec, installed with their dependencies;
  accelkit:       accelkit's wheel (CONTEXT/accelkit/), installed with --no-deps after its
                  own requirements (CONTEXT/accelkit-requirements.txt, torch excluded), so
                  installing accelkit never replaces the torch under test.
  requirements:   more requirements the backend's image needs for its target (a CUDA
                  toolkit wheel whose ptxas knows it), installed after torch;
  links:          {link path: glob under the venv's site-packages}: a stable path to a
                  file a requirement brought (/opt/venv/bin/ptxas), for the Dockerfile's ENV.
Commands are argument lists; nothing goes through a shell.
"""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path


def pip(*args: str) -> None:
    argv = [sys.executable, "-m", "pip", "install", "--no-cache-dir", *args]
    print("+ " + " ".join(argv), flush=True)
    subprocess.run(argv, check=True)


def has_requirements(path: Path) -> bool:
    lines = path.read_text(encoding="utf-8").splitlines()
    return any(line.strip() and not line.lstrip().startswith("#") for line in lines)


def link_files(links: dict[str, str]) -> None:
    """Each link path made a symbolic link to the newest file its glob matches under this
    venv's site-packages; exits when a glob matches nothing."""
    site = Path(sysconfig.get_paths()["purelib"])
    for link, pattern in links.items():
        found = sorted(site.glob(pattern))
        if not found:
            raise SystemExit(f"install.py: nothing matches {pattern} under {site}")
        path = Path(link)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink() or path.exists():
            path.unlink()
        path.symlink_to(found[-1])
        print(f"+ ln -s {found[-1]} {path}", flush=True)


def main(context: Path) -> int:
    spec = json.loads((context / "install.json").read_text(encoding="utf-8"))
    wheels = [str(context / "torch" / name) for name in spec.get("torch_wheels", [])]
    if wheels:
        pip("--no-deps", *wheels)
        if has_requirements(context / "torch-requirements.txt"):
            pip("-r", str(context / "torch-requirements.txt"))
    else:
        pip("--index-url", spec["torch_index"], spec.get("torch_spec") or "torch")
    if spec.get("requirements"):
        pip(*spec["requirements"])
    link_files(spec.get("links") or {})
    if has_requirements(context / "accelkit-requirements.txt"):
        pip("-r", str(context / "accelkit-requirements.txt"))
    pip("--no-deps", *(str(context / "accelkit" / name) for name in spec["accelkit"]))
    subprocess.run([sys.executable, "-m", "pip", "list"], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
