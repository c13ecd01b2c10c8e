"""accelkit's pytest plugin: the suite's device option, capability markers, metrics, and
(in the controlling process) the results file and the event stream the CLI renders.

Loaded with `-p accelkit.suite.session.plugin` by `accelkit.suite.run.runner`; pytest-xdist hands
the
same options to every worker. Nothing here imports torch at module level.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from collections.abc import Callable, Generator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from accelkit.backends.base import Backend
    from accelkit.results.writer import ResultsWriter

from accelkit.suite.session import compile_cache, lockstep
from accelkit.suite.session.caseid import case_id, case_seed_of, suite_of

METRIC_PROPERTY = "accelkit.metric"
#: What a passed case verified, in one line: the case's message when it passes.
NOTE_PROPERTY = "accelkit.note"
#: Set on a case whose required capability is missing: its setup failure is a `failed` case.
REQUIRED_PROPERTY = "accelkit.required_missing"
REPRO_PROPERTY = "accelkit.repro"
HANG_PROPERTY = "accelkit.hang"
MAX_MESSAGE_CHARS = 4000


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("accelkit", "accelkit suite")
    group.addoption("--accelkit-device", default="cpu", help="accelkit backend name")
    group.addoption("--accelkit-seed", type=int, default=0, help="base random seed")
    group.addoption(
        "--accelkit-results", default=None, help="results file to fill (controller only)"
    )
    group.addoption("--accelkit-events-fd", type=int, default=None, help="fd for JSON events")
    group.addoption("--accelkit-events-file", default=None, help="file to append them to")
    group.addoption(
        "--accelkit-timeout", type=float, default=0.0, help="per-case timeout, for reporting"
    )
    group.addoption(
        "--accelkit-breadth",
        default="quick",
        choices=("quick", "full"),
        help="quick: the default subset of samples/gradients; full: everything",
    )
    group.addoption(
        "--accelkit-measure-ceilings",
        action="store_true",
        default=False,
        help="perf: measure copy bandwidth and large-GEMM rate here instead of a peak table",
    )
    group.addoption(
        "--accelkit-expectations",
        default=None,
        help="YAML file of known failures on this backend (default: the bundled one)",
    )
    group.addoption(
        "--accelkit-target",
        default=None,
        help="the run's GPU target (sm_107, gfx942): the cross-compile cases compile for it",
    )
    group.addoption(
        "--accelkit-compile-only",
        action="store_true",
        default=False,
        help="run only the cases marked cross_compile (no device)",
    )
    group.addoption(
        "--accelkit-required",
        default="",
        help="comma-separated capabilities every case must have: a case whose `requires` "
        "names a missing one fails instead of skipping",
    )
    group.addoption(
        "--accelkit-case",
        default=None,
        help="run only the case with this id, or those under it (conformance/linalg/lstsq)",
    )
    group.addoption(
        "--accelkit-outputs",
        default=None,
        help="save every conformance case's compared answers in this folder (accelkit diff)",
    )
    group.addoption(
        "--accelkit-pass",
        type=int,
        default=1,
        help="measurement pass (1-based): passes after the first run only the perf cases "
        "not marked single_pass (accelkit test --passes)",
    )
    group.addoption("--accelkit-shard", help="run shard I/N of the cases (accelkit test --shard)")
    group.addoption(
        "--accelkit-lockstep", nargs=2, help="SOCKET SIDE: accelkit.suite.session.lockstep"
    )
    group.addoption("--accelkit-durations", help="results file to balance shards by durations")


_MARKERS = (
    "requires(*capabilities): run only when every named capability is available; "
    "otherwise skip with the capability table's reason",
    "cross_compile: compiles for the run's --target with no device; the only cases a "
    "--compile-only run keeps, and left out of runs that have no target",
    "single_pass: a perf case measured in the first pass only (its samples are already "
    "separate processes, or it is too slow to repeat); see accelkit test --passes",
    "shard_group(name): cases that share an expensive session; accelkit test --shard "
    "keeps them in one shard",
)


def pytest_configure(config: pytest.Config) -> None:
    for marker in _MARKERS:
        config.addinivalue_line("markers", marker)
    # Inductor's caches kept between runs, before anything compiles, and their counters.
    config.pluginmanager.register(compile_cache.CacheCounts(config), "accelkit-compile-cache")
    _apply_inductor_target()
    is_worker = hasattr(config, "workerinput")
    lockstep.from_pytest(config, is_worker)
    results = config.getoption("--accelkit-results", default=None)
    if not is_worker and results:
        events_fd = config.getoption("--accelkit-events-fd")
        events_file = config.getoption("--accelkit-events-file")
        events = os.fdopen(events_fd, "w", buffering=1) if events_fd is not None else None
        if events_file is not None:
            events = open(events_file, "a", buffering=1, encoding="utf-8")  # noqa: SIM115
        timeout_s = float(config.getoption("--accelkit-timeout"))
        recorder = ResultsRecorder(Path(results), events=events, timeout_s=timeout_s)
        config.pluginmanager.register(recorder, "accelkit-recorder")


def _apply_inductor_target() -> None:
    """Point Inductor at the image's GPU target (`accelkit setup cuda --arch sm_107`).

    Inductor reads `torch._inductor.config.cuda.arch` from its config only, not from the
    environment: the test image records the target in ACCELKIT_INDUCTOR_CUDA_ARCH.
    """
    arch = os.environ.get("ACCELKIT_INDUCTOR_CUDA_ARCH", "").strip()
    if arch:
        import torch._inductor.config as inductor_config

        inductor_config.cuda.arch = arch


# --------------------------------------------------------------------------------------
# What every case sees (worker side)


def _capability_table(config: pytest.Config) -> dict[str, dict[str, Any]]:
    """The capability table of this run, as written in the results file's header."""
    cached: dict[str, dict[str, Any]] | None = getattr(config, "_accelkit_capabilities", None)
    if cached is None:
        path = config.getoption("--accelkit-results", default=None)
        cached = {}
        if path:
            try:
                cached = dict(json.loads(Path(path).read_text(encoding="utf-8"))["capabilities"])
            except (OSError, ValueError, KeyError):
                cached = {}
        if not cached:
            from accelkit.probe.capabilities import capabilities

            cached = {
                name: {"available": a.available, "reason": a.reason}
                for name, a in capabilities().items()
            }
        config._accelkit_capabilities = cached  # type: ignore[attr-defined]
    return cached


