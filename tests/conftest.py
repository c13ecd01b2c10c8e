"""Shared fixtures of accelkit's own tests, and the CI rule on skips.

Docker-backed tests skip with a reason where no engine answers; CI sets
ACCELKIT_REQUIRE_DOCKER=1 to turn that skip into a failure, so a missing engine can never
pass silently.

The expensive end-to-end work runs once per session and is shared by the tests that check
the same thing from different sides: one run of the whole built-in suite on the CPU
(`cpu_suite_run`), one cold CPU test-image build (`cpu_test_image`) and one rehearsal of
the nightly's two CPU legs, the 3.11 one in that image (`cpu_leg_rehearsal`). The first
test to use one pays for it, so each such test carries a `pytest.mark.timeout` that covers
the fixture too.

Under `CI=true` (GitHub Actions sets it; so does the harness that runs `.ci/run`) every
skip fails the run unless its reason matches an entry of `ALLOWED_SKIPS_IN_CI`: a test
that CI cannot run is either given what it needs by `.ci/run` or listed there with the
reason it may skip. A skip that nobody listed is a test that silently stopped running.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest

from accelkit.containers.engine import connect
from accelkit.containers.images import image_exists
from accelkit.errors import Unavailable
from tests.helpers import (
    REHEARSAL_TIMEOUT_S,
    REPO,
    SETUP_TIMEOUT_S,
    SUITE_RUN_PASSES,
    SUITE_RUN_TIMEOUT_S,
    TORCH_WHEEL_ENV,
    CpuTestImage,
    LegRehearsal,
    SuiteRun,
    cpu_torch_wheel,
    managed_containers,
    readme_main_job,
    run_cli,
    snapshot_source,
)

REQUIRE_DOCKER_ENV = "ACCELKIT_REQUIRE_DOCKER"
BASE_IMAGE_ENV = "ACCELKIT_BASE_IMAGE"
DEFAULT_BASE_IMAGE = "accelkit-base:bookworm"
CI_ENV = "CI"
FIXTURES = REPO / "tests" / "fixtures"


@dataclass(frozen=True)
class AllowedSkip:
    """A skip that may happen in CI: `pattern` is searched in the skip's reason."""

    pattern: str
    why: str


# Only the host's own hardware may make a test meaningless in CI; a missing tool, package,
# wheel, engine or image never does (.ci/run installs or builds each of them).
ALLOWED_SKIPS_IN_CI: tuple[AllowedSkip, ...] = (
    AllowedSkip(
        r"^this machine has (a CUDA device|an XPU|2 or more GPUs)$",
        "the test proves what happens without that hardware; a CI machine with it has "
        "nothing to prove there (CI's machine has no GPU: this never skips there today)",
    ),
)


def in_ci() -> bool:
    return os.environ.get(CI_ENV, "").lower() in ("true", "1")


def allowed_skip(reason: str) -> AllowedSkip | None:
    return next((a for a in ALLOWED_SKIPS_IN_CI if re.search(a.pattern, reason)), None)


