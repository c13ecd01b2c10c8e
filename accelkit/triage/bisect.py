"""`accelkit bisect`: the first torch build where a case broke (or a metric regressed).

The builds come from a folder of wheels, a pip index or a folder of prepared environments
(`builds_in_folder`, `builds_on_index`, `builds_in_envs`) and are put in version order;
`select` keeps those from the good one to the bad one (a version, or a nightly's date).
`bisect` then runs the search `git bisect` runs, over builds instead of commits:

1. the good build is tested first and must show the case's good behaviour, the bad one next
   and must not (else there is nothing to find, and the answer says so);
2. the untested build nearest the middle of the remaining range is tested; good moves the
   range's good end to it, bad its bad end;
3. a build that cannot be installed or run is unusable: it is skipped, as `git bisect skip`
   skips a commit, and the next candidate nearest the middle is tried;
4. when no untested build is left between the two ends, the last good and the first bad
   build are the answer, with the unusable builds between them (the change is in one of
   those, or right at the first bad one).

Each step installs one build (`Installer`) and runs only the named case there (`Judge`).
The answer names both builds with their git hashes (torch.version.git_version, read from
the installed build) and the commit range to read, as a GitHub compare URL.

When the good build is newer than the bad one (looking for the build that fixed or added
something), the search runs from the newest build down: the "first bad" build is then the
newest one still showing the bad behaviour, and the commit range is still written oldest
first.

`BisectRequest` is the command's options, checked when made; `find_builds` lists and
selects its builds (all `--dry-run` needs), and `accelkit.triage.builds.run_bisect` puts an
installer and a judge to the search.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from accelkit.errors import BadInput, Failed
from accelkit.suite.run.request import AB_DEFAULT_PASSES

Verdict = Literal["good", "bad", "unusable"]
COMPARE_URL = "https://github.com/pytorch/pytorch/compare/{old}...{new}"
_DATE = re.compile(r"^(\d{4})-?(\d{2})-?(\d{2})$")


@dataclass(frozen=True)
class Build:
    """One torch build: its version and where it comes from (a wheel file, an index, or a
    prepared environment: a venv or a site folder)."""

    version: str
    wheel: Path | None = None
    index: str | None = None
    env: Path | None = None

    @property
    def source(self) -> str:
        return str(self.wheel or self.index or self.env or "")

    @property
    def key(self) -> Version:
        return Version(self.version)

    @property
    def date(self) -> str | None:
        """A nightly's date (the `.devYYYYMMDD` of its version), else None."""
        dev = self.key.dev
        return str(dev) if dev is not None and len(str(dev)) == 8 else None

    def describe(self) -> str:
        return f"torch {self.version}"


class BuildUnusable(Exception):
    """A build that cannot be installed or run here; the message says why."""


@dataclass(frozen=True)
class Environment:
    """Where a build runs: the command that starts Python, the folders to put first on
    PYTHONPATH (or the test image), and what `import torch` says there."""

    python: tuple[str, ...]
    path: tuple[str, ...]
    torch_version: str
    git_version: str
    note: str = ""
    image: str | None = None
    """A test image (`accelkit setup`) the case runs in (`accelkit test --image`), if any."""


class Installer(Protocol):
    def install(self, build: Build) -> AbstractContextManager[Environment]:
        """Install `build` for the time of the `with` block; BuildUnusable if it cannot be
        installed or imported."""
        ...


class Judge(Protocol):
    def __call__(self, environment: Environment, build: Build) -> tuple[Verdict, str]:
        """Run the case in `environment`: its verdict and what decided it. The first call
        (the good build) sets what good means."""
        ...


@dataclass(frozen=True)
class Step:
    build: Build
    verdict: Verdict
    detail: str
    torch_version: str | None = None
    git_version: str | None = None

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "version": self.build.version,
            "source": self.build.source,
            "verdict": self.verdict,
            "detail": self.detail,
            "torch_version": self.torch_version,
            "git_version": self.git_version,
        }


@dataclass(frozen=True)
class BisectResult:
    last_good: Step
    first_bad: Step
    unusable_between: tuple[Step, ...]
    steps: tuple[Step, ...]
    reversed_order: bool = False
    """The good build is the newer one: the search looked for where the good behaviour
    started (a fix), walking from the newest build down."""
    candidates: int = 0

    @property
    def compare_url(self) -> str | None:
        ends = sorted((self.last_good, self.first_bad), key=lambda s: s.build.key)
        old, new = (s.git_version for s in ends)
        if not old or not new or old == "Unknown" or new == "Unknown":
            return None
        return COMPARE_URL.format(old=old, new=new)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "last_good": self.last_good.to_json_dict(),
            "first_bad": self.first_bad.to_json_dict(),
            "unusable_between": [s.to_json_dict() for s in self.unusable_between],
            "compare_url": self.compare_url,
            "reversed_order": self.reversed_order,
            "candidates": self.candidates,
            "steps": [s.to_json_dict() for s in self.steps],
        }


