"""`accelkit bisect`: the search over many builds (a fake installer and judge that fail loudly
when misused), and finding builds. The command, and one end-to-end bisection across two real
torch releases: tests/integration/test_bisect.py."""

from __future__ import annotations

import contextlib
import json
import math
import random
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from accelkit.errors import BadInput
from accelkit.triage.bisect import (
    BisectRequest,
    Build,
    BuildUnusable,
    Environment,
    NothingToBisect,
    Verdict,
    bisect,
    builds_in_folder,
    builds_on_index,
    find_builds,
    iter_lines,
    parse_index_versions,
    select,
)
from accelkit.triage.builds import wheel_identity

# --------------------------------------------------------------------------------------
# Fakes: a table of builds; anything the search must never do fails the test at once.


class FakeInstaller:
    """Builds 0..n-1: version `2.0.<i>`, git hash `g<i>`; `broken` ones cannot install."""

    def __init__(self, n: int, broken: set[int] | None = None) -> None:
        self.builds = [Build(f"2.0.{i}", index="fake://index") for i in range(n)]
        self.broken = set(broken or ())
        self.installed: list[int] = []
        self.active: int | None = None

    def index_of(self, build: Build) -> int:
        if build not in self.builds:
            raise AssertionError(f"fake installer: asked for an unknown build {build}")
        return self.builds.index(build)

    @contextlib.contextmanager
    def install(self, build: Build) -> Iterator[Environment]:
        index = self.index_of(build)
        if index in self.installed:
            raise AssertionError(f"fake installer: build {index} installed twice")
        if self.active is not None:
            raise AssertionError("fake installer: two builds installed at once")
        self.installed.append(index)
        if index in self.broken:
            raise BuildUnusable(f"build {index} does not install")
        self.active = index
        try:
            yield Environment(("python",), (f"/site/{index}",), build.version, f"g{index}")
        finally:
            self.active = None


class FakeJudge:
    """Good before `change`, bad from it; checks it runs inside the build's environment."""

    def __init__(self, installer: FakeInstaller, change: int) -> None:
        self.installer = installer
        self.change = change

    def __call__(self, environment: Environment, build: Build) -> tuple[Verdict, str]:
        index = self.installer.index_of(build)
        if self.installer.active != index or environment.path != (f"/site/{index}",):
            raise AssertionError(f"fake judge: build {index} judged outside its environment")
        return ("good", "passed") if index < self.change else ("bad", "failed")


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 17, 64])
def test_the_search_finds_every_change_point_in_few_steps(n: int) -> None:
    for change in range(1, n):
        installer = FakeInstaller(n)
        result = bisect(installer.builds, installer, FakeJudge(installer, change))
        assert result.last_good.build == installer.builds[change - 1]
        assert result.first_bad.build == installer.builds[change]
        assert result.unusable_between == ()
        # Both ends, then a binary search of the n - 2 builds between them.
        assert len(installer.installed) <= 2 + math.ceil(math.log2(max(n - 1, 1)))
        assert result.first_bad.git_version == f"g{change}"


def test_unusable_builds_are_skipped_like_git_bisect_skip() -> None:
    rng = random.Random(14)
    for _ in range(200):
        n = rng.randint(3, 40)
        change = rng.randint(1, n - 1)
        broken = {i for i in range(1, n - 1) if rng.random() < 0.3}
        installer = FakeInstaller(n, broken)
        result = bisect(installer.builds, installer, FakeJudge(installer, change))
        usable_good = max(i for i in range(change) if i not in broken)
        usable_bad = min(i for i in range(change, n) if i not in broken)
        assert result.last_good.build == installer.builds[usable_good]
        assert result.first_bad.build == installer.builds[usable_bad]
        between = {installer.index_of(s.build) for s in result.unusable_between}
        assert between == set(range(usable_good + 1, usable_bad)), (n, change, broken)
        assert all(s.verdict == "unusable" for s in result.unusable_between)


