"""Shared helpers for accelkit's own tests."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from accelkit.containers.run import MANAGED_LABEL

REPO = Path(__file__).resolve().parent.parent
FIXTURE_CASES = REPO / "tests" / "fixtures" / "cases"
TORCH_WHEEL_ENV = "ACCELKIT_TEST_TORCH_WHEEL"
#: Fault plugins and builds with planted bugs and slowdowns (tests/fixtures/faults/).
FAULTS = REPO / "tests" / "fixtures" / "faults"
#: The smallest GEMM perf case of the built-in suite.
SMALL_GEMM = "perf/gemm/float32/128x128x128"

# Subprocess limits of the shared runs: about twice what each took on the 2-core
# development machine while other jobs loaded it to 10-14 runnable processes (a cold
# `setup cpu` took over 480 s there).
SUITE_RUN_TIMEOUT_S = 900
SETUP_TIMEOUT_S = 1200
REHEARSAL_TIMEOUT_S = 600
# pytest-timeout for the tests of the shared runs: the first one to use a run pays for it.
SUITE_TESTS_TIMEOUT_S = SUITE_RUN_TIMEOUT_S + 120
IMAGE_TESTS_TIMEOUT_S = 2 * SETUP_TIMEOUT_S + REHEARSAL_TIMEOUT_S + 120


def run_cli(
    *args: str, timeout: float = 240, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`accelkit ARGS` in a real subprocess, as a user would run it (no terminal)."""
    return subprocess.run(
        [sys.executable, "-m", "accelkit", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        check=False,
    )


def load_script(path: Path) -> ModuleType:
    """A script that is not a package module (benchmarks/*.py), imported by path and
    registered under its stem (dataclasses look their module up by name)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def run_python(script: str, *args: str, timeout: float = 240) -> Any:
    """`python -c SCRIPT ARGS` from the checkout, in a subprocess (so that what it imports,
    op_db above all, stays out of the test process); it must exit 0, and its last line of
    output is JSON: returned parsed."""
    proc = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def assert_one_line_error(proc: subprocess.CompletedProcess[str], code: int, needle: str) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("accelkit: error: "), lines
    assert needle in lines[0], lines
    assert "Traceback" not in proc.stderr + proc.stdout


def cpu_torch_wheel() -> Path | None:
    """A CPU-only torch wheel for this Python from this machine's disk, or None.

    This machine's torch 2.14.1 wheel is a CUDA 13 build whose import needs ~2.4 GB of
    nvidia-* wheels, so a CPU build (+cpu) found in pip's find-links folders is preferred;
    ACCELKIT_TEST_TORCH_WHEEL names another (.ci/run sets it to the wheel it downloaded).
    """
    if os.environ.get(TORCH_WHEEL_ENV):
        return Path(os.environ[TORCH_WHEEL_ENV])
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    folders = [*(os.environ.get("PIP_FIND_LINKS") or "").split(), "/opt/wheels"]
    for folder in folders:
        found = sorted(Path(folder).glob(f"torch-*+cpu-{tag}-{tag}-*linux*x86_64.whl"))
        if found:
            return found[-1]
    return None


def snapshot_source(target: Path) -> Path:
    """A copy of accelkit's source with a marker unique to this test run.

    Others editing the checkout cannot change the copy's image tag, and the marker makes
    the tag new, so the first setup from it is a real cold build even on an engine that
    kept the images of earlier runs. `python -m accelkit` with the copy on PYTHONPATH (and
    a working directory outside the checkout) takes the copy as its own source tree.
    """
    target.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, target / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO / "accelkit", target / "accelkit", ignore=ignore)
    # The wheel carries the Dockerfiles (pyproject's force-include).
    shutil.copytree(REPO / "dockerfiles", target / "dockerfiles")
    (target / "accelkit" / "_test_run_marker.py").write_text(f"RUN = {uuid.uuid4().hex!r}\n")
    return target


# --------------------------------------------------------------------------------------
# The shared end-to-end runs (their fixtures: tests/conftest.py)


def readme_quickstart() -> list[str]:
    """The command lines of README's quickstart block (between its `quickstart` markers)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = text.split("<!-- quickstart:", 1)[1].split("<!-- /quickstart -->", 1)[0]
    body = block.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in body.splitlines() if line.strip()]