class NothingToBisect(Failed):
    """The ends do not behave as good and bad: there is no change to find (exit 1)."""


@dataclass(frozen=True)
class BisectRequest:
    """`accelkit bisect`'s options, checked (BadInput, one line) when made."""

    case: str
    good: str
    bad: str
    wheels: Path | None = None
    index: str | None = None
    envs: Path | None = None
    images: bool = False
    device: str = "cpu"
    passes: int = AB_DEFAULT_PASSES
    threshold: float = 0.03
    metric: str | None = None
    cache: Path | None = None
    work: Path | None = None
    timeout: float = 1800.0

    def __post_init__(self) -> None:
        from accelkit import backends

        sources = (self.wheels, self.index, self.envs)
        if sum(source is not None for source in sources) != 1:
            raise BadInput(
                "name where the builds come from: --wheels DIR, --index URL or --envs DIR"
            )
        if self.case.split("/", 1)[0] not in ("conformance", "perf"):
            raise BadInput(f"--case {self.case}: a case id starts with conformance/ or perf/")
        if self.images and self.wheels is None:
            raise BadInput("--images: makes test images of wheels; add --wheels DIR")
        if self.index is not None:
            from accelkit.inputs import check_url

            check_url("--index", self.index)
        backends.get(self.device)
        if self.passes < 1:
            raise BadInput(f"--passes: must be >= 1, got {self.passes}")
        if not 0.0 < self.threshold < 1.0:
            raise BadInput(
                f"--threshold {self.threshold}: must be between 0 and 1 (e.g. 0.03 for 3%)"
            )
        for flag, folder in (("--cache", self.cache), ("--work", self.work)):
            if folder is not None and folder.exists() and not folder.is_dir():
                raise BadInput(f"{flag} {folder}: not a directory")

    @property
    def perf(self) -> bool:
        return self.case.startswith("perf/")

    def make_folders(self) -> None:
        """Create --cache and --work (not for a dry run: it writes nothing)."""
        for folder in (self.cache, self.work):
            if folder is not None:
                try:
                    folder.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise BadInput(f"{folder}: cannot create it ({exc.strerror})") from None


def find_builds(request: BisectRequest) -> tuple[list[Build], bool]:
    """The request's builds from --good to --bad, good first, and whether that is newest
    first (`select`); BadInput when its source has no build for this Python and platform."""
    if request.envs is not None:
        found = builds_in_envs(request.envs)
    elif request.wheels is not None:
        found = builds_in_folder(request.wheels)
    else:
        found = builds_on_index(str(request.index))
    if not found:
        where = request.wheels or request.index or request.envs
        raise BadInput(f"no torch build for this Python and platform in {where}")
    return select(found, request.good, request.bad)


# --------------------------------------------------------------------------------------
# Finding builds


def builds_in_folder(folder: Path) -> list[Build]:
    """The torch wheels in `folder` that install on this Python and platform, in version
    order (one per version: the first compatible file)."""
    from packaging.tags import sys_tags

    if not folder.is_dir():
        raise BadInput(f"--wheels {folder}: not a directory")
    supported = set(sys_tags())
    found: dict[str, Build] = {}
    for path in sorted(folder.glob("torch-*.whl")):
        try:
            name, version, _, tags = parse_wheel_filename(path.name)
        except (InvalidWheelFilename, InvalidVersion):
            continue
        if name != "torch" or not (set(tags) & supported):
            continue
        found.setdefault(str(version), Build(str(version), wheel=path.resolve()))
    return sorted(found.values(), key=lambda b: b.key)


def builds_in_envs(folder: Path) -> list[Build]:
    """The prepared environments in `folder`, in version order: one subfolder per build,
    named by its version (`2.15.0.dev20260105`), each a venv (with bin/python) or a site
    folder to put first on PYTHONPATH (a torch installed with `pip install --target`, or
    anything that changes the torch the Python finds). Other entries are left out."""
    if not folder.is_dir():
        raise BadInput(f"--envs {folder}: not a directory")
    found: list[Build] = []
    for path in sorted(folder.iterdir()):
        if not path.is_dir() or path.name.startswith("."):
            continue
        try:
            Version(path.name)
        except InvalidVersion:
            continue
        found.append(Build(path.name, env=path.resolve()))
    return sorted(found, key=lambda b: b.key)


def parse_index_versions(output: str) -> list[str]:
    """The versions in `pip index versions torch`'s output ("Available versions: a, b")."""
    for line in output.splitlines():
        if line.strip().startswith("Available versions:"):
            listed = line.split(":", 1)[1]
            return [v.strip() for v in listed.split(",") if v.strip()]
    return []


