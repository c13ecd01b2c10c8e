"""Runs the shared suite on this host: a `RunRequest` in, a results file and an outcome out.
(`accelkit.suite.run.container` is its sibling for `--image`; the CLI picks between them.)

The engine is pytest in a child process (its own process group, so a Ctrl-C or a kill takes
every worker with it), with pytest-xdist workers for crash isolation and pytest-timeout for
hangs. The accelkit plugin in that process writes the results file as cases finish and sends
one JSON event per line on a pipe; `run()` hands each event to the caller (the CLI renders
them) and returns when pytest is done.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelkit.errors import BadInput, ExitCode, Failed, Unavailable
from accelkit.events import Event, EventCallback
from accelkit.suite.run import child_process, outcome, run_plan
from accelkit.suite.run.environment import child_env, perf_env
from accelkit.suite.run.outcome import NO_TESTS, RunOutcome
from accelkit.suite.run.request import (
    COMPILE_ONLY_CASES,
    SUITE_ROOT,
    RunRequest,
    cases_root,
    suite_path,
    validate,
)
from accelkit.suite.session import sharding

# pytest-xdist stops replacing crashed workers after this many; a crash must cost one case.
_MAX_WORKER_RESTARTS = 100_000


def check_device(request: RunRequest) -> None:
    from accelkit import backends

    if request.compile_only:  # compiling for a target needs no device
        return
    availability = backends.get(request.device).availability()
    if not availability.available:
        raise Unavailable(f"{request.device}: not available: {availability.reason}")


@dataclass(frozen=True)
class RunContext:
    """What a run derives from its request and this machine before it starts: the GPU
    target, the capabilities every case must have, and the compiler triton will use."""

    target: str | None = None
    required: tuple[str, ...] = ()
    toolchain: Any = None  # backends.base.Toolchain, for runs that compile for a target
    environment: dict[str, str] = field(default_factory=dict)
    """Variables the pytest child needs besides the backend's (the toolchain's)."""


def run_target(request: RunRequest) -> str | None:
    """The run's GPU target: --target, else the first device's own when it is one of the
    backend's targets (an sm_107 GPU makes an sm_107 run), else None."""
    from accelkit import backends

    if request.target is not None or request.compile_only:
        return request.target
    backend = backends.get(request.device)
    devices = backend.devices()
    arch = devices[0].arch if devices else None
    return arch if arch in backend.targets else None


def required_capabilities(request: RunRequest, target: str | None) -> tuple[str, ...]:
    """What every case of a device run must have: the backend's requirements for the
    target, plus --require, less --waive. A compile-only run has no device: none."""
    from accelkit import backends

    if request.compile_only:
        return ()
    declared = backends.get(request.device).required_capabilities(target)
    wanted = dict.fromkeys((*declared, *request.required_extra))
    return tuple(name for name in wanted if name not in request.waived)


def run_context(request: RunRequest) -> RunContext:
    """The request's `RunContext`; Unavailable when a compile-only run's toolchain cannot
    compile for the target (one line: its version and the targets it knows)."""
    target = run_target(request)
    required = required_capabilities(request, target)
    if not request.compile_only or target is None:
        return RunContext(target, required)
    from accelkit import backends
    from accelkit.suite.crosscompile.compiling import target_toolchain

    backend = backends.get(request.device)
    cross = backend.cross_target(target)
    if cross is None:  # validate() has said so already
        raise BadInput(f"--compile-only: {request.device} cannot compile for {target}")
    # The same check as doctor's row for the target (accelkit.probe.capabilities).
    toolchain = target_toolchain(backend, cross, os.environ)
    if toolchain.problem is not None:
        raise Unavailable(toolchain.problem)
    return RunContext(target, required, toolchain, dict(toolchain.environment))


def header(request: RunRequest, context: RunContext | None = None) -> Any:
    """The results file's header: run info, environment fingerprint, capability table."""
    from accelkit.probe.capabilities import capabilities
    from accelkit.probe.fingerprint import fingerprint
    from accelkit.results.model import Capability, Results, RunInfo
    from accelkit.results.writer import now_iso

    context = context or RunContext()
    toolchain = context.toolchain
    return Results(
        run=RunInfo(
            started=now_iso(),
            device=request.device,
            suites=list(request.suites),  # type: ignore[arg-type]
            argv=list(request.argv),
            seed=request.seed,
            timeout_s=request.timeout_s,
            breadth=request.breadth,
            shard=sharding.shard_record(request.shard, request.durations_from),
            target=context.target,
            compile_only=request.compile_only or None,
            toolchain=toolchain.describe() if toolchain is not None else None,
            required=list(context.required) or None,
            waived=list(request.waived) or None,
            outputs=str(request.record_outputs.resolve()) if request.record_outputs else None,
        ),
        env=fingerprint(),
        capabilities={
            name: Capability(available=a.available, reason=a.reason)
            for name, a in capabilities().items()
        },
    )


