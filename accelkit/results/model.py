"""The results file (`accelkit test --json PATH`): schema `accelkit.results/1`.

The contract of DESIGN.md, as pydantic models. `schema.json` beside this module is the
published JSON Schema, generated from these models (see `tests/unit/results/test_results_file.py`;
regenerate with `python -m accelkit.results.model > accelkit/results/schema.json`).
"""

from __future__ import annotations

import json
import shlex
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

# Re-exported: the vocabulary lives in names.py, which loads without pydantic.
from accelkit.results.names import BAD_STATUSES as BAD_STATUSES
from accelkit.results.names import STATUSES as STATUSES
from accelkit.results.names import SUITES as SUITES
from accelkit.results.names import Status as Status
from accelkit.results.names import Suite as Suite

SCHEMA_ID: Final = "accelkit.results/1"


class _Model(BaseModel):
    # Unknown keys are kept, so a newer writer's additions survive a round trip.
    model_config = ConfigDict(extra="allow")


class MeasurementMethod(_Model):
    """How a perf metric was measured (written by the perf harness; absent in older files
    and in metrics that were not timed, such as compile latencies).

    timer: what timed each block ("perf_counter", "cuda events", "xpu
    synchronize+perf_counter"). threads: torch's intra-op threads (`accelkit test
    --threads`; numpy's canaries: the same count for OpenBLAS); None: the library's own
    choice. cache: "rotated" (each call took the next of `input_sets` input sets,
    `input_bytes` in all, so the previous call's operands were not what it read: cold
    caches, as `triton.testing.do_bench` flushes L2 between calls) or "reused" (one input
    set every call: warm caches, as `torch.utils.benchmark.Timer` measures): the same op
    reads slower rotated, so two numbers compare only when they were measured alike.
    """

    timer: str
    threads: int | None = None
    cache: Literal["rotated", "reused"]
    input_sets: int = 1
    input_bytes: int | None = None


class Metric(_Model):
    value: float
    unit: str
    higher_is_better: bool
    samples: list[float] = Field(default_factory=list)
    # The group (measurement pass, i.e. process) each sample came from, parallel to
    # `samples`. Samples of one group share that process's conditions (memory layout, a
    # burst of load from other jobs), so they are not independent draws of the run's
    # distribution; `accelkit compare` resamples whole groups when both sides have enough.
    # Absent: every sample came from one group. A case measured in one pass may number
    # its own groups: `perf/compile/latency` in an interleaved A/B pass, where each sample
    # took its own lockstep turn and pairs with the other side's sample of that number.
    sample_groups: list[int] | None = None
    # How it was measured (timer, threads, cache state); absent in files before the field.
    method: MeasurementMethod | None = None

    @model_validator(mode="after")
    def _groups_match_samples(self) -> Metric:
        if self.sample_groups is not None and len(self.sample_groups) != len(self.samples):
            raise ValueError(
                f"sample_groups has {len(self.sample_groups)} entries for "
                f"{len(self.samples)} samples"
            )
        return self


class FailedCheck(_Model):
    """The comparison that failed in a conformance case: what was compared, the tolerance
    it had (None for an exact comparison) and the worst element the run saw."""

    what: str
    rtol: float | None = None
    atol: float | None = None
    index: list[int] | None = None
    actual: float | None = None
    expected: float | None = None
    abs_diff: float | None = None


class Repro(_Model):
    """What `accelkit repro` needs to rebuild a case's exact inputs (issue 14): recorded for
    failed conformance cases and for perf cases.

    kind: which reproducer fits ("opinfo": an op_db sample; "function": a case function run
    with its parameters; "perf": a perf case timed alone). seed: the case's seed (the
    suite seeds torch with it when the case starts). device: the torch device type it ran
    on. file, function, params: the case's module (relative to the cases folder), its
    function and its JSON-able parameters. dtype, sample, grad: an OpInfo case's dtype, the
    index of the sample that failed and whether it was the gradient; layout: for a
    `noncontiguous` OpInfo case, the layout the sample failed in ("strided", "transposed",
    "channels_last", "expanded").
    """

    kind: str
    seed: int
    device: str
    file: str
    function: str
    params: dict[str, object] = Field(default_factory=dict)
    dtype: str | None = None
    sample: int | None = None
    grad: bool | None = None
    op: str | None = None
    layout: str | None = None
    check: FailedCheck | None = None


def repro_command(case_id: str, source: str) -> str:
    """The command that writes and runs the reproducer of a case recorded in `source`."""
    return f"accelkit repro {shlex.quote(case_id)} --from {shlex.quote(source)}"


class RankStop(_Model):
    """Where one rank of a distributed case stopped, from its Flight Recorder dump.

    state: "waiting" (inside the collective, not completed), "missing" (never entered the
    collective its peers wait in), "mismatch" (entered another collective at that sequence
    number), "completed" (every collective it entered completed), "no dump" (no dump came
    back: the rank died or did not answer); seq: the collective's sequence number in its
    process group ("0 (default_pg)")."""

    rank: int
    state: str
    collective: str | None = None
    seq: int | None = None
    process_group: str | None = None
    note: str = ""


class Hang(_Model):
    """A distributed case that timed out or lost a rank: every rank's Flight Recorder dump,
    read by torch's analyzer where it works ("torchfrtrace") or by accelkit ("dumps")."""

    analyzer: str
    summary: str
    ranks: list[RankStop] = Field(default_factory=list)
    analyzer_output: str = ""