def builds_on_index(
    index: str, run_pip: Callable[[Sequence[str]], str] | None = None
) -> list[Build]:
    """The torch versions a pip index offers (pip's own listing), in version order."""
    import subprocess
    import sys

    def default(args: Sequence[str]) -> str:
        proc = subprocess.run(
            [sys.executable, "-m", "pip", *args], capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["pip failed"])[-1]
            raise BadInput(f"--index {index}: pip cannot list torch there: {last}")
        return proc.stdout

    output = (run_pip or default)(["index", "versions", "torch", "--index-url", index])
    builds: list[Build] = []
    for version in parse_index_versions(output):
        try:
            Version(version)
        except InvalidVersion:
            continue
        builds.append(Build(version, index=index))
    return sorted(builds, key=lambda b: b.key)


def _matches(build: Build, wanted: str) -> bool:
    date = _DATE.match(wanted)
    if date is not None:
        return build.date == "".join(date.groups())
    if build.version == wanted:
        return True
    try:
        return build.key == Version(wanted) or build.key.public == Version(wanted).public
    except InvalidVersion:
        return False


def select(builds: Sequence[Build], good: str, bad: str) -> tuple[list[Build], bool]:
    """The builds from `good` to `bad` (versions or nightly dates), good first, and whether
    that is newest first. BadInput naming what is there when one is not found."""

    def position(wanted: str, flag: str) -> int:
        found = [i for i, b in enumerate(builds) if _matches(b, wanted)]
        if not found:
            listed = ", ".join(b.version for b in builds[:20]) or "none"
            raise BadInput(f"{flag} {wanted}: no such build among: {listed}")
        if len(found) > 1:
            names = ", ".join(builds[i].version for i in found)
            raise BadInput(f"{flag} {wanted}: matches several builds ({names}); name one")
        return found[0]

    g, b = position(good, "--good"), position(bad, "--bad")
    if g == b:
        raise BadInput(f"--good and --bad name the same build ({builds[g].version})")
    if g < b:
        return list(builds[g : b + 1]), False
    return list(reversed(builds[b : g + 1])), True


# --------------------------------------------------------------------------------------
# The search


def bisect(
    builds: Sequence[Build],
    installer: Installer,
    judge: Judge,
    *,
    on_step: Callable[[Step], None] | None = None,
    reversed_order: bool = False,
) -> BisectResult:
    """git bisect over `builds` (good first, bad last; see the module doc)."""
    if len(builds) < 2:
        raise BadInput("bisect needs at least a good and a bad build")
    tested: dict[int, Step] = {}
    order: list[Step] = []

    def test(index: int) -> Step:
        build = builds[index]
        try:
            with installer.install(build) as environment:
                verdict, detail = judge(environment, build)
                step = Step(
                    build, verdict, detail, environment.torch_version, environment.git_version
                )
        except BuildUnusable as why:
            step = Step(build, "unusable", str(why))
        tested[index] = step
        order.append(step)
        if on_step is not None:
            on_step(step)
        return step

    first = test(0)
    if first.verdict != "good":
        raise NothingToBisect(
            f"the good build {first.build.version} is {first.verdict}: {first.detail}"
        )
    last = test(len(builds) - 1)
    if last.verdict != "bad":
        raise NothingToBisect(
            f"the bad build {last.build.version} is {last.verdict}: {last.detail}"
        )
    low, high = 0, len(builds) - 1
    while True:
        candidates = [i for i in range(low + 1, high) if i not in tested]
        if not candidates:
            break
        middle = (low + high) / 2
        index = min(candidates, key=lambda i: (abs(i - middle), i))
        step = test(index)
        if step.verdict == "good":
            low = index
        elif step.verdict == "bad":
            high = index
    return BisectResult(
        last_good=tested[low],
        first_bad=tested[high],
        unusable_between=tuple(tested[i] for i in range(low + 1, high)),
        steps=tuple(order),
        reversed_order=reversed_order,
        candidates=len(builds),
    )


def iter_lines(result: BisectResult) -> Iterator[str]:
    """The answer in words (what `accelkit bisect` prints)."""

    def name(step: Step) -> str:
        git = (step.git_version or "?")[:12]
        return f"torch {step.build.version} (git {git})"

    if result.reversed_order:
        yield f"last bad build:  {name(result.first_bad)}"
        yield f"first good build: {name(result.last_good)}"
    else:
        yield f"last good build: {name(result.last_good)}"
        yield f"first bad build: {name(result.first_bad)}"
    for step in result.unusable_between:
        yield f"  unusable between them: torch {step.build.version}: {step.detail}"
    if result.unusable_between:
        yield "  (the change is in one of the unusable builds, or in the first bad one)"
    url = result.compare_url
    yield f"commits: {url}" if url else "commits: unknown (a build has no git hash)"
    yield f"{len(result.steps)} of {result.candidates} builds tested"


@dataclass
class StepLog:
    """Collects steps as they come (for --json and for tests)."""

    steps: list[Step] = field(default_factory=list)

    def __call__(self, step: Step) -> None:
        self.steps.append(step)
