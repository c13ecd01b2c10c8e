"""`accelkit test` as data: its options (declared once, `RUN_OPTIONS`), the frozen `RunRequest`
they become, the argv it turns back into, and every check a user can fail before anything
starts or is written.

The CLI builds its command from `RUN_OPTIONS`; the container path (`accelkit.suite.run.container`)
runs `accelkit test` inside an image with `request.to_argv()`; the matrix rehearsal parses a
leg's `test_args` with `RunRequest.from_argv`, which is the same click parser.

`RUN_OPTIONS` declares the command's 30 options with their help texts beside the request
fields and the checks of those fields: each option, its field and its validation in one place.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal, cast, get_args

from accelkit import options
from accelkit.errors import BadInput
from accelkit.options import Opt
from accelkit.results.names import SUITES
from accelkit.suite.session.sharding import ShardSpec

SuiteChoice = Literal["conformance", "perf", "all", "distributed"]
Breadth = Literal["quick", "full"]
SUITE_CHOICES: tuple[str, ...] = get_args(SuiteChoice)
BREADTH_CHOICES: tuple[str, ...] = get_args(Breadth)
DISTRIBUTED_CASES = Path("conformance") / "test_distributed.py"
"""`--suite distributed`: the distributed cases of the conformance suite, alone (the suite a
multi-node run runs)."""

SUITE_ROOT = Path(__file__).resolve().parent.parent
#: The cases a compile-only run collects, under the cases root.
COMPILE_ONLY_CASES = "conformance/test_cross_compile.py"
DEFAULT_TIMEOUT_S = 300.0
DEFAULT_JOIN_TIMEOUT_S = 600.0
MAX_DEFAULT_WORKERS = 4
"""The default conformance workers are one per usable CPU, at most this many: each worker
holds torch and the operator database (about 1.3 GB), and on an accelerator they share one
device."""
DEFAULT_PASSES = 5
"""Measurement passes of the perf cases: each pass is a separate pytest process, and the
samples of all passes are pooled with their pass as the group (`accelkit.results.merge`).
Samples taken in one process share its conditions (memory layout, a burst of load from
another job) and are not independent; five groups are the fewest with which
`accelkit compare`'s rank test on per-group medians can confirm a change at the 1% level."""

AB_DEFAULT_PASSES = 10
"""Passes a side of `--ab` without --passes: compare's sign-flip test at 1% (results/stats.py)
confirms a change from 8 pairs on only when all agree, from 10 when one small pair does not."""


def _default_passes(ab: object) -> int:
    return DEFAULT_PASSES if ab is None else AB_DEFAULT_PASSES


DEFAULT_CPU_THREADS = 1
"""Intra-op threads of the perf cases when the device is the host CPU and `--threads` is not
given. With more, every OpenMP barrier waits for whichever core another process holds: on
a loaded 2-core machine a 128^3 GEMM took 16 ms per call with 2 threads, 45 us with 1."""

