"""`accelkit repro CASE --from results.json`: a standalone reproducer for a recorded case.

`plan_repro` reads the case's record (`Case.repro`, written by the suite for every failed
conformance case and every perf case) and decides what the reproducer embeds
(`accelkit.triage.bundle`); `write_repro` writes the one file; `run_repro` runs it once
with a Python that has torch. Which cases can be reproduced:

- OpInfo cases (`conformance/opinfo/<op>/<dtype>[/grad]`, forward, in place and gradient):
  the failing sample, rebuilt from the case's seed and the sample's index;
- case functions whose module needs nothing of accelkit but `accelkit.suite.numerics.reference`
  (ops, control flow, compile parity, dynamic shapes, complex, gemv, linalg, graph
  capture), with their recorded parameters; those that compile also run with Inductor
  bypassed;
- perf cases of GEMM, gemv, memory, attention and the canaries: the op rebuilt from the
  record and the metrics' tags and timed alone with the suite's timer
  (`accelkit.triage.perf_repro`, `accelkit.triage.perf_replay`);
- not: distributed cases (rank processes), cases that need other pytest fixtures than
  `device` and the seed, and the compile-latency, collective, graph-replay and transfer
  perf cases (`accelkit bisect --case` reruns those alone).

The file name is the case id made safe: `repro_conformance_opinfo_exp_float32.py`.

`ReproRequest` is the command's options, checked before anything is read or written;
`write_reproducer` writes the file only once the case is known to be reproducible (bad input
leaves nothing), `exit_code` turns the reproducer's own status into accelkit's, and
`judge_reproducer` reruns a perf reproducer for `--baseline` and returns the judgement
(`accelkit.triage.perf_baseline`).
"""

from __future__ import annotations

import ast
import difflib
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelkit.errors import BadInput, Failed
from accelkit.results.io import load_results
from accelkit.results.model import Case, Results
from accelkit.triage.bundle import (
    ACCELKIT_ROOT,
    Embedded,
    accelkit_module,
    accelkit_package,
    check_closed,
    file_module,
    render_script,
)

if TYPE_CHECKING:
    from accelkit.triage.perf_baseline import BaselineJudgement

ENTRY = "accelkit.triage.replay_main:main"
FIXTURES_FROM_RECORD = ("device", "backend", "case_seed", "_accelkit_seed")
"""Must match accelkit.triage.replay_main.FIXTURES_FROM_RECORD (a test checks)."""
SUITE_ROOT = ACCELKIT_ROOT / "suite"
CUSTOM_CASES_PACKAGE = "accelkit_cases"
"""Modules of a `--cases DIR` folder are embedded under this package."""

_COMMON = (
    "accelkit.suite.session.failures",
    "accelkit.suite.numerics.mode",
    "accelkit.suite.session.outputs",
    "accelkit.suite.session.params",
    "accelkit.triage.replay_main",
)


EXIT_CODES = {0: 0, 1: 1, 2: 3}
"""The reproducer's own statuses (0 passes, 1 fails as the case did, 2 cannot run here) as
accelkit's exit codes (2 becomes 3, unavailable); any other status is a failure (1)."""


def exit_code(returncode: int) -> int:
    return EXIT_CODES.get(returncode, 1)


@dataclass(frozen=True)
class ReproRequest:
    """`accelkit repro`'s options, checked (BadInput, one line) when made."""

    case: str
    source: Path
    out: Path = Path(".")
    run: bool = True
    python: str | None = None
    baseline: Path | None = None
    passes: int = 1
    threshold: float = 0.03

    def __post_init__(self) -> None:
        if self.out.exists() and not self.out.is_dir():
            raise BadInput(f"--out {self.out}: not a directory")
        if self.passes < 1:
            raise BadInput(f"--passes: must be >= 1, got {self.passes}")
        if not 0.0 < self.threshold < 1.0:
            raise BadInput(
                f"--threshold {self.threshold}: must be between 0 and 1 (e.g. 0.03 for 3%)"
            )
        if self.baseline is not None:
            if not self.case.startswith("perf/"):
                raise BadInput("--baseline: judges perf cases only")
            if not self.run:
                raise BadInput("--baseline: needs the reproducer to run (drop --no-run)")
        elif self.passes != 1:
            raise BadInput("--passes: repeats a perf reproducer for --baseline; add --baseline")

    @property
    def interpreter(self) -> tuple[str, ...]:
        """The Python to run the reproducer with (empty: the one running accelkit)."""
        return (self.python,) if self.python else ()


