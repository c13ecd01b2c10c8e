"""Installing one torch build and running one case on it, for `accelkit bisect`.

`SiteInstaller` installs a build into a throwaway site folder (`pip install --no-deps
--target`) that goes first on PYTHONPATH, so the Python running accelkit imports that torch
instead of its own, with everything else (accelkit's dependencies, torch's pure-Python
dependencies) from the environment it already has. That works whether accelkit itself runs
in a venv or not, and costs one unpacked wheel per build. A wheel whose version and git hash
are those of the torch already installed is not installed again: the step runs on it.
With a cache folder, installed builds are kept there by version and wheel, and reused
(`accelkit bisect --cache DIR`); without, each is removed after its step.

`ImageInstaller` makes each wheel a test image with `accelkit setup BACKEND --torch-wheel W`
(`accelkit bisect --images`): the image is tagged by its content, so a build already set up
once is reused (the bisection's cache is setup's), and the case runs in it with `accelkit
test --image TAG`. A setup that fails marks the build unusable. A perf step's interleaved
run (`--ab image:GOOD image:STEP`) measures both builds in their images.

`EnvInstaller` takes prepared environments (`accelkit bisect --envs DIR`): a venv runs
with its own Python, a site folder goes first on PYTHONPATH; nothing is installed or
removed, and what `import torch` says there names the build.

`CaseJudge` runs `accelkit test --case ID` (only that case) with the build's Python: for a
conformance case the first run (the good build) decides what good means (usually `passed`)
and every later run is good when its status is the same. A perf case is measured
interleaved against the good build (`accelkit test --ab GOOD STEP`, `accelkit.suite.run.ab`:
passes A B, B A, ... on the same machine, so a shift of the machine lands on both sides),
and `compare`'s verdict of the step against the good build decides (`perf_verdict`):
regressed is bad; unchanged or improved is good; noisy (or environment-shifted) means the
passes could not tell, and the step is measured again with twice the passes, then marked
unusable (skipped, never guessed). `--threshold` is compare's minimum effect: bisecting a
known 2x slowdown, a band of 20-50% keeps the machine's few-percent noise from deciding.
The good build's environment must outlive its own step (it is side A of every later
step): `run_bisect` keeps installed builds for the whole bisection.

`run_bisect` is `accelkit bisect` after its options are checked: the installer its source
asks for, the judge of its case, and the search (`accelkit.triage.bisect.bisect`).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from accelkit.suite.run.interpreters import IMAGE_PREFIX
from accelkit.triage.bisect import (
    BisectRequest,
    BisectResult,
    Build,
    BuildUnusable,
    Environment,
    Installer,
    Step,
    Verdict,
    bisect,
)

ACCELKIT_PARENT = Path(__file__).resolve().parent.parent.parent
"""The folder holding the `accelkit` package (put on PYTHONPATH of every step)."""
MARKER = ".accelkit-build.json"
_VERSION_LINE = re.compile(r"""^(__version__|git_version)\s*(?::\s*str\s*)?=\s*['"]([^'"]*)['"]""")
_PROBE = "import json, torch; print(json.dumps([torch.__version__, torch.version.git_version]))"
#: The PYTHONPATH entries that give a step accelkit (ACCELKIT_PARENT, accelkit_alone's copy):
#: a launcher for `--ab` leaves them out.
_ACCELKIT_PATHS = {str(ACCELKIT_PARENT)}


@functools.cache
def accelkit_alone() -> str:
    """A folder holding a copy of this accelkit package and nothing else, for the PYTHONPATH
    of a build's own Python (a venv): ACCELKIT_PARENT of an installed accelkit is
    site-packages, whose torch would shadow the venv's. Made once a process, removed at exit."""
    from accelkit.suite.run.ab import copy_accelkit

    folder = Path(tempfile.mkdtemp(prefix="accelkit-alone-"))
    atexit.register(shutil.rmtree, folder, True)
    path = str(copy_accelkit(folder))
    _ACCELKIT_PATHS.add(path)
    return path


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