def _required(config: pytest.Config) -> frozenset[str]:
    text = str(config.getoption("--accelkit-required", default="") or "")
    return frozenset(name.strip() for name in text.split(",") if name.strip())


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip a case whose `requires` capability is missing here, with the probe's reason;
    a capability the run requires (its backend and target's, or --require) fails it."""
    table = _capability_table(item.config)
    required = _required(item.config)
    for mark in item.iter_markers("requires"):
        for name in mark.args:
            entry = table.get(name)
            if entry is None:
                raise pytest.UsageError(f"{item.nodeid}: unknown capability {name!r}")
            if entry.get("available"):
                continue
            reason = f"{name}: {entry.get('reason') or 'unavailable'}"
            if name in required:
                item.user_properties.append((REQUIRED_PROPERTY, name))
                pytest.fail(f"required capability missing: {reason}", pytrace=False)
            pytest.skip(reason)


@pytest.fixture(scope="session", autouse=True)
def _torch_loaded() -> None:
    """torch and the collected cases, loaded, leave the cyclic GC's care (freeze_loaded)."""
    from accelkit.torch_import import freeze_loaded, torch_or_none

    torch_or_none()
    freeze_loaded()


@pytest.fixture(scope="session")
def accelkit_backend(pytestconfig: pytest.Config) -> str:
    """accelkit's backend name for this run: cpu, cuda, rocm, xpu or mps."""
    return str(pytestconfig.getoption("--accelkit-device"))


@pytest.fixture(scope="session")
def accelkit_target(pytestconfig: pytest.Config) -> str | None:
    """The run's GPU target (sm_107, gfx942), or None when it has none."""
    value = pytestconfig.getoption("--accelkit-target", default=None)
    return str(value) if value else None


@pytest.fixture(scope="session")
def backend(accelkit_backend: str) -> Backend:
    """The backend under test (accelkit.backends): cases ask it for its facts (collective
    backend, graph capture, host memory, TF32, rank devices) instead of naming backends."""
    from accelkit import backends

    return backends.get(accelkit_backend)


@pytest.fixture(scope="session")
def device(backend: Backend) -> str:
    """The torch device type the cases run on (ROCm devices are `cuda` in torch)."""
    return backend.torch_device_type


@pytest.fixture(scope="session")
def breadth(pytestconfig: pytest.Config) -> str:
    """How much of the operator database to cover: "quick" (default) or "full"."""
    return str(pytestconfig.getoption("--accelkit-breadth"))


@pytest.hookimpl(trylast=True)  # after -k and -m: a shard splits what they selected
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep only the case named by --accelkit-case; keep this shard's cases (`--shard`);
    keep only the repeated perf cases in passes after the first (of the shard's: every pass
    runs the same ones); mark the cases this backend's expectations list as known failures
    (xfail)."""
    from accelkit.suite.expectations import load_expectations

    only = config.getoption("--accelkit-case", default=None)
    if only:
        _keep(config, items, lambda item: in_case(case_id(item.nodeid), only))
    from accelkit.suite.session.sharding import select_shard

    select_shard(config, items)
    if int(config.getoption("--accelkit-pass", default=1)) > 1:
        _keep(config, items, is_repeated_in_passes)
    if config.getoption("--accelkit-compile-only", default=False):
        _keep(config, items, lambda item: item.get_closest_marker("cross_compile") is not None)
    elif not config.getoption("--accelkit-target", default=None):
        _keep(config, items, lambda item: item.get_closest_marker("cross_compile") is None)

    path = config.getoption("--accelkit-expectations", default=None)
    backend = str(config.getoption("--accelkit-device"))
    breadth = str(config.getoption("--accelkit-breadth"))
    known = load_expectations(backend, Path(path) if path else None, breadth)
    if not known:
        return
    for item in items:
        entry = known.get(case_id(item.nodeid))
        if entry is not None:
            item.add_marker(pytest.mark.xfail(reason=entry.describe(), strict=False))


def _keep(config: pytest.Config, items: list[pytest.Item], wanted: Callable[..., bool]) -> None:
    dropped = [item for item in items if not wanted(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if wanted(item)]


def in_case(case: str, selection: str) -> bool:
    """Whether `case` is the case `selection` names, or one under it (`--case` takes a case
    id or a prefix of ids: conformance/linalg/lstsq)."""
    prefix = selection.rstrip("/")
    return case == prefix or case.startswith(prefix + "/")


def is_repeated_in_passes(item: pytest.Item) -> bool:
    """Whether a case runs in every measurement pass: perf cases not marked single_pass."""
    return suite_of(item.nodeid) == "perf" and item.get_closest_marker("single_pass") is None


@pytest.fixture(scope="session")
def capability_table(pytestconfig: pytest.Config) -> dict[str, dict[str, Any]]:
    return _capability_table(pytestconfig)


@pytest.fixture(autouse=True)
def _accelkit_seed(request: pytest.FixtureRequest) -> int:
    """Seed every case from the run's seed and its own id: replayable with `--seed N`."""
    seed = case_seed_of(int(request.config.getoption("--accelkit-seed")), request.node.nodeid)
    random.seed(seed)
    try:
        import numpy

        numpy.random.seed(seed)
    except ImportError:
        pass
    import sys

    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed)
    return seed


