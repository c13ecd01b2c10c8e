"""The nightly workflow run for real under nektos/act, offline (issue #46).

One scheduled night of .github/workflows/nightly.yml, every job on this host with GitHub's own
actions at the pinned SHAs (tests/act_workflows.py says how and what stands in for what):
the matrix job, the leg job for the CPU leg this machine can run (in 2 shards, in the
session's CPU test image, a tiny case selection: the point is the workflow, not the suite),
the report job (merge, compare with last night served by a fake `gh`, the step summary) and
the history job (a commit to the `results` branch of a local bare repository).

What the night runs is a matrix written into the workspace as matrices/nightly.yaml: the
real one's CPU legs need PyTorch's nightly index and ubuntu:24.04, neither reachable here, so
the rehearsal's one leg names the session's test image (`image:`, which the workflow "pulls"
from a stand-in registry that holds only it) and `-k while_loop`.

Run it alone: `python -m pytest tests/integration/test_workflows_act.py`.
"""

from __future__ import annotations

import json
import subprocess
import zipfile
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from tests.act_workflows import (
    BUILD_LEG_STEPS,
    ActRun,
    bare_remote,
    fake_gh_state,
    leg_coverage,
    make_tool_cache,
    make_workspace,
    planted_nightly,
    print_coverage,
    print_jobs,
    pushes_to,
    rehearsal_matrix,
    require_act,
    run_act,
    standin_bin,
    workflow_jobs,
)
from tests.helpers import IMAGE_TESTS_TIMEOUT_S, REPO, CpuTestImage, LegRehearsal

pytestmark = [pytest.mark.slow, pytest.mark.docker]

LEG = "cpu-py3.11"
SHARDS = 2
SHARD_JOBS = [f"{LEG}-shard-{i}-of-{SHARDS}" for i in range(1, SHARDS + 1)]
#: The night's other Python: one job, in the session's cpu-py3.13 image (Debian trixie's
#: Python and python3-torch, as the session's rehearsal of the nightly's CPU legs set it up).
OTHER_LEG = "cpu-py3.13"
LEGS = [LEG, OTHER_LEG]
LEG_JOBS = [*SHARD_JOBS, OTHER_LEG]
NIGHTLY_JOBS = {
    "Compute the matrix": "matrix",
    **{job: "leg" for job in LEG_JOBS},
    "Report and compare": "report",
    "Keep the night in the results branch": "history",
}
ACT_TIMEOUT_S = 600
#: Every runner label the rehearsal's jobs name, each run on this host.
LABELS = ("ubuntu-latest", "self-hosted", "linux.4xlarge")


def _fresh_baseline(root: Path, other: Path) -> Path:
    """Last night's merged results, dated yesterday: the checked-in real CPU run for LEG,
    and `other` (the session's real run of OTHER_LEG) for OTHER_LEG."""
    yesterday = (datetime.now(timezone.utc) - timedelta(days=1)).isoformat(timespec="seconds")
    real = REPO / "tests" / "fixtures" / "results" / "cpu-real.json"
    for leg, source in ((LEG, real), (OTHER_LEG, other)):
        data = json.loads(source.read_text())
        data["run"]["started"] = data["run"]["finished"] = yesterday
        (root / leg).mkdir(parents=True)
        (root / leg / "results.json").write_text(json.dumps(data))
    return root


def _unzip(run: ActRun, name: str, dest: Path) -> Path:
    (archive,) = run.artifacts.glob(f"*/{name}/{name}.zip")
    with zipfile.ZipFile(archive) as opened:
        opened.extractall(dest)
    return dest


