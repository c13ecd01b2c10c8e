"""`accelkit bisect --images`: each build a test image made by `accelkit setup BACKEND
--torch-wheel W` (content-hashed by setup, so a build set up before is reused), the case run
in it with `accelkit test --image TAG`.

Unit tests only, with a fake `accelkit setup` that answers as the real one does (its
`--json` line) and a judge whose `accelkit test` is captured: what setup is asked for
(checked by setup's own parser), what a failed setup makes of the step (unusable), the
image and torch identity carried into the step, and the bisection driving one setup per
build. Not run here: a real image build (minutes per wheel, and the image tag hashes
accelkit's source, so every change of the source builds anew).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from accelkit.errors import BadInput
from accelkit.setup.request import SetupRequest
from accelkit.triage.bisect import Build, BuildUnusable, Environment, bisect
from accelkit.triage.builds import CaseJudge, ImageInstaller
from tests.factories import case, results


class FakeSetup:
    """`accelkit setup ... --json`: one image per wheel, `cached` once it was made; wheels
    named in `broken` fail as a setup whose install step fails does."""

    def __init__(self, broken: Sequence[str] = ()) -> None:
        self.broken = set(broken)
        self.made: set[str] = set()
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str]) -> tuple[int, str, str]:
        self.calls.append(list(argv))
        assert argv[:2] == ["setup", "cpu"] and argv[-1] == "--json", argv
        # As strict as the real command: its own parser (BadInput on what it refuses).
        request = SetupRequest.from_argv(argv[1:-1])
        assert request.torch_wheel is not None, argv
        wheel = request.torch_wheel
        if wheel.name in self.broken:
            return 1, "", "| installing torch\naccelkit: error: the image's torch does not import"
        version = wheel.name.split("-")[1]
        tag = f"accelkit-test-cpu:{abs(hash(wheel.name)) % 10**8:08d}"
        result = {
            "image": tag,
            "cached": tag in self.made,
            "verified": {"torch": {"version": version, "git_version": f"git-{version}"}},
            "build_s": 1.0,
            "verify_s": 1.0,
        }
        self.made.add(tag)
        return 0, json.dumps(result) + "\n", "| step 1/4\n"


def _wheels(tmp_path: Path, versions: Sequence[str]) -> list[Build]:
    builds = []
    for version in versions:
        wheel = tmp_path / f"torch-{version}-cp311-cp311-manylinux_2_28_x86_64.whl"
        wheel.write_bytes(b"")
        builds.append(Build(version, wheel=wheel))
    return builds


def test_setup_is_asked_for_the_wheel_and_the_image_carries_the_step(tmp_path: Path) -> None:
    (build,) = _wheels(tmp_path, ["2.13.0+cpu"])
    fake = FakeSetup()
    installer = ImageInstaller("cpu", run=fake)
    assert installer.setup_argv(build) == [
        "setup",
        "cpu",
        "--torch-wheel",
        str(build.wheel),
        "--json",
    ]
    with installer.install(build) as env:
        assert env.image is not None and env.image.startswith("accelkit-test-cpu:")
        assert (env.torch_version, env.git_version) == ("2.13.0+cpu", "git-2.13.0+cpu")
        assert env.note == "image built"
    with installer.install(build) as again:
        assert again.image == env.image and again.note == "image reused"


def test_setup_arguments_are_checked_by_setups_own_parser(tmp_path: Path) -> None:
    (build,) = _wheels(tmp_path, ["2.13.0+cpu"])
    with pytest.raises(BadInput, match="No such option: --bogus"):
        ImageInstaller("cpu", setup_args=["--bogus"], run=FakeSetup()).setup_argv(build)
    with pytest.raises(BuildUnusable, match="from a folder of wheels"):
        ImageInstaller("cpu", run=FakeSetup()).setup_argv(Build("2.14.1", index="x"))


@pytest.mark.parametrize(
    ("answer", "needle"),
    [
        ((1, "", "| x\naccelkit: error: no base image"), "setup exited 1: accelkit: error: no"),
        ((0, "not json\n", ""), "accelkit setup printed no image"),
        ((0, "", ""), "accelkit setup printed no image"),
        ((0, '{"cached": true}\n', ""), "accelkit setup printed no image"),
    ],
)
def test_a_setup_that_fails_makes_the_build_unusable(
    tmp_path: Path, answer: tuple[int, str, str], needle: str
) -> None:
    (build,) = _wheels(tmp_path, ["2.13.0+cpu"])
    installer = ImageInstaller("cpu", run=lambda argv: answer)
    with pytest.raises(BuildUnusable, match=needle), installer.install(build):
        pass


def test_the_case_runs_in_the_image(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    judge = CaseJudge("conformance/ops/exp/float32", device="cpu", work=tmp_path, passes=1)
    seen: list[tuple[tuple[str, ...], list[str]]] = []

    def accelkit(python: Sequence[str], path: Sequence[str], argv: list[str]) -> int:
        seen.append((tuple(python), argv))
        out = Path(argv[argv.index("--json") + 1])
        from accelkit.results.io import write_results

        write_results(results([case("conformance/ops/exp/float32", "failed")]), out)
        return 1

    monkeypatch.setattr(judge, "_accelkit", accelkit)
    env = Environment(("python",), ("/accelkit",), "2.13.0+cpu", "g", image="img:1")
    verdict, detail = judge(env, Build("2.13.0+cpu"))
    assert (verdict, detail) == ("good", "failed")  # the first build sets what good means
    ((python, argv),) = seen
    assert python == ("python",) and argv[-2:] == ["--image", "img:1"]
    assert argv[argv.index("--case") + 1] == "conformance/ops/exp/float32"
    # A perf case: the good build's image is side A of every later step's interleaved run.
    perf = CaseJudge("perf/gemm/float32/128x128x128", device="cpu", work=tmp_path, passes=2)
    seen.clear()

    def interleaved(python: tuple[str, ...], path: tuple[str, ...], argv: list[str]) -> int:
        seen.append((python, argv))
        from accelkit.results.io import write_results
        from accelkit.suite.run.ab import side_paths

        a, b, _ = side_paths(Path(argv[argv.index("--json") + 1]))
        for out in (a, b):
            write_results(results([case("perf/gemm/float32/128x128x128", "passed")]), out)
        return 0

    monkeypatch.setattr(perf, "_accelkit", interleaved)
    assert perf(env, Build("2.13.0+cpu"))[0] == "good"  # the reference: nothing runs
    step = Environment(("python",), ("/accelkit",), "2.14.0+cpu", "h", image="img:2")
    perf(step, Build("2.14.0+cpu"))
    ((_, argv),) = seen
    assert argv[argv.index("--ab") + 1 : argv.index("--ab") + 3] == ["image:img:1", "image:img:2"]


def test_bisect_sets_up_each_build_it_tests_once(tmp_path: Path) -> None:
    versions = [f"2.15.0.dev202601{i:02d}" for i in range(1, 10)]
    builds = _wheels(tmp_path, versions)
    fake = FakeSetup(broken=[builds[4].wheel.name])  # type: ignore[union-attr]
    change = 6

    def judge(environment: Environment, build: Build) -> tuple[Any, str]:
        assert environment.image is not None
        assert environment.torch_version == build.version
        return ("good", "passed") if versions.index(build.version) < change else ("bad", "x")

    result = bisect(builds, ImageInstaller("cpu", run=fake), judge)
    assert result.first_bad.build == builds[change]
    assert result.last_good.build == builds[change - 1]
    assert result.first_bad.git_version == f"git-{versions[change]}"
    wheels = [call[call.index("--torch-wheel") + 1] for call in fake.calls]
    assert len(wheels) == len(set(wheels)) == len(result.steps)
    unusable = [s for s in result.steps if s.verdict == "unusable"]
    assert all("the image's torch does not import" in s.detail for s in unusable)