@pytest.mark.parametrize(
    ("change", "broken", "needle"),
    [
        (0, set(), "the good build 2.0.0 is bad"),
        (9, set(), "the bad build 2.0.8 is good"),
        (4, {0}, "the good build 2.0.0 is unusable: build 0 does not install"),
        (4, {8}, "the bad build 2.0.8 is unusable"),
    ],
)
def test_ends_that_do_not_behave_leave_nothing_to_bisect(
    change: int, broken: set[int], needle: str
) -> None:
    installer = FakeInstaller(9, broken)
    with pytest.raises(NothingToBisect, match=needle):
        bisect(installer.builds, installer, FakeJudge(installer, change))


def test_the_answer_names_both_builds_their_hashes_and_the_commit_range() -> None:
    installer = FakeInstaller(6, {3})
    result = bisect(installer.builds, installer, FakeJudge(installer, 4))
    lines = list(iter_lines(result))
    assert lines[0] == "last good build: torch 2.0.2 (git g2)"
    assert lines[1] == "first bad build: torch 2.0.4 (git g4)"
    assert "unusable between them: torch 2.0.3: build 3 does not install" in lines[2]
    assert result.compare_url == "https://github.com/pytorch/pytorch/compare/g2...g4"
    assert json.loads(json.dumps(result.to_json_dict()))["first_bad"]["git_version"] == "g4"


def test_a_good_build_newer_than_the_bad_one_searches_for_the_fix() -> None:
    builds = [Build(v, index="x") for v in ("2.12.0", "2.13.0", "2.14.0", "2.14.1")]
    ordered, reversed_order = select(builds, good="2.14.1", bad="2.12.0")
    assert reversed_order and [b.version for b in ordered] == [
        "2.14.1",
        "2.14.0",
        "2.13.0",
        "2.12.0",
    ]
    installer = FakeInstaller(0)
    installer.builds = ordered
    gits = {b.version: f"g{b.version}" for b in ordered}

    @contextlib.contextmanager
    def install(build: Build) -> Iterator[Environment]:
        yield Environment(("python",), (), build.version, gits[build.version])

    def judge(environment: Environment, build: Build) -> tuple[Verdict, str]:
        return ("good", "passed") if build.key >= Build("2.14.0").key else ("bad", "skipped")

    installer.install = install  # type: ignore[method-assign]
    result = bisect(ordered, installer, judge, reversed_order=True)
    lines = list(iter_lines(result))
    assert lines[:2] == [
        "last bad build:  torch 2.13.0 (git g2.13.0)",
        "first good build: torch 2.14.0 (git g2.14.0)",
    ]
    # The commit range is written oldest first whatever the search's direction.
    assert result.compare_url == "https://github.com/pytorch/pytorch/compare/g2.13.0...g2.14.0"


# --------------------------------------------------------------------------------------
# Finding builds


def test_builds_are_selected_by_version_or_nightly_date() -> None:
    builds = [
        Build(v, index="x")
        for v in ("2.13.0", "2.14.0.dev20260101+cpu", "2.14.0.dev20260102+cpu", "2.14.0")
    ]
    ordered, reversed_order = select(builds, "2.13.0", "2026-01-02")
    assert not reversed_order
    nightlies = ["2.14.0.dev20260101+cpu", "2.14.0.dev20260102+cpu"]
    assert [b.version for b in ordered] == ["2.13.0", *nightlies]
    assert select(builds, "20260101", "2.14.0")[0][0].date == "20260101"
    with pytest.raises(BadInput, match=r"--good 2\.99: no such build among: 2\.13\.0, "):
        select(builds, "2.99", "2.14.0")
    with pytest.raises(BadInput, match="name the same build"):
        select(builds, "2.14.0", "2.14.0")


def test_a_folder_of_wheels_gives_the_builds_this_python_can_install(tmp_path: Path) -> None:
    from packaging.tags import sys_tags

    tag = next(iter(sys_tags()))
    here = f"{tag.interpreter}-{tag.abi}-{tag.platform}"
    for name in (
        f"torch-2.13.0+cpu-{here}.whl",
        f"torch-2.14.1-{here}.whl",
        "torch-2.14.0-cp27-cp27m-win32.whl",  # another platform: left out
        f"torchvision-0.29.1-{here}.whl",  # not torch
        "torch-not-a-wheel.whl",
    ):
        (tmp_path / name).write_bytes(b"")
    assert [b.version for b in builds_in_folder(tmp_path)] == ["2.13.0+cpu", "2.14.1"]
    with pytest.raises(BadInput, match="not a directory"):
        builds_in_folder(tmp_path / "nope")


