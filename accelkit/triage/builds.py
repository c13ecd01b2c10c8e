"""Installing one torch build and running one case on it, for `accelkit bisect`.

`SiteInstaller` installs a build into a throwaway site folder (`pip install --no-deps
--target`) that goes first on PYTHONPATH, so the Python running accelkit imports that torch
instead of its own, with everything else (accelkit's dependencies, torch's pure-Python
dependencies) from the environment it already has. That works whether accelkit itself runs
in a venv or not, and costs one unpacked wheel per build. A wheel whose version and git hash
are those of the torch already installed is not installed again: the step runs on it.
With a cache folder, installed builds are kept there by version and wheel, and reused
(`accelkit bisect --cache DIR`); without, each is removed after its step.

`CaseJudge` runs `accelkit test --case ID` (only that case) with the build's Python: for a
conformance case the first run (the good build) decides what good means (usually `passed`)
and every later run is good when its status is the same; for a perf case the good build's
run is the baseline and `accelkit compare`'s verdict decides (regressed: bad; noisy: the
step is repeated with twice the passes, then unusable), with `--passes` measurement passes
so that the verdict rests on process-to-process noise, not one process's samples.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from accelkit.triage.bisect import Build, BuildUnusable, Environment, Verdict

ACCELKIT_PARENT = Path(__file__).resolve().parent.parent.parent
"""The folder holding the `accelkit` package (put on PYTHONPATH of every step)."""
MARKER = ".accelkit-build.json"
_VERSION_LINE = re.compile(r"""^(__version__|git_version)\s*(?::\s*str\s*)?=\s*['"]([^'"]*)['"]""")
_PROBE = "import json, torch; print(json.dumps([torch.__version__, torch.version.git_version]))"


def wheel_identity(wheel: Path) -> tuple[str | None, str | None]:
    """(version, git hash) from the wheel's torch/version.py, without installing it."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            text = archive.read("torch/version.py").decode("utf-8", "replace")
    except (OSError, KeyError, zipfile.BadZipFile):
        return None, None
    return _identity(text)


