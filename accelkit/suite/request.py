"""`accelkit test` as data: its options (declared once, `RUN_OPTIONS`), the frozen `RunRequest`
they become, the argv it turns back into, and every check a user can fail before anything
starts or is written.

The CLI builds its command from `RUN_OPTIONS`; the container path (`accelkit.suite.container`)
runs `accelkit test` inside an image with `request.to_argv()`; the matrix rehearsal parses a
leg's `test_args` with `RunRequest.from_argv`, which is the same click parser.
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

SuiteChoice = Literal["conformance", "perf", "all"]
Breadth = Literal["quick", "full"]
SUITE_CHOICES: tuple[str, ...] = get_args(SuiteChoice)
BREADTH_CHOICES: tuple[str, ...] = get_args(Breadth)
SUITES: tuple[str, ...] = ("conformance", "perf")

SUITE_ROOT = Path(__file__).resolve().parent
DEFAULT_TIMEOUT_S = 300.0
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

RUN_OPTIONS: tuple[Opt, ...] = (
    Opt("device", ("--device", "-d"), str, "cpu", "Backend to test: cpu, cuda, rocm, xpu or mps."),
    Opt("suite", ("--suite",), str, "all", "Which suite: conformance, perf or all."),
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
        f"CPU, at most {MAX_DEFAULT_WORKERS}; 0 runs them in one process without crash "
        "isolation. Perf cases always run one at a time.",
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
        DEFAULT_PASSES,
        "perf: measure in this many separate processes and pool their samples, so compare "
        "sees run-to-run noise (the compile-latency case runs once).",
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
    passes: int = DEFAULT_PASSES
    measure_ceilings: bool = False
    expectations: Path | None = None
    cases_dir: Path | None = None
    log_path: Path | None = None
    record_outputs: Path | None = None
    image: str | None = None
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
        return cls(**{**values, "timeout_s": float(values["timeout_s"])}, argv=tuple(argv))

    @classmethod
    def from_argv(cls, argv: Sequence[str]) -> RunRequest:
        """`accelkit test ARGV` parsed by the command's own parser (nothing runs)."""
        params = options.parse(RUN_OPTIONS, argv, "accelkit test")
        return cls.from_params(params, ("accelkit", "test", *argv))

    def params(self) -> dict[str, Any]:
        values = asdict(self)
        values.pop("argv")
        return values

    def to_argv(self, *, always: Sequence[str] = ()) -> list[str]:
        """The options of `accelkit test` that make this request (defaults left out, but for
        the fields named in `always`)."""
        return options.to_argv(RUN_OPTIONS, self.params(), always=always)

    @property
    def suites(self) -> tuple[str, ...]:
        return SUITES if self.suite == "all" else (self.suite,)

    @property
    def worker_count(self) -> int:
        return default_workers() if self.workers is None else self.workers

    def with_argv(self, argv: Sequence[str]) -> RunRequest:
        return replace(self, argv=tuple(argv))


def _choice(flag: str, name: str, value: object, valid: tuple[str, ...]) -> None:
    if value not in valid:
        raise BadInput(f"{flag}: unknown {name} {value!r}; valid: {', '.join(valid)}")


def cases_root(request: RunRequest) -> Path:
    """The folder holding the request's conformance/ and perf/ case folders."""
    return request.cases_dir.resolve() if request.cases_dir is not None else SUITE_ROOT


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
    for suite in request.suites:
        if not (cases_root(request) / suite).is_dir():
            raise BadInput(f"--suite {suite}: {cases_root(request) / suite} has no cases")


def suite_choice(value: str) -> SuiteChoice:
    _choice("--suite", "suite", value, SUITE_CHOICES)
    return cast(SuiteChoice, value)
