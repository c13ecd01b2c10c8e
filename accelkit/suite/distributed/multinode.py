"""Rank sessions across nodes as torchrun jobs: `accelkit test --suite distributed --nnodes N
--node-rank R --rdzv-endpoint HOST:PORT`, the same command on every node.

Node 0 hosts a c10d TCPStore at the rendezvous endpoint for the whole run and runs the pytest
session of the distributed cases (one process: the sessions run one at a time). Its cases are
the single-host ones: when a case's fixture calls `distributed.run_ranks`, `run_job` here
publishes the rank function as a job in the store, and every node (node 0 here, the others
in `follow`) starts its part with torchrun (`torch.distributed.run`, c10d rendezvous on the
same endpoint, its agents clients of node 0's store, a rendezvous id per job):

    node 0 (accelkit test --node-rank 0)            node R (accelkit test --node-rank R)
      hosts the store at HOST:PORT                    connects; registers accelkit/node/R
      waits for every node; runs pytest                 follows the jobs:
        a fixture calls run_ranks(fn, world_size)
          accelkit/job/<seq> = spec  ------------->     accelkit/job/<seq>
          torchrun --nnodes N --rdzv-endpoint          torchrun --nnodes N --rdzv-endpoint
            ranks: <job>/started, result, fr/<r>          (its ranks report the same way)
          reads every rank's result, or judges       <job>/node/R = how its torchrun ended
        the case asserts as on one host
      accelkit/finished  ----------------------->     leaves

torchrun's c10d rendezvous gives the global ranks in its own order (`--node-rank` is used by
its static backend only), so a rank names its accelkit node itself (`<job>/started/<rank>`).
Each node splits the job's world evenly (the first nodes take one more), so a session keeps
the world size its cases expect; the session must have at least one rank per node.

A rank that dies, hangs or raises fails the job with that rank named, never the run: node
0 stops waiting when every rank reported, a rank raised, a node's torchrun ended without
some of its ranks' results (its failures: `accelkit.suite.distributed.torchrun_node`), or the
deadline
passed; then it asks the ranks still running for their Flight Recorder dumps (ranks that
their node's agent stops after a sibling failed dump on SIGTERM), writes every dump it got
as `rank_<r>` (torchfrtrace's layout) under the run's flight-recorder folder, stops the job
on every node, and raises AssertionError with the verdict. The session's cases then fail
with it, as on one host.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from accelkit.errors import BadInput, Unavailable
from accelkit.suite.distributed.rank_verdict import Verdict, death, judge, last_collective

ENV = "ACCELKIT_MULTINODE"
DEFAULT_JOIN_TIMEOUT_S = 600.0
ENDPOINT = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9.-]{0,252}):([0-9]{1,5})")
POLL_S = 0.2
SETTLE_S = 10.0
"""After every rank reported: how long the nodes' torchrun get to end on their own."""
DUMP_WAIT_S = 15.0
"""How long the ranks still running get to send their Flight Recorder dumps."""
STOP_WAIT_S = 30.0
"""How long a stopped node gets to report how its torchrun ended."""
LOG_TAIL_LINES = 15


@dataclass(frozen=True)
class NodeConfig:
    """This node's place in a multi-node run (what `accelkit test --nnodes` was given)."""

    nnodes: int
    node_rank: int
    endpoint: str
    join_timeout_s: float = DEFAULT_JOIN_TIMEOUT_S
    token: str = ""
    """The run's id, from node 0 (torchrun rendezvous ids are `<token>-<job>`)."""
    cases_root: str = ""
    dumps_dir: str = ""
    """Node 0: where Flight Recorder dumps of failed jobs go."""

    @property
    def host(self) -> str:
        return parse_endpoint(self.endpoint)[0]

    @property
    def port(self) -> int:
        return parse_endpoint(self.endpoint)[1]

    def to_env(self) -> str:
        return json.dumps(asdict(self))


def parse_endpoint(text: str, flag: str = "--rdzv-endpoint") -> tuple[str, int]:
    """`HOST:PORT` -> (host, port); BadInput (one line) for anything else."""
    match = ENDPOINT.fullmatch(text.strip())
    if match is None:
        raise BadInput(f"{flag} {text!r}: expected HOST:PORT, e.g. 10.0.0.5:29500")
    port = int(match.group(2))
    if not 1 <= port <= 65535:
        raise BadInput(f"{flag} {text}: port must be 1 to 65535")
    return match.group(1).strip("[]"), port