def pytest_argv(
    request: RunRequest,
    results_path: Path,
    events_fd: int | None,
    pass_number: int = 1,
    *,
    suites: tuple[str, ...] | None = None,
    workers: int | None = None,
    context: RunContext | None = None,
    python: str | None = None,
    lockstep: tuple[str, str] | None = None,
    events_file: Path | None = None,
    ini: Path = SUITE_ROOT / "pytest.ini",
) -> list[str]:
    """pytest's command line for `suites` (default: the request's) with `workers` xdist
    workers (default: the request's), run by `python` (default: this interpreter);
    `lockstep`: (baton socket, side) of an interleaved A/B pass (`accelkit.suite.session.lockstep`);
    its events go to the pipe `events_fd`, or are appended to `events_file` (a run in a
    container, which is given no descriptor of ours, nor this package: `ini` is the suite's
    pytest.ini where it sees it)."""
    context = context or RunContext()
    root = cases_root(request)
    suites = request.suites if suites is None else suites
    workers = request.worker_count if workers is None else workers
    argv = [python or sys.executable, "-m", "pytest", "-c", str(ini)]
    argv += ["--rootdir", str(root)]
    argv += [
        "-p",
        "accelkit.suite.session.plugin",
        "-p",
        "pytest_timeout",
        "-p",
        "no:cacheprovider",
    ]
    # pytest's unraisable-exception plugin collects garbage 5 times at the end of every
    # session and worker: 1 s with torch loaded, for each of a run's ~10 processes.
    argv += ["-p", "no:unraisableexception"]
    argv += ["--accelkit-device", request.device, "--accelkit-seed", str(request.seed)]
    argv += ["--accelkit-results", str(results_path)]
    if events_fd is not None:
        argv += ["--accelkit-events-fd", str(events_fd)]
    if events_file is not None:
        argv += ["--accelkit-events-file", str(events_file)]
    argv += ["--accelkit-timeout", str(request.timeout_s)]
    argv += ["--accelkit-breadth", request.breadth, "--timeout", str(request.timeout_s)]
    # The thread method ends the worker process: it also stops a hang in native code.
    argv += ["--timeout-method", "thread", "-rfEs", "--tb=short", "-q"]
    if workers > 0:
        argv += ["-p", "xdist.plugin", "-n", str(workers)]
        argv += ["--max-worker-restart", str(_MAX_WORKER_RESTARTS)]
    if request.expectations is not None:
        argv += ["--accelkit-expectations", str(request.expectations.resolve())]
    if request.measure_ceilings:
        argv.append("--accelkit-measure-ceilings")
    if request.record_outputs is not None:
        argv += ["--accelkit-outputs", str(request.record_outputs.resolve())]
    if pass_number > 1:
        argv += ["--accelkit-pass", str(pass_number)]
    if lockstep is not None:
        argv += ["--accelkit-lockstep", *lockstep]
    if context.target is not None:
        argv += ["--accelkit-target", context.target]
    if context.required:
        argv += ["--accelkit-required", ",".join(context.required)]
    if request.keyword:
        argv += ["-k", request.keyword]
    if request.case:
        argv += ["--accelkit-case", request.case]
    if request.shard is not None:
        argv += ["--accelkit-shard", request.shard]
    if request.durations_from is not None:
        argv += ["--accelkit-durations", str(request.durations_from.resolve())]
    if request.compile_only:
        argv += ["--accelkit-compile-only", str(root / COMPILE_ONLY_CASES)]
    else:
        argv += _case_paths(request, suites)
    return argv


def _case_paths(request: RunRequest, suites: tuple[str, ...]) -> list[str]:
    """The folders (or, for --case, the one module) pytest collects: a case id's first two
    parts name its suite and module (`conformance/ops/exp/float32` is in
    conformance/test_ops.py), so one case costs collecting one module, not the suite."""
    if request.case is not None:
        parts = request.case.split("/")
        root = cases_root(request)
        module = root / parts[0] / f"test_{parts[1]}.py" if len(parts) > 1 else None
        if parts[0] in suites and module is not None and module.is_file():
            return [str(module)]
    return [str(suite_path(request, suite)) for suite in suites]


