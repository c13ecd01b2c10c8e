"""Finding the runs of a report in results files and folders.

Inputs are results files and directories. A directory is searched recursively for
`*.json` files holding an accelkit results file; other JSON (junit-adjacent setup.json,
build.json, manifests) is skipped and listed as a skipped input. A file named explicitly
must be a results file (anything else is bad input). The nightly layout is

    results/<leg>/results.json              one nightly, one folder per matrix leg
    history/<night>/<leg>/results.json      a history of nightlies

Every results file becomes a `Run` with a `leg` (its folder, or the file's stem) and a
`group` (the folder above the leg: the night). A leg folder that holds files but no results
file (the leg produced nothing) becomes a missing `Run`: it shows as missing in tables and
trends, never silently dropped or papered over by averaging its neighbours. A shard's file
(`<leg>/shard-I-of-N/results.json`, `accelkit matrix run`'s layout for a sharded leg) is
skipped when the merged `<leg>/results.json` is beside it.

Differential files (`accelkit diff --out`) are not runs and are passed over here, named or
found: `report.model.load_report` reads them beside the runs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from accelkit.errors import BadInput
from accelkit.results.differential_file import is_differential_document
from accelkit.results.environment import run_environment
from accelkit.results.io import load_results
from accelkit.results.model import SCHEMA_ID, Results

_SCHEMA_PREFIX = SCHEMA_ID.split("/", 1)[0] + "/"


@dataclass(frozen=True)
class Run:
    """One column of the report: a results file, or a leg that produced none."""

    label: str
    leg: str
    group: str
    source: str
    results: Results | None = None

    @property
    def missing(self) -> bool:
        return self.results is None

    @property
    def device(self) -> str:
        return self.results.run.device if self.results is not None else "?"

    @property
    def started(self) -> str:
        return self.results.run.started if self.results is not None else ""

    @property
    def torch_version(self) -> str | None:
        return _torch_version(self.results) if self.results is not None else None

    @property
    def device_name(self) -> str | None:
        return _device_name(self.results) if self.results is not None else None


def _torch_version(results: Results) -> str | None:
    return run_environment(results)["torch_version"]


def _device_name(results: Results) -> str | None:
    """The name of the run's first device (`accelkit.results.environment`)."""
    return run_environment(results)["device_name"]


def _is_results_document(path: Path) -> bool | None:
    """True: claims to be a results file; False: some other JSON; None: unreadable."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(raw, dict):
        return False
    schema = raw.get("schema")
    return isinstance(schema, str) and schema.startswith(_SCHEMA_PREFIX)


@dataclass(frozen=True)
class _Found:
    path: Path
    results: Results | None
    leg: str
    group: str


def _leg_and_group(path: Path, root: Path | None) -> tuple[str, str]:
    """The leg (the folder of a results.json, else the file's stem) and its group."""
    leg_dir = path.parent
    leg = leg_dir.name if path.name == "results.json" else path.stem
    group_dir = leg_dir.parent if path.name == "results.json" else leg_dir
    if root is not None:
        group = group_dir.relative_to(root).as_posix() if group_dir.is_relative_to(root) else ""
        if group in ("", "."):
            group = root.name or root.as_posix()
    else:
        group = group_dir.as_posix()
    return leg or path.stem, group


def _scan_directory(root: Path, skipped: list[str]) -> list[_Found]:
    found: list[_Found] = []
    result_dirs: set[Path] = set()
    for path in sorted(root.rglob("*.json")):
        if not path.is_file():
            continue
        claim = _is_results_document(path)
        if not claim and is_differential_document(path):
            continue  # read by report.model.load_report, beside the runs
        if not claim:
            why = "not JSON" if claim is None else "not an accelkit results file"
            skipped.append(f"{path}: {why}")
            continue
        results = load_results(path)  # claims the schema but is invalid: bad input
        shard, merged = results.run.shard, path.parent.parent / "results.json"
        if shard is not None and path.name == "results.json" and merged.is_file():
            # <leg>/shard-I-of-N/results.json beside <leg>/results.json: already merged.
            skipped.append(f"{path}: shard {shard.index}/{shard.count}, merged into {merged}")
            continue
        leg, group = _leg_and_group(path, root)
        found.append(_Found(path, results, leg, group))
        result_dirs.update(p for p in path.parents if p.is_relative_to(root))
    # Legs that produced nothing (setup or build failed, the runner died): folders that sit
    # beside real legs (their parent leads to results files but is not a leg itself) and
    # hold files but no results file anywhere below. They are shown as missing.
    leg_dirs = {f.path.parent for f in found}
    for directory in sorted(p for p in root.rglob("*") if p.is_dir()):
        parent = directory.parent
        if directory in result_dirs or parent not in result_dirs or parent in leg_dirs:
            continue
        if any(child.is_file() for child in directory.rglob("*")):
            leg, group = _leg_and_group(directory / "results.json", root)
            found.append(_Found(directory, None, leg, group))
    return found


def _in_group_order(found: list[_Found]) -> list[_Found]:
    """Nights in time order (a night's time: its earliest run), legs by name within one."""
    group_started: dict[str, str] = {}
    for f in found:
        if f.results is not None:
            started = f.results.run.started
            if f.group not in group_started or started < group_started[f.group]:
                group_started[f.group] = started
    return sorted(found, key=lambda f: (group_started.get(f.group, "~"), f.group, f.leg))


def discover(paths: Sequence[Path]) -> tuple[list[Run], list[str]]:
    """The runs named by `paths` (files and directories), and the inputs skipped.

    Raises BadInput for a missing path, an explicitly named file that is not a valid
    results file, a results file that does not validate, or when nothing is found.
    """
    if not paths:
        raise BadInput("no results files given")
    found: list[_Found] = []
    skipped: list[str] = []
    for path in paths:
        if path.is_dir():
            in_dir = _scan_directory(path, skipped)
            if not any(f.results is not None for f in in_dir):
                raise BadInput(f"{path}: no accelkit results files found in this directory")
            found.extend(_in_group_order(in_dir))
        elif path.exists() and is_differential_document(path):
            continue  # read by report.model.load_report, beside the runs
        elif path.exists():
            leg, group = _leg_and_group(path, None)
            found.append(_Found(path, load_results(path), leg, group))
        else:
            raise BadInput(f"{path}: no such file or directory")
    return _label(found), skipped


def _label(found: list[_Found]) -> list[Run]:
    def base(f: _Found) -> str:
        if f.results is None:
            return f"{f.leg} (missing) · {f.group}"
        parts = [f.results.run.device]
        version = _torch_version(f.results)
        if version:
            parts.append(f"torch {version}")
        parts.append(f.leg)
        return " · ".join(parts)

    labels = [base(f) for f in found]
    counts: dict[str, int] = {}
    for label in labels:
        counts[label] = counts.get(label, 0) + 1
    runs: list[Run] = []
    for f, label in zip(found, labels, strict=True):
        if counts[label] > 1:
            label = f"{label} · {f.group}"
        runs.append(
            Run(label=label, leg=f.leg, group=f.group, source=str(f.path), results=f.results)
        )
    # Still ambiguous (same leg and group twice): number them.
    seen: dict[str, int] = {}
    unique: list[Run] = []
    for run in runs:
        seen[run.label] = seen.get(run.label, 0) + 1
        if seen[run.label] > 1:
            run = Run(
                label=f"{run.label} #{seen[run.label]}",
                leg=run.leg,
                group=run.group,
                source=run.source,
                results=run.results,
            )
        unique.append(run)
    return unique
