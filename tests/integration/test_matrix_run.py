"""`accelkit matrix run`: the local rehearsal of matrix legs (accelkit.matrix.rehearse)."""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from accelkit.backends import Availability
from accelkit.backends import get as get_backend
from accelkit.cli import main
from accelkit.errors import BadInput
from accelkit.matrix import RehearsalOptions, load_legs, plan_rehearsal
from accelkit.results.io import load_results
from accelkit.setup.request import SetupRequest
from accelkit.suite.run.request import RunRequest
from tests.helpers import (
    IMAGE_TESTS_TIMEOUT_S,
    REPO,
    LegRehearsal,
    run_cli,
)

MATRICES = REPO / "matrices"
NIGHTLY = str(MATRICES / "nightly.yaml")


class FakeHost:
    """A machine with (or without) a Docker engine that holds every image asked about."""

    def __init__(self, docker: bool = True) -> None:
        self._docker = docker

    def docker(self) -> Availability:
        return Availability(self._docker, "" if self._docker else "socket refused")

    def has_image(self, name: str) -> bool:
        assert self._docker, "has_image asked without an engine"
        return True


@pytest.fixture
def wheel(tmp_path: Path) -> Path:
    # plan_setup only reads the wheel's name; the real wheel is needed only to install it.
    path = tmp_path / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    path.write_bytes(b"not really a wheel")
    return path


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(args)
    out, err = capsys.readouterr()
    return int(info.value.code or 0), out, err


def _pairs(argv: tuple[str, ...] | list[str]) -> dict[str, str]:
    """{flag: value} of an argv's `--flag value` pairs."""
    return {flag: value for flag, value in itertools.pairwise(argv) if flag.startswith("--")}


def test_dry_run_plan_for_nightly(tmp_path: Path, wheel: Path) -> None:
    options = RehearsalOptions(output=tmp_path / "out", base_image="base:1", torch_wheels=(wheel,))
    plan = plan_rehearsal(load_legs(NIGHTLY), options, FakeHost())
    by_name = {leg.leg.name: leg for leg in plan.legs}
    assert len(plan.legs) == len(load_legs(NIGHTLY))  # nothing silently dropped
    cpu = [leg for leg in plan.legs if leg.leg.backend == "cpu"]
    # The cp311 wheel fits the 3.11 leg only; the others say so, naming the wheel.
    assert [leg.leg.name for leg in cpu if leg.runnable] == ["cpu-py3.11"]
    assert by_name["cpu-py3.11"].reason == ""
    for leg in cpu:
        assert leg.setup is not None
        assert leg.setup.argv[:3] == ("accelkit", "setup", "cpu")
        setup = _pairs(leg.setup.argv)
        assert setup["--python"] == leg.leg.python and setup["--base-image"] == "base:1"
        assert leg.setup.argv[-1] == "--json"
        if leg.leg.python == "3.11":
            assert setup["--torch-wheel"] == str(wheel) and "--torch-channel" not in setup
        else:
            assert f"no --torch-wheel fits Python {leg.leg.python}" in leg.reason
            assert f"{wheel.name}: built for cp311" in leg.reason
        test_options = _pairs(leg.test.argv)
        assert test_options["--image"] == "<image from setup>"
        if leg.leg.explore_seeds:  # the explore leg: its findings, no junit
            assert leg.test.argv[:6] == (
                "accelkit",
                "test",
                "--device",
                "cpu",
                "--suite",
                "conformance",
            )
            assert test_options["--explore-seeds"] == "3" and "--junit" not in test_options
            assert test_options["--json"] == str(leg.output_dir / "findings.json")
            continue
        assert leg.test.argv[:6] == ("accelkit", "test", "--device", "cpu", "--suite", "all")
        assert test_options["--json"] == str(leg.output_dir / "results.json")
        assert test_options["--junit"] == str(leg.output_dir / "junit.xml")
        # The shown argv is what `accelkit test` itself parses back into the leg's request.
        assert RunRequest.from_argv(leg.test.argv[2:]).json_path == leg.output_dir / "results.json"
        assert leg.output_dir == tmp_path / "out" / leg.leg.name
    for leg in plan.legs:
        if (
            leg.leg.backend in ("cuda", "rocm", "xpu")
            and not get_backend(leg.leg.backend).devices()
        ):
            assert not leg.runnable
            assert f"{leg.leg.backend}: no device on this host" in leg.reason
    rocm = [leg for leg in plan.legs if leg.leg.backend == "rocm"]
    assert rocm and all("build step" in leg.reason for leg in rocm)
    assert all(leg.build is not None and leg.build.skipped is None for leg in rocm)
    mps = by_name["mps-py3.12"]
    assert mps.setup is None and "--image" not in mps.test.argv
    if not get_backend("mps").availability().available:
        assert not mps.runnable and mps.reason.startswith("mps on this host: ")
    data = plan.to_dict()
    assert data["total"] == len(plan.legs)
    json.dumps(data)  # serialisable


