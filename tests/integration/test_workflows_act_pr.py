"""The pull-request workflow run for real under nektos/act, offline, and ci.yml expanded
(issue #46).

pr.yml on a `pull_request` event, every job on this host with GitHub's own actions at the
pinned SHAs (tests/act_workflows.py says how): the matrix job (`accelkit matrix github
matrices/pr.yaml` on Python 3.12, as the workflow has it) and the leg job, without a
container, as on GitHub's hosted runner: setup-python, the install of torch from the index
the matrix resolved, `pip install .`, `accelkit test` and the upload of the leg's results.

What stands in for what, and why:
- matrices/pr.yaml is written into the workspace with one change, the leg's Python: 3.11
  instead of 3.12, and `-k while_loop` (the point is the workflow, not the suite). PyTorch
  publishes no CPU torch for CPython 3.12 that this machine (or CI's) can reach; its CPU
  wheel for 3.11 is what the session's other CPU tests use (tests/helpers.cpu_torch_wheel).
- PyTorch's nightly CPU index is unreachable: the step's `pip install --pre --index-url
  https://download.pytorch.org/whl/nightly/cpu torch` runs as written, pip gives it up, and
  the CPU wheel is found beside it and pinned (act_workflows.torch_index_standin). The
  results file records the index the job named, with the version that was installed.
- The `project-tests` job is ci.yml called as a reusable workflow: `.ci/run` itself (what
  CI is running while this test runs) is not run again; the run is `act -j leg` (the leg and
  the job it needs), and ci.yml's job is expanded by act's dry run below instead.

pr.yml has no job after the leg: its artifact is checked from act's artifact server, and its
step summary (the leg's report under links to the pull request and the run) from act's log.

Run it alone: `python -m pytest tests/integration/test_workflows_act_pr.py`.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from tests.act_workflows import (
    ActRun,
    dry_run,
    list_jobs,
    make_tool_cache,
    make_workspace,
    print_jobs,
    rehearsal_matrix,
    require_act,
    run_act,
    standin_bin,
    torch_index_standin,
    workflow_jobs,
)
from tests.helpers import REPO, cpu_torch_wheel

pytestmark = [pytest.mark.slow]

LEG = "cpu-py3.11"
PR_JOBS = {"Compute the matrix": "matrix", LEG: "leg"}
ACT_TIMEOUT_S = 480
#: The runner labels pr.yml's jobs name, each run on this host.
LABELS = ("ubuntu-latest", "ubuntu-24.04")
PULL_REQUEST = {
    "number": 7,
    "pull_request": {
        "number": 7,
        "head": {"ref": "feature", "sha": "7" * 40},
        "base": {"ref": "main", "sha": "6" * 40},
    },
    "repository": {"full_name": "octo/accelkit"},
}


def _pr_matrix() -> str:
    """matrices/pr.yaml with its leg on Python 3.11 (see the module doc) and a tiny -k."""
    import yaml

    real = yaml.safe_load((REPO / "matrices" / "pr.yaml").read_text(encoding="utf-8"))
    (entry,) = real["entries"]
    assert entry["python"] == ["3.12"] and entry["container"] is False, entry
    leg = {**entry, "python": ["3.11"], "test_args": ["-k", "while_loop"]}
    return rehearsal_matrix([leg], name=real["name"], description="the rehearsal's PR leg")


@pytest.fixture(scope="module")
def pull_request(tmp_path_factory: pytest.TempPathFactory) -> ActRun:
    act = require_act()
    wheel = cpu_torch_wheel()
    if wheel is None:
        pytest.fail("no CPU torch wheel on this machine (ACCELKIT_TEST_TORCH_WHEEL)")
    work = tmp_path_factory.mktemp("act-pr")
    workspace = make_workspace(work / "workspace", {"matrices/pr.yaml": _pr_matrix()})
    return run_act(
        act,
        workspace,
        "pull_request",
        "pr.yml",
        work=work,
        labels=LABELS,
        tool_cache=make_tool_cache(work / "tool-cache", ["3.11", "3.12"]),
        bin_dir=standin_bin(work / "bin", []),
        env=torch_index_standin(work / "torch-constraint.txt", wheel),
        event_payload=PULL_REQUEST,
        extra=["-j", "leg"],
        timeout=ACT_TIMEOUT_S,
    )


def _installed() -> str:
    """The version of the CPU wheel that stands in for the index's torch (2.13.0+cpu)."""
    wheel = cpu_torch_wheel()
    assert wheel is not None
    return wheel.name.split("-")[1]


