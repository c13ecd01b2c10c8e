"""The nightly's ROCm build leg under nektos/act, offline (issue #46): its build step for real.

`act schedule -j leg` on nightly.yml (the matrix job, then the leg job on this host; see
tests/act_workflows.py for how) with one leg: the real matrix's ROCm entry on gfx942, with
what stands in for what cannot be reached here, each as strict as the real thing:

- github.com/pytorch/pytorch: a bare repository holding the stand-in PyTorch tree
  (tests/fixtures/rocm/torch-src) on the leg's ref, `release/2.14`, and no other ref
  (rocm_standin.pytorch_remote); the job's own `git clone` reaches it through git's
  `url.<stand-in>.insteadOf` (git itself is real);
- TheRock's multi-arch index: the stand-in index the build tests use (rocm_standin: the
  same package names, versions and pre-releases, a rocm_sdk with TheRock's refusals), given
  to the build as `--index-url` in the leg's build_args;
- the builder's and the test image's base (manylinux, ubuntu:24.04): the session's local
  base image (`--builder-base-image`, `base_image:`), which the stand-in registry serves to
  `docker pull`; `--no-triton` (the stand-in tree has no triton to build).

The leg's other changes, for cost: Python 3.11 (the builder image the build tests make: one
image, not two), one shard (each shard job builds its own wheel; the nightly's 2 differ only
in `--shard`), and a tiny `-k`; and its setup without `--arch` (SETUP_WITHOUT_ARCH). The job
clones the stand-in PyTorch at the leg's ref, builds and smoke-tests the wheel with the real
`accelkit build rocm`, pulls its base image and sets up the leg's test image with the real
`accelkit setup rocm --torch-wheel wheelhouse`: the wheel requires `rocm[libraries]==<its
SDK>`, which setup installs from the index the build's manifest names (the stand-in, as
strict as TheRock's: nothing else serves it), then verifies the image (doctor, the preloads
through rocm_sdk with its warnings as errors). The one step left is the one that needs the
GPU (`accelkit test --device rocm`). This module prints the ROCm leg's step coverage,
tests/integration/test_workflows_act.py the CPU night's.

Run it alone: `python -m pytest tests/integration/test_workflows_act_rocm.py`.
"""

from __future__ import annotations

import json
import subprocess
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import rocm_standin
from tests.act_workflows import (
    BUILD_LEG_STEPS,
    ActRun,
    fake_gh_state,
    git_url_rewrites,
    leg_coverage,
    make_tool_cache,
    make_workspace,
    print_coverage,
    rehearsal_matrix,
    require_act,
    run_act,
    standin_bin,
)
from tests.helpers import REPO

# The ROCm builds of tests/integration/test_build.py count the engine's builder containers
# before and after: one worker runs every ROCm build, one after the other.
pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.xdist_group("rocm-build")]

TARGET = "gfx942"
PYTHON = "3.11"
LEG = f"rocm7.14-{TARGET}-py{PYTHON}"
ACT_TIMEOUT_S = 540


def rocm_leg(index: str, base_image: str) -> dict[str, Any]:
    """matrices/nightly.yaml's ROCm entry on gfx942, with the stand-ins (see the module doc)."""
    real = yaml.safe_load((REPO / "matrices" / "nightly.yaml").read_text(encoding="utf-8"))
    (entry,) = [e for e in real["entries"] if e["backend"] == "rocm"]
    assert entry["torch"] == {"ref": "release/2.14"} and entry["build"] is True, entry
    # The matrix's defaults, then the entry's own keys (its `include` is another Python).
    leg = {**real["defaults"], **{k: v for k, v in entry.items() if k != "include"}}
    standins = [f"--index-url={index}", f"--builder-base-image={base_image}", "--no-triton"]
    leg.update(
        targets=[TARGET],
        python=[PYTHON],
        shards=1,
        base_image=base_image,
        runner={TARGET: entry["runner"][TARGET]},
        build_args=[*entry["build_args"], *standins],
        setup_args=[a for a in entry["setup_args"] if not a.startswith("--arch")],
        test_args=["-k", "while_loop"],
    )
    return leg


@pytest.fixture(scope="module")
def rocm_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("rocm-index")
    libraries = rocm_standin.build_libraries(root / "libs")
    rocm_standin.write_index(root, libraries, layout="multi-arch")
    with rocm_standin.serve(root) as url:
        yield url


@pytest.fixture(scope="module")
def rocm_night(
    rocm_index: str, base_image: str, tmp_path_factory: pytest.TempPathFactory
) -> ActRun:
    act = require_act()
    work = tmp_path_factory.mktemp("act-rocm")
    leg = rocm_leg(rocm_index, base_image)
    matrix = rehearsal_matrix([leg], name="nightly", description="the rehearsal's ROCm leg")
    workspace = make_workspace(work / "workspace", {"matrices/nightly.yaml": matrix})
    pytorch = rocm_standin.pytorch_remote(work / "pytorch.git", leg["torch"]["ref"])
    env = {
        "FAKE_GH_STATE": str(fake_gh_state(work / "gh.json", None)),
        **git_url_rewrites({rocm_standin.PYTORCH_REMOTE: f"file://{pytorch}"}),
    }
    return run_act(
        act,
        workspace,
        "schedule",
        "nightly.yml",
        work=work,
        labels=("ubuntu-latest", *leg["runner"][TARGET]),
        tool_cache=make_tool_cache(work / "tool-cache", ["3.12", PYTHON]),
        bin_dir=standin_bin(work / "bin", [base_image]),
        env=env,
        extra=["-j", "leg"],
        timeout=ACT_TIMEOUT_S,
    )