@pytest.fixture(autouse=True)
def _accelkit_outputs(request: pytest.FixtureRequest) -> Generator[None, None, None]:
    """With --accelkit-outputs DIR, keep what each conformance case computed
    (accelkit.suite.session.outputs): the material of differential runs."""
    folder = request.config.getoption("--accelkit-outputs", default=None)
    nodeid = request.node.nodeid
    if not folder or suite_of(nodeid) != "conformance":
        yield
        return
    from accelkit.suite.session.outputs import recording

    with recording(case_id(nodeid), Path(folder)):
        yield


@pytest.fixture
def case_seed(_accelkit_seed: int) -> int:
    """This case's seed: torch, random and numpy were seeded with it as the case started."""
    return _accelkit_seed


@pytest.fixture
def record_metric(request: pytest.FixtureRequest) -> Callable[..., None]:
    """Record a measurement: `record_metric(name, value, unit, higher_is_better, samples)`.

    Extra keyword arguments (iqr, noisy, peak_fraction, ...) are kept in the results file.
    """

    def record(
        name: str,
        value: float,
        unit: str,
        higher_is_better: bool,
        samples: list[float] | None = None,
        **extra: Any,
    ) -> None:
        metric = {
            "value": float(value),
            "unit": unit,
            "higher_is_better": bool(higher_is_better),
            "samples": [float(s) for s in (samples or [])],
            **extra,
        }
        request.node.user_properties.append((METRIC_PROPERTY, {"name": name, **metric}))

    return record