@pytest.fixture(scope="module")
def nightly(
    cpu_test_image: CpuTestImage,
    cpu_leg_rehearsal: LegRehearsal,
    tmp_path_factory: pytest.TempPathFactory,
) -> ActRun:
    act = require_act()
    work = tmp_path_factory.mktemp("act-nightly")
    image = cpu_test_image.image
    other = cpu_leg_rehearsal.output / OTHER_LEG
    if not (other / "setup.json").is_file() or not (other / "results.json").is_file():
        pytest.fail(f"the session's rehearsal made no {OTHER_LEG} image and results: {other}")
    other_image = json.loads((other / "setup.json").read_text())["image"]
    leg = {
        "backend": "cpu",
        "python": ["3.11"],
        "torch": {"channel": "nightly"},
        "suites": ["conformance", "perf"],
        "image": image,
        "shards": SHARDS,
        "runner": ["self-hosted", "linux.4xlarge"],
        "timeout_minutes": 30,
        "test_args": ["-k", "while_loop"],
    }
    other_leg = {**leg, "python": ["3.13"], "image": other_image, "shards": 1}
    matrix = rehearsal_matrix([leg, other_leg], name="nightly", description="the rehearsal's night")
    workspace = make_workspace(work / "workspace", {"matrices/nightly.yaml": matrix})
    remote = bare_remote(work / "remote.git")
    baseline = _fresh_baseline(work / "baseline", other / "results.json")
    state = fake_gh_state(work / "gh.json", baseline)
    env = {
        "FAKE_GH_STATE": str(state),
        "FAKE_GH_LOG": str(work / "gh.log"),
        **pushes_to(remote),
    }
    return run_act(
        act,
        workspace,
        "schedule",
        "nightly.yml",
        work=work,
        labels=LABELS,
        tool_cache=make_tool_cache(work / "tool-cache", ["3.11", "3.12", "3.13"]),
        bin_dir=standin_bin(work / "bin", [image, other_image]),
        env=env,
        timeout=ACT_TIMEOUT_S,
    )


ACT_TEST_TIMEOUT_S = IMAGE_TESTS_TIMEOUT_S + ACT_TIMEOUT_S


def _explain(run: ActRun) -> str:
    return f"act exited {run.returncode}; log: {run.workdir / 'act.log'}\n" + run.text[-6000:]


@pytest.mark.timeout(ACT_TEST_TIMEOUT_S)
def test_every_job_of_the_night_ran_and_succeeded(nightly: ActRun) -> None:
    print_jobs("nightly.yml under act, the CPU night: jobs", nightly)
    assert nightly.returncode == 0, _explain(nightly)
    assert nightly.jobs() == dict.fromkeys(NIGHTLY_JOBS, "success"), _explain(nightly)
    assert nightly.job_ids() == NIGHTLY_JOBS
    for job, job_id in NIGHTLY_JOBS.items():
        ran = nightly.steps(job)
        named = [
            s.get("name") or s["uses"]
            for s in workflow_jobs("nightly.yml", nightly.workspace)[job_id]["steps"]
        ]
        # Every step ran, in the workflow's order, but those whose `if:` was false (act
        # reports no result for them).
        steps = workflow_jobs("nightly.yml", nightly.workspace)[job_id]["steps"]
        unreported = [s for s in steps if (s.get("name") or s["uses"]) not in ran]
        assert [n for n in named if n in ran] == list(ran), job
        assert all("if" in s for s in unreported), (job, unreported)


@pytest.mark.timeout(ACT_TEST_TIMEOUT_S)
def test_the_job_logs_are_plain_lines(nightly: ActRun) -> None:
    """act's host runner gives each step a pseudo-terminal; accelkit still writes a log there
    (issue 46, item 4): no spinner frames, no cursor movement, no colour codes."""
    legs = [job for job in NIGHTLY_JOBS if job.startswith("cpu-")]
    for job in legs:
        log = nightly.lines(job, "Test")
        assert "PASSED" in log, (job, log[-2000:])
        assert not any("\u2800" <= ch <= "\u28ff" for ch in log), (job, log[-2000:])
        assert "\x1b[" not in log, (job, log[-2000:])


