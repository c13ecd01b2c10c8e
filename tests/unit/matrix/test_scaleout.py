"""Scale-out in the matrix: `shards: N` and `nodes: N` legs, the jobs they fan out into in
the GitHub matrix, the nightly's shard-merging step, and the rehearsal's plan for them.

No case runs here: the rehearsal of a sharded leg is checked as a plan (which argv each
shard gets, and the merge), and the workflow's merge step runs on factory-made shards.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from accelkit.backends import Availability
from accelkit.errors import ConfigError
from accelkit.matrix import (
    GITHUB_FIELDS,
    RehearsalOptions,
    github_matrix,
    leg_jobs,
    load_legs,
    plan_rehearsal,
)
from accelkit.results.io import load_results, write_results
from accelkit.suite.run.request import RunRequest, validate
from tests.factories import LAST_NIGHT, case, night_run, results, shard
from tests.helpers import REPO
from tests.matrices import line_of, write_matrix

MATRICES = sorted((REPO / "matrices").glob("*.yaml"))
NIGHTLY_WORKFLOW = REPO / ".github" / "workflows" / "nightly.yml"

HEADER = """\
schema: 1
defaults:
  python: ["3.11"]
  torch: {channel: nightly}
  suites: [conformance]
  timeout_minutes: 60
entries:
  - backend: cpu
    runner: [self-hosted, linux.4xlarge]
"""

SHARDED = HEADER + "    shards: 3\n"

TWO_NODES = (
    HEADER
    + """\
    include:
      - variant: 2nodes
        suites: [distributed]
        container: false
        nodes: 2
        rdzv_endpoint: "cpu-pair-0.lan:29500"
        runner: [[self-hosted, pair0], [self-hosted, pair1]]