SetupRun = Callable[[Sequence[str]], tuple[int, str, str]]
"""Runs `accelkit ARGV`: (exit status, stdout, stderr)."""


class ImageInstaller:
    """Test images by `accelkit setup` (module doc)."""

    def __init__(
        self,
        backend: str,
        *,
        setup_args: Sequence[str] = (),
        run: SetupRun | None = None,
        timeout_s: float = 7200.0,
    ) -> None:
        self.backend = backend
        self.setup_args = tuple(setup_args)
        self.timeout_s = timeout_s
        self.run = run or self._run

    def _run(self, argv: Sequence[str]) -> tuple[int, str, str]:
        pythonpath = [str(ACCELKIT_PARENT), os.environ.get("PYTHONPATH", "")]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in pythonpath if p)}
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "accelkit", *argv],
                capture_output=True,
                text=True,
                env=env,
                timeout=self.timeout_s,
            )
        except subprocess.TimeoutExpired:
            return 124, "", f"accelkit setup took more than {self.timeout_s:g} s"
        return proc.returncode, proc.stdout, proc.stderr

    def setup_argv(self, build: Build) -> list[str]:
        """`accelkit setup`'s arguments for the build (checked by setup's own parser)."""
        from accelkit.setup.request import SetupRequest

        if build.wheel is None:
            raise BuildUnusable("--images takes builds from a folder of wheels (--wheels)")
        argv = [self.backend, "--torch-wheel", str(build.wheel), *self.setup_args]
        SetupRequest.from_argv(argv)  # BadInput here, not a failed step
        return ["setup", *argv, "--json"]

    @contextlib.contextmanager
    def install(self, build: Build) -> Iterator[Environment]:
        code, out, err = self.run(self.setup_argv(build))
        if code != 0:
            raise BuildUnusable(f"accelkit setup exited {code}: {_tail(err)}")
        try:
            result = json.loads(out.strip().splitlines()[-1])
            image = str(result["image"])
            torch = result.get("verified", {}).get("torch", {})
        except (ValueError, IndexError, KeyError, TypeError, AttributeError):
            raise BuildUnusable("accelkit setup printed no image") from None
        wheel = wheel_identity(build.wheel) if build.wheel is not None else (None, None)
        version = str(torch.get("version") or wheel[0] or build.version)
        git = str(torch.get("git_version") or wheel[1] or "Unknown")
        how = "reused" if result.get("cached") else "built"
        yield Environment(
            (sys.executable,), (str(ACCELKIT_PARENT),), version, git, f"image {how}", image
        )


class EnvInstaller:
    """Prepared environments (module doc); BuildUnusable when torch does not import there."""

    def __init__(self, *, python: Sequence[str] = (sys.executable,)) -> None:
        self.python = tuple(python)

    @contextlib.contextmanager
    def install(self, build: Build) -> Iterator[Environment]:
        folder = build.env
        if folder is None or not folder.is_dir():
            raise BuildUnusable(f"{folder}: not a prepared environment")
        venv = folder / "bin" / "python"
        python: tuple[str, ...]
        path: tuple[str, ...]
        if venv.is_file():
            python, path = (str(venv),), (accelkit_alone(),)
        else:
            python, path = self.python, (str(folder), str(ACCELKIT_PARENT))
        version, git = probe(python, path)
        yield Environment(python, path, version, git, note=f"prepared in {folder}")


_LAUNCHER = """#!{shebang} -S
# accelkit bisect: {note}
import os, sys
python = {python}
env = dict(os.environ)
env["PYTHONPATH"] = os.pathsep.join(p for p in [*{path}, env.get("PYTHONPATH", "")] if p)
os.execvpe(python[0], [*python, *sys.argv[1:]], env)
"""