class Case(_Model):
    id: str
    suite: Suite
    status: Status
    message: str = ""
    duration_s: float = 0.0
    metrics: dict[str, Metric] = Field(default_factory=dict)
    # Set only when the backend's expectations list the case as a known failure: it failed
    # as expected (status skipped), or it passed unexpectedly (status passed).
    known_failure: bool | None = None
    unexpected_pass: bool | None = None
    # How to rebuild the case standalone (`accelkit repro`); absent in older files.
    repro: Repro | None = None
    # A distributed case that hung or lost a rank: where each rank stopped.
    hang: Hang | None = None


class Capability(_Model):
    available: bool
    reason: str = ""


class ShardSelection(_Model):
    """What one pytest session of a shard chose from (`accelkit test --shard`)."""

    cases: int
    """The cases every shard of the run chose from (after -k)."""
    selected: int
    """The cases this shard ran."""
    digest: str
    """sha256 of the sorted case ids chosen from: equal in every shard of one run."""


class Shard(_Model):
    """The shard a results file holds (`accelkit test --shard INDEX/COUNT`); `accelkit
    merge` turns the COUNT shards of a run into one leg result."""

    index: int
    count: int
    balanced_by: Literal["durations", "count"]
    # sha256 of the --durations-from file (None when balanced by case count).
    durations_sha256: str | None = None
    # Per suite (one pytest session each): what the shard chose from.
    selections: dict[str, ShardSelection] = Field(default_factory=dict)


class CompileCache(_Model):
    """Inductor's caches kept between runs (`ACCELKIT_COMPILE_CACHE`,
    `accelkit.suite.session.compile_cache`): the torch build they are keyed by and torch's cache
    counters summed over the run's processes (FX graph cache hits, misses and bypasses;
    AOTAutograd cache hits and misses)."""

    key: str
    hits: int = 0
    misses: int = 0
    bypasses: int = 0
    autograd_hits: int = 0
    autograd_misses: int = 0

    @property
    def hit_rate(self) -> float | None:
        """FX graph cache hits over hits and misses; None when nothing was looked up."""
        lookups = self.hits + self.misses
        return self.hits / lookups if lookups else None

    def describe(self) -> str:
        """One line for summaries: "92% hit rate (120 hits, 10 misses)"."""
        rate = self.hit_rate
        text = f"{rate:.0%} hit rate" if rate is not None else "nothing looked up"
        text += f" ({self.hits} hits, {self.misses} misses"
        text += f", {self.bypasses} bypassed)" if self.bypasses else ")"
        return text


class RunInfo(_Model):
    started: str
    # None while the run is in progress, or when it was killed before it finished.
    finished: str | None = None
    device: str
    suites: list[Suite]
    argv: list[str]
    # Replay and provenance: the base random seed, the per-case timeout, and the container
    # image the suite ran in (None when it ran on the host).
    seed: int | None = None
    timeout_s: float | None = None
    breadth: str | None = None
    image: str | None = None
    # Measurement passes of the perf cases (`accelkit test --passes`): each pass is a
    # separate process; None in files written before passes existed (one pass).
    passes: int | None = None
    # A shard of a run (`accelkit test --shard`); None for a whole run.
    shard: Shard | None = None
    # A run merged from this many shards (`accelkit merge`); None for a run in one piece.
    shards: int | None = None
    # The GPU target of the run (sm_107, gfx942; --target or the device's own), whether
    # it only compiled for the target with no device (--compile-only), and the compiler it
    # compiled with ("ptxas 13.5 (/path)").
    target: str | None = None
    compile_only: bool | None = None
    toolchain: str | None = None
    # Capabilities every case had to have on this device (a case needing a missing one
    # failed instead of skipping), and those the run waived.
    required: list[str] | None = None
    waived: list[str] | None = None
    # Intra-op CPU threads of the perf cases (`accelkit test --threads`; 1 on the CPU by
    # default); None: torch's own choice, or a file written before the option existed.
    threads: int | None = None
    # `accelkit test --ab A B`: which side this file is ("A" or "B"), its interpreter (and
    # image), the order of passes ("ABBA") and the lockstep turns it took over all passes
    # ("turns"; "0": it measured alone); None for an ordinary run.
    ab: dict[str, str] | None = None
    # The folder where the cases' outputs were recorded (`accelkit test --record-outputs`),
    # for differential runs (`accelkit diff`); None when they were not.
    outputs: str | None = None
    # Inductor's caches carried over from earlier runs (ACCELKIT_COMPILE_CACHE) and how
    # often they hit; None when the run kept none (or a file written before).
    compile_cache: CompileCache | None = None


class Summary(_Model):
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    error: int = 0
    crashed: int = 0
    timeout: int = 0

    @classmethod
    def of(cls, cases: list[Case]) -> Summary:
        counts = dict.fromkeys(STATUSES, 0)
        for case in cases:
            counts[case.status] += 1
        return cls(**counts)


class Results(_Model):
    schema_: Literal["accelkit.results/1"] = Field(default=SCHEMA_ID, alias="schema")
    run: RunInfo
    env: dict[str, object] = Field(default_factory=dict)
    capabilities: dict[str, Capability] = Field(default_factory=dict)
    cases: list[Case] = Field(default_factory=list)
    summary: Summary = Field(default_factory=Summary)

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    def to_json_dict(self) -> dict[str, object]:
        return self.model_dump(mode="json", by_alias=True)


def json_schema() -> dict[str, object]:
    schema = Results.model_json_schema(by_alias=True)
    schema["$id"] = SCHEMA_ID
    schema["title"] = "accelkit results file"
    return schema


if __name__ == "__main__":
    print(json.dumps(json_schema(), indent=2, sort_keys=True))