def run(request: RunRequest, on_event: EventCallback | None = None) -> RunOutcome:
    """Run the suite on this host as planned; raises BadInput/Unavailable before starting
    anything."""
    from accelkit.results.io import load_results
    from accelkit.results.junit import write_junit
    from accelkit.results.writer import ResultsWriter

    validate(request)
    if request.image is not None:
        raise ValueError("an --image run goes through accelkit.suite.run.container")
    if request.node_rank > 0:
        raise ValueError("node 1 and up serve ranks: accelkit.suite.run.runner.serve")
    check_device(request)
    context = run_context(request)
    with (
        tempfile.TemporaryDirectory(prefix="accelkit-run-") as tmp,
        _nodes(request),
        _run_workers(request),
    ):
        # Absolute: pytest runs with the cases folder as its working directory.
        results_path = (request.json_path or Path(tmp) / "results.json").resolve()
        log_path = (request.log_path or Path(tmp) / "pytest.log").resolve()
        first = header(request, context)
        if "perf" in request.suites:
            first.run.passes = 1
            first.run.threads = request.perf_threads
        ResultsWriter(results_path, first).write(durable=True)
        emit = on_event or (lambda e: None)
        emit(run_plan.plan_event(request, phases(request)))
        pytest_exit = NO_TESTS
        for index, (suites, workers) in enumerate(phases(request)):
            if index:  # the file stays `finished: null` until the last phase has ended
                _reopen(results_path)
            emit(run_plan.session_event(suites[0], 1, request.passes))
            status = run_pytest(
                request,
                results_path,
                log_path,
                emit,
                suites=suites,
                workers=workers,
                append_log=index > 0,
                context=context,
            )
            pytest_exit = combined_exit(pytest_exit, status)
            if status not in (0, 1, NO_TESTS):
                break
        results = load_results(results_path)
        if request.passes > 1 and pytest_exit in (0, 1) and _measured_perf(results):
            results, status = _more_passes(request, results, results_path, log_path, emit, context)
            pytest_exit = combined_exit(pytest_exit, status)
        if not results.cases and not outcome.empty_share(results, pytest_exit):
            _refuse_a_run_without_cases(request, results_path, log_path, pytest_exit)
        if not results.cases:
            pytest_exit = 0  # this shard's share of a selection that has cases is empty
        if request.junit_path is not None:
            write_junit(results, request.junit_path)
        exit_code = outcome.exit_code(results, pytest_exit)
        kept_log: Path | None = log_path
        if request.log_path is None:
            kept_log = None
            if exit_code != ExitCode.OK or pytest_exit not in (0, 1):
                kept_log = keep_log(log_path)
        return RunOutcome(
            results=results, exit_code=exit_code, log_path=kept_log, pytest_exit=pytest_exit
        )


def serve(request: RunRequest, say: Callable[[str], None] | None = None) -> int:
    """Node 1 and up of a multi-node run (`--nnodes N --node-rank R`, R > 0): run this
    node's ranks of every job node 0 publishes, until node 0 finishes; the jobs served."""
    from accelkit.suite.distributed import multinode

    validate(request)
    check_device(request)
    return multinode.follow(_node_config(request), say)


def _node_config(request: RunRequest) -> Any:
    from accelkit.suite.distributed.multinode import NodeConfig

    assert request.rdzv_endpoint is not None
    dumps = ""
    if request.json_path is not None:
        path = request.json_path.resolve()
        dumps = str(path.with_name(f"{path.stem}-flight-recorder"))
    return NodeConfig(
        nnodes=request.nnodes,
        node_rank=request.node_rank,
        endpoint=request.rdzv_endpoint,
        join_timeout_s=request.join_timeout_s,
        cases_root=str(cases_root(request)),
        dumps_dir=dumps,
    )


@contextlib.contextmanager
def _nodes(request: RunRequest) -> Iterator[None]:
    """Node 0 of a multi-node run: host the store for the run, wait for every node, and
    tell the pytest child where it is (`accelkit.suite.distributed.multinode`)."""
    if request.nnodes == 1:
        yield
        return
    from accelkit.suite.distributed import multinode

    with multinode.hosted(_node_config(request)) as (_, config):
        previous = os.environ.get(multinode.ENV)
        os.environ[multinode.ENV] = config.to_env()  # the pytest child's environment
        try:
            yield
        finally:
            if previous is None:
                os.environ.pop(multinode.ENV, None)
            else:
                os.environ[multinode.ENV] = previous