@pytest.mark.timeout(ACT_TEST_TIMEOUT_S)
def test_the_outputs_each_next_job_reads_were_set(nightly: ActRun) -> None:
    outputs = nightly.outputs("Compute the matrix")
    assert json.loads(outputs["legs"]) == LEGS
    items = json.loads(outputs["matrix"])["include"]
    assert [item["job"] for item in items] == LEG_JOBS
    assert [item["python"] for item in items] == ["3.11", "3.11", "3.13"]
    for job in LEG_JOBS:
        assert nightly.outputs(job)["image"].startswith("accelkit-test-cpu:")
    assert nightly.outputs("Report and compare")["red"] == "false"


@pytest.mark.timeout(ACT_TEST_TIMEOUT_S)
def test_each_artifact_was_uploaded_once_and_downloaded(nightly: ActRun, tmp_path: Path) -> None:
    shard_artifacts = [f"results-{job}" for job in LEG_JOBS]
    assert not nightly.duplicate_uploads()
    uploaded = {name: job for name, job, _ in nightly.artifact_uploads()}
    for job in LEG_JOBS:
        assert uploaded.pop(f"results-{job}") == job
    assert uploaded.pop("nightly-results") == uploaded.pop("nightly-report") == "Report and compare"
    # Any other artifact is one the workflow names (a matrix job's, for the legs).
    assert set(uploaded.values()) <= {"Compute the matrix"}, uploaded
    assert set(nightly.uploads()) >= {*shard_artifacts, "nightly-results", "nightly-report"}
    download = nightly.lines("Report and compare", "Download every leg's results")
    for name in shard_artifacts:
        assert "Artifact download completed successfully" in download
        assert name in download, download
    merged = _unzip(nightly, "nightly-results", tmp_path / "merged")
    assert (merged / LEG / "results.json").is_file()
    shards = json.loads((merged / LEG / "results.json").read_text())
    assert shards["run"].get("shard") is None  # the merged leg, not a shard
    # Each leg ran on its own Python, in its image (setup-python's is the runner's only).
    other = json.loads((merged / OTHER_LEG / "results.json").read_text())
    assert shards["env"]["python"]["version"].startswith("3.11.")
    assert other["env"]["python"]["version"].startswith("3.13.")
    history = nightly.lines("Keep the night in the results branch")
    assert "nightly-report" in history and "nightly-results" in history


@pytest.mark.timeout(ACT_TEST_TIMEOUT_S)
def test_the_summary_has_the_legs_the_comparison_and_links(nightly: ActRun, tmp_path: Path) -> None:
    report = _unzip(nightly, "nightly-report", tmp_path / "report")
    compare = (report / "compare" / "summary.md").read_text()
    assert "Nightly against the previous nightly" in compare
    assert "[run #41](https://github.com/octo/accelkit/actions/runs/901)" in compare
    assert f"| {LEG} |" in compare
    verdict = json.loads((report / "compare" / "verdict.json").read_text())
    assert [leg["name"] for leg in verdict["legs"]] == LEGS
    report_md = (report / "summary.md").read_text()
    # The step summary: the comparison, then the report, as the artifact has them.
    summary = nightly.summary("Report and compare")
    assert summary.startswith("## Nightly against the previous nightly: ✅ every leg green")
    assert compare.strip() in summary and report_md.strip() in summary
    assert "| leg | verdict |" in summary
    assert all(f"| {leg} | " in summary for leg in LEGS), summary