def test_an_index_gives_the_versions_pip_lists() -> None:
    listing = "torch (2.14.1)\nAvailable versions: 2.14.1, 2.13.0+cpu, 2.13.0, junk\n"
    assert parse_index_versions(listing) == ["2.14.1", "2.13.0+cpu", "2.13.0", "junk"]
    calls: list[list[str]] = []

    def pip(args: list[str]) -> str:
        calls.append(list(args))
        return listing

    builds = builds_on_index("file:///simple", run_pip=pip)  # type: ignore[arg-type]
    assert [b.version for b in builds] == ["2.13.0", "2.13.0+cpu", "2.14.1"]
    assert calls == [["index", "versions", "torch", "--index-url", "file:///simple"]]


def test_a_wheel_says_its_version_and_git_hash_without_being_installed(tmp_path: Path) -> None:
    wheel = tmp_path / "torch-2.0.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(
            "torch/version.py",
            "from typing import Optional\n__version__ = '2.0.0+cpu'\n"
            "git_version = 'abc123'\ncuda: Optional[str] = None\n",
        )
    assert wheel_identity(wheel) == ("2.0.0+cpu", "abc123")
    assert wheel_identity(tmp_path / "missing.whl") == (None, None)


# --------------------------------------------------------------------------------------
# The command's request: its checks, in the order the command made them, and its builds


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({}, r"^name where the builds come from"),
        ({"wheels": Path("w"), "index": "https://x.test/"}, r"^name where the builds come"),
        ({"envs": Path("e"), "case": "unit/x"}, r"^--case unit/x: a case id starts with"),
        ({"envs": Path("e"), "images": True}, r"^--images: makes test images of wheels"),
        ({"envs": Path("e"), "device": "abacus"}, r"abacus"),
        ({"envs": Path("e"), "passes": 0}, r"^--passes: must be >= 1, got 0$"),
        ({"envs": Path("e"), "threshold": 0.0}, r"^--threshold 0.0: must be between 0 and 1"),
    ],
)
def test_the_request_refuses_bad_options_in_one_line(
    fields: dict[str, object], message: str
) -> None:
    values: dict[str, object] = {"case": "perf/gemm", "good": "2.0.0", "bad": "2.0.1", **fields}
    with pytest.raises(BadInput, match=message):
        BisectRequest(**values)  # type: ignore[arg-type]


def test_the_request_finds_and_selects_its_builds(tmp_path: Path) -> None:
    for version in ("2.0.0", "2.0.1", "2.0.2", "not-a-version"):
        (tmp_path / version).mkdir()
    request = BisectRequest("conformance/x", "2.0.2", "2.0.0", envs=tmp_path)
    builds, reversed_order = find_builds(request)
    assert [b.version for b in builds] == ["2.0.2", "2.0.1", "2.0.0"] and reversed_order
    assert not request.perf and BisectRequest("perf/x", "a", "b", envs=tmp_path).perf
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(BadInput, match=r"^no torch build for this Python and platform in "):
        find_builds(BisectRequest("conformance/x", "2.0.2", "2.0.0", envs=empty))


def test_cache_and_work_must_be_folders_and_are_made_when_missing(tmp_path: Path) -> None:
    file = tmp_path / "file"
    file.write_text("x")
    with pytest.raises(BadInput, match=r"^--work .*file: not a directory$"):
        BisectRequest("conformance/x", "a", "b", envs=tmp_path, work=file)
    request = BisectRequest(
        "conformance/x", "a", "b", envs=tmp_path, cache=tmp_path / "c" / "d", work=tmp_path / "w"
    )
    assert not (tmp_path / "c").exists()  # made by the run, never by a dry run
    request.make_folders()
    assert (tmp_path / "c" / "d").is_dir() and (tmp_path / "w").is_dir()