def _run_workers(request: RunRequest) -> contextlib.AbstractContextManager[Any]:
    """Several passes: host the perf cases' run-scoped workers
    (accelkit.suite.session.run_scoped)."""
    from accelkit.suite.session import run_scoped

    several = "perf" in request.suites and request.passes > 1
    return run_scoped.hosting() if several else contextlib.nullcontext()


def phases(request: RunRequest) -> list[tuple[tuple[str, ...], int]]:
    """The pytest sessions of a run, in order, as (suites, xdist workers): conformance with
    the requested workers, then the perf cases in one worker (0 stays 0), so no perf case
    is ever timed while another case runs beside it."""
    planned: list[tuple[tuple[str, ...], int]] = []
    if "conformance" in request.suites:
        planned.append((("conformance",), request.worker_count))
    if "perf" in request.suites:
        planned.append((("perf",), min(request.worker_count, 1)))
    if request.case is not None:  # one case: only its suite's session
        planned = [p for p in planned if request.case.split("/")[0] in p[0]] or planned
    return planned


def combined_exit(first: int, second: int) -> int:
    """One pytest exit status for two sessions: "no tests" only when neither ran any;
    otherwise the worse (0 ok < 1 failures < 2 interrupted < 3 internal < 4 usage)."""
    if first == NO_TESTS:
        return second
    if second == NO_TESTS:
        return first
    return max(first, second)


def _reopen(results_path: Path) -> None:
    from accelkit.results.io import load_results, write_results

    write_results(_with_run(load_results(results_path), finished=None), results_path)


def _measured_perf(results: Any) -> bool:
    return any(case.suite == "perf" and case.metrics for case in results.cases)


def _more_passes(
    request: RunRequest,
    results: Any,
    results_path: Path,
    log_path: Path,
    on_event: EventCallback,
    context: RunContext | None = None,
) -> tuple[Any, int]:
    """Passes 2..N of the perf cases (see DEFAULT_PASSES), each pooled into the results
    file as it ends. Until the last pass has ended the file says `finished: null`, so an
    interrupted run still leaves a valid file with every pass that completed.

    Their events reach `on_event` as `pass` (one per pass: number, passes, total cases)
    and `pass_case` (a case of that pass, with its number)."""
    from accelkit.results.io import load_results, write_results
    from accelkit.results.merge import pool
    from accelkit.results.model import Summary
    from accelkit.results.writer import ResultsWriter

    finished = results.run.finished
    pytest_exit = 0
    header_only = results.model_copy(update={"cases": [], "summary": Summary()})
    for number in range(2, request.passes + 1):
        results = _with_run(results, finished=None)
        write_results(results, results_path)
        part_path = results_path.with_name(f".{results_path.name}.pass{number}")
        try:
            # The pass adds its Inductor cache counters to the run's so far.
            header = _with_run(header_only, compile_cache=results.run.compile_cache)
            ResultsWriter(part_path, header).write()
            on_event(run_plan.session_event("perf", number, request.passes))
            exit_status = run_pytest(
                request,
                part_path,
                log_path,
                _pass_events(number, request.passes, on_event),
                pass_number=number,
                suites=("perf",),
                workers=min(request.worker_count, 1),
                append_log=True,
                context=context,
            )
            if exit_status == NO_TESTS:  # nothing repeats in later passes (all single_pass)
                results = _with_run(results, finished=finished)
                break
            part = load_results(part_path)
        finally:
            part_path.unlink(missing_ok=True)
        labels = (f"passes 1-{number - 1}", f"pass {number}")
        results = _with_run(
            pool([results, part], labels),
            finished=part.run.finished,
            compile_cache=part.run.compile_cache,
        )
        results.run.passes = number
        pytest_exit = max(pytest_exit, exit_status)
        if exit_status not in (0, 1):
            break
    write_results(results, results_path)
    return results, pytest_exit


def _with_run(results: Any, **update: Any) -> Any:
    return results.model_copy(update={"run": results.run.model_copy(update=update)})