@pytest.mark.timeout(ACT_TEST_TIMEOUT_S)
def test_the_results_branch_gained_one_commit_with_the_night(nightly: ActRun) -> None:
    remote = nightly.workdir / "remote.git"
    log = subprocess.run(
        ["git", "-C", str(remote), "log", "--format=%s", "results"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert len(log) == 1 and log[0].startswith("nightly run "), log
    files = subprocess.run(
        ["git", "-C", str(remote), "ls-tree", "-r", "--name-only", "results"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert "index.json" in files
    for leg in LEGS:
        assert any(f.startswith("nights/") and f.endswith(f"/{leg}/results.json") for f in files)
    gh = [json.loads(line) for line in (nightly.workdir / "gh.log").read_text().splitlines()]
    assert ["auth", "setup-git"] in gh
    assert any(argv[:2] == ["run", "download"] and "901" in argv for argv in gh)


@pytest.mark.timeout(ACT_TEST_TIMEOUT_S)
def test_leg_job_step_coverage(nightly: ActRun) -> None:
    """The leg job's steps, each executed on some job of the night, or (a build leg's steps)
    executed by the ROCm build leg's rehearsal; the table is printed (pytest -s, or the
    captured output of a failure). Its other half, the ROCm leg's: test_workflows_act_rocm.py."""
    where = "executed on the ROCm build leg (test_workflows_act_rocm.py)"
    rows = leg_coverage(nightly, LEG_JOBS, elsewhere=dict.fromkeys(BUILD_LEG_STEPS, where))
    print_coverage("leg job step coverage (nightly.yml under act, the CPU night):", rows)
    unexplained = [row for row in rows if row[1] not in ("executed", "skipped by if:")]
    assert not unexplained, unexplained


# ---- planted faults -------------------------------------------------------------------------
# One night of nightly.yml whose leg jobs are stand-ins that upload prepared results with the
# real upload step (nothing else of a leg differs between these faults), and whose sharded
# leg's two jobs upload under one artifact name. Everything after the legs is the real thing.
#   cpu-py3.10: its results are missing (the job wrote nothing);
#   cpu-py3.11: last night has no results of it (no baseline);
#   cpu-py3.12: 2 shards uploading the same artifact name;
#   cpu-py3.13: its GEMM regressed (2 ms, last night 1 ms).
FAULT_LEGS = {"3.10": {}, "3.11": {}, "3.12": {"shards": 2}, "3.13": {}}


def _fault_matrix() -> str:
    legs = [
        {
            "backend": "cpu",
            "python": [python],
            "torch": {"channel": "nightly"},
            "suites": ["conformance", "perf"],
            "runner": ["self-hosted", "linux.4xlarge"],
            "timeout_minutes": 30,
            **extra,
        }
        for python, extra in FAULT_LEGS.items()
    ]
    return rehearsal_matrix(legs, name="nightly", description="planted faults")


@pytest.fixture(scope="module")
def faulty_night(tmp_path_factory: pytest.TempPathFactory) -> ActRun:
    from tests.factories import night_run, shard_results, write_leg, write_results

    act = require_act()
    work = tmp_path_factory.mktemp("act-faults")
    now = datetime.now(timezone.utc)
    tonight = now.isoformat(timespec="seconds")
    yesterday = (now - timedelta(days=1)).isoformat(timespec="seconds")
    prepared, baseline = work / "prepared", work / "baseline"
    (prepared / "cpu-py3.10").mkdir(parents=True)  # nothing in it
    write_leg(prepared, "cpu-py3.11", night_run(tonight))
    for index in (1, 2):
        ids = [f"conformance/ops/{name}/float32" for name in ("add", "mul")[index - 1 : index]]
        _, shard = shard_results(index, ids, count=2, started=tonight)
        write_results(prepared / "cpu-py3.12" / f"shard-{index}-of-2" / "results.json", shard)
    write_leg(prepared, "cpu-py3.13", night_run(tonight, gemm=2e-3))
    for leg in ("cpu-py3.10", "cpu-py3.12", "cpu-py3.13"):
        write_leg(baseline, leg, night_run(yesterday))
    overlays = {
        "matrices/nightly.yaml": _fault_matrix(),
        ".github/workflows/nightly.yml": planted_nightly(
            stand_in_legs=True, upload_name="results-${{ matrix.name }}"
        ),
    }
    workspace = make_workspace(work / "workspace", overlays)
    remote = bare_remote(work / "remote.git")
    env = {
        "PREPARED": str(prepared),
        "FAKE_GH_STATE": str(fake_gh_state(work / "gh.json", baseline)),
        **pushes_to(remote),
    }
    return run_act(
        act,
        workspace,
        "schedule",
        "nightly.yml",
        work=work,
        labels=LABELS,
        tool_cache=make_tool_cache(work / "tool-cache", ["3.12"]),
        bin_dir=standin_bin(work / "bin", []),
        env=env,
        timeout=ACT_TIMEOUT_S,
    )


def _verdicts(run: ActRun, tmp_path: Path) -> dict[str, Any]:
    report = _unzip(run, "nightly-report", tmp_path / "report")
    verdict = json.loads((report / "compare" / "verdict.json").read_text())
    return {leg["name"]: leg for leg in verdict["legs"]}


@pytest.mark.timeout(ACT_TIMEOUT_S + 60)
def test_planted_faults_turn_the_night_red_at_the_right_steps(faulty_night: ActRun) -> None:
    run = faulty_night
    print_jobs("nightly.yml under act, the night with the planted faults: jobs", run)
    assert run.returncode != 0, _explain(run)
    jobs = run.jobs()
    assert jobs["Compute the matrix"] == "success"
    # The report job ran every step, and failed at the one that says the night is red.
    report = run.steps("Report and compare")
    assert report.pop("Fail on red legs") == "failure", _explain(run)
    assert set(report.values()) == {"success"}, report
    assert run.outputs("Report and compare")["red"] == "true"
    assert jobs["Report and compare"] == "failure"
    # A red night is still kept.
    assert jobs["Keep the night in the results branch"] == "success"


@pytest.mark.timeout(ACT_TIMEOUT_S + 60)
def test_two_shards_uploading_one_artifact_name_are_refused(faulty_night: ActRun) -> None:
    shards = [f"cpu-py3.12-shard-{i}-of-2" for i in (1, 2)]
    step = "Upload the leg's results"
    # Both jobs uploaded; the rehearsal refuses the second as GitHub's service does.
    assert faulty_night.duplicate_uploads() == {
        "results-cpu-py3.12": [(job, step) for job in sorted(shards)]
    } or faulty_night.duplicate_uploads() == {
        "results-cpu-py3.12": [(job, step) for job in sorted(shards, reverse=True)]
    }, faulty_night.artifact_uploads()


@pytest.mark.timeout(ACT_TIMEOUT_S + 60)
def test_a_leg_without_results_is_red(faulty_night: ActRun, tmp_path: Path) -> None:
    assert faulty_night.jobs()["cpu-py3.10"] == "success"  # the job itself wrote nothing
    upload = faulty_night.lines("cpu-py3.10", "Upload the leg's results")
    assert "No files were found" in upload, upload
    legs = _verdicts(faulty_night, tmp_path)
    assert legs["cpu-py3.10"]["reasons"] == ["produced no results"]
    # The shards that cannot merge leave their leg without results too.
    assert legs["cpu-py3.12"]["reasons"] == ["produced no results"]
    merge = faulty_night.lines("Report and compare", "Merge each leg's shards")
    assert "leg cpu-py3.12: its shards do not merge" in merge, merge
    assert "cpu-py3.10" in faulty_night.summary("Report and compare")


@pytest.mark.timeout(ACT_TIMEOUT_S + 60)
def test_a_leg_without_a_baseline_is_named(faulty_night: ActRun, tmp_path: Path) -> None:
    legs = _verdicts(faulty_night, tmp_path)
    assert not legs["cpu-py3.11"]["red"]
    assert legs["cpu-py3.11"]["state"] == "no-baseline", legs["cpu-py3.11"]
    summary = faulty_night.summary("Report and compare")
    assert "without a usable baseline" in summary and "`cpu-py3.11`" in summary, summary


@pytest.mark.timeout(ACT_TIMEOUT_S + 60)
def test_a_regressed_leg_is_red_with_its_metric(faulty_night: ActRun, tmp_path: Path) -> None:
    legs = _verdicts(faulty_night, tmp_path)
    assert legs["cpu-py3.13"]["regressed"] == ["perf/gemm · latency"], legs["cpu-py3.13"]
    assert legs["cpu-py3.13"]["red"]
    summary = faulty_night.summary("Report and compare")
    assert "perf/gemm · latency" in summary, summary