RUN_OPTIONS: tuple[Opt, ...] = (
    Opt("device", ("--device", "-d"), str, "cpu", "Backend to test: cpu, cuda, rocm, xpu or mps."),
    Opt(
        "suite",
        ("--suite",),
        str,
        "all",
        "Which suite: conformance, perf or all; distributed: only the distributed cases of "
        "conformance (what --nnodes runs).",
    ),
    Opt("keyword", ("-k",), str, None, "Only cases matching this pytest -k expression.", True),
    Opt(
        "case",
        ("--case",),
        str,
        None,
        "Only the case with this id, as the results file names it "
        "(conformance/opinfo/exp/float32), or the cases under it (conformance/linalg/lstsq).",
        True,
    ),
    Opt(
        "json_path",
        ("--json",),
        Path,
        None,
        "Write the results file here (updated as cases finish).",
        True,
    ),
    Opt("junit_path", ("--junit",), Path, None, "Write JUnit XML here.", True),
    Opt(
        "timeout_s",
        ("--timeout",),
        float,
        DEFAULT_TIMEOUT_S,
        "Per-case timeout in seconds (0: none).",
    ),
    Opt(
        "workers",
        ("--workers",),
        int,
        None,
        "Worker processes for conformance cases (a crash costs one case); default: one per "
        f"CPU, at most {MAX_DEFAULT_WORKERS} (1 with --case); 0 runs them in one process "
        "without crash isolation. Perf cases always run one at a time.",
        optional=True,
        show_default=False,
    ),
    Opt("seed", ("--seed",), int, 0, "Base random seed (to replay a run)."),
    Opt(
        "breadth",
        ("--breadth",),
        str,
        "quick",
        "quick: a fast subset of the operator database; full: all of it.",
    ),
    Opt(
        "passes",
        ("--passes",),
        int,
        None,
        "perf: measure in this many separate processes and pool their samples, so compare "
        "sees run-to-run noise (the compile-latency case runs once). Default "
        f"{DEFAULT_PASSES}; with --ab, {AB_DEFAULT_PASSES} a side.",
        optional=True,
    ),
    Opt(
        "threads",
        ("--threads",),
        int,
        None,
        "perf: intra-op CPU threads (torch.set_num_threads, and numpy's BLAS for the host "
        f"canaries) the perf cases run with; default {DEFAULT_CPU_THREADS} when the device is "
        "the CPU, torch's own choice on an accelerator; 0: torch's own choice. Recorded in the "
        "results file (run.threads).",
        optional=True,
        show_default=False,
    ),
    Opt(
        "measure_ceilings",
        ("--measure-ceilings",),
        bool,
        False,
        "perf: measure this device's copy bandwidth and large-GEMM rate and report fractions "
        "of those instead of the peak table's.",
    ),
    Opt(
        "expectations",
        ("--expectations",),
        Path,
        None,
        "YAML list of known failures (default: the bundled list for the device).",
        True,
    ),
    Opt(
        "cases_dir",
        ("--cases",),
        Path,
        None,
        "Run the cases in this directory (with conformance/ and perf/ folders) instead of "
        "the built-in suite.",
        True,
    ),
    Opt("log_path", ("--log",), Path, None, "Write pytest's own log here.", True),
    Opt(
        "target",
        ("--target",),
        str,
        None,
        "GPU target of the run (sm_107, gfx942; default: the device's own): its required "
        "capabilities apply, and the suite's Triton kernels are compiled for it.",
        True,
    ),
    Opt(
        "compile_only",
        ("--compile-only",),
        bool,
        False,
        "Only compile the suite's Triton kernels for --target with the real compiler and "
        "check the binaries; needs no device (conformance/cross_compile/<target>/...).",
    ),
    Opt(
        "require",
        ("--require",),
        str,
        None,
        "Capabilities this run must have besides the backend's own, comma-separated: a "
        "case that needs a missing one fails instead of being skipped.",
        True,
    ),
    Opt(
        "waive",
        ("--waive",),
        str,
        None,
        "Required capabilities this run does without, comma-separated: cases needing them "
        "skip again (a matrix leg's `waive` says why).",
        True,
    ),
    Opt(
        "ab",
        ("--ab",),
        str,
        None,
        "perf: interleaved A/B: measure two torch builds in alternating passes (A B, B A, ...) "
        "and compare them pair by pair; A and B are python interpreters, venv folders or "
        "test images (image:REF, a fresh container a pass) whose python has torch, pytest, "
        "pytest-xdist, pytest-timeout, numpy and pydantic. Writes both results files "
        "(--json R.json: R.a.json, R.b.json, and compare's JSON in R.compare.json) and prints "
        "compare's verdict of B against A; exits 1 when B regressed. With --suite perf only, "
        "not with --image.",
        optional=True,
        show_default=False,
        nargs=2,
    ),
    Opt(
        "record_outputs",
        ("--record-outputs",),
        Path,
        None,
        "Save what each conformance case computed in this folder (one file per case), "
        "for `accelkit diff` between two runs.",
        True,
    ),
    Opt(
        "image",
        ("--image",),
        str,
        None,
        "Run the suite inside this container image (see `accelkit setup`); results still "
        "land at the --json/--junit paths on this host.",
        True,
    ),
    Opt(
        "shard",
        ("--shard",),
        str,
        None,
        "Run shard I of N (e.g. 2/3): a deterministic part of the cases; the N shards together "
        "run every case once (merge their results with `accelkit merge`).",
        True,
    ),
    Opt(
        "durations_from",
        ("--durations-from",),
        Path,
        None,
        "With --shard: balance the shards by the case durations in this results file (e.g. "
        "last night's), largest first; without it they are balanced by case count. Any run: "
        "the progress view's total and time left start from that file's cases and durations.",
        True,
    ),
    Opt(
        "nnodes",
        ("--nnodes",),
        int,
        1,
        "Run the distributed cases' ranks as torchrun jobs over this many nodes (with --suite "
        "distributed); start the same command on every node, each with its --node-rank.",
    ),
    Opt(
        "node_rank",
        ("--node-rank",),
        int,
        0,
        "This node's rank (0 to nnodes-1). Node 0 hosts the rendezvous store at "
        "--rdzv-endpoint and writes the results; the others run their ranks.",
    ),
    Opt(
        "rdzv_endpoint",
        ("--rdzv-endpoint",),
        str,
        None,
        "HOST:PORT of node 0, reachable from every node: torchrun's c10d rendezvous and "
        "accelkit's store.",
        True,
    ),
    Opt(
        "join_timeout_s",
        ("--join-timeout",),
        float,
        DEFAULT_JOIN_TIMEOUT_S,
        "Seconds node 0 waits for every other node to join (and they for node 0).",
    ),
    Opt(
        "explore_seeds",
        ("--explore-seeds",),
        int,
        0,
        "Explore: run the conformance suite at N seeds nobody tuned against (drawn at random; "
        "with --seed S > 0: S to S+N-1). What disagrees is a finding, not a failure: each is "
        "listed with its reproducer and an issue text (--json F: F, F's .md, and each seed's "
        "results beside it; default: a new accelkit-explore-<time>/ folder). Exit 0 unless "
        "a run could not run.",
    ),
)