def _skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _fail_unlisted_skip(report: pytest.TestReport | pytest.CollectReport, path: Path) -> None:
    if not (in_ci() and report.skipped) or hasattr(report, "wasxfail"):
        return
    if FIXTURES in path.parents:
        # A suite run of the fixture cases loads this file too (pytest reads conftest.py
        # files above the cases); their skips are what those tests check, not CI's.
        return
    reason = _skip_reason(report)
    if allowed_skip(reason) is None:
        report.outcome = "failed"
        report.longrepr = (
            f"skipped in CI ({CI_ENV}=true), and the reason is not in ALLOWED_SKIPS_IN_CI "
            f"(tests/conftest.py): {reason}\nMake .ci/run provide what the test needs, or "
            "list the reason there with why CI may skip it."
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    _fail_unlisted_skip(report, item.path)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Any:
    report = yield
    _fail_unlisted_skip(report, collector.path)
    return report


#: The session fixtures that cost minutes, and the pytest-xdist group of the tests that use
#: them: `pytest -n 2 --dist loadgroup` (README's test command) sends each group to one
#: worker, so each fixture is still made once per session. Tests of no group go anywhere.
SHARED_FIXTURE_GROUPS = {
    "cpu_suite_run": "cpu-suite-run",
    "cpu_test_image": "cpu-test-image",
    "cpu_leg_rehearsal": "cpu-test-image",
    "old_torch": "old-torch",
}


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        groups = {SHARED_FIXTURE_GROUPS[f] for f in fixtures if f in SHARED_FIXTURE_GROUPS}
        if len(groups) > 1:
            raise pytest.UsageError(f"{item.nodeid} uses fixtures of two groups: {groups}")
        if groups:
            item.add_marker(pytest.mark.xdist_group(groups.pop()))


@pytest.fixture
def cpu0_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A function that makes `accelkit.suite.perf.rotation` see the given caches of CPU 0,
    as (type, sysfs size) pairs, e.g. [("Unified", "32768K")], instead of this machine's;
    its cached answer is cleared before and after."""
    from accelkit.suite.perf import rotation

    root = tmp_path / "cpu0-cache"

    def pin(caches: list[tuple[str, str]]) -> None:
        for i, (kind, size) in enumerate(caches):
            index = root / f"index{i}"
            index.mkdir(parents=True)
            (index / "type").write_text(kind + "\n")
            (index / "size").write_text(size + "\n")
        monkeypatch.setattr(rotation, "CPU0_CACHES", root)
        rotation.last_level_cache_bytes.cache_clear()

    yield pin
    rotation.last_level_cache_bytes.cache_clear()


@pytest.fixture
def llc_32mib(cpu0_caches: Any) -> int:
    """One 32 MiB last-level cache, whatever this machine has (the memory-bound cases' set
    counts follow it)."""
    cpu0_caches([("Unified", "32768K")])
    return 32 << 20


def _docker_missing(reason: str) -> NoReturn:
    if os.environ.get(REQUIRE_DOCKER_ENV) == "1":
        pytest.fail(f"{reason} ({REQUIRE_DOCKER_ENV}=1: failing, not skipping)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    """A docker-py client of the engine that answers (DOCKER_HOST or the default socket)."""
    try:
        client = connect()
    except Unavailable as exc:
        _docker_missing(f"no Docker engine: {exc}")
    yield client
    client.close()


@pytest.fixture(scope="session")
def base_image(docker_client: Any) -> str:
    """The local base image Dockerfiles build FROM (made by .ci/run with mmdebstrap)."""
    return _local_image(docker_client, BASE_IMAGE_ENV, DEFAULT_BASE_IMAGE)


def _local_image(docker_client: Any, env: str, default: str) -> str:
    """The base image `$env` names (or `default`), which .ci/run builds: never pulled."""
    name = os.environ.get(env) or default
    _wait_for_base_image(name)
    if not image_exists(docker_client, name):
        _docker_missing(f"base image {name} is missing (.ci/run builds it)")
    return name


#: Set by .ci/run, which makes the base images in the background while the tests run: the
#: folder where each image that is ready gets `ready-TAG` (':' and '/' as '_'), and each job
#: (listed in `jobs`) `ended-NAME` with its exit code.
BASE_IMAGES_ENV = "ACCELKIT_CI_BASE_IMAGES"
BASE_IMAGE_WAIT_S = 1500.0


def _wait_for_base_image(name: str, poll_s: float = 1.0) -> None:
    """Wait until .ci/run's background jobs made `name`, or all of them ended (then the
    engine says whether it is there); no wait outside .ci/run."""
    folder = os.environ.get(BASE_IMAGES_ENV)
    if not folder:
        return
    ready = Path(folder) / ("ready-" + re.sub(r"[:/]", "_", name))
    deadline = time.monotonic() + BASE_IMAGE_WAIT_S
    while not ready.exists():
        jobs = (Path(folder) / "jobs").read_text(encoding="utf-8").split()
        ended = {job: Path(folder, f"ended-{job}") for job in jobs}
        if all(path.exists() for path in ended.values()):
            failed = [
                job
                for job, path in ended.items()
                if path.read_text(encoding="utf-8").strip() != "0"
            ]
            if failed:
                log = Path(folder).parent / f"{failed[0]}.log"
                pytest.fail(f"base image {name}: .ci/run's job failed (log: {log})", pytrace=False)
            return
        if time.monotonic() > deadline:
            pytest.fail(
                f"base image {name} not ready after {BASE_IMAGE_WAIT_S:.0f} s", pytrace=False
            )
        time.sleep(poll_s)


@pytest.fixture(scope="session")
def old_torch(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """torch 2.13.0+cpu installed once per test session into a site folder (the way
    `accelkit bisect` installs a build), shared by the triage tests that run a second torch:
    `.cache` is a bisect --cache folder holding it, `.site` the folder to put on PYTHONPATH.
    Installing the 190 MB wheel takes about a minute here; every test after the first
    reuses it."""
    from types import SimpleNamespace

    from accelkit.triage.bisect import Build
    from accelkit.triage.builds import SiteInstaller
    from tests.wheels import old_release_wheel

    wheel = old_release_wheel()
    cache = tmp_path_factory.mktemp("torch-builds")
    build = Build("2.13.0+cpu", wheel=wheel)
    site = SiteInstaller(cache=cache).prepare(build)
    return SimpleNamespace(cache=cache, site=site, wheel=wheel, build=build)


# --------------------------------------------------------------------------------------
# Shared end-to-end runs


@pytest.fixture(scope="session")
def cpu_suite_run(tmp_path_factory: pytest.TempPathFactory) -> SuiteRun:
    out = tmp_path_factory.mktemp("cpu-suite")
    results, junit = out / "r.json", out / "r.xml"
    # README's quickstart line as written (its r.json and r.xml land in `out`), with the
    # measured ceilings and passes the perf checks read.
    args = [*readme_main_job(), "--measure-ceilings", "--passes", str(SUITE_RUN_PASSES)]
    proc = run_cli(*args, timeout=SUITE_RUN_TIMEOUT_S, cwd=out)
    return SuiteRun(proc.returncode, proc.stdout, proc.stderr, results, junit)


@pytest.fixture(scope="session")
def cpu_test_image(
    base_image: str, docker_client: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CpuTestImage]:
    wheel = cpu_torch_wheel()
    if wheel is None:
        pytest.skip(f"no CPU torch wheel on this machine (set {TORCH_WHEEL_ENV})")
    source = snapshot_source(tmp_path_factory.mktemp("cpu-image") / "accelkit-src")
    # As the cpu-py3.11 leg sets it up (its --python is part of the image's content hash),
    # so the leg rehearsal finds this image instead of building its own.
    args = ["setup", "cpu", "--torch-wheel", str(wheel), "--base-image", base_image]
    args += ["--python", "3.11", "--accelkit-source", str(source), "--json"]
    outcomes = []
    try:
        for _ in range(2):
            proc = run_cli(*args, timeout=SETUP_TIMEOUT_S)
            assert proc.returncode == 0, proc.stderr[-4000:]
            outcomes.append(json.loads(proc.stdout))
        yield CpuTestImage(wheel, source, outcomes[0], outcomes[1])
    finally:
        # Each session's image is unique (see snapshot_source): do not let them pile up.
        if outcomes:
            docker_client.images.remove(outcomes[0]["image"], force=True, noprune=True)


#: Set where an index with a torch for CPython 3.13 is reachable (PyTorch's CPU index, or
#: PyPI with its CUDA build: a 6.4 GB image): the cpu-py3.13 leg installs that torch on the
#: trixie base. Unset (CI), the leg tests Debian trixie's own python3-torch, in the
#: trixie-torch base image (`--torch-from-base 3.13`).
TORCH_INDEX_ENV = "ACCELKIT_TEST_TORCH_INDEX"
TORCH_SPEC_ENV = "ACCELKIT_TEST_TORCH_SPEC"


@pytest.fixture(scope="session")
def cpu_leg_rehearsal(
    cpu_test_image: CpuTestImage,
    base_image: str,
    trixie_image: str,
    trixie_torch_image: str,
    docker_client: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> LegRehearsal:
    """The nightly's two CPU legs, cpu-py3.11 and cpu-py3.13, each on a base image made for
    its Python (bookworm, trixie), compared with last night's results (a real results file).
    One rehearsal for the session: the leg tests and the in-image tests read it."""
    work = tmp_path_factory.mktemp("rehearsal")
    out, baseline = work / "leg-results", work / "baseline"
    (baseline / "cpu-py3.11").mkdir(parents=True)
    real = FIXTURES / "results" / "cpu-real.json"
    (baseline / "cpu-py3.11" / "results.json").write_text(real.read_text())
    before = managed_containers(docker_client, cpu_test_image.image)
    index = os.environ.get(TORCH_INDEX_ENV)
    torch = ["--torch-wheel", str(cpu_test_image.wheel)]
    if index:
        torch += ["--torch-index", index, "--torch-spec", os.environ.get(TORCH_SPEC_ENV, "torch")]
        torch += ["--base-image", f"3.13={trixie_image}"]
    else:
        torch += ["--base-image", f"3.13={trixie_torch_image}", "--torch-from-base", "3.13"]
    # The marked copy on PYTHONPATH, run outside the checkout: accelkit's source tree is
    # the copy, so the cpu-py3.11 leg's setup finds the image cpu_test_image built.
    args = ["matrix", "run", str(REPO / "matrices" / "nightly.yaml")]
    args += ["--filter", "name=cpu-py3.11,cpu-py3.13"]
    args += ["--base-image", f"3.11={base_image}"]
    args += [*torch, "-k", "while_loop", "--output", str(out), "--baseline", str(baseline)]
    args += ["--json"]
    env = {"PYTHONPATH": str(cpu_test_image.source)}
    proc = run_cli(*args, cwd=work, env=env, timeout=REHEARSAL_TIMEOUT_S)
    leftover = managed_containers(docker_client, cpu_test_image.image) - before
    return LegRehearsal(
        proc.returncode,
        proc.stdout,
        proc.stderr,
        out,
        cpu_test_image.image,
        leftover,
        cpu_test_image.wheel,
        "index" if index else "base",
    )


#: A Debian trixie base image (Python 3.13), made by .ci/run with mmdebstrap like base_image.
TRIXIE_IMAGE_ENV = "ACCELKIT_BASE_IMAGE_TRIXIE"
DEFAULT_TRIXIE_IMAGE = "accelkit-base:trixie"


@pytest.fixture(scope="session")
def trixie_image(docker_client: Any) -> str:
    """The local Debian trixie base image: a second real Python (3.13) beside bookworm's 3.11."""
    return _local_image(docker_client, TRIXIE_IMAGE_ENV, DEFAULT_TRIXIE_IMAGE)


#: trixie with Debian's python3-torch (.ci/trixie-torch.Dockerfile, built by .ci/run).
TRIXIE_TORCH_IMAGE_ENV = "ACCELKIT_BASE_IMAGE_TRIXIE_TORCH"
DEFAULT_TRIXIE_TORCH_IMAGE = "accelkit-base:trixie-torch"


@pytest.fixture(scope="session")
def trixie_torch_image(docker_client: Any) -> str:
    """Debian trixie with its own torch for CPython 3.13: the cpu-py3.13 leg's torch here."""
    return _local_image(docker_client, TRIXIE_TORCH_IMAGE_ENV, DEFAULT_TRIXIE_TORCH_IMAGE)