def active() -> NodeConfig | None:
    """The multi-node run this process belongs to (the pytest session on node 0), or None."""
    text = os.environ.get(ENV)
    if not text:
        return None
    return NodeConfig(**json.loads(text))


def split_world(world_size: int, nnodes: int) -> list[int]:
    """Ranks per node: even, the first nodes one more (3 over 2 nodes: [2, 1])."""
    if world_size < nnodes:
        raise AssertionError(
            f"a rank session of {world_size} ranks cannot span {nnodes} nodes "
            "(torchrun starts at least one rank per node)"
        )
    base, extra = divmod(world_size, nnodes)
    return [base + (1 if node < extra else 0) for node in range(nnodes)]


# --------------------------------------------------------------------------------------
# Rank functions by reference (a node imports them from its own cases folder)


def function_reference(fn: Callable[..., Any], cases_root: str) -> dict[str, str]:
    """How another node finds `fn`: its file under the cases folder (cases are pytest
    modules, imported under their base name) or, elsewhere, its importable module."""
    source = inspect.getsourcefile(fn)
    root = Path(cases_root).resolve() if cases_root else None
    if source is not None and root is not None:
        path = Path(source).resolve()
        if root in path.parents:
            return {
                "file": path.relative_to(root).as_posix(),
                "module": fn.__module__,
                "name": fn.__qualname__,
            }
    return {"module": fn.__module__, "name": fn.__qualname__}


def load_function(reference: Mapping[str, str], cases_root: str) -> Callable[..., Any]:
    module_name = reference["module"]
    module = sys.modules.get(module_name)
    if module is None and reference.get("file"):
        path = Path(cases_root) / reference["file"]
        sys.path.insert(0, str(path.parent))
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    elif module is None:
        module = importlib.import_module(module_name)
    target: Any = module
    for part in reference["name"].split("."):
        target = getattr(target, part)
    return target  # type: ignore[no-any-return]


# --------------------------------------------------------------------------------------
# The store at the rendezvous endpoint


