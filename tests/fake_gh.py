#!/usr/bin/env python3
"""A stand-in for the GitHub CLI (`gh`) the nightly workflow calls, as strict as the real one
for what the workflow uses; tests put it on PATH as `gh`.

What it serves comes from the JSON file named by FAKE_GH_STATE:

    {"repo": "octo/accelkit",
     "runs": [{"databaseId": 904, "number": 41, "workflow": "nightly.yml",
               "workflowName": "nightly", "headBranch": "main", "event": "schedule",
               "status": "completed", "conclusion": "failure",
               "createdAt": "2026-03-01T02:17:03Z", ...,
               "artifacts": [{"name": "nightly-results", "expired": false, "dir": "/path"}]}]}

Every invocation is appended to FAKE_GH_LOG (one JSON argv per line) when it is set.

Checked as gh checks them (cli/cli, pkg/cmd/run/list, pkg/cmd/run/download, pkg/cmd/run/
shared/shared.go): the subcommands, every flag's spelling (long and short, `--flag value`
and `--flag=value`), --status's values, --limit > 0, the field names of --json (gh's
RunFields), a token in GH_TOKEN or GITHUB_TOKEN, that the repository exists and the run
exists. Runs come newest first, as the API returns them. `run download` with one --name
extracts the artifact into --dir itself, with several into --dir/<name>/, and fails like gh
when the run's artifacts are all expired ("no valid artifacts found to download") or none
matches ("no artifact matches any of the names provided").

Not served (an error, never silently ignored): --jq and --template (the workflow parses JSON
in Python), interactive prompts, any other subcommand.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

#: gh run list --json: the fields gh accepts (RunFields in pkg/cmd/run/shared/shared.go).
RUN_FIELDS = (
    "name",
    "displayTitle",
    "headBranch",
    "headSha",
    "createdAt",
    "updatedAt",
    "startedAt",
    "attempt",
    "status",
    "conclusion",
    "event",
    "number",
    "databaseId",
    "workflowDatabaseId",
    "workflowName",
    "url",
)
STATUSES = ("queued", "completed", "in_progress", "requested", "waiting", "pending")
CONCLUSIONS = (
    "action_required",
    "cancelled",
    "failure",
    "neutral",
    "skipped",
    "stale",
    "startup_failure",
    "success",
    "timed_out",
)
#: flag -> (its other spelling, takes a value, may repeat)
LIST_FLAGS: dict[str, tuple[str | None, bool, bool]] = {
    "--branch": ("-b", True, False),
    "--commit": ("-c", True, False),
    "--created": (None, True, False),
    "--event": ("-e", True, False),
    "--jq": ("-q", True, False),
    "--json": (None, True, False),
    "--limit": ("-L", True, False),
    "--status": ("-s", True, False),
    "--template": ("-t", True, False),
    "--user": ("-u", True, False),
    "--workflow": ("-w", True, False),
    "--all": ("-a", False, False),
    "--repo": ("-R", True, False),
}
DOWNLOAD_FLAGS: dict[str, tuple[str | None, bool, bool]] = {
    "--dir": ("-D", True, False),
    "--name": ("-n", True, True),
    "--pattern": ("-p", True, True),
    "--repo": ("-R", True, False),
}
SETUP_GIT_FLAGS: dict[str, tuple[str | None, bool, bool]] = {"--hostname": ("-h", True, False)}


class GhError(Exception):
    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def parse(
    args: list[str], flags: dict[str, tuple[str | None, bool, bool]]
) -> tuple[dict[str, Any], list[str]]:
    short = {spelling: name for name, (spelling, _, _) in flags.items() if spelling}
    values: dict[str, Any] = {}
    positional: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if not arg.startswith("-") or arg == "-":
            positional.append(arg)
            continue
        name, eq, inline = arg.partition("=")
        name = short.get(name, name)
        if name not in flags:
            raise GhError(f"unknown flag: {arg.split('=')[0]}\n\nUsage:  gh ...")
        _, takes_value, repeats = flags[name]
        if not takes_value:
            if eq:
                raise GhError(f'invalid argument "{inline}" for "{name}" flag')
            values[name] = True
            continue
        if eq:
            value = inline
        elif index < len(args):
            value = args[index]
            index += 1
        else:
            raise GhError(f"flag needs an argument: {arg}")
        if repeats:
            values.setdefault(name, []).append(value)
        else:
            values[name] = value
    return values, positional


def load_state(options: dict[str, Any]) -> dict[str, Any]:
    state = json.loads(Path(os.environ["FAKE_GH_STATE"]).read_text(encoding="utf-8"))
    repo = options.get("--repo")
    if repo is None:
        raise GhError("fake gh: no git remote here; pass --repo OWNER/REPO")
    if repo != state["repo"]:
        raise GhError(
            f"GraphQL: Could not resolve to a Repository with the name '{repo}'. (repository)"
        )
    return state


def run_list(args: list[str]) -> int:
    options, positional = parse(args, LIST_FLAGS)
    if positional:
        raise GhError(f'unknown command "{positional[0]}" for "gh run list"')
    for flag in ("--jq", "--template"):
        if flag in options:
            raise GhError(f"fake gh: {flag} is not served (parse the --json output instead)")
    status = options.get("--status")
    if status is not None and status not in STATUSES + CONCLUSIONS:
        valid = ", ".join(STATUSES + CONCLUSIONS)
        raise GhError(
            f'invalid argument "{status}" for "-s, --status" flag: valid values are {{{valid}}}'
        )
    try:
        limit = int(options.get("--limit", "20"))
    except ValueError:
        raise GhError(f'invalid argument "{options["--limit"]}" for "-L, --limit" flag') from None
    if limit < 1:
        raise GhError(f"invalid limit: {limit}")
    fields: list[str] = []
    if "--json" in options:
        fields = [f for f in options["--json"].split(",") if f]
        unknown = [f for f in fields if f not in RUN_FIELDS]
        if unknown or not fields:
            available = "\n".join(f"  {f}" for f in sorted(RUN_FIELDS))
            field = unknown[0] if unknown else ""
            raise GhError(f'Unknown JSON field: "{field}"\nAvailable fields:\n{available}')
    state = load_state(options)
    runs = list(state["runs"])
    workflow = options.get("--workflow")
    if workflow is not None:
        if not any(workflow in (r["workflow"], r["workflowName"]) for r in runs):
            raise GhError(f"could not find any workflows named {workflow}")
        runs = [r for r in runs if workflow in (r["workflow"], r["workflowName"])]
    for flag, key in (("--branch", "headBranch"), ("--event", "event"), ("--commit", "headSha")):
        if flag in options:
            runs = [r for r in runs if r.get(key) == options[flag]]
    if status in STATUSES:
        runs = [r for r in runs if r["status"] == status]
    elif status is not None:
        runs = [r for r in runs if r.get("conclusion") == status]
    runs.sort(key=lambda r: r["createdAt"], reverse=True)
    runs = runs[:limit]
    if not fields:
        for r in runs:
            columns = ("status", "conclusion", "workflowName", "headBranch", "event", "databaseId")
            print("\t".join(str(r.get(c) or "") for c in columns))
        return 0
    print(json.dumps([{f: r.get(f, "") for f in fields} for r in runs], indent=2))
    return 0


def run_download(args: list[str]) -> int:
    options, positional = parse(args, DOWNLOAD_FLAGS)
    if len(positional) > 1:
        raise GhError(f"accepts at most 1 arg(s), received {len(positional)}")
    if not positional:
        raise GhError(
            "fake gh: downloading without a run id (across runs, or prompting) is not served"
        )
    if "--pattern" in options:
        raise GhError("fake gh: --pattern is not served")
    state = load_state(options)
    run_id = positional[0]
    run = next((r for r in state["runs"] if str(r["databaseId"]) == run_id), None)
    if run is None:
        raise GhError(
            "error fetching artifacts: HTTP 404: Not Found (https://api.github.com/repos/"
            f"{state['repo']}/actions/runs/{run_id}/artifacts?per_page=100)"
        )
    artifacts = [a for a in run.get("artifacts", []) if not a.get("expired")]
    if not artifacts:
        raise GhError("no valid artifacts found to download")
    names = options.get("--name", [])
    destination = Path(options.get("--dir", "."))
    downloaded = 0
    for artifact in artifacts:
        if names and artifact["name"] not in names:
            continue
        target = destination if len(names) == 1 else destination / artifact["name"]
        shutil.copytree(artifact["dir"], target, dirs_exist_ok=True)
        downloaded += 1
    if not downloaded:
        raise GhError("no artifact matches any of the names provided")
    return 0


def auth_setup_git(args: list[str]) -> int:
    _, positional = parse(args, SETUP_GIT_FLAGS)
    if positional:
        raise GhError(f'unknown command "{positional[0]}" for "gh auth setup-git"')
    return 0  # the real one configures git's credential helper; tests push to a local remote


COMMANDS = {
    ("run", "list"): run_list,
    ("run", "download"): run_download,
    ("auth", "setup-git"): auth_setup_git,
}


def main(argv: list[str]) -> int:
    log = os.environ.get("FAKE_GH_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(argv) + "\n")
    try:
        if not (os.environ.get("GH_TOKEN") or os.environ.get("GITHUB_TOKEN")):
            raise GhError(
                "gh: To use GitHub CLI in a GitHub Actions workflow, set the GH_TOKEN "
                "environment variable. Example:\n  env:\n    GH_TOKEN: ${{ github.token }}",
                4,
            )
        command = COMMANDS.get(tuple(argv[:2]))  # type: ignore[arg-type]
        if command is None:
            raise GhError(f'unknown command "{" ".join(argv[:2])}" for "gh"')
        return command(argv[2:])
    except GhError as error:
        print(str(error), file=sys.stderr)
        return error.code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