def default_workers() -> int:
    """Conformance workers when `--workers` is not given: one per CPU this process may use
    (its affinity mask, which container CPU limits set), at most MAX_DEFAULT_WORKERS."""
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        usable = os.cpu_count() or 1
    return max(1, min(usable, MAX_DEFAULT_WORKERS))


@dataclass(frozen=True)
class RunRequest:
    """One `accelkit test`: every field is one of `RUN_OPTIONS` (same name), except `argv`,
    the command line as the user typed it (recorded in the results file)."""

    device: str = "cpu"
    suite: SuiteChoice = "all"
    keyword: str | None = None
    case: str | None = None
    json_path: Path | None = None
    junit_path: Path | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    workers: int | None = None
    """None: `default_workers()` where the suite runs (inside the image for --image)."""
    seed: int = 0
    breadth: Breadth = "quick"
    passes: int = DEFAULT_PASSES  # from_params: AB_DEFAULT_PASSES with --ab, unless given
    threads: int | None = None
    """None: `DEFAULT_CPU_THREADS` on the CPU, torch's default elsewhere (`perf_threads`)."""
    measure_ceilings: bool = False
    expectations: Path | None = None
    cases_dir: Path | None = None
    log_path: Path | None = None
    target: str | None = None
    """None: the device's own, where the backend has targets (`runner.run_target`)."""
    compile_only: bool = False
    require: str | None = None
    waive: str | None = None
    ab: tuple[str, str] | None = None
    """Two python interpreters (or venv folders), measured interleaved (`accelkit.suite.run.ab`)."""
    record_outputs: Path | None = None
    image: str | None = None
    shard: str | None = None
    """`I/N` (`accelkit.suite.session.sharding.ShardSpec`); None: every case."""
    durations_from: Path | None = None
    nnodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str | None = None
    join_timeout_s: float = DEFAULT_JOIN_TIMEOUT_S
    explore_seeds: int = 0
    """N > 0: the exploration mode (`accelkit.results.findings`)."""
    argv: tuple[str, ...] = field(default_factory=tuple, compare=False)

    @classmethod
    def from_params(cls, params: Mapping[str, Any], argv: Sequence[str] = ()) -> RunRequest:
        """The request of parsed option values; BadInput for a choice that does not exist."""
        values = {**options.defaults(RUN_OPTIONS), **params}
        _choice("--suite", "suite", values["suite"], SUITE_CHOICES)
        _choice("--breadth", "breadth", values["breadth"], BREADTH_CHOICES)
        known = {f.name for f in fields(cls)} - {"argv"}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"not options of accelkit test: {', '.join(unknown)}")
        if values.get("ab") is not None:
            values["ab"] = tuple(str(v) for v in values["ab"])
        if values.get("passes") is None:
            values["passes"] = _default_passes(values.get("ab"))
        floats = {key: float(values[key]) for key in ("timeout_s", "join_timeout_s")}
        return cls(**{**values, **floats}, argv=tuple(argv))

    @classmethod
    def from_argv(cls, argv: Sequence[str]) -> RunRequest:
        """`accelkit test ARGV` parsed by the command's own parser (nothing runs)."""
        params = options.parse(RUN_OPTIONS, argv, "accelkit test")
        return cls.from_params(params, ("accelkit", "test", *argv))

    def params(self) -> dict[str, Any]:
        values = asdict(self)
        values.pop("argv")
        if values["passes"] == _default_passes(self.ab):
            values["passes"] = None  # the default `from_params` gives: left out of argv
        return values

    def to_argv(self, *, always: Sequence[str] = ()) -> list[str]:
        """The options of `accelkit test` that make this request (defaults left out, but for
        the fields named in `always`)."""
        return options.to_argv(RUN_OPTIONS, self.params(), always=always)

    @property
    def suites(self) -> tuple[str, ...]:
        if self.suite == "distributed" or self.compile_only:  # cross-compile: conformance
            return ("conformance",)
        return SUITES if self.suite == "all" else (self.suite,)

    @property
    def required_extra(self) -> tuple[str, ...]:
        """The capabilities --require adds."""
        return capability_list(self.require)

    @property
    def waived(self) -> tuple[str, ...]:
        """The capabilities --waive takes off the required list."""
        return capability_list(self.waive)

    @property
    def perf_threads(self) -> int | None:
        """The intra-op threads the perf cases run with; None: torch's own choice."""
        if self.threads is not None:
            return self.threads or None
        from accelkit import backends

        return DEFAULT_CPU_THREADS if backends.get(self.device).host_memory else None

    @property
    def worker_count(self) -> int:
        if self.nnodes > 1:  # one pytest process: the rank sessions run one job at a time
            return 0
        if self.workers is None:  # one case (--case) keeps one worker busy, never two
            return min(default_workers(), 1) if self.case is not None else default_workers()
        return self.workers

    def with_argv(self, argv: Sequence[str]) -> RunRequest:
        return replace(self, argv=tuple(argv))

    @property
    def shard_spec(self) -> ShardSpec | None:
        return None if self.shard is None else ShardSpec.parse(self.shard)