@dataclass(frozen=True)
class Written:
    """A reproducer on disk: its plan, its path and, with --baseline, the baseline's case."""

    plan: ReproPlan
    path: Path
    baseline_case: Case | None

    def to_json_dict(self) -> dict[str, Any]:
        return {**self.plan.to_json_dict(), "script": str(self.path), "command": self.command}

    @property
    def command(self) -> str:
        return f"python {self.path}"


def write_reproducer(request: ReproRequest) -> Written:
    """Check the baseline's case (with --baseline) and plan the reproducer, then make the
    folder and write the file: bad input leaves nothing behind."""
    base_case = None
    if request.baseline is not None:
        from accelkit.triage.perf_baseline import baseline_case

        base_case = baseline_case(load_results(request.baseline), request.case)
    plan = plan_repro(request.source, request.case)
    try:
        request.out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise BadInput(f"--out {request.out}: cannot make the folder ({err.strerror})") from None
    return Written(plan, write_repro(plan, request.out), base_case)


@dataclass(frozen=True)
class ReproPlan:
    case_id: str
    kind: str
    file_name: str
    script: str
    embedded: tuple[str, ...]

    def to_json_dict(self) -> dict[str, Any]:
        return {"case": self.case_id, "kind": self.kind, "embedded": list(self.embedded)}


def script_name(case_id: str) -> str:
    return "repro_" + re.sub(r"[^A-Za-z0-9]+", "_", case_id).strip("_") + ".py"


def find_case(results: Results, case_id: str, source: Path) -> Case:
    for case in results.cases:
        if case.id == case_id:
            return case
    close = difflib.get_close_matches(case_id, [c.id for c in results.cases], n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    raise BadInput(f"{source}: no case {case_id!r}{hint}")


def _cases_root(results: Results) -> Path:
    """The folder the run's cases came from: the built-in suite, or its `--cases DIR`."""
    argv = list(results.run.argv)
    if "--cases" in argv[:-1]:
        return Path(argv[argv.index("--cases") + 1]).resolve()
    return SUITE_ROOT


def _case_module(results: Results, file: str) -> Embedded:
    root = _cases_root(results)
    path = (root / file).resolve()
    if not path.is_file() or path.suffix != ".py":
        raise BadInput(f"the case's module {file} is not in {root} any more")
    dotted = ".".join(Path(file).with_suffix("").parts)
    if root == SUITE_ROOT:
        return accelkit_module(f"accelkit.suite.{dotted}")
    return file_module(f"{CUSTOM_CASES_PACKAGE}.{dotted}", path, f"cases/{file}")


def _check_arguments(module: Embedded, function: str, params: dict[str, Any]) -> None:
    """BadInput unless every argument of `function` comes from the record."""
    for node in ast.parse(module.source).body:
        if isinstance(node, ast.FunctionDef) and node.name == function:
            names = [
                a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)
            ]
            missing = [n for n in names if n not in params and n not in FIXTURES_FROM_RECORD]
            if missing:
                raise BadInput(
                    f"{function} needs the pytest fixture {missing[0]!r}: not reproducible "
                    "standalone (only device, the backend's facts and the case's seed come from "
                    "the record)"
                )
            return
    raise BadInput(f"{module.path} has no function {function} any more")