def launcher(environment: Environment, target: Path) -> Path:
    """An executable at `target` that runs the environment's Python with its folders first
    on PYTHONPATH: what `accelkit test --ab` takes as a side. Its accelkit folder is left out:
    the side imports the run's copy of accelkit (`accelkit.suite.run.ab`), and a second
    accelkit before it would collect the cases from one and import them from the other. The
    values are written as
    Python literals (JSON), never through a shell."""
    shebang = sys.executable
    if any(c.isspace() for c in shebang) or len(shebang) > 120:
        raise BuildUnusable(f"cannot write a launcher for {shebang} (spaces or too long)")
    text = _LAUNCHER.format(
        shebang=shebang,
        note=re.sub(r"\s+", " ", f"torch {environment.torch_version} {environment.note}"),
        python=json.dumps(list(environment.python)),
        path=json.dumps([p for p in environment.path if p not in _ACCELKIT_PATHS]),
    )
    target.write_text(text, encoding="utf-8")
    target.chmod(0o755)
    return target


def perf_verdict(found: Sequence[Any]) -> tuple[Verdict | None, str]:
    """A step's verdict from compare's metrics of the step (B) against the good build (A):
    bad when one regressed, unusable when a side lacks one, None (measure again) when one
    could not be told apart, else good. `found` holds `MetricComparison`s of the case."""
    if not found:
        return "unusable", "no metric to compare"

    def line(m: Any) -> str:
        ratio = f"{m.ratio:.3f}x" if m.ratio is not None else "no ratio"
        ci = f", CI {m.ci[0]:.3f}-{m.ci[1]:.3f}x" if m.ci is not None else ""
        return f"{m.metric} {m.verdict} ({ratio}{ci})"

    text = ", ".join(line(m) for m in found)
    verdicts = {m.verdict for m in found}
    if "regressed" in verdicts:
        return "bad", text
    if "missing" in verdicts:
        return "unusable", f"a side did not measure it: {text}"
    if verdicts & {"noisy", "environment-shifted"}:
        return None, text
    return "good", text