def test_a_leg_can_take_the_torch_of_its_base_image(tmp_path: Path, wheel: Path) -> None:
    # No cp313 wheel: the 3.13 leg tests the torch its base image has (Debian trixie's).
    options = RehearsalOptions(
        output=tmp_path,
        torch_wheels=(wheel,),
        base_images=(("3.11", "bookworm:1"), ("3.13", "trixie-torch:1")),
        torch_from_base=("3.13",),
    )
    plan = plan_rehearsal(load_legs(NIGHTLY, ["name=cpu-py3.11,cpu-py3.13"]), options, FakeHost())
    by_name = {leg.leg.name: leg for leg in plan.legs}
    assert all(leg.runnable for leg in plan.legs), [leg.reason for leg in plan.legs]
    py313 = by_name["cpu-py3.13"].setup
    assert py313 is not None and py313.plan is not None
    assert "--torch-from-base" in py313.argv and "--torch-wheel" not in py313.argv
    assert _pairs(py313.argv)["--base-image"] == "trixie-torch:1"
    assert py313.plan.torch_source() == {"kind": "base", "base_image": "trixie-torch:1"}
    # The argv shown is the one `accelkit setup` parses back into the same request.
    assert SetupRequest.from_argv(py313.argv[2:-1]).torch_from_base
    assert _pairs(by_name["cpu-py3.11"].setup.argv)["--torch-wheel"] == str(wheel)  # type: ignore[union-attr]
    # Without a base image for that Python there is nothing to take torch from.
    bare = dataclasses.replace(options, base_images=(("3.11", "bookworm:1"),))
    with pytest.raises(BadInput, match=r"--torch-from-base 3\.13 needs --base-image 3\.13="):
        plan_rehearsal(load_legs(NIGHTLY, ["name=cpu-py3.13"]), bare, FakeHost())


def test_torch_from_base_takes_a_python(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["matrix", "run", NIGHTLY, "--torch-from-base", "py3.13", "--dry-run"]
    code, out, err = _run(args, capsys)
    assert code == 2 and "--torch-from-base: malformed value 'py3.13'" in err, (out, err)


def test_skip_build_keeps_the_build_step_listed(tmp_path: Path, wheel: Path) -> None:
    options = RehearsalOptions(output=tmp_path, torch_wheels=(wheel,), skip_build=True)
    plan = plan_rehearsal(load_legs(NIGHTLY, ["backend=rocm"]), options, FakeHost())
    for leg in plan.legs:
        assert leg.build is not None and leg.build.skipped
        assert "build step" not in leg.reason


def test_legs_need_docker_and_a_local_wheel(tmp_path: Path) -> None:
    options = RehearsalOptions(output=tmp_path)
    plan = plan_rehearsal(load_legs(NIGHTLY, ["backend=cpu"]), options, FakeHost(docker=False))
    assert plan.legs and not plan.runnable
    for leg in plan.legs:
        assert "no Docker engine: socket refused" in leg.reason
        # The leg's setup installs torch from an index a rehearsal does not reach.
        assert "which a rehearsal does not reach: pass --torch-wheel" in leg.reason


def test_unknown_test_arg_is_bad_input(tmp_path: Path, wheel: Path) -> None:
    options = RehearsalOptions(output=tmp_path, torch_wheels=(wheel,), test_args=("--no-such",))
    with pytest.raises(BadInput, match=r"test_args: accelkit test: No such option: --no-such"):
        plan_rehearsal(load_legs(NIGHTLY, ["name=cpu-py3.11"]), options, FakeHost())
    options = RehearsalOptions(output=tmp_path, torch_wheels=(wheel,), test_args=("--device", "x"))
    with pytest.raises(BadInput, match=r"--device is set from the leg"):
        plan_rehearsal(load_legs(NIGHTLY, ["name=cpu-py3.11"]), options, FakeHost())


def test_bad_filter_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["matrix", "run", NIGHTLY, "--filter", "bakend=cpu", "--dry-run"], capsys)
    assert code == 2, (out, err)
    assert "bakend" in err and "Traceback" not in err