def _explain(run: ActRun) -> str:
    return f"act exited {run.returncode}; log: {run.workdir / 'act.log'}\n" + run.text[-6000:]


@pytest.mark.timeout(ACT_TIMEOUT_S + 120)
def test_every_job_of_the_pull_request_ran_and_succeeded(pull_request: ActRun) -> None:
    run = pull_request
    print_jobs("pr.yml under act, a pull request: jobs", run)
    assert run.returncode == 0, _explain(run)
    assert run.jobs() == dict.fromkeys(PR_JOBS, "success"), _explain(run)
    assert run.job_ids() == PR_JOBS
    for job, job_id in PR_JOBS.items():
        steps = workflow_jobs("pr.yml", run.workspace)[job_id]["steps"]
        named = [s.get("name") or s["uses"] for s in steps]
        # Every step ran and succeeded, in the workflow's order (pr.yml's only `if:` is
        # !cancelled(), true here).
        assert run.steps(job) == dict.fromkeys(named, "success"), (job, run.steps(job))


@pytest.mark.timeout(ACT_TIMEOUT_S + 120)
def test_the_matrix_output_the_leg_reads_was_set(pull_request: ActRun) -> None:
    matrix = json.loads(pull_request.outputs("Compute the matrix")["matrix"])
    (item,) = matrix["include"]
    assert item["job"] == LEG and item["python"] == "3.11" and item["container"] is False
    assert item["torch_index"] == "https://download.pytorch.org/whl/nightly/cpu"
    assert item["runner"] == ["ubuntu-24.04"] and item["suite"] == "conformance"
    # The leg job read it: its environment and its Python are the matrix item's.
    install = pull_request.lines(LEG, "Install accelkit and CPU torch")
    assert "download.pytorch.org/whl/nightly/cpu" in install, install
    assert "Successfully installed" in install and f"torch-{_installed()}" in install, install


@pytest.mark.timeout(ACT_TIMEOUT_S + 120)
def test_the_leg_artifact_was_uploaded_once_with_its_results(
    pull_request: ActRun, tmp_path: Path
) -> None:
    run = pull_request
    assert not run.duplicate_uploads()
    name = f"results-{LEG}"
    assert run.artifact_uploads() == [(name, LEG, "Upload the leg's results")]
    (archive,) = run.artifacts.glob(f"*/{name}/{name}.zip")
    with zipfile.ZipFile(archive) as opened:
        opened.extractall(tmp_path)
    results = json.loads((tmp_path / LEG / "results.json").read_text())
    assert (tmp_path / LEG / "junit.xml").is_file()
    # Run by the leg's Python (setup-python's 3.11), with the torch the step installed.
    python = results["env"]["python"]
    assert python["version"].startswith("3.11.") and "tool-cache" in python["executable"]
    assert results["env"]["torch"]["version"] == _installed()
    source = results["env"]["torch"]["source"]
    assert source["kind"] == "index" and source["channel"] == "nightly", source
    assert source["index"] == "https://download.pytorch.org/whl/nightly/cpu", source
    cases = results["cases"]
    assert cases and all("while_loop" in case["id"] for case in cases), [c["id"] for c in cases]
    assert {case["status"] for case in cases} == {"passed", "skipped"}, cases