def _choice(flag: str, name: str, value: object, valid: tuple[str, ...]) -> None:
    if value not in valid:
        raise BadInput(f"{flag}: unknown {name} {value!r}; valid: {', '.join(valid)}")


def capability_list(text: str | None) -> tuple[str, ...]:
    """`a, b,c` -> ("a", "b", "c"): the capability names of --require and --waive."""
    if not text:
        return ()
    return tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))


def cases_root(request: RunRequest) -> Path:
    """The folder holding the request's conformance/ and perf/ case folders."""
    return request.cases_dir.resolve() if request.cases_dir is not None else SUITE_ROOT


def suite_path(request: RunRequest, suite: str) -> Path:
    """What pytest collects for `suite`: its folder, or the distributed cases' module."""
    if request.suite == "distributed":
        return cases_root(request) / DISTRIBUTED_CASES
    return cases_root(request) / suite


def validate(request: RunRequest) -> None:
    """Check everything a user can get wrong before anything starts or is written (BadInput,
    exit 2); the same checks whether the suite runs here or in an image."""
    from accelkit import backends
    from accelkit.results.io import check_output_path

    backends.get(request.device)
    _choice("--suite", "suite", request.suite, SUITE_CHOICES)
    _choice("--breadth", "breadth", request.breadth, BREADTH_CHOICES)
    if request.expectations is not None:
        from accelkit.suite.expectations import load_expectations

        load_expectations(request.device, request.expectations)  # BadInput when malformed
    if request.timeout_s < 0:
        raise BadInput(
            f"--timeout: must be >= 0 seconds (0 disables it), got {request.timeout_s:g}"
        )
    if request.workers is not None and request.workers < 0:
        raise BadInput(f"--workers: must be >= 0, got {request.workers}")
    if request.passes < 1:
        raise BadInput(f"--passes: must be >= 1, got {request.passes}")
    if request.threads is not None and request.threads < 0:
        raise BadInput(f"--threads: must be >= 0 (0: torch's own choice), got {request.threads}")
    for flag, path in (
        ("--json", request.json_path),
        ("--junit", request.junit_path),
        ("--log", request.log_path),
    ):
        if path is not None:
            check_output_path(path, flag=flag)
    outputs = [p.resolve() for p in (request.json_path, request.junit_path, request.log_path) if p]
    if len(set(outputs)) != len(outputs):
        raise BadInput("--json, --junit and --log must name different files")
    if request.record_outputs is not None:
        folder = request.record_outputs
        if folder.exists() and not folder.is_dir():
            raise BadInput(f"--record-outputs {folder}: not a directory")
        if not folder.exists() and not folder.parent.is_dir():
            raise BadInput(f"--record-outputs {folder}: directory {folder.parent} does not exist")
    if request.cases_dir is not None and not request.cases_dir.is_dir():
        raise BadInput(f"--cases {request.cases_dir}: not a directory")
    if request.keyword is not None and not request.keyword.strip():
        raise BadInput("-k: empty expression")
    if request.ab is not None:
        if request.suite != "perf":
            raise BadInput("--ab: measures perf cases only; add --suite perf")
        if request.image is not None:
            raise BadInput("--ab: compares two interpreters on this host, not with --image")
        if request.junit_path is not None:
            raise BadInput("--ab: writes two results files; --junit is not supported with it")
        from accelkit.suite.run.interpreters import check_side

        for spec in request.ab:
            check_side(spec)  # BadInput when it names no interpreter, venv or image
    if request.case is not None and not request.case.strip("/ "):
        raise BadInput("--case: empty case id")
    if request.case is not None and request.case.split("/", 1)[0] not in request.suites:
        raise BadInput(
            f"--case {request.case}: a case id starts with the suite it runs in "
            f"({' or '.join(f'{s}/' for s in request.suites)})"
        )
    if request.image is not None:
        from accelkit.inputs import check_image

        check_image("--image", request.image)
    _validate_shard(request)
    _validate_nodes(request)
    _validate_exploration(request)
    for suite in request.suites:
        if not suite_path(request, suite).exists():
            raise BadInput(f"--suite {request.suite}: {suite_path(request, suite)} has no cases")
    _validate_target(request)
    _validate_capabilities(request)