def _explain(run: ActRun) -> str:
    return f"act exited {run.returncode}; log: {run.workdir / 'act.log'}\n" + run.text[-6000:]


#: Why the rehearsal's setup has no `--arch gfx942`: proving a target runs its compile-only
#: cases with the image's Inductor and triton, which the stand-in PyTorch does not have
#: (tests/unit/setup/test_image_targets.py::test_a_rocm_image_proves_its_gfx_target covers
#: the proof).
SETUP_WITHOUT_ARCH = "the stand-in PyTorch has no Inductor or triton to compile for gfx942"
NEEDS_GPU = "needs a ROCm GPU: accelkit test --device rocm (this host has no /dev/kfd)"


@pytest.mark.timeout(ACT_TIMEOUT_S + 120)
def test_the_rocm_leg_builds_its_wheel_from_the_clone_at_its_ref(rocm_night: ActRun) -> None:
    run = rocm_night
    assert run.jobs()["Compute the matrix"] == "success", _explain(run)
    steps = run.steps(LEG)
    for step in (*BUILD_LEG_STEPS, "Install accelkit", "Bring the leg's image onto the runner"):
        assert steps[step] == "success", (step, _explain(run))
    # The build step's own record (its --json, uploaded with the leg's results).
    build = json.loads(_artifact_file(run, "build.json").read_text())
    (wheel,) = [Path(w) for w in build["wheels"]]
    # `--rocm-version 7.14 --pre` against the stand-in index: its newest 7.14.*, a release
    # candidate; the wheel is the leg's Python's, smoke-tested in a clean container.
    assert wheel.name == "torch-2.14.1+rocm7.14.1rc1-cp311-cp311-linux_x86_64.whl"
    assert build["resolved"]["rocm_version"] == "7.14.1rc1"
    assert build["smoke"]["ok"] is True
    # Built from the job's clone of the stand-in PyTorch at the leg's ref, and recorded so.
    ref = subprocess.run(
        ["git", "-C", str(run.workdir / "pytorch.git"), "rev-parse", "release/2.14"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    manifest = json.loads((wheel.parent / "manifest.json").read_text())
    assert manifest["inputs"]["torch_ref"] == "release/2.14", manifest["inputs"]
    assert f"a checkout of release/2.14 at {ref}" in json.dumps(manifest["plan"])


@pytest.mark.timeout(ACT_TIMEOUT_S + 120)
def test_the_rocm_leg_sets_up_its_image_from_the_builds_sdk_index(rocm_night: ActRun) -> None:
    """The job sets up the test image of the wheel it built, its SDK from the index of its
    build (the manifest beside the wheel), and stops at the one step that needs the GPU; the
    leg's files are still uploaded. Its step coverage is printed."""
    run = rocm_night
    steps = run.steps(LEG)
    assert steps["Set up the backend"] == "success", _explain(run)
    # The SDK from the build's index alone (the stand-in's, from the manifest beside the
    # wheel), pinned as the wheel pins it, then verified.
    setup_log = run.lines(LEG, "Set up the backend")
    sdk_install = [line for line in setup_log.splitlines() if "rocm[libraries]==7.14.1rc1" in line]
    assert any("--index-url http://127.0.0.1:" in line for line in sdk_install), sdk_install
    setup = json.loads(_artifact_file(run, "setup.json").read_text())
    verified = setup["verified"]
    assert verified["torch"]["version"] == "2.14.1+rocm7.14.1rc1", verified
    assert verified["torch"]["source"]["kind"] == "wheel", verified
    assert verified["checks"]["preload"] == "without device", verified
    assert verified["device"] is False
    # Then the GPU step, the only one this host cannot run.
    assert run.jobs()[LEG] == "failure", _explain(run)
    assert steps["Test"] == "failure", steps
    assert "rocm: not available" in run.lines(LEG, "Test"), run.lines(LEG, "Test")[-3000:]
    assert steps["Upload the leg's results"] == "success"
    rows = leg_coverage(
        run,
        [LEG],
        elsewhere={"Last night's case durations": "executed on the sharded CPU leg"},
        needs_device={"Test": NEEDS_GPU},
    )
    print_coverage(f"leg job step coverage (nightly.yml under act, the ROCm leg {LEG}):", rows)
    states = {name: state for name, state, _ in rows}
    assert all(states[step] == "executed" for step in BUILD_LEG_STEPS), rows
    assert states["Set up the backend"] == "executed", rows
    assert states["Test"] == "not runnable", rows
    assert "unexplained" not in states.values(), rows


def _artifact_file(run: ActRun, name: str) -> Path:
    artifact = f"results-{LEG}"
    (archive,) = run.artifacts.glob(f"*/{artifact}/{artifact}.zip")
    with zipfile.ZipFile(archive) as opened:
        opened.extractall(run.workdir / "artifact")
    return run.workdir / "artifact" / LEG / name