def version_file_identity(path: Path) -> tuple[str | None, str | None]:
    """(version, git hash) from an installed torch's version.py."""
    try:
        return _identity(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None, None


def _identity(text: str) -> tuple[str | None, str | None]:
    found: dict[str, str] = {}
    for line in text.splitlines():
        match = _VERSION_LINE.match(line.strip())
        if match:
            found[match.group(1)] = match.group(2)
    return found.get("__version__"), found.get("git_version")


def _tail(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "no output"


def probe(python: Sequence[str], path: Sequence[str]) -> tuple[str, str]:
    """(torch version, git hash) of the torch `python` imports with `path` first."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*path, os.environ.get("PYTHONPATH", "")])}
    try:
        proc = subprocess.run(
            [*python, "-c", _PROBE], capture_output=True, text=True, env=env, timeout=600
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BuildUnusable(f"cannot start Python: {exc}") from None
    if proc.returncode != 0:
        raise BuildUnusable(f"import torch fails: {_tail(proc.stderr)}")
    version, git = json.loads(proc.stdout.strip().splitlines()[-1])
    return str(version), str(git)


class SiteInstaller:
    def __init__(
        self,
        *,
        cache: Path | None = None,
        python: Sequence[str] = (sys.executable,),
        pip_args: Sequence[str] = (),
    ) -> None:
        self.cache = cache
        self.python = tuple(python)
        self.pip_args = tuple(pip_args)
        self._host: tuple[str, str] | None = None

    def host_torch(self) -> tuple[str, str] | None:
        """(version, git hash) of the torch this Python has, None if none (read from its
        torch/version.py: importing torch costs seconds)."""
        if self._host is None:
            self._host = ("", "")
            script = (
                "import importlib.util as u; s = u.find_spec('torch'); print(s.origin if s else '')"
            )
            try:
                proc = subprocess.run(
                    [*self.python, "-c", script], capture_output=True, text=True, timeout=120
                )
            except (OSError, subprocess.TimeoutExpired):
                return None
            origin = proc.stdout.strip()
            if proc.returncode == 0 and origin:
                found = version_file_identity(Path(origin).parent / "version.py")
                if found[0] and found[1]:
                    self._host = (found[0], found[1])
        return self._host if self._host[0] else None

    def _folder_name(self, build: Build) -> str:
        source = str(build.wheel or build.index or "")
        key = hashlib.sha256(source.encode()).hexdigest()[:12]
        return f"torch-{build.version}-{key}"

    def prepare(self, build: Build) -> Path:
        """Install `build` into the cache (or a new folder) and return the folder."""
        folder = (
            self.cache / self._folder_name(build)
            if self.cache is not None
            else Path(tempfile.mkdtemp(prefix="accelkit-torch-"))
        )
        if (folder / MARKER).is_file():
            return folder
        partial = folder.with_name(folder.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        spec = [str(build.wheel)] if build.wheel else [f"torch=={build.version}"]
        index = ["--index-url", build.index] if build.index and not build.wheel else []
        argv = [*self.python, "-m", "pip", "install", "--no-deps", "--no-compile", "-q"]
        argv += ["--target", str(partial), *index, *self.pip_args, *spec]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
        except (OSError, subprocess.TimeoutExpired) as exc:
            shutil.rmtree(partial, ignore_errors=True)
            raise BuildUnusable(f"pip install failed: {exc}") from None
        if proc.returncode != 0:
            shutil.rmtree(partial, ignore_errors=True)
            raise BuildUnusable(f"pip install failed: {_tail(proc.stderr)}")
        (partial / MARKER).write_text(json.dumps({"version": build.version}), encoding="utf-8")
        shutil.rmtree(folder, ignore_errors=True)
        partial.rename(folder)
        return folder

    @contextlib.contextmanager
    def install(self, build: Build) -> Iterator[Environment]:
        host = self.host_torch()
        if build.wheel is not None and host is not None and wheel_identity(build.wheel) == host:
            yield Environment(
                self.python,
                (str(ACCELKIT_PARENT),),
                host[0],
                host[1],
                note="the torch installed here (same version and git hash as the wheel)",
            )
            return
        folder = self.prepare(build)
        try:
            path = (str(folder), str(ACCELKIT_PARENT))
            version, git = version_file_identity(folder / "torch" / "version.py")
            if not version or not git:  # not a torch we can read: let Python say why
                version, git = probe(self.python, path)
            yield Environment(self.python, path, version, git, note=f"installed in {folder}")
        finally:
            if self.cache is None:
                shutil.rmtree(folder, ignore_errors=True)


class CaseJudge:
    """Runs one case with a build (see the module doc); the first call is the good build."""

    def __init__(
        self,
        case_id: str,
        *,
        device: str,
        work: Path,
        passes: int,
        metric: str | None = None,
        timeout_s: float = 1800.0,
        max_passes: int = 20,
    ) -> None:
        self.case_id = case_id
        self.suite = case_id.split("/", 1)[0]
        self.device = device
        self.work = work
        self.passes = passes
        self.metric = metric
        self.timeout_s = timeout_s
        self.max_passes = max_passes
        self.reference_status: str | None = None
        self.baseline: Any = None
        self._runs = 0

    def run_case(self, environment: Environment, build: Build, passes: int) -> Any:
        """The results of `accelkit test --case ID` with the build; BuildUnusable if the
        run did not produce the case."""
        from accelkit.results.io import load_results

        self._runs += 1
        out = (
            self.work
            / f"step-{self._runs:02d}-{re.sub(r'[^A-Za-z0-9.]+', '_', build.version)}.json"
        )
        argv = [*environment.python, "-m", "accelkit", "test", "--device", self.device]
        argv += ["--suite", self.suite, "--case", self.case_id, "--json", str(out)]
        argv += ["--workers", "0", "--passes", str(passes)]
        pythonpath = [*environment.path, os.environ.get("PYTHONPATH", "")]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in pythonpath if p)}
        try:
            proc = subprocess.run(
                argv, capture_output=True, text=True, env=env, timeout=self.timeout_s
            )
        except subprocess.TimeoutExpired:
            raise BuildUnusable(f"the run took more than {self.timeout_s:g} s") from None
        if proc.returncode not in (0, 1) or not out.is_file():
            raise BuildUnusable(f"accelkit test exited {proc.returncode}: {_tail(proc.stderr)}")
        results = load_results(out)
        if not any(c.id == self.case_id for c in results.cases):
            raise BuildUnusable(f"the run has no case {self.case_id} (not in this build)")
        return results

    def __call__(self, environment: Environment, build: Build) -> tuple[Verdict, str]:
        try:
            if self.suite == "perf":
                return self._perf(environment, build)
            return self._conformance(environment, build)
        except BuildUnusable as why:
            return "unusable", str(why)

    def _conformance(self, environment: Environment, build: Build) -> tuple[Verdict, str]:
        results = self.run_case(environment, build, 1)
        case = next(c for c in results.cases if c.id == self.case_id)
        first_line = case.message.strip().splitlines()[0][:200] if case.message.strip() else ""
        detail = case.status + (f": {first_line}" if first_line else "")
        if self.reference_status is None:
            self.reference_status = case.status
            return "good", detail
        return ("good" if case.status == self.reference_status else "bad"), detail

    def _perf(self, environment: Environment, build: Build) -> tuple[Verdict, str]:
        from accelkit.results.compare import compare

        passes = self.passes
        while True:
            results = self.run_case(environment, build, passes)
            if self.baseline is None:
                self.baseline = results
                return "good", f"baseline ({passes} passes)"
            found = [
                m
                for m in compare(self.baseline, results).metrics
                if m.case == self.case_id and (self.metric is None or m.metric == self.metric)
            ]
            if not found:
                return "unusable", "no metric to compare"
            text = ", ".join(f"{m.metric} {m.verdict} ({(m.ratio or 0):.3f}x)" for m in found)
            if any(m.verdict == "regressed" for m in found):
                return "bad", text
            if any(m.verdict == "noisy" for m in found):
                if passes * 2 > self.max_passes:
                    return "unusable", f"too noisy to decide: {text}"
                passes *= 2
                continue
            return "good", text