def _pass_events(number: int, passes: int, on_event: EventCallback) -> EventCallback:
    def forward(event: Event) -> None:
        kind = event.get("event")
        if kind == "collected":
            on_event(
                {"event": "pass", "pass": number, "passes": passes, "total": event.get("total")}
            )
        elif kind == "case":
            on_event({"event": "pass_case", "pass": number, "case": event.get("case")})
        elif kind == "start":
            on_event(event)

    return forward


def pass_header(what: str, number: int, label: str = "") -> bytes:
    """The line that opens a pass's output in the run's pytest log."""
    return f"\n===== accelkit: {what}, pass {number}{label} =====\n".encode()


def run_pytest(
    request: RunRequest,
    results_path: Path,
    log_path: Path,
    on_event: EventCallback,
    *,
    pass_number: int = 1,
    suites: tuple[str, ...] | None = None,
    workers: int | None = None,
    append_log: bool = False,
    context: RunContext | None = None,
    python: str | None = None,
    env: dict[str, str] | None = None,
    label: str = "",
    lockstep: tuple[str, str] | None = None,
    started: Callable[[subprocess.Popen[bytes]], None] | None = None,
) -> int:
    """One pytest process; `python`, `env` (default: this interpreter, `child_env` with
    the run context's variables and the perf threads) and `lockstep` (see `pytest_argv`) for
    the interleaved A/B mode, `label` names it in the log; `started` gets the process once it
    runs (to stop it from another thread: `child_process.stop_group`)."""
    context = context or RunContext()
    read_fd, write_fd = os.pipe()
    argv = pytest_argv(
        request,
        results_path,
        write_fd,
        pass_number,
        suites=suites,
        workers=workers,
        context=context,
        python=python,
        lockstep=lockstep,
    )
    if env is None:
        env = {
            **child_env(request.device),
            **context.environment,
            **perf_env(request.perf_threads),
        }
    with open(log_path, "ab" if append_log else "wb") as log, child_process.sigterm_as_interrupt():
        if append_log:
            what = " ".join(suites or request.suites)
            log.write(pass_header(what, pass_number, label))
            log.flush()
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                pass_fds=(write_fd,),
                start_new_session=True,  # its own process group: we stop it and its workers
                preexec_fn=child_process.die_with_parent(),
                cwd=str(cases_root(request)),
            )
        finally:
            os.close(write_fd)
        if started is not None:
            started(proc)
        try:
            for event in _events(read_fd):
                on_event(event)
            return proc.wait()
        except BaseException:
            child_process.stop_group(proc)
            raise


def _events(read_fd: int) -> Iterator[Event]:
    with os.fdopen(read_fd, "r", encoding="utf-8") as stream:
        for line in stream:
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                if isinstance(event, dict):
                    yield event


def _refuse_a_run_without_cases(
    request: RunRequest, results_path: Path, log_path: Path, pytest_exit: int
) -> None:
    """Raise the one-line error of a pytest that ended before running any case: it could
    not start (2: bad input), the selection matched nothing (5: bad input), or pytest itself
    failed (3, 4, or 1: an uncaught exception, such as its plugin failing to import under a
    stale install). The results file the run began is removed first: no file means no suite
    ran, so a job cannot read this run as one that found nothing wrong."""
    error: BadInput | Failed
    if pytest_exit == 2:
        error = BadInput(f"the suite could not start: {last_error_line(log_path)}")
    elif pytest_exit == NO_TESTS:
        what = f"-k {request.keyword!r}" if request.keyword else "the selection"
        error = BadInput(f"{what} matched no case")
    elif pytest_exit in (1, 3, 4):
        kept = log_path if request.log_path is not None else keep_log(log_path)
        error = Failed(
            f"pytest failed before running any case: {last_error_line(log_path)} "
            f"(pytest log: {kept})"
        )
    else:
        return
    results_path.unlink(missing_ok=True)
    raise error


def keep_log(log_path: Path) -> Path:
    """A copy of the pytest log that outlives the run's folder, for an error to point at."""
    fd, kept = tempfile.mkstemp(prefix="accelkit-pytest-", suffix=".log")
    with os.fdopen(fd, "wb") as out, open(log_path, "rb") as src:
        out.write(src.read())
    return Path(kept)


def last_error_line(log_path: Path) -> str:
    """The pytest log's last error line (or its last line), for a one-line error."""
    try:
        lines = log_path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return "no log"
    for line in reversed(lines):
        stripped = line.strip()
        if stripped.startswith(("ERROR", "E ", "pytest: error")) or "Error" in stripped:
            return stripped[:300]
    return (lines[-1].strip() if lines else "no output")[:300]