def _recorded(results: Results, case: Case) -> dict[str, Any]:
    torch = results.env.get("torch")
    torch = torch if isinstance(torch, dict) else {}
    backends = results.env.get("backends")
    device_name = "?"
    if isinstance(backends, dict):
        entry = backends.get(results.run.device)
        if isinstance(entry, dict) and entry.get("devices"):
            device_name = str(entry["devices"][0].get("name", "?"))
    return {
        "torch": torch.get("version"),
        "git": torch.get("git_version"),
        "backend": results.run.device,
        "device_name": device_name,
        "started": results.run.started,
        "status": case.status,
        "message": case.message[:1500],
    }


def plan_repro(results_path: Path, case_id: str) -> ReproPlan:
    """The reproducer of `case_id` in the results file; BadInput when it has no record or
    its kind cannot be reproduced standalone. Nothing is written."""
    results = load_results(results_path)
    case = find_case(results, case_id, results_path)
    record = case.repro
    if case.suite == "perf":
        from accelkit.triage.perf_repro import check_reproducible

        check_reproducible(case_id)
    if record is None:
        raise BadInput(
            f"{case_id}: the results file has no reproducer record for this {case.status} case "
            "(the suite records one for failed conformance cases and for perf cases)"
        )
    extra = record.model_extra or {}
    if extra.get("unencoded_params"):
        raise BadInput(
            f"{case_id}: parameter {extra['unencoded_params'][0]!r} has no JSON form: "
            "not reproducible standalone"
        )
    common = [accelkit_module(name) for name in _COMMON]
    case_record: dict[str, Any] = {
        "case": case_id,
        **record.model_dump(mode="json", exclude_none=True),
        "recorded": _recorded(results, case),
    }
    case_record.pop("unencoded_params", None)
    environ: dict[str, str] = {}
    if record.kind == "opinfo":
        modules = [
            *common,
            accelkit_module("accelkit.suite.numerics.reference"),
            *accelkit_package("accelkit.suite.opinfo"),
        ]
    elif record.kind == "function":
        module = _case_module(results, record.file)
        _check_arguments(module, record.function, dict(record.params))
        shim = accelkit_module("accelkit.triage.pytest_shim")
        pytest_module = Embedded("pytest", shim.path, shim.source)
        modules = [
            *common,
            accelkit_module("accelkit.suite.numerics.reference"),
            pytest_module,
            module,
        ]
        check_closed(modules, roots=("accelkit", "pytest", CUSTOM_CASES_PACKAGE))
        case_record["module"] = module.name
    elif record.kind == "perf":
        from accelkit.suite.run.environment import perf_env
        from accelkit.triage.perf_repro import perf_spec

        case_record["perf"] = perf_spec(results, case)
        environ = perf_env(results.run.threads)  # as the runner sets it for the perf cases
        modules = [
            *common,
            accelkit_module("accelkit.results.noise"),
            accelkit_module("accelkit.suite.session.lockstep"),  # timing's turns: a no-op there
            accelkit_module("accelkit.suite.perf.timing"),
            accelkit_module("accelkit.triage.perf_replay"),
        ]
    else:
        raise BadInput(
            f"{case_id}: no standalone reproducer for {record.kind} cases "
            "(covered: OpInfo cases, case functions and perf cases)"
        )
    return ReproPlan(
        case_id=case_id,
        kind=record.kind,
        file_name=script_name(case_id),
        script=render_script(
            docstring=_docstring(case_id, results_path, case_record),
            case=case_record,
            modules=modules,
            entry=ENTRY,
            environ=environ,
        ),
        embedded=tuple(m.name for m in modules),
    )