"""
)


def _job_argv(item: dict[str, Any], out: Path) -> list[str]:
    """`accelkit test`'s argv as nightly.yml's Test step builds it for a matrix item (whose
    Install step made the job's folder `out`)."""
    out.mkdir(parents=True, exist_ok=True)
    argv = ["--device", item["device"], "--suite", item["suite"]]
    if item["container"]:
        argv += ["--image", "accelkit-test:leg"]
    argv += item["test_args"]
    if item["writes_results"] and item["explore_seeds"]:  # an explore leg writes findings
        argv += ["--json", str(out / "findings.json")]
    elif item["writes_results"]:
        argv += ["--json", str(out / "results.json"), "--junit", str(out / "junit.xml")]
    return argv


# --- the schema ------------------------------------------------------------------------


def test_a_sharded_leg_is_one_leg_of_three_jobs(tmp_path: Path) -> None:
    (leg,) = load_legs(str(write_matrix(tmp_path, SHARDED, header="")))
    assert (leg.name, leg.shards, leg.nodes) == ("cpu-py3.11", 3, 1)
    assert "--shard" not in " ".join(leg.test_args)  # the jobs add it, not the leg
    items = github_matrix([leg])["include"]
    assert [item["job"] for item in items] == [f"cpu-py3.11-shard-{i}-of-3" for i in (1, 2, 3)]
    assert {item["name"] for item in items} == {"cpu-py3.11"}
    assert [item["test_args"][-1] for item in items] == [
        "--shard=1/3",
        "--shard=2/3",
        "--shard=3/3",
    ]
    assert [item["shard"] for item in items] == ["1/3", "2/3", "3/3"]
    assert [item["leg_dir"] for item in items] == [f"cpu-py3.11/shard-{i}-of-3" for i in (1, 2, 3)]
    assert all(item["writes_results"] and item["node_rank"] == 0 for item in items)
    assert all(item["runner"] == ["self-hosted", "linux.4xlarge"] for item in items)


def test_a_two_node_leg_is_one_job_per_node_with_one_rendezvous(tmp_path: Path) -> None:
    legs = load_legs(str(write_matrix(tmp_path, TWO_NODES, header="")))
    leg = next(leg for leg in legs if leg.nodes == 2)
    assert leg.name == "cpu-py3.11-2nodes" and leg.rdzv_endpoint == "cpu-pair-0.lan:29500"
    assert leg.runner == ("self-hosted", "pair0")  # node 0's, the rendezvous host
    items = github_matrix([leg])["include"]
    assert [item["job"] for item in items] == [
        "cpu-py3.11-2nodes-node-0",
        "cpu-py3.11-2nodes-node-1",
    ]
    assert [item["runner"] for item in items] == [
        ["self-hosted", "pair0"],
        ["self-hosted", "pair1"],
    ]
    for rank, item in enumerate(items):
        assert item["suite"] == "distributed" and item["container"] is False
        assert item["test_args"] == [
            "--nnodes=2",
            f"--node-rank={rank}",
            "--rdzv-endpoint=cpu-pair-0.lan:29500",
        ]
        assert (item["nodes"], item["node_rank"], item["shard"]) == (2, rank, "")
    # Node 0 writes the leg's results where an unsharded leg would; node 1 writes none.
    assert [(i["leg_dir"], i["writes_results"]) for i in items] == [
        ("cpu-py3.11-2nodes", True),
        ("cpu-py3.11-2nodes/node-1", False),
    ]


@pytest.mark.parametrize(
    ("text", "needle", "words"),
    [
        (HEADER + "    shards: 0\n", "shards:", ("shards must be a whole number from 1 to 32",)),
        (HEADER + "    shards: 33\n", "shards:", ("from 1 to 32", "33")),
        (HEADER + "    shards: true\n", "shards:", ("the boolean True",)),
        (HEADER + "    shards: '3'\n", "shards:", ("the string '3'",)),
        (HEADER + "    nodes: 9\n", "nodes:", ("nodes must be a whole number from 1 to 8",)),
        (HEADER + "    shard: 3\n", "shard:", ("did you mean 'shards'",)),
        (
            TWO_NODES.replace('        rdzv_endpoint: "cpu-pair-0.lan:29500"\n', ""),
            "nodes: 2",
            ("needs rdzv_endpoint",),
        ),
        (
            TWO_NODES.replace("cpu-pair-0.lan:29500", "cpu-pair-0.lan"),
            "rdzv_endpoint",
            ("rdzv_endpoint", "HOST:PORT"),
        ),
        (
            TWO_NODES.replace("cpu-pair-0.lan:29500", "cpu-pair-0.lan:70000"),
            "rdzv_endpoint",
            ("port must be 1 to 65535",),
        ),
        (
            TWO_NODES.replace("cpu-pair-0.lan:29500", "$(id):1"),
            "rdzv_endpoint",
            ("contains '$'",),
        ),
        (
            HEADER + "    rdzv_endpoint: 'h:1'\n",
            "rdzv_endpoint",
            ("only for a leg of nodes: 2 or more",),
        ),
        (
            TWO_NODES.replace("suites: [distributed]", "suites: [conformance]"),
            "nodes: 2",
            ("distributed cases only",),
        ),
        (
            TWO_NODES.replace("        container: false\n", ""),
            "nodes: 2",
            ("set container: false",),
        ),
        (
            TWO_NODES.replace("nodes: 2", "nodes: 2\n        shards: 2"),
            "nodes: 2",
            ("remove shards",),
        ),
        (
            TWO_NODES.replace(
                "[[self-hosted, pair0], [self-hosted, pair1]]", "[self-hosted, pair0]"
            ),
            "runner: [self-hosted, pair0]",
            ("one label list per node",),
        ),
        (
            TWO_NODES.replace(", [self-hosted, pair1]", ""),
            "runner: [[",
            ("one label list per node",),
        ),
        (
            HEADER.replace("[self-hosted, linux.4xlarge]", "[[a], [b]]"),
            "runner:",
            ("one per node; set nodes",),
        ),
        (
            HEADER.replace("suites: [conformance]", "suites: [conformance, distributed]"),
            "suites:",
            ("only suite",),
        ),
        (HEADER + "    test_args: ['--shard=1/2']\n", "- backend", ("--shard is set from shards",)),
        (HEADER + "    test_args: ['--nnodes=2']\n", "- backend", ("--nnodes is set from nodes",)),
    ],
)
def test_bad_scale_out_settings_name_their_line(
    tmp_path: Path, text: str, needle: str, words: tuple[str, ...]
) -> None:
    path = write_matrix(tmp_path, text, header="")
    with pytest.raises(ConfigError) as info:
        load_legs(str(path))
    message = str(info.value)
    assert message.startswith(f"{path}:{line_of(path, needle)}: "), message
    assert "\n" not in message
    for word in words:
        assert word in message, message


def test_job_names_are_unique_and_within_githubs_limit(tmp_path: Path) -> None:
    clash = SHARDED + "    include:\n      - {python: '3.11', variant: shard-2-of-3, shards: 1}\n"
    path = write_matrix(tmp_path, clash, header="")
    with pytest.raises(ConfigError) as info:
        load_legs(str(path))
    assert "job named 'cpu-py3.11-shard-2-of-3', like a job of leg 'cpu-py3.11'" in str(info.value)
    wide = HEADER.replace('python: ["3.11"]', 'python: ["3.10", "3.11", "3.12", "3.13"]')
    wide = wide.split("entries:\n")[0] + "entries:\n"
    for variant in ("a", "b"):  # 2 legs x 4 pythons x 32 shards: GitHub's 256 jobs
        wide += f"  - {{backend: cpu, variant: {variant}, shards: 32, runner: [r]}}\n"
    (tmp_path / "wide").mkdir()
    assert len(load_legs(str(write_matrix(tmp_path / "wide", wide, header="")))) == 8
    path = write_matrix(
        tmp_path, wide + "  - {backend: mps, container: false, runner: [m]}\n", header=""
    )
    with pytest.raises(ConfigError) as info:
        load_legs(str(path))
    assert str(info.value).startswith(f"{path}: the matrix has 260 jobs"), str(info.value)
    assert "at most 256" in str(info.value)


def test_the_distributed_suite_alone_is_a_single_host_leg(tmp_path: Path) -> None:
    text = HEADER.replace("suites: [conformance]", "suites: [distributed]")
    (leg,) = load_legs(str(write_matrix(tmp_path, text, header="")))
    (item,) = github_matrix([leg])["include"]
    assert (item["suite"], item["nodes"], item["job"]) == ("distributed", 1, "cpu-py3.11")


# --- every job of every shipped leg is one `accelkit test` accepts -------------------------


@pytest.mark.parametrize("matrix", MATRICES, ids=lambda p: p.name)
def test_every_shipped_job_is_accepted_by_accelkit_test(matrix: Path, tmp_path: Path) -> None:
    items = github_matrix(load_legs(str(matrix)))["include"]
    assert len({item["job"] for item in items}) == len(items), "job names are unique"
    assert len({item["leg_dir"] for item in items}) == len(items), "job folders are distinct"
    for item in items:
        assert tuple(item) == GITHUB_FIELDS
        request = RunRequest.from_argv(_job_argv(item, tmp_path / item["leg_dir"]))
        validate(request)
        if item["shard"]:
            assert request.shard == item["shard"]


def test_every_job_of_a_two_node_leg_is_accepted_by_accelkit_test(tmp_path: Path) -> None:
    legs = load_legs(str(write_matrix(tmp_path, TWO_NODES, header="")))
    for item in github_matrix(legs)["include"]:
        request = RunRequest.from_argv(_job_argv(item, tmp_path / item["leg_dir"]))
        validate(request)
        assert (request.nnodes, request.node_rank) == (item["nodes"], item["node_rank"])


def test_the_nightly_runs_the_full_breadth_in_shards_and_pull_requests_stay_quick() -> None:
    legs = load_legs(str(REPO / "matrices" / "nightly.yaml"))
    full = [leg for leg in legs if "--breadth=full" in leg.test_args]
    # Every device leg, and the CPU's default Python; the other Pythons' CPU legs (their
    # interpreter and wheel, the same kernels) stay quick in one job.
    assert {leg.name for leg in legs} - {leg.name for leg in full} == {
        "cpu-py3.10",
        "cpu-py3.11",
        "cpu-py3.13",
        "cpu-py3.12-explore",  # 3 fresh seeds of the quick conformance cases, one job
    }
    assert all(leg.shards > 1 for leg in full)
    cpu = next(leg for leg in full if leg.name == "cpu-py3.12")
    assert cpu.shards == 4 and len(leg_jobs(cpu)) == 4
    assert all(leg.nodes == 1 for leg in legs)  # no two-node runners in the fleet yet
    for leg in load_legs(str(REPO / "matrices" / "pr.yaml")):
        assert "--breadth=full" not in leg.test_args and leg.shards == 1


# --- the nightly's leg job: each job's test command ------------------------------------------


def _leg_step(name: str) -> str:
    data = yaml.safe_load(NIGHTLY_WORKFLOW.read_text())
    (step,) = [s for s in data["jobs"]["leg"]["steps"] if s.get("name") == name]
    return str(step["run"])


def test_the_test_step_runs_each_jobs_command(tmp_path: Path) -> None:
    """The leg job's Test step, with a recording `accelkit`, for a shard, for node 1 and for
    an explore leg (findings, no junit)."""
    legs = [*load_legs(str(write_matrix(tmp_path, TWO_NODES, header="")))]
    (tmp_path / "s").mkdir()
    legs += load_legs(str(write_matrix(tmp_path / "s", SHARDED, header="")))
    (tmp_path / "e").mkdir()
    explore = HEADER + "    include: [{variant: explore, explore_seeds: 2}]\n"
    legs += load_legs(str(write_matrix(tmp_path / "e", explore, header="")))[1:]
    items = {item["job"]: item for item in github_matrix(legs)["include"]}
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "argv"
    # As strict as the real command's parsing and checks: argv that `accelkit test` would
    # reject is a one-line error and exit 2 here too (nothing runs).
    fake = bin_dir / "accelkit"
    fake.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        "from accelkit.errors import BadInput\n"
        "from accelkit.suite.run.request import RunRequest, validate\n"
        f"open({str(record)!r}, 'w').write(''.join(a + chr(10) for a in sys.argv[1:]))\n"
        "if sys.argv[1:2] != ['test']:\n"
        "    sys.exit(f'accelkit: error: not a test command: {sys.argv[1:2]}')\n"
        "try:\n"
        "    validate(RunRequest.from_argv(sys.argv[2:]))\n"
        "except BadInput as error:\n"
        "    print(f'accelkit: error: {error}', file=sys.stderr)\n"
        "    sys.exit(2)\n"
    )
    fake.chmod(0o755)
    (bin_dir / "python").symlink_to(sys.executable)
    # The job's checkout, where its Install step made the job's folder under leg-results/.
    work = tmp_path / "checkout"
    work.mkdir()
    (work / ".github").symlink_to(REPO / ".github")
    # Last night's results of the sharded leg, as the job's "Last night's case durations"
    # step downloads them (a node job, no shard, never reads them).
    (work / "durations" / "cpu-py3.11").mkdir(parents=True)
    write_results(night_run(LAST_NIGHT), work / "durations" / "cpu-py3.11" / "results.json")
    seen = {}
    jobs = ("cpu-py3.11-shard-2-of-3", "cpu-py3.11-2nodes-node-0", "cpu-py3.11-2nodes-node-1")
    for job in (*jobs, "cpu-py3.11-explore"):
        item = items[job]
        (work / "leg-results" / item["leg_dir"]).mkdir(parents=True, exist_ok=True)
        env = {
            "LEG_NAME": item["name"],
            "SHARD": item["shard"],
            **os.environ,
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": str(REPO),
            "RUNNER_TEMP": str(tmp_path),
            "TEST_ARGS": json.dumps(item["test_args"]),
            "DEVICE": item["device"],
            "SUITE": item["suite"],
            "CONTAINER": json.dumps(item["container"]),
            "IMAGE": "accelkit-test-cpu:abc" if item["container"] else "",
            "LEG_DIR": item["leg_dir"],
            "WRITES_RESULTS": json.dumps(item["writes_results"]),
            "EXPLORE_SEEDS": str(item["explore_seeds"]),
        }
        proc = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", _leg_step("Test")],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        seen[job] = record.read_text().splitlines()
    assert seen["cpu-py3.11-shard-2-of-3"] == [
        *("test", "--device", "cpu", "--suite", "conformance"),
        *("--image", "accelkit-test-cpu:abc", "--shard=2/3"),
        *("--durations-from", "durations/cpu-py3.11/results.json"),
        *("--json", "leg-results/cpu-py3.11/shard-2-of-3/results.json"),
        *("--junit", "leg-results/cpu-py3.11/shard-2-of-3/junit.xml"),
    ]
    node = ["test", "--device", "cpu", "--suite", "distributed", "--nnodes=2"]
    endpoint = "--rdzv-endpoint=cpu-pair-0.lan:29500"
    assert seen["cpu-py3.11-2nodes-node-0"] == [
        *node,
        *("--node-rank=0", endpoint),
        *("--json", "leg-results/cpu-py3.11-2nodes/results.json"),
        *("--junit", "leg-results/cpu-py3.11-2nodes/junit.xml"),
    ]
    assert seen["cpu-py3.11-2nodes-node-1"] == [*node, "--node-rank=1", endpoint]
    assert seen["cpu-py3.11-explore"] == [
        *("test", "--device", "cpu", "--suite", "conformance"),
        *("--image", "accelkit-test-cpu:abc", "--explore-seeds=2"),
        *("--json", "leg-results/cpu-py3.11-explore/findings.json"),
    ]