def connect(config: NodeConfig, timeout_s: float | None = None) -> Any:
    """A client of node 0's store (retrying until `timeout_s`, default the join timeout)."""
    import torch.distributed as dist

    wait = config.join_timeout_s if timeout_s is None else timeout_s
    try:
        with _quiet_stderr():
            return dist.TCPStore(  # type: ignore[attr-defined]
                config.host, config.port, is_master=False, timeout=timedelta(seconds=wait)
            )
    except Exception as exc:
        raise Unavailable(
            f"--rdzv-endpoint {config.endpoint}: node 0 did not answer within {wait:g} s "
            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
        ) from None


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """c10d logs a failed connect or listen (with a C++ stack) on file descriptor 2; the
    caller turns the exception into accelkit's one-line error instead."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


@contextlib.contextmanager
def hosted(config: NodeConfig) -> Iterator[tuple[Any, NodeConfig]]:
    """Node 0: host the store at the endpoint for the run, wait for every other node, and
    tell them the run is over on the way out. Yields (store, config with the run's token)."""
    import torch.distributed as dist

    try:
        with _quiet_stderr():
            store = dist.TCPStore(  # type: ignore[attr-defined]
                config.host,
                config.port,
                is_master=True,
                wait_for_workers=False,
                timeout=timedelta(seconds=config.join_timeout_s),
            )
    except Exception as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise Unavailable(
            f"--rdzv-endpoint {config.endpoint}: cannot listen there: {first}"
        ) from None
    config = replace(config, token=uuid.uuid4().hex[:12])
    store.set("accelkit/run", config.token)
    try:
        _wait_for_nodes(store, config)
        yield store, config
    finally:
        with contextlib.suppress(Exception):
            store.set("accelkit/finished", "1")
            # Only the nodes that joined can say they left: a node that never came is not
            # waited for (node 0 alone reports that at once, not STOP_WAIT_S later).
            joined = [n for n in range(1, config.nnodes) if store.check([f"accelkit/node/{n}"])]
            _wait_keys(store, [f"accelkit/left/{n}" for n in joined], STOP_WAIT_S)


def _wait_for_nodes(store: Any, config: NodeConfig) -> None:
    keys = [f"accelkit/node/{n}" for n in range(1, config.nnodes)]
    missing = _wait_keys(store, keys, config.join_timeout_s)
    if missing:
        nodes = ", ".join(key.rsplit("/", 1)[1] for key in missing)
        raise Unavailable(
            f"node {nodes} did not join {config.endpoint} within {config.join_timeout_s:g} s "
            "(start `accelkit test` with the same --nnodes and --rdzv-endpoint on every node)"
        )


def _wait_keys(store: Any, keys: list[str], timeout_s: float) -> list[str]:
    """Wait until every key exists; the keys still missing after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        missing = [key for key in keys if not store.check([key])]
        if not missing or time.monotonic() >= deadline:
            return missing
        time.sleep(POLL_S)


# --------------------------------------------------------------------------------------
# One node's part of one job: torchrun, through accelkit.suite.distributed.torchrun_node


class NodeJob:
    """torchrun for this node's ranks of `spec`, in its own process group."""

    def __init__(self, spec: Mapping[str, Any], config: NodeConfig, workdir: Path) -> None:
        self.spec, self.config = spec, config
        self.local_size = int(spec["local_sizes"][config.node_rank])
        self.failures_path = workdir / f"job{spec['seq']}-failures.json"
        self.log_path = workdir / f"job{spec['seq']}-node{config.node_rank}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.stopped = False

    def argv(self) -> list[str]:
        join = max(1, int(self.config.join_timeout_s))
        return [
            sys.executable,
            "-m",
            "accelkit.suite.distributed.torchrun_node",
            str(self.failures_path),
            "--nnodes",
            str(self.config.nnodes),
            "--nproc-per-node",
            str(self.local_size),
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            self.config.endpoint,
            "--rdzv-id",
            str(self.spec["rdzv_id"]),
            # The agents are clients of node 0's store, wherever they run.
            "--rdzv-conf",
            f"is_host=false,join_timeout={join}",
            "--max-restarts",
            "0",
            "--monitor-interval",
            "0.5",
            "--module",
            "accelkit.suite.distributed.rank_worker",
        ]

    def start(self) -> None:
        env = {key: value for key, value in os.environ.items() if key != ENV}
        env["ACCELKIT_RANK_JOB"] = json.dumps(
            {
                "store": self.config.endpoint,
                "node": self.config.node_rank,
                "cases_root": self.config.cases_root,
                "timeout_s": self.config.join_timeout_s,
                "spec": dict(self.spec),
            }
        )
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                self.argv(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )

    def poll(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def stop(self) -> None:
        """SIGTERM to torchrun and its ranks (their agent stops them; they dump and exit),
        then SIGKILL."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.stopped = True
        for sig, wait_s in ((signal.SIGTERM, STOP_WAIT_S), (signal.SIGKILL, 5.0)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(timeout=wait_s)
                break
            except subprocess.TimeoutExpired:
                continue
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def report(self) -> dict[str, Any]:
        """How this node's torchrun ended: its exit code, the ranks that failed, its log's
        last lines."""
        failures: dict[str, Any] = {}
        with contextlib.suppress(OSError, ValueError):
            failures = json.loads(self.failures_path.read_text(encoding="utf-8"))
        tail: list[str] = []
        with contextlib.suppress(OSError):
            lines = self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
            tail = [line for line in lines if line.strip()][-LOG_TAIL_LINES:]
        return {
            "node": self.config.node_rank,
            "exit": self.poll(),
            "stopped": self.stopped,
            "failures": failures,
            "log_tail": tail,
        }


# --------------------------------------------------------------------------------------
# Node 0: one job, from publishing it to the verdict


_store_client: Any = None


def _leader_store(config: NodeConfig) -> Any:
    global _store_client
    if _store_client is None:
        _store_client = connect(config, timeout_s=60.0)
    return _store_client


def run_job(
    fn: Callable[[int, int], Any],
    *,
    world_size: int,
    backend: str,
    timeout_s: float,
    env: Mapping[str, str] | None,
    init_kwargs: Callable[[int, int], dict[str, Any]] | None,
    pg_timeout: timedelta,
) -> list[Any]:
    """`fn(rank, world_size)` as a torchrun job over every node; values by rank, or
    AssertionError naming the ranks that failed (see the module docstring)."""
    config = active()
    if config is None:
        raise RuntimeError("run_job: not in a multi-node run")
    store = _leader_store(config)
    sizes = split_world(world_size, config.nnodes)
    seq = int(store.add("accelkit/jobs", 1))
    name = f"{seq:02d}-{fn.__name__.strip('_')}"
    spec = {
        "seq": seq,
        "job": f"accelkit/j{seq}",
        "name": name,
        "fn": function_reference(fn, config.cases_root),
        "init": function_reference(init_kwargs, config.cases_root) if init_kwargs else None,
        "backend": backend,
        "env": dict(env or {}),
        "world_size": world_size,
        "local_sizes": sizes,
        "pg_timeout_s": pg_timeout.total_seconds(),
        "rdzv_id": f"accelkit-{config.token}-{seq}",
    }
    store.set(f"accelkit/job/{seq}", json.dumps(spec))
    with tempfile.TemporaryDirectory(prefix="accelkit-node0-") as tmp:
        local = NodeJob(spec, config, Path(tmp))
        watch = _Watch(store, spec, config, local)
        try:
            local.start()
            verdict = watch.run(timeout_s)
        finally:
            watch.stop_everywhere()
    if verdict.ok:
        return [verdict.results[rank]["value"] for rank in range(world_size)]
    raise AssertionError(verdict.message())


class _Watch:
    """Node 0's view of one job in the store, and the job's end on every node."""

    def __init__(self, store: Any, spec: Mapping[str, Any], config: NodeConfig, local: NodeJob):
        self.store, self.spec, self.config, self.local = store, spec, config, local
        self.job = str(spec["job"])
        self.world_size = int(spec["world_size"])
        self.started: dict[int, dict[str, Any]] = {}
        self.results: dict[int, dict[str, Any]] = {}
        self.reports: dict[int, dict[str, Any]] = {}

    def _read(self) -> None:
        for rank in range(self.world_size):
            for table, key in ((self.started, "started"), (self.results, "result")):
                path = f"{self.job}/{key}/{rank}"
                if rank not in table and self.store.check([path]):
                    table[rank] = json.loads(self.store.get(path))
        if self.local.poll() is not None and 0 not in self.reports:
            self.store.set(f"{self.job}/node/0", json.dumps(self.local.report()))
        for node in range(self.config.nnodes):
            path = f"{self.job}/node/{node}"
            if node not in self.reports and self.store.check([path]):
                self.reports[node] = json.loads(self.store.get(path))

    def _judge(self, late: float | None) -> Verdict | None:
        return judge(
            self.world_size,
            self.config.nnodes,
            self.started,
            self.results,
            self.reports,
            timed_out=late,
        )

    def run(self, timeout_s: float) -> Verdict:
        deadline = time.monotonic() + timeout_s
        while True:
            self._read()
            late = timeout_s if time.monotonic() >= deadline else None
            verdict = self._judge(late)
            if verdict is not None:
                break
            time.sleep(POLL_S)
        if verdict.ok:
            self._settle()
            return verdict
        self.store.set(f"{self.job}/dump-request", "1")
        self._await_dumps()
        self.stop_everywhere()
        # With every node's report in, the cause is clearer: a rank that died on another
        # node comes before the ranks that raised because their peer was gone.
        final = self._judge(late)
        verdict = final if final is not None and not final.ok else verdict
        verdict.dumps = self._save_dumps()
        return verdict

    def _settle(self) -> None:
        """Every rank reported: give the nodes' torchrun a moment to end on their own (a
        node whose rank was killed on purpose ends at once; the others then wait in
        torchrun's exit barrier until stopped)."""
        deadline = time.monotonic() + SETTLE_S
        while len(self.reports) < self.config.nnodes and time.monotonic() < deadline:
            if any(rep.get("exit") not in (0, None) for rep in self.reports.values()):
                break
            time.sleep(POLL_S)
            self._read()

    def _await_dumps(self) -> None:
        deadline = time.monotonic() + DUMP_WAIT_S
        while time.monotonic() < deadline:
            self._read()
            waiting = [
                r
                for r in self.started
                if not self.store.check([f"{self.job}/fr/{r}"]) and self._may_dump(r)
            ]
            if not waiting:
                return
            time.sleep(POLL_S)

    def _may_dump(self, rank: int) -> bool:
        """A rank still running, or one that may have dumped as it was stopped."""
        report = self.reports.get(self.started[rank]["node"])
        if report is None:
            return True
        failure = report.get("failures", {}).get(str(rank))
        return failure is not None and death(failure)[1]

    def stop_everywhere(self) -> None:
        with contextlib.suppress(Exception):
            self.store.set(f"{self.job}/stop", "1")
        self.local.stop()
        with contextlib.suppress(Exception):
            self._read()
            if 0 not in self.reports:
                self.store.set(f"{self.job}/node/0", json.dumps(self.local.report()))
            deadline = time.monotonic() + STOP_WAIT_S
            while len(self.reports) < self.config.nnodes and time.monotonic() < deadline:
                time.sleep(POLL_S)
                self._read()

    def _save_dumps(self) -> str:
        """Every rank's dump as `rank_<r>` in this job's folder; one line naming them."""
        folder = Path(self.config.dumps_dir or tempfile.mkdtemp(prefix="accelkit-fr-"))
        folder = folder / str(self.spec["name"])
        by_node: dict[int, list[int]] = {}
        summaries: list[str] = []
        for rank in sorted(self.started):
            key = f"{self.job}/fr/{rank}"
            if not self.store.check([key]):
                continue
            data = self.store.get(key)
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"rank_{rank}").write_bytes(data)
            by_node.setdefault(int(self.started[rank]["node"]), []).append(rank)
            summaries.append(f"  rank {rank}: {last_collective(data)}")
        if not by_node:
            return "Flight Recorder: no rank sent a dump"
        nodes = "; ".join(
            f"node {node}: rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}"
            for node, ranks in sorted(by_node.items())
        )
        return "\n".join([f"Flight Recorder dumps ({nodes}) in {folder}", *summaries])


# --------------------------------------------------------------------------------------
# Nodes other than 0


def follow(config: NodeConfig, on_job: Callable[[str], None] | None = None) -> int:
    """Run this node's part of every job node 0 publishes, until node 0 finishes; the number
    of jobs served. Unavailable when node 0 does not answer or goes away."""
    say = on_job or (lambda text: None)
    store = connect(config)
    config = replace(config, token=store.get("accelkit/run").decode())
    store.set(f"accelkit/node/{config.node_rank}", json.dumps({"host": os.uname().nodename}))
    served = 0
    seq = 1
    with tempfile.TemporaryDirectory(prefix=f"accelkit-node{config.node_rank}-") as tmp:
        try:
            while True:
                key = f"accelkit/job/{seq}"
                if not store.check([key]):
                    if store.check(["accelkit/finished"]):
                        break
                    time.sleep(POLL_S)
                    continue
                spec = json.loads(store.get(key))
                job = NodeJob(spec, config, Path(tmp))
                say(f"job {seq} ({spec['name']}): {job.local_size} of {spec['world_size']} ranks")
                job.start()
                while job.poll() is None and not store.check([f"{spec['job']}/stop"]):
                    time.sleep(POLL_S)
                job.stop()
                report = job.report()
                store.set(f"{spec['job']}/node/{config.node_rank}", json.dumps(report))
                stopped = " (stopped by node 0: the job had ended)" if report["stopped"] else ""
                say(f"job {seq}: torchrun exit code {report['exit']}{stopped}")
                served += 1
                seq += 1
        except Unavailable:
            raise
        except Exception as exc:  # the store went away: node 0 ended without finishing
            raise Unavailable(f"lost node 0 at {config.endpoint}: {type(exc).__name__}") from None
        finally:
            with contextlib.suppress(Exception):
                store.set(f"accelkit/left/{config.node_rank}", "1")
    return served