def test_dry_run_json_of_pr_matrix(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # pr.yaml's leg runs without a container: it needs the host's torch, nothing else.
    args = ["matrix", "run", str(MATRICES / "pr.yaml"), "--dry-run", "--json", "-o", str(tmp_path)]
    code, out, _ = _run(args, capsys)
    plan = json.loads(out)["plan"]
    (leg,) = plan["legs"]
    assert leg["steps"]["setup"] is None
    argv = leg["steps"]["test"]["argv"]
    assert argv[:6] == ["accelkit", "test", "--device", "cpu", "--suite", "conformance"]
    assert code == (0 if leg["runnable"] else 3)
    assert not list(tmp_path.iterdir())  # a dry run writes nothing


def test_nothing_runnable_exits_3(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    if get_backend("cuda").devices():
        pytest.skip("this machine has a CUDA device")
    args = ["matrix", "run", NIGHTLY, "--filter", "backend=cuda", "-o", str(tmp_path)]
    code, out, _ = _run(args, capsys)
    assert code == 3, out
    assert "0 of 4 legs can run here" in out


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.timeout(IMAGE_TESTS_TIMEOUT_S)
def test_rehearse_one_cpu_leg_end_to_end(cpu_leg_rehearsal: LegRehearsal) -> None:
    """The nightly CPU leg cpu-py3.11, setup and test, in the session's CPU test image (its
    cold build and the in-image run are checked in tests/integration/test_setup.py)."""
    rehearsal = cpu_leg_rehearsal
    assert rehearsal.returncode == 0, (rehearsal.stdout[-3000:], rehearsal.stderr[-3000:])
    data = json.loads(rehearsal.stdout)
    legs = {leg["name"]: leg for leg in data["outcome"]["legs"]}
    leg = legs["cpu-py3.11"]
    assert leg["status"] == "passed" and leg["counts"]["passed"] >= 1
    leg_dir = rehearsal.output / "cpu-py3.11"
    assert {p.name for p in leg_dir.iterdir()} == {"results.json", "junit.xml", "setup.json"}
    results = load_results(leg_dir / "results.json")
    assert results.run.device == "cpu" and results.cases
    assert results.summary.passed == leg["counts"]["passed"]
    setup = json.loads((leg_dir / "setup.json").read_text())
    assert setup["image"] == rehearsal.image
    assert setup["cached"] is True  # the leg's setup found the shared image
    # `accelkit report DIR` reads the layout, as the nightly's report job does.
    report = run_cli("report", str(rehearsal.output), cwd=REPO)
    assert report.returncode == 0, report.stderr


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.timeout(IMAGE_TESTS_TIMEOUT_S)
def test_rehearse_two_cpu_legs_end_to_end(cpu_leg_rehearsal: LegRehearsal) -> None:
    """cpu-py3.11 and cpu-py3.13 as the nightly runs them: each leg's image on a base made
    for its Python (bookworm, trixie), with a torch for that Python (the cp311 wheel;
    Debian trixie's own python3-torch, or an index's), then compared with last night's
    results into the nightly's summary."""
    rehearsal = cpu_leg_rehearsal
    assert rehearsal.returncode == 0, (rehearsal.stdout[-3000:], rehearsal.stderr[-3000:])
    data = json.loads(rehearsal.stdout)
    legs = {leg["name"]: leg for leg in data["outcome"]["legs"]}
    pythons, sources = {}, {}
    for name in ("cpu-py3.11", "cpu-py3.13"):
        assert legs[name]["status"] == "passed" and legs[name]["counts"]["passed"], legs[name]
        leg_dir = rehearsal.output / name
        assert {p.name for p in leg_dir.iterdir()} == {"results.json", "junit.xml", "setup.json"}
        results = load_results(leg_dir / "results.json")
        assert results.run.device == "cpu" and results.cases
        env: dict[str, Any] = results.env
        pythons[name] = env["python"]["version"]
        # The channel or wheel the leg got, with the exact version pip installed.
        source = sources[name] = env["torch"]["source"]
        assert env["torch"]["version"].startswith(source["version"])  # + a local tag: +cu130
        setup = json.loads((leg_dir / "setup.json").read_text())
        assert setup["verified"]["python"]["version"] == pythons[name]
    assert pythons["cpu-py3.11"].startswith("3.11.")
    assert pythons["cpu-py3.13"].startswith("3.13.")
    assert sources["cpu-py3.11"] == {
        "kind": "wheel",
        "wheel": rehearsal.wheel.name,
        "version": sources["cpu-py3.11"]["version"],
    }
    assert sources["cpu-py3.13"]["kind"] == rehearsal.torch_313
    if rehearsal.torch_313 == "base":
        # Debian's build, seen through the venv's system site-packages: the base image's
        # own torch, named with the image it came from.
        assert sources["cpu-py3.13"]["base_image"].endswith("trixie-torch")
        assert "debian" in sources["cpu-py3.13"]["version"]
    # The nightly's compare step, rehearsed: the same summary, for the legs that ran.
    verdict = data["verdict"]
    assert [leg["name"] for leg in verdict["legs"]] == sorted(pythons)
    assert verdict["legs"][0]["state"] in ("green", "stale-baseline")
    summary = (rehearsal.output / "summary.md").read_text(encoding="utf-8")
    assert summary.startswith("## Nightly against the previous nightly")