# --- the nightly's merge step -------------------------------------------------------------


def _merge_step() -> str:
    data = yaml.safe_load(NIGHTLY_WORKFLOW.read_text())
    steps = data["jobs"]["report"]["steps"]
    names = [step.get("name") for step in steps]
    merge = names.index("Merge each leg's shards")
    # After the download, before the upload of tonight's results, report and compare.
    assert names.index("Download every leg's results") < merge
    for later in ("Upload the merged results (the next nightly's baseline)", "Report"):
        assert merge < names.index(later)
    assert merge < names.index("Compare with the previous nightly")
    return str(steps[merge]["run"])


ENV = {"accelkit": "0.1", "torch": {"version": "2.14.1"}, "backends": {"cpu": {"devices": []}}}


def _shard_file(root: Path, leg: str, index: int, count: int, ids: list[str]) -> None:
    made = results(
        [case(i) for i in ids],
        env=ENV,
        finished="2026-03-05T03:00:00+00:00",
        shard=shard(index, count, selections={"conformance": (4, len(ids), "d" * 64)}),
        suites=["conformance"],
    )
    folder = root / leg / f"shard-{index}-of-{count}"
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(made.to_json_dict()))


def test_the_merge_step_joins_each_legs_shards(tmp_path: Path) -> None:
    work = tmp_path / "work"
    ids = [f"conformance/ops/op{i}/float32" for i in range(4)]
    _shard_file(work / "results", "cpu-py3.12", 1, 3, ids[:2])
    _shard_file(work / "results", "cpu-py3.12", 2, 3, ids[2:3])
    _shard_file(work / "results", "cpu-py3.12", 3, 3, ids[3:])
    # A leg with a shard missing (its job died) is left without results: compare says red.
    _shard_file(work / "results", "cpu-py3.10", 1, 2, ids[:2])
    plain = work / "results" / "cpu-py3.11"
    plain.mkdir(parents=True)
    (plain / "results.json").write_text(json.dumps(results([case(ids[0])], env=ENV).to_json_dict()))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    accelkit = bin_dir / "accelkit"
    accelkit.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m accelkit "$@"\n')
    accelkit.chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(REPO),
    }
    env.pop("GITHUB_ACTIONS", None)
    proc = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", _merge_step()],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    merged = load_results(work / "results" / "cpu-py3.12" / "results.json")
    assert [c.id for c in merged.cases] == ids and merged.run.shards == 3
    assert merged.run.shard is None
    assert sorted(p.name for p in (work / "shard-results" / "cpu-py3.12").iterdir()) == [
        "shard-1-of-3",
        "shard-2-of-3",
        "shard-3-of-3",
    ]
    assert not list((work / "results").glob("*/shard-*"))  # the report sees legs only
    assert not (work / "results" / "cpu-py3.10" / "results.json").exists()
    assert "::error::leg cpu-py3.10: its shards do not merge" in proc.stdout
    assert "missing shard 2/2" in proc.stdout + proc.stderr
    assert load_results(plain / "results.json").cases[0].id == ids[0]  # untouched
    shutil.rmtree(work)