def _docstring(case_id: str, source: Path, record: dict[str, Any]) -> str:
    recorded = record["recorded"]
    if "perf" in record:
        return _perf_docstring(case_id, source, record)
    message = "\n".join(
        "    " + line for line in str(recorded.get("message", "")).splitlines()[:12]
    )
    return (
        f"Reproducer for {case_id}\n\n"
        f"Written by `accelkit repro` from {source}: the run of {recorded.get('started')} on\n"
        f"{recorded.get('backend')} ({recorded.get('device_name')}), torch "
        f"{recorded.get('torch')} (git {str(recorded.get('git'))[:12]}), where the case was "
        f"{recorded.get('status')}:\n\n{message}\n\n"
        "Run it with any Python that has torch (nothing else is needed: the accelkit code\n"
        "the case runs is embedded below; torch's OpInfo database also imports expecttest):\n\n"
        f"    python {script_name(case_id)}\n\n"
        "It rebuilds the case's inputs from its seed, runs it on the recorded device type,\n"
        "compares with the float64 reference on the CPU and prints the worst element and the\n"
        "tolerance. Exit status: 0 passes, 1 fails, 2 cannot run here.\n"
    )


def _perf_docstring(case_id: str, source: Path, record: dict[str, Any]) -> str:
    recorded = record["recorded"]
    return (
        f"Perf reproducer for {case_id}\n\n"
        f"Written by `accelkit repro` from {source}: the run of {recorded.get('started')} on\n"
        f"{recorded.get('backend')} ({recorded.get('device_name')}), torch "
        f"{recorded.get('torch')} (git {str(recorded.get('git'))[:12]}).\n\n"
        "Run it with any Python that has torch (nothing else is needed: the accelkit timing\n"
        "code is embedded below; the host canaries also use numpy):\n\n"
        f"    python {script_name(case_id)}\n\n"
        "It rebuilds the case's op, sizes and dtype on the recorded device type, sets the\n"
        "recorded intra-op threads, times it alone with the perf suite's timer (the same\n"
        "warm-up, block sizing, synchronisation and sample rules) and prints each metric\n"
        "beside the recorded one: medians, the recorded interquartile range and the ratio.\n"
        "Exit status: 0 measured, 2 cannot run here.\n"
    )


def write_repro(plan: ReproPlan, out_dir: Path) -> Path:
    from accelkit.results.io import atomic_write_text

    if not out_dir.is_dir():
        raise BadInput(f"--out {out_dir}: not a directory")
    path = out_dir / plan.file_name
    atomic_write_text(path, plan.script)
    path.chmod(0o755)
    return path


def run_repro(
    path: Path, *, python: Sequence[str] = (), timeout_s: float = 1800.0
) -> subprocess.CompletedProcess[str]:
    """Run the reproducer once (`python` default: this interpreter), capturing its output."""
    argv = [*(python or [sys.executable]), str(path.resolve())]
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout_s, check=False, cwd=path.parent
    )


def judge_reproducer(
    script: Path,
    first_output: str,
    *,
    baseline: Case,
    source: Path,
    case_id: str,
    passes: int,
    threshold: float,
    python: Sequence[str] = (),
    on_run: Callable[[int], None] | None = None,
) -> BaselineJudgement:
    """The perf reproducer `script`, already run once (`first_output`, its stdout), run until
    it measured `passes` times, each its own process (`on_run(number)` before each), judged
    against the baseline's case beside the recorded run's (`case_id` in `source`). Failed
    when a run fails or prints no measurement, or no metric is on both sides."""
    from accelkit.triage.perf_baseline import BaselineJudgement, against_baseline, parse_measured

    runs = [parse_measured(first_output)]
    for number in range(2, passes + 1):
        if on_run is not None:
            on_run(number)
        proc = run_repro(script, python=python)
        if proc.returncode != 0:
            raise Failed(f"run {number} of the reproducer exited {proc.returncode}")
        runs.append(parse_measured(proc.stdout))
    measured = [r for r in runs if r is not None]
    if len(measured) != len(runs):
        raise Failed("the reproducer printed no measurement to judge")
    recorded = next((c for c in load_results(source).cases if c.id == case_id), None)
    verdicts = against_baseline(baseline, recorded, measured, threshold=threshold)
    if not verdicts:
        raise Failed("no metric of the case is in both the baseline and the measurement")
    return BaselineJudgement(threshold, tuple(verdicts))
