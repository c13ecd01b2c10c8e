"""Installs torch and accelkit into a test image's venv. Runs INSIDE the install step of the
image's build (`python install.py CONTEXT`), with the standard library only; served by
accelkit.setup.image with the other install inputs (torch_source.py beside it) and
downloaded into CONTEXT by fetch_inputs.py, which the same RUN step deletes afterwards.

Reads CONTEXT/install.json:
  torch_wheels:   wheel files (names in CONTEXT/torch/) to install with --no-deps, with
                  build_artifacts, followed by torch_sdk's requirements, then
                  CONTEXT/torch-requirements.txt (their other requirements, GPU runtimes
                  a CPU image does not need left out);
  build_artifacts: wheel files (in CONTEXT/torch/) of the torch wheel's build that it pins
                  (its triton, on no index), installed with it, --no-deps;
  torch_sdk:      {index_url, requirements}: the wheel's SDK pins (rocm[libraries]==7.14.1rc1)
                  and the index its build installed the SDK from, installed from that index
                  alone: no configuration file, no PIP_* variable, only the CA bundle of
                  CONTEXT/pip (PyPI's `rocm` is a placeholder; an extra index must not offer
                  one). The index may hold credentials: the printed command hides them;
  or else
  torch_index:    an index URL and torch_spec, installed with their dependencies, with
                  pip's --pre when torch_pre is true (nightly and test channels), or else
  torch_from_base: true: the base image's own torch, which this venv (made with
                  --system-site-packages) must import; nothing installs torch, only
                  its declared requirements that nothing here provides (Debian's
                  python3-torch declares setuptools, which Inductor imports, and
                  the package does not depend on it), minus torch_skip (GPU
                  runtimes a CPU image does not need); those present at another
                  version than torch asks for are listed and left as the base has them;
  torch_source:   where torch comes from (kind, channel, index, wheel), recorded in the venv
                  with the version pip installed (torch_source.py);
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

import fnmatch
import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path
from types import ModuleType

#: accelkit/incontainer/torch_source.py, copied into the build context beside this script.
TORCH_SOURCE_SCRIPT = "torch_source.py"


#: The user-info part of a URL (`user:token@`), hidden where a command is printed.
_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]*@")


def pip(*args: str, env: dict[str, str] | None = None) -> None:
    argv = [sys.executable, "-m", "pip", "install", "--no-cache-dir", *args]
    print("+ " + _USERINFO.sub(r"\1****@", " ".join(argv)), flush=True)
    subprocess.run(argv, check=True, env=env)


def pip_from_sdk_index(context: Path, index_url: str, requirements: list[str]) -> None:
    """`requirements` from `index_url` alone: pip reads no configuration file and no PIP_*
    variable (an extra index or find-links of the runner must not serve an SDK package),
    and trusts the CA bundle the host's pip settings name."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    cert = context / "pip" / "ca.pem"
    options = ["--disable-pip-version-check", "--index-url", index_url]
    if cert.is_file():
        options += ["--cert", str(cert)]
    pip(*options, *requirements, env=env)


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


def check_base_torch() -> None:
    """Exits with one line unless this venv's interpreter imports the base image's torch."""
    argv = [sys.executable, "-c", "import torch; print(torch.__version__, torch.__file__)"]
    print("+ " + " ".join(argv), flush=True)
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        why = lines[-1] if lines else f"exit code {proc.returncode}"
        raise SystemExit(
            f"install.py: --torch-from-base: the base image's Python {sys.version.split()[0]} "
            f"imports no torch ({why})"
        )
    print(proc.stdout.strip(), flush=True)


#: `pip check`'s lines about torch: a requirement nothing installed provides, and one
#: installed at another version (pip evaluates the markers for this interpreter).
_PIP_CHECK_MISSING = re.compile(r"^torch \S+ requires (\S+), which is not installed\.$")
_PIP_CHECK_OTHER = re.compile(r"^torch \S+ has requirement (.+), but you have (\S+) (\S+)\.$")
_REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def base_torch_requirements(skip: list[str]) -> tuple[list[str], list[str]]:
    """The installed torch's own requirements that nothing installed provides, as pip
    requirements, and those installed at a version torch does not ask for, as notes, from
    `pip check` (which evaluates the markers). `skip`: fnmatch patterns of names to leave out."""
    argv = [sys.executable, "-m", "pip", "check"]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    return read_pip_check(proc.stdout, importlib.metadata.requires("torch") or [], skip)


def read_pip_check(
    output: str, declared: list[str], skip: list[str]
) -> tuple[list[str], list[str]]:
    """`base_torch_requirements` from `pip check`'s output and torch's Requires-Dist lines."""
    wanted: dict[str, str] = {}
    for line in declared:
        match = _REQUIREMENT_NAME.match(line)
        if match is not None:
            wanted.setdefault(_normal(match.group(1)), line.split(";")[0].strip())
    missing: list[str] = []
    others: list[str] = []
    for line in output.splitlines():
        line = line.strip()
        if found := _PIP_CHECK_MISSING.match(line):
            name = _normal(found.group(1))
            if not any(fnmatch.fnmatch(name, pattern) for pattern in skip):
                missing.append(wanted.get(name, found.group(1)))
        elif found := _PIP_CHECK_OTHER.match(line):
            others.append(f"{found.group(2)} {found.group(3)} (torch asks for {found.group(1)})")
    return missing, others


def load_torch_source(context: Path) -> ModuleType:
    """torch_source.py from the build context (this script runs alone, not as a package)."""
    spec = importlib.util.spec_from_file_location(
        "accelkit_torch_source", context / TORCH_SOURCE_SCRIPT
    )
    if spec is None or spec.loader is None:
        raise SystemExit(f"install.py: no {TORCH_SOURCE_SCRIPT} in {context}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(context: Path) -> int:
    spec = json.loads((context / "install.json").read_text(encoding="utf-8"))
    wheels = [str(context / "torch" / name) for name in spec.get("torch_wheels", [])]
    if spec.get("torch_from_base"):
        check_base_torch()
        missing, others = base_torch_requirements(list(spec.get("torch_skip") or []))
        for note in others:
            print(f"install.py: the base image has {note}: left as it is", flush=True)
        if missing:
            pip(*missing)
    elif wheels:
        built = [str(context / "torch" / name) for name in spec.get("build_artifacts", [])]
        pip("--no-deps", *wheels, *built)
        sdk = spec.get("torch_sdk")
        if sdk:
            pip_from_sdk_index(context, str(sdk["index_url"]), list(sdk["requirements"]))
        if has_requirements(context / "torch-requirements.txt"):
            pip("-r", str(context / "torch-requirements.txt"))
    else:
        pre = ["--pre"] if spec.get("torch_pre") else []
        pip(*pre, "--index-url", spec["torch_index"], spec.get("torch_spec") or "torch")
    source = dict(spec.get("torch_source") or {"kind": "index"})
    record = load_torch_source(context).write_record(source)
    print(f"torch source: {json.dumps(record, sort_keys=True)}", flush=True)
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