# --- the rehearsal's plan -----------------------------------------------------------------


class _Host:
    def docker(self) -> Availability:
        return Availability(True, "")

    def has_image(self, name: str) -> bool:
        return True


def test_the_rehearsal_runs_each_shard_then_merges_them(tmp_path: Path) -> None:
    text = SHARDED + "    container: false\n"
    legs = load_legs(str(write_matrix(tmp_path, text, header="")))
    out = tmp_path / "out"
    options = RehearsalOptions(output=out, test_args=("-k", "add"))
    (leg,) = plan_rehearsal(legs, options, _Host()).legs
    assert leg.runnable, leg.reason
    assert len(leg.shards) == 3
    for index, step in enumerate(leg.shards, start=1):
        folder = out / "cpu-py3.11" / f"shard-{index}-of-3"
        assert step.argv[:2] == ("accelkit", "test")
        request = RunRequest.from_argv(list(step.argv[2:]))
        assert request.shard == f"{index}/3" and request.keyword == "add"
        assert (request.json_path, request.junit_path) == (
            folder / "results.json",
            folder / "junit.xml",
        )
        assert step.request is not None and step.request.shard == f"{index}/3"
    assert leg.merge == (
        "accelkit",
        "merge",
        *(str(out / "cpu-py3.11" / f"shard-{i}-of-3" / "results.json") for i in (1, 2, 3)),
        "-o",
        str(out / "cpu-py3.11" / "results.json"),
    )
    # The leg's own test step names the merged file, the leg's result.
    assert leg.test.request is not None and leg.test.request.shard is None
    assert leg.test.request.json_path == out / "cpu-py3.11" / "results.json"
    steps = leg.to_dict()["steps"]
    assert len(steps["shards"]) == 3 and steps["merge"]["argv"][1] == "merge"


def test_the_rehearsal_refuses_a_shard_option_on_a_sharded_leg(tmp_path: Path) -> None:
    from accelkit.errors import BadInput

    legs = load_legs(str(write_matrix(tmp_path, SHARDED, header="")))
    options = RehearsalOptions(output=tmp_path / "out", test_args=("--shard", "1/2"))
    with pytest.raises(BadInput, match="--shard is set from the leg's shards"):
        plan_rehearsal(legs, options, _Host())


def test_the_rehearsal_does_not_run_a_two_node_leg(tmp_path: Path) -> None:
    legs = load_legs(str(write_matrix(tmp_path, TWO_NODES, header="")))
    plan = plan_rehearsal(legs, RehearsalOptions(output=tmp_path / "out"), _Host())
    by_name = {leg.leg.name: leg for leg in plan.legs}
    two = by_name["cpu-py3.11-2nodes"]
    assert not two.runnable and not two.shards and two.merge is None
    assert "a leg of nodes: 2 runs one job per node" in two.reason
    assert "cpu-pair-0.lan:29500" in two.reason