def readme_main_job() -> list[str]:
    """README's main job, the quickstart's `accelkit test` line, as arguments after
    `accelkit`: the shared whole-suite run (tests/conftest.py) runs exactly these."""
    import shlex

    (line,) = [ln for ln in readme_quickstart() if ln.startswith("accelkit test ")]
    return shlex.split(line)[1:]


# Measurement passes of the shared suite run. Two prove the pooling on every real perf case;
# each further pass repeats every perf case in one more process (about 50 s here), and the
# default count is one number (runner.DEFAULT_PASSES), not a code path of its own.
SUITE_RUN_PASSES = 2


@dataclass(frozen=True)
class SuiteRun:
    """`accelkit test --device cpu --json --junit`, the README's main job, run once, with
    measured ceilings (only the perf checks read them) and SUITE_RUN_PASSES passes."""

    returncode: int
    stdout: str
    stderr: str
    results: Path
    junit: Path

    def data(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(self.results.read_text(encoding="utf-8"))
        return loaded


@dataclass(frozen=True)
class CpuTestImage:
    """One cold `accelkit setup cpu` from a marked copy of the source, then the same setup
    again (a cache hit); the image is removed when the session ends."""

    wheel: Path
    source: Path
    cold: dict[str, Any]
    cached: dict[str, Any]

    @property
    def image(self) -> str:
        return str(self.cached["image"])


def managed_containers(client: Any, image: str) -> set[str]:
    """Containers accelkit made from `image` (others may share the engine)."""
    found = client.containers.list(all=True, filters={"label": MANAGED_LABEL, "ancestor": image})
    return {c.id for c in found}


@dataclass(frozen=True)
class LegRehearsal:
    """`accelkit matrix run matrices/nightly.yaml --filter name=cpu-py3.11,cpu-py3.13 -k
    while_loop --baseline DIR`: the 3.11 leg in the session's CPU test image (its setup is a
    cache hit, its test step is `accelkit test --image`), outputs in `output/<leg>/`."""

    returncode: int
    stdout: str
    stderr: str
    output: Path
    image: str
    leftover_containers: set[str]
    wheel: Path
    #: where the cpu-py3.13 leg's torch came from: "base" (Debian trixie's python3-torch in
    #: the base image) or "index" (ACCELKIT_TEST_TORCH_INDEX)
    torch_313: str


# --------------------------------------------------------------------------------------
# What an image's layers hold (`docker save`)


class _Chunks(io.RawIOBase):
    """A file over the chunks `docker save` streams (tarfile reads it in stream mode)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks, self._rest = chunks, b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._rest:
            self._rest = next(self._chunks, b"")
            if not self._rest:
                return 0
        size = min(len(buffer), len(self._rest))
        buffer[:size], self._rest = self._rest[:size], self._rest[size:]
        return size


def image_layer_files(
    client: Any, image: str, secrets: Iterable[bytes] = ()
) -> tuple[set[str], set[str]]:
    """(the paths in every layer of `image`, without a leading "./"; those whose content
    holds one of `secrets`), read from `docker save` as a stream."""
    wanted = [s for s in secrets if s]
    overlap = max((len(s) for s in wanted), default=1) - 1
    names: set[str] = set()
    leaks: set[str] = set()
    stream = io.BufferedReader(_Chunks(iter(client.images.get(image).save())), 1 << 20)
    with tarfile.open(fileobj=stream, mode="r|") as saved:
        for member in saved:
            layer = saved.extractfile(member) if member.name.endswith("layer.tar") else None
            if layer is None:
                continue
            with tarfile.open(fileobj=layer, mode="r|") as files:
                for entry in files:
                    name = entry.name.removeprefix("./")
                    names.add(name)
                    data = files.extractfile(entry) if wanted and entry.isfile() else None
                    tail = b""
                    while data is not None and (chunk := data.read(1 << 20)):
                        window = tail + chunk
                        if any(s in window for s in wanted):
                            leaks.add(name)
                            break
                        tail = window[-overlap:] if overlap else b""
    return names, leaks
