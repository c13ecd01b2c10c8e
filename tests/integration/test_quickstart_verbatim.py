"""README's quickstart, run line by line as a new user would: a fresh venv in a fresh folder
holding a copy of the checkout (issue 48, "Done means" 1).

TWO CHANGES, AND ONLY THESE, because this machine reaches PyPI but not PyPI's CPU index
(download.pytorch.org):

1. `pip install torch --index-url https://download.pytorch.org/whl/cpu` installs the CPU
   torch wheel .ci/run downloaded (ACCELKIT_TEST_TORCH_WHEEL, a `+cpu` build, the same kind
   of wheel that index serves) by its path; its dependencies come from PyPI as they would.
2. The main job's `accelkit test` line gets `-k SELECTION` appended, a few cases: the whole
   suite, as written, is the session's shared run (tests/conftest.py `cpu_suite_run`).

Every other line runs as written, in one bash, in order (`sudo` is a pass-through where
the tests run as root without sudo; apt-get then finds python3-venv installed). About 90 s,
most of it pip installing torch into the venv.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.helpers import cpu_torch_wheel, readme_quickstart, snapshot_source

CPU_INDEX_LINE = "pip install torch --index-url https://download.pytorch.org/whl/cpu"
SELECTION = "opinfo and abs and float32"


def quickstart_script(lines: list[str], wheel: Path) -> tuple[str, list[str]]:
    """The bash script of README's lines and the changes made to them (the docstring's)."""
    changed: list[str] = []
    body: list[str] = []
    for line in lines:
        if line == CPU_INDEX_LINE:
            line = f"pip install {shlex.quote(str(wheel))}"
            changed.append(f"{CPU_INDEX_LINE!r} -> {line!r}")
        elif line.startswith("accelkit test "):
            new = f"{line} -k {shlex.quote(SELECTION)}"
            changed.append(f"{line!r} -> {new!r}")
            line = new
        body.append(line)
    prelude = [
        "set -euxo pipefail",
        # Root without sudo (a CI container): the line's apt-get runs as itself.
        'if ! command -v sudo >/dev/null && [ "$(id -u)" = 0 ]; then sudo() { "$@"; }; fi',
    ]
    return "\n".join([*prelude, *body]) + "\n", changed


@pytest.mark.timeout(600)
def test_readmes_quickstart_runs_in_a_fresh_venv(tmp_path: Path) -> None:
    wheel = cpu_torch_wheel()
    if wheel is None:
        pytest.fail("no CPU torch wheel on this machine (ACCELKIT_TEST_TORCH_WHEEL)")
    lines = readme_quickstart()
    script, changed = quickstart_script(lines, wheel)
    assert len(changed) == 2, changed  # exactly the two the docstring names
    checkout = snapshot_source(tmp_path / "accelkit")
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("VIRTUAL_ENV", "PYTHON", "PIP_REQUIRE"))
    }
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if "/.venv/" not in p
    )
    proc = subprocess.run(
        ["bash", "-c", script],
        cwd=checkout,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=560,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"changed: {changed}\n{out[-4000:]}"
    venv_python = checkout / ".venv" / "bin" / "python"
    # The venv's own accelkit and torch ran, not this interpreter's.
    where = subprocess.run(
        [
            str(venv_python),
            "-c",
            "import accelkit, torch; print(accelkit.__file__, torch.__version__)",
        ],
        cwd=tmp_path,  # not the checkout's folder, whose accelkit/ would shadow the venv's
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert where.startswith(str(checkout / ".venv")) and "+cpu" in where, where
    assert (checkout / "r.json").is_file() and (checkout / "r.xml").is_file()
    assert "OK: " in proc.stdout, out[-3000:]