MAX_EXPLORE_SEEDS = 1000


def _validate_exploration(request: RunRequest) -> None:
    if request.explore_seeds == 0:
        return
    if not 0 < request.explore_seeds <= MAX_EXPLORE_SEEDS:
        raise BadInput(
            f"--explore-seeds: must be 1 to {MAX_EXPLORE_SEEDS}, got {request.explore_seeds}"
        )
    if request.suite not in ("conformance", "all") or request.compile_only:
        raise BadInput("--explore-seeds: explores the conformance suite; use --suite conformance")
    for flag, given in (
        ("--ab", request.ab is not None),
        ("--shard", request.shard is not None),
        ("--nnodes", request.nnodes > 1),
        ("--junit", request.junit_path is not None),
        ("--log", request.log_path is not None),
        ("--measure-ceilings", request.measure_ceilings),
    ):
        if given:
            raise BadInput(f"--explore-seeds: not with {flag}")


def _validate_shard(request: RunRequest) -> None:
    if request.shard is not None:
        ShardSpec.parse(request.shard)
    if request.durations_from is not None:
        from accelkit.results.io import load_results

        try:
            load_results(request.durations_from)
        except BadInput as exc:
            raise BadInput(f"--durations-from {exc}") from None


def _validate_nodes(request: RunRequest) -> None:
    if request.nnodes < 1:
        raise BadInput(f"--nnodes: must be >= 1, got {request.nnodes}")
    if not 0 <= request.node_rank < request.nnodes:
        raise BadInput(
            f"--node-rank {request.node_rank}: must be 0 to {request.nnodes - 1} (--nnodes "
            f"{request.nnodes})"
        )
    if request.nnodes == 1:
        if request.rdzv_endpoint is not None:
            raise BadInput("--rdzv-endpoint: only with --nnodes 2 or more")
        return
    from accelkit.suite.distributed.multinode import parse_endpoint

    if request.rdzv_endpoint is None:
        raise BadInput(f"--nnodes {request.nnodes}: needs --rdzv-endpoint HOST:PORT (node 0)")
    parse_endpoint(request.rdzv_endpoint)
    if request.suite != "distributed":
        raise BadInput(
            f"--nnodes {request.nnodes}: runs the distributed cases only; add --suite distributed"
        )
    if request.join_timeout_s <= 0:
        raise BadInput(f"--join-timeout: must be > 0 seconds, got {request.join_timeout_s:g}")
    if request.shard is not None:
        raise BadInput("--shard: not with --nnodes (a multi-node run is one shard)")
    if request.image is not None:
        raise BadInput(
            "--image: not with --nnodes yet; run `accelkit test --nnodes ...` inside the image "
            "on every node, with the host's network"
        )
    if request.node_rank > 0:
        given = [
            flag
            for flag, value in (("--json", request.json_path), ("--junit", request.junit_path))
            if value is not None
        ]
        if given:
            raise BadInput(
                f"{', '.join(given)}: node {request.node_rank} writes no results (node 0 does)"
            )