@pytest.mark.timeout(ACT_TIMEOUT_S + 120)
def test_the_leg_writes_its_step_summary(pull_request: ActRun, tmp_path: Path) -> None:
    """The leg's summary: a line linking the pull request and the run (whose artifact holds
    the files), then the leg's report: its run table (a row for the leg) and its cases."""
    run = pull_request
    assert run.summary("Compute the matrix") == ""
    summary = run.summary(LEG)
    repo = "https://github.com/octo/accelkit"
    assert summary.startswith(f"## {LEG} on [pull request #7]({repo}/pull/7)\n"), summary
    links = [line for line in summary.splitlines() if "actions/runs/" in line]
    assert len(links) == 1 and f"`results-{LEG}` artifact of [run " in links[0], links
    assert f"]({repo}/actions/runs/" in links[0], links
    assert "## accelkit report" in summary and "| run | device | torch |" in summary, summary
    # The run table's row of the leg: its torch, and its cases passed.
    (row,) = [line for line in summary.splitlines() if line.startswith("| cpu · torch")]
    assert f"{_installed()} · {LEG} |" in row and "passed" in row, row


# ---- listing and dry runs: ci.yml and pr.yml's call of it --------------------------------


@pytest.fixture(scope="module")
def plain_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("act-list") / "workspace")


@pytest.mark.timeout(120)
def test_act_lists_every_job_of_the_three_workflows(plain_workspace: Path) -> None:
    act = require_act()
    listed = {
        w: {
            # act lists a job's events in no fixed order.
            r["Job ID"]: (r["Stage"], r["Job name"], ",".join(sorted(r["Events"].split(","))))
            for r in list_jobs(act, plain_workspace, w)
        }
        for w in ("ci.yml", "pr.yml", "nightly.yml")
    }
    for workflow, jobs in listed.items():
        print(f"\nact --list, {workflow}: job id, stage, job name, events")
        for job_id, (stage, name, on) in jobs.items():
            print(f"  {job_id:<14}  {stage}  {name:<28}  {on}")
    events = "push,workflow_call,workflow_dispatch"
    assert listed["ci.yml"] == {"ci-run": ("0", ".ci/run (Debian bookworm)", events)}
    assert listed["pr.yml"] == {
        "matrix": ("0", "Compute the matrix", "pull_request"),
        "project-tests": ("0", "accelkit's own tests", "pull_request"),
        "leg": ("1", "${{ matrix.job }}", "pull_request"),
    }
    for workflow, jobs in listed.items():
        assert set(jobs) == set(workflow_jobs(workflow, plain_workspace)), workflow


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("event", "workflow", "job", "shown"),
    [
        ("push", "ci.yml", None, "ci/.ci/run (Debian bookworm)"),
        ("workflow_dispatch", "ci.yml", None, "ci/.ci/run (Debian bookworm)"),
        # pr.yml's call of ci.yml: the called workflow's job, under the caller's job.
        (
            "pull_request",
            "pr.yml",
            "project-tests",
            "accelkit's own tests/ci/.ci/run (Debian bookworm)",
        ),
    ],
)
def test_the_job_that_calls_ci_run_is_expanded(
    plain_workspace: Path, tmp_path: Path, event: str, workflow: str, job: str | None, shown: str
) -> None:
    """act's dry run of the job that runs `.ci/run`: its container (python:3.11-bookworm,
    privileged, with /var/lib/docker a volume) and its two steps, planned in order."""
    run = dry_run(require_act(), plain_workspace, event, workflow, work=tmp_path, job=job)
    assert run.returncode == 0, run.text[-4000:]
    assert {e["job"] for e in run.events if e.get("jobID")} == {shown}, run.text[-4000:]
    assert run.jobs() == {shown.split("/", 1)[1]: "success"}
    steps = [e["step"] for e in run.events if e.get("stage") == "Main" and "stepResult" in e]
    checkout = "actions/checkout@fbc6f3992d24b796d5a048ff273f7fcc4a7b6c09"
    assert steps == [checkout, "bash .ci/run"], steps
    assert all(e.get("dryrun") for e in run.events if e.get("jobID")), run.text[-2000:]
    assert "Start image=python:3.11-bookworm" in run.text, run.text[-2000:]