class AbRun(Protocol):
    def __call__(
        self, good: Environment, step: Environment, build: Build, passes: int
    ) -> tuple[Any, Any]:
        """The (good side, step side) results of one interleaved run of the case;
        BuildUnusable when it did not measure the case."""
        ...


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
        threshold: float | None = None,
        run_ab: AbRun | None = None,
    ) -> None:
        self.case_id = case_id
        self.suite = case_id.split("/", 1)[0]
        self.device = device
        self.work = work
        self.passes = passes
        self.metric = metric
        self.timeout_s = timeout_s
        self.max_passes = max_passes
        self.threshold = threshold
        self.run_ab: AbRun = run_ab or self._run_ab
        self.reference_status: str | None = None
        self.good: Environment | None = None
        self._runs = 0

    def _out(self, build: Build, suffix: str = "") -> Path:
        self._runs += 1
        name = re.sub(r"[^A-Za-z0-9.]+", "_", build.version)
        return self.work / f"step-{self._runs:02d}-{name}{suffix}.json"

    def _accelkit(self, python: Sequence[str], path: Sequence[str], argv: list[str]) -> int:
        """`accelkit ARGV` with `python` and `path` first on PYTHONPATH: its exit status, or
        BuildUnusable when it ran past the step's time."""
        pythonpath = [*path, os.environ.get("PYTHONPATH", "")]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in pythonpath if p)}
        try:
            proc = subprocess.run(
                [*python, "-m", "accelkit", *argv],
                capture_output=True,
                text=True,
                env=env,
                timeout=self.timeout_s,
            )
        except subprocess.TimeoutExpired:
            raise BuildUnusable(f"the run took more than {self.timeout_s:g} s") from None
        if proc.returncode not in (0, 1):
            raise BuildUnusable(f"accelkit test exited {proc.returncode}: {_tail(proc.stderr)}")
        return proc.returncode

    def _load_case(self, out: Path) -> Any:
        from accelkit.results.io import load_results

        if not out.is_file():
            raise BuildUnusable(f"the run wrote no results file {out.name}")
        results = load_results(out)
        if not any(c.id == self.case_id for c in results.cases):
            raise BuildUnusable(f"the run has no case {self.case_id} (not in this build)")
        return results

    def run_case(self, environment: Environment, build: Build, passes: int) -> Any:
        """The results of `accelkit test --case ID` with the build; BuildUnusable if the
        run did not produce the case."""
        out = self._out(build)
        argv = ["test", "--device", self.device, "--suite", self.suite, "--case", self.case_id]
        argv += ["--json", str(out), "--workers", "0", "--passes", str(passes)]
        if environment.image is not None:
            argv += ["--image", environment.image]
        self._accelkit(environment.python, environment.path, argv)
        return self._load_case(out)

    def _run_ab(
        self, good: Environment, step: Environment, build: Build, passes: int
    ) -> tuple[Any, Any]:
        """`accelkit test --suite perf --case ID --ab GOOD STEP`, run by this Python; a build
        in a test image is its side as `image:TAG`."""
        out = self._out(build, "-ab")
        stem = out.name.removesuffix(".json")
        sides = [
            f"{IMAGE_PREFIX}{env.image}"
            if env.image is not None
            else str(launcher(env, self.work / f"{stem}.python-{side}"))
            for env, side in ((good, "a"), (step, "b"))
        ]
        argv = ["test", "--device", self.device, "--suite", "perf", "--case", self.case_id]
        argv += ["--ab", sides[0], sides[1], "--json", str(out)]
        argv += ["--workers", "0", "--passes", str(passes)]
        self._accelkit((sys.executable,), (str(ACCELKIT_PARENT),), argv)
        from accelkit.suite.run.ab import side_paths

        a, b, _ = side_paths(out)
        return self._load_case(a), self._load_case(b)

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
        from accelkit.results import stats
        from accelkit.results.compare import compare

        if self.good is None:
            self.good = environment
            return "good", "the reference: side A of every later step's interleaved run"
        passes = self.passes
        threshold = self.threshold if self.threshold is not None else stats.DEFAULT_THRESHOLD
        while True:
            a, b = self.run_ab(self.good, environment, build, passes)
            found = [
                m
                for m in compare(a, b, threshold=threshold).metrics
                if m.case == self.case_id and (self.metric is None or m.metric == self.metric)
            ]
            verdict, text = perf_verdict(found)
            text += f"; A/B {passes} passes"
            if verdict is not None:
                return verdict, text
            if passes * 2 > self.max_passes:
                return "unusable", f"too noisy to decide: {text}"
            passes *= 2


def run_bisect(
    request: BisectRequest,
    builds: Sequence[Build],
    *,
    reversed_order: bool = False,
    on_start: Callable[[int], None] | None = None,
    on_step: Callable[[Step], None] | None = None,
) -> BisectResult:
    """Bisect `builds` (from `find_builds`) for the request's case: each step's files in
    --work (default: a temporary folder), installed builds in --cache (default: kept only
    for a perf case, whose good build is side A of every step, and removed at the end).
    `on_start(number of builds)` once the folders are made, `on_step` after each step."""
    request.make_folders()
    with tempfile.TemporaryDirectory(prefix="accelkit-bisect-") as tmp:
        judge = CaseJudge(
            request.case,
            device=request.device,
            work=request.work or Path(tmp),
            passes=request.passes,
            metric=request.metric,
            timeout_s=request.timeout,
            max_passes=4 * request.passes,
            threshold=request.threshold,
        )
        # A perf step measures against the good build: it stays installed throughout.
        keep = request.cache or (Path(tmp) / "builds" if request.perf else None)
        if keep is not None:
            keep.mkdir(exist_ok=True)
        installer: Installer
        if request.envs is not None:
            installer = EnvInstaller()
        elif request.images:
            installer = ImageInstaller(request.device, timeout_s=max(request.timeout, 7200.0))
        else:
            installer = SiteInstaller(cache=keep)
        if on_start is not None:
            on_start(len(builds))
        return bisect(builds, installer, judge, on_step=on_step, reversed_order=reversed_order)