def _validate_target(request: RunRequest) -> None:
    from accelkit import backends

    backend = backends.get(request.device)
    if request.target is not None:
        backend.check_target(request.target, flag="--target", families=False)
    if not request.compile_only:
        return
    if request.target is None:
        able = [target for target in backend.targets if backend.cross_target(target)]
        raise BadInput(
            f"--compile-only needs --target, one of {', '.join(able)}"
            if able
            else f"--compile-only: the {request.device} backend compiles for no GPU target "
            "without its device"
        )
    if request.suite == "perf":
        raise BadInput("--compile-only runs conformance cases only, not --suite perf")
    if backend.cross_target(request.target) is None:
        raise BadInput(
            f"--compile-only: the {request.device} backend cannot compile for "
            f"{request.target} without its device"
        )
    if not (cases_root(request) / COMPILE_ONLY_CASES).is_file():
        raise BadInput(f"--compile-only: {cases_root(request) / COMPILE_ONLY_CASES} is missing")


def _validate_capabilities(request: RunRequest) -> None:
    import difflib

    from accelkit.probe.capabilities import names

    known = names()
    for flag, listed in (("--require", request.required_extra), ("--waive", request.waived)):
        for name in listed:
            if name not in known:
                close = difflib.get_close_matches(name, known, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise BadInput(f"{flag}: unknown capability {name!r}{hint}")
    both = sorted(set(request.required_extra) & set(request.waived))
    if both:
        raise BadInput(f"--require and --waive both name {', '.join(both)}")


def suite_choice(value: str) -> SuiteChoice:
    _choice("--suite", "suite", value, SUITE_CHOICES)
    return cast(SuiteChoice, value)