@pytest.fixture
def record_note(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """Say what a case verified (`record_note("cubin for sm_107 ...")`): the message of the
    case when it passes; a failure or skip keeps its own reason."""

    def record(note: str) -> None:
        request.node.user_properties.append((NOTE_PROPERTY, note))

    return record


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Attach what `accelkit repro` needs to a failed case's report (and, for a distributed
    case that hung, where each rank stopped); perf cases always carry theirs."""
    report = yield
    failed = report.failed and call.when in ("setup", "call") and call.excinfo is not None
    perf_case = call.when == "call" and report.passed and suite_of(item.nodeid) == "perf"
    if not (failed or perf_case):
        return report
    from accelkit.suite.session.failures import failure_info
    from accelkit.suite.session.replay import replay_record

    info = failure_info(call.excinfo.value) if failed and call.excinfo is not None else {}
    hang = info.pop("hang", None)
    if hang is not None:
        report.user_properties.append((HANG_PROPERTY, hang))
    if call.when == "call":
        record = replay_record(item, info)
        if record is not None:
            report.user_properties.append((REPRO_PROPERTY, record))
    return report


# --------------------------------------------------------------------------------------
# The controlling process: turn reports into cases, keep the results file, emit events


def _message(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    if longrepr is None:
        return ""
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # a skip: (file, line, reason)
        reason = str(longrepr[2])
        return reason.removeprefix("Skipped: ")
    crash = getattr(longrepr, "reprcrash", None)
    text = str(getattr(crash, "message", "") or "") if crash is not None else ""
    if not text:
        text = str(longrepr).strip()
        lines = [ln for ln in text.splitlines() if ln.startswith("E ")]
        text = "\n".join(ln[1:].strip() for ln in lines) if lines else text
    # pytest.fail("...") reads "Failed: ..."; the status says it failed already.
    return text.removeprefix("Failed: ")[:MAX_MESSAGE_CHARS]


def _required_missing(report: pytest.TestReport) -> bool:
    return any(key == REQUIRED_PROPERTY for key, _ in report.user_properties)


class ResultsRecorder:
    """Collects the reports of each case into one `Case` and keeps the file and the CLI told."""

    def __init__(self, path: Path, *, events: IO[str] | None, timeout_s: float) -> None:
        from accelkit.results.io import load_results
        from accelkit.results.writer import ResultsWriter

        self._writer = ResultsWriter(path, load_results(path), min_interval_s=0.25)
        self._events = events
        self._timeout_s = timeout_s
        self._started: dict[str, float] = {}
        self._partial: dict[str, dict[str, Any]] = {}
        self._total_announced = False
        self._previous_sigterm: Any = None

    @property
    def writer(self) -> ResultsWriter:
        """The results file's writer (the compile-cache plugin adds its counters through it
        before the session finishes the file)."""
        return self._writer

    # events ---------------------------------------------------------------------------
    def _emit(self, event: dict[str, Any]) -> None:
        if self._events is None:
            return
        try:
            self._events.write(json.dumps(event) + "\n")
        except (BrokenPipeError, OSError, ValueError):
            self._events = None  # the reader is gone; keep writing the results file

    # session --------------------------------------------------------------------------
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        def on_sigterm(signum: int, frame: Any) -> None:
            self._writer.flush()
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

        self._previous_sigterm = signal.signal(signal.SIGTERM, on_sigterm)

    def _announce_total(self, ids: list[str]) -> None:
        if not self._total_announced:
            self._total_announced = True
            self._emit({"event": "collected", "total": len(ids)})

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        from accelkit.suite.session.sharding import selections_key

        if not hasattr(session.config, "workerinput"):
            self._record_selections(session.config.stash.get(selections_key(), {}))
            if session.items:
                self._announce_total([item.nodeid for item in session.items])

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        from accelkit.suite.session.sharding import SHARD_SELECTIONS

        sent = getattr(node, "workeroutput", {}).get(SHARD_SELECTIONS)
        if sent:
            self._record_selections(json.loads(sent))

    def _record_selections(self, selections: dict[str, dict[str, Any]]) -> None:
        """What this shard's session chose from, into the results file's `run.shard`."""
        shard = self._writer.results().run.shard
        if shard is None or not selections:
            return
        from accelkit.results.model import ShardSelection

        merged = {**shard.selections}
        merged.update({k: ShardSelection.model_validate(v) for k, v in selections.items()})
        self._writer.update_run(shard=shard.model_copy(update={"selections": merged}))

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self._announce_total(ids)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self._finish_case(
                report.nodeid or "collection",
                "error",
                f"collection failed: {_message(report)}",
                0.0,
            )

    # cases ----------------------------------------------------------------------------
    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        self._started[nodeid] = time.monotonic()
        self._partial[nodeid] = {"status": None, "message": "", "duration": 0.0, "metrics": {}}
        self._emit({"event": "start", "id": case_id(nodeid)})

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        nodeid = report.nodeid
        state = self._partial.setdefault(
            nodeid, {"status": None, "message": "", "duration": 0.0, "metrics": {}}
        )
        state["duration"] += float(getattr(report, "duration", 0.0) or 0.0)
        for key, value in report.user_properties:
            if key == METRIC_PROPERTY and isinstance(value, dict):
                metric = dict(value)
                state["metrics"][str(metric.pop("name"))] = metric
            elif key in (REPRO_PROPERTY, HANG_PROPERTY) and isinstance(value, dict):
                state[key.removeprefix("accelkit.")] = value
        when = report.when
        if when not in ("setup", "call", "teardown"):  # xdist reports a lost worker as "???"
            self._crashed(nodeid, report)
            return
        if report.skipped and hasattr(report, "wasxfail"):
            state["status"] = state["status"] or "skipped"
            state["message"] = f"known failure: {report.wasxfail or _message(report)}"
            state["extra"] = {"known_failure": True}
        elif report.passed and when == "call" and hasattr(report, "wasxfail"):
            # Listed as a known failure but passed: report it so the list shrinks.
            state["status"] = "passed"
            state["message"] = f"unexpected pass: listed as known failure ({report.wasxfail})"
            state["extra"] = {"unexpected_pass": True}
        elif report.skipped:
            state["status"] = state["status"] or "skipped"
            state["message"] = state["message"] or _message(report)
        elif report.failed:
            if when == "call" or _required_missing(report):
                state["status"] = "failed"
                state["message"] = _message(report)
            elif state["status"] in (None, "passed"):
                state["status"] = "error"
                state["message"] = f"{when} error: {_message(report)}"
        elif when == "call":
            state["status"] = state["status"] or "passed"
            notes = [str(v) for key, v in report.user_properties if key == NOTE_PROPERTY]
            if state["status"] == "passed" and notes and not state["message"]:
                state["message"] = "; ".join(notes)[:MAX_MESSAGE_CHARS]
        if when == "teardown":
            self._finish_case(nodeid, state["status"] or "passed", state["message"], None)

    def _crashed(self, nodeid: str, report: pytest.TestReport) -> None:
        started = self._started.get(nodeid)
        elapsed = time.monotonic() - started if started is not None else 0.0
        if self._timeout_s > 0 and elapsed >= self._timeout_s * 0.98:
            status = "timeout"
            message = f"exceeded the per-case timeout of {self._timeout_s:g} s and was stopped"
        else:
            status = "crashed"
            message = f"the process running the case died ({_message(report) or 'no report'})"
        self._finish_case(nodeid, status, message, elapsed)

    def _finish_case(self, nodeid: str, status: str, message: str, duration: float | None) -> None:
        from accelkit.results.model import Case, Metric

        state = self._partial.pop(nodeid, {"duration": 0.0, "metrics": {}})
        self._started.pop(nodeid, None)
        if duration is None:
            duration = float(state.get("duration", 0.0))
        metrics = {
            name: Metric.model_validate(value) for name, value in state.get("metrics", {}).items()
        }
        case = Case(
            id=case_id(nodeid),
            suite=suite_of(nodeid),  # type: ignore[arg-type]
            status=status,  # type: ignore[arg-type]
            message=message,
            duration_s=round(duration, 6),
            metrics=metrics,
            repro=state.get("repro"),
            hang=state.get("hang"),
            **state.get("extra", {}),
        )
        self._writer.add(case)
        self._emit({"event": "case", "case": case.model_dump(mode="json")})

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
        if interrupted:  # leave `finished` unset: the run did not finish
            self._writer.flush()
        else:
            self._writer.finish()
        self._emit({"event": "finished", "exitstatus": int(exitstatus)})
        if self._previous_sigterm is not None:
            signal.signal(signal.SIGTERM, self._previous_sigterm)
