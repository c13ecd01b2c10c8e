"""OpInfo under the compiler: each op's samples through `torch.compile(backend="inductor")`.

A compiled case (`conformance/opinfo_compiled/<op>/<dtype>`) runs the op's forward samples
compiled by Inductor on the device and compares each answer with the float64 reference under
the same tolerance model as the eager case (`sample_rules`, `comparison.compare`; op_db's
toleranceOverrides for Inductor's own OpInfo test apply, `tolerances.HONOURED_TESTS`). Where
the compiled answer fails, the message says whether eager on the same device gets the sample
right, so a wrong lowering or decomposition reads differently from an eager bug.

Compile time dominates on the CPU (a C++ compile per kernel), so compiled work is shared:

- an op's samples are compiled as one graph (`compile_batch`): one trace, one Inductor
  compile, kernels for samples that differ only in their sizes shared through dynamic shapes
  (`dynamic=True`: one size-generic kernel instead of one per shape);
- at full breadth, at most FULL_COMPILED_SAMPLES samples an op (op_db's grids of hundreds
  of samples make one graph whose symbolic shapes take minutes to simplify), fewer for the
  ops of COMPILED_SAMPLE_CAPS;
- at quick breadth, the ops of `QUICK_COMPILED_OPS` (lowerings outside the compile zoo of
  test_compile_parity.py: a decomposed pointwise op, a reduction, a scan, a scatter) are
  compiled together, once per process, in float32 with their first QUICK_COMPILED_SAMPLES
  samples; each case then compares its op's share. Where the whole
  batch cannot compile, each op is compiled on its own.

Each op's samples are drawn under the seed its own case would get from the plugin
(`case_seed`), so a case replays alone (`-k`, `--seed`) with the same inputs as in a batch.
The compiled batch, each sample's reference and the eager rerun of a failing sample each get
their own copy of the sample (`own_copies`, `own_copy`): samples may share tensors that an op
updates in place (batch_norm's samples 7-10 share running_mean and running_var, and sample 8
trains), and each sample's reference is computed after the batch ran, so on shared tensors it
would see the updates of the samples after it; a float64 sample is its own reference (no
conversion copies it), so computing it in place would change the samples after it.
An op that op_db wraps in `wrapper_set_seed`, which dynamo cannot trace, compiles the op
itself on its samples that draw no random numbers (`SEEDED_OPS`). Ops that cannot compile
are known skips with the reason (`skips.COMPILE_SKIPS`); where only some samples cannot
(`skips.COMPILE_SAMPLE_SKIPS`), the case compiles the others and its message names the
samples left out (`CompiledRun.note`).
"""

from __future__ import annotations

import copy
import itertools
import random
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils import _pytree as pytree

from accelkit.suite.opinfo import peer
from accelkit.suite.opinfo.comparison import Mismatch
from accelkit.suite.opinfo.eigen import EIGEN_OPS
from accelkit.suite.opinfo.op_db import DTYPES, full_name, op_db_by_name
from accelkit.suite.opinfo.planning import OpinfoCase, plan, skip_reason
from accelkit.suite.opinfo.records import SampleSkip, entry_for
from accelkit.suite.opinfo.running import compare_with_steps, inputs_dtype, reference_sample
from accelkit.suite.opinfo.sample_rules import NoDigits, sample_rules, squared_rules, squares
from accelkit.suite.opinfo.skips import COMPILE_SAMPLE_SKIPS, COMPILE_SKIPS
from accelkit.suite.opinfo.ties import indices_as_values
from accelkit.suite.opinfo.tolerances import Rules, max_magnitude

# Lowerings outside the compile zoo, one of each kind, float32, the first sample only: four
# ops compile in ~1 minute on a loaded 2-core CPU (each kernel is a C++ compile); every op
# compiles at `--breadth full`.
QUICK_COMPILED_OPS: tuple[str, ...] = (
    "nn.functional.hardswish",  # a decomposed pointwise activation
    "logsumexp",  # a reduction with a decomposition
    "cumprod",  # a scan
    "index_add",  # scatter with accumulation
)
QUICK_COMPILED_DTYPES: tuple[str, ...] = ("float32",)
QUICK_COMPILED_SAMPLES = 1
FULL_COMPILED_SAMPLES = 32
"""At full breadth, an op with more samples than this compiles this many of them: sample 0
and the rest drawn by the case seed (`chosen_samples`). Op_db's grids reach 1440 samples
(max_pool2d); one graph of 576 max_pool3d calls was still compiling after 300 s of dynamic
shapes' symbolic simplification with no C++ built, while 16 took 23 s. 75 of 632 compilable
ops (torch 2.14.1, CPU) have more than 32 samples, 18133 samples in all against 7051 chosen.
(PyTorch's own Inductor OpInfo test compiles the first sample of an op unless it lists the
op in `inductor_all_samples`.)"""
COMPILED_SAMPLE_CAPS: dict[str, int] = {
    "nn.functional.interpolate.bicubic": 12,
}
"""Ops whose graphs cost more than a case's default timeout to compile at
FULL_COMPILED_SAMPLES, with a smaller cap. interpolate.bicubic's 24 samples (a distinct kernel
each: sizes, scale factors, align_corners) took 395 s to compile in float64 and 171 s in
float32 with a cold Inductor cache on the 2-core dev machine (300 s is the per-case default)."""
MODULE_NODEID = "conformance/test_opinfo_compiled.py::test_opinfo_compiled"
# The skip message's start for COMPILE_SKIPS (accelkit.suite.run.outcome.COMPILE_SKIP_PREFIX,
# which the run summary counts; written out here as case_seed is, and checked equal).
COMPILE_SKIP_PREFIX = "cannot compile: "


@dataclass(frozen=True)
class SeededOp:
    """An op that op_db wraps in `wrapper_set_seed`, whose `freeze_rng_state` dynamo cannot
    trace (it constructs torch._C._DisableTorchDispatch, a pybind11 class: "Unsupported method
    call", dynamic and static). Its compiled case compiles `fn`, the op itself, on the samples
    that draw no random numbers (`deterministic`): Inductor draws its own, so a dropout mask
    cannot match eager's. The reference and the eager rerun still call op_db's wrapper."""

    fn: Callable[..., Any]
    deterministic: Callable[[Any], bool]


def _no_dropout(sample: Any) -> bool:
    return float(sample.kwargs.get("dropout_p", 0.0)) == 0.0


def _not_training(default: bool) -> Callable[[Any], bool]:
    """Whether a sample does not train, for a function whose `training` defaults to
    `default`."""
    return lambda sample: not sample.kwargs.get("training", default)


SEEDED_OPS: dict[str, SeededOp] = {
    # 13 of 25 samples have dropout_p 0 (the others 0.5).
    "nn.functional.scaled_dot_product_attention": SeededOp(
        torch.nn.functional.scaled_dot_product_attention, _no_dropout
    ),
    # 96 of 192 samples have training=False (dropout_p 0.5 applies only while training).
    "nn.functional.multi_head_attention_forward": SeededOp(
        torch.nn.functional.multi_head_attention_forward, _not_training(default=True)
    ),
    "nn.functional.feature_alpha_dropout.without_train": SeededOp(
        torch.nn.functional.feature_alpha_dropout, _not_training(default=False)
    ),
}
"""PyTorch's own Inductor OpInfo test skips the two attention ops outright."""


def compiled_callable(op: Any) -> Callable[..., Any]:
    """What a compiled case compiles for `op`: op_db's callable, or the op itself for a
    SEEDED_OPS op."""
    seeded = SEEDED_OPS.get(full_name(op))
    return seeded.fn if seeded is not None else op.op


def plan_compiled(device_type: str, breadth: str) -> list[OpinfoCase]:
    """The compiled cases of a run: at quick breadth QUICK_COMPILED_OPS in
    QUICK_COMPILED_DTYPES, at full breadth every forward case of the eager plan."""
    if breadth == "quick":
        names = op_db_by_name()
        return [
            OpinfoCase(op, dtype)
            for op in QUICK_COMPILED_OPS
            if op in names
            for dtype in QUICK_COMPILED_DTYPES
        ]
    return [case for case in plan(device_type, breadth) if not case.grad and not case.noncontiguous]


def compiled_skip_reason(op: Any, case: OpinfoCase, device_type: str, breadth: str) -> str | None:
    """Why this compiled case cannot run here: the eager case's reason, or a known reason the
    op cannot compile (COMPILE_SKIPS)."""
    if case.op in EIGEN_OPS:
        return f"{case.op}: eigenpairs are matched, not compared; compiled eig is not checked"
    reason = skip_reason(op, case, device_type, breadth)
    if reason is not None:
        return reason
    for key in ((case.op, case.dtype, None), (case.op, None, None)):
        skip = COMPILE_SKIPS.get(key)
        if skip is not None:
            return f"{COMPILE_SKIP_PREFIX}{skip.reason}"
    return None


def chosen_samples(
    op: Any, case: OpinfoCase, device: str, breadth: str, base_seed: int
) -> tuple[list[int], list[Any]]:
    """The samples a compiled case compiles, with their indices in the op's sample list: the
    first QUICK_COMPILED_SAMPLES at quick breadth; at full breadth all of them, or sample 0
    and FULL_COMPILED_SAMPLES - 1 others drawn by the case seed where there are more (so
    another --seed covers others; COMPILED_SAMPLE_CAPS lowers the cap for a few ops). A
    SEEDED_OPS op keeps its deterministic samples only; the samples of a
    COMPILE_SAMPLE_SKIPS entry are left out (`Chosen.left_out`)."""
    chosen = choose_samples(op, case, device, breadth, base_seed)
    return chosen.indices, chosen.samples


@dataclass(frozen=True)
class Chosen:
    """What `choose_samples` chose: the samples to compile with their indices, and the
    indices left out by a COMPILE_SAMPLE_SKIPS entry (`skip`)."""

    indices: list[int]
    samples: list[Any]
    left_out: list[int]
    skip: SampleSkip | None


def compile_sample_skip(case: OpinfoCase) -> SampleSkip | None:
    """The COMPILE_SAMPLE_SKIPS entry of a compiled case, if any."""
    return entry_for(COMPILE_SAMPLE_SKIPS, case.op, DTYPES[case.dtype])


def choose_samples(op: Any, case: OpinfoCase, device: str, breadth: str, base_seed: int) -> Chosen:
    """`chosen_samples`, with the samples a COMPILE_SAMPLE_SKIPS entry leaves out."""
    limit = QUICK_COMPILED_SAMPLES if breadth == "quick" else None
    samples = draw_samples(op, case, device, limit, base_seed)
    indices = list(range(len(samples)))
    seeded = SEEDED_OPS.get(case.op)
    if seeded is not None:
        indices = [i for i in indices if seeded.deterministic(samples[i])]
    skip = compile_sample_skip(case)
    left_out = [i for i in indices if skip.applies(samples[i])] if skip is not None else []
    indices = [i for i in indices if i not in left_out]
    cap = COMPILED_SAMPLE_CAPS.get(case.op, FULL_COMPILED_SAMPLES)
    if breadth != "quick" and len(indices) > cap:
        others = random.Random(case_seed(case.param_id, base_seed)).sample(indices[1:], cap - 1)
        indices = [indices[0], *sorted(others)]
    return Chosen(indices, [samples[i] for i in indices], left_out, skip)


def case_seed(param_id: str, base_seed: int) -> int:
    """The seed the plugin gives the compiled case `param_id`
    (accelkit.suite.session.caseid.case_seed_of).

    Written out here, not imported: a compiled case's reproducer carries this module alone,
    and caseid needs the results model (tests/unit/suite/opinfo/test_sample_tables.py checks the two
    agree)."""
    nodeid = f"{MODULE_NODEID}[{param_id}]"
    return (base_seed * 1_000_003 + zlib.crc32(nodeid.encode())) % (2**31)


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    try:
        import numpy

        numpy.random.seed(seed)
    except ImportError:
        pass
    torch.manual_seed(seed)


def draw_samples(
    op: Any, case: OpinfoCase, device: str, limit: int | None, base_seed: int
) -> list[Any]:
    """The case's forward samples, drawn under its own case seed."""
    _seed_everything(case_seed(case.param_id, base_seed))
    samples = op.sample_inputs_func(op, device, DTYPES[case.dtype], False)
    return list(itertools.islice(samples, limit) if limit is not None else samples)


def own_copy(sample: Any) -> Any:
    """The sample deep-copied: tensors shared within it stay shared, and an op that updates
    its inputs in place leaves `sample` as it was."""
    return copy.deepcopy(sample)


def own_copies(samples: list[Any]) -> list[Any]:
    """Each sample deep-copied on its own (`own_copy`): tensors shared between samples are
    no longer shared."""
    return [own_copy(sample) for sample in samples]


@dataclass
class Compiled:
    """The compiled answers of one op's samples, or why they could not be computed."""

    outputs: list[Any] | None = None
    error: str | None = None


def compile_batch(entries: list[tuple[Any, list[Any]]], *, dynamic: bool = True) -> list[Any]:
    """The raw outputs of each (op, samples) entry's samples, computed by ONE Inductor-compiled
    function (no graph break allowed): a list per entry. Tensors are the graph's inputs;
    everything else in a sample is a constant of the graph."""
    tensors: list[torch.Tensor] = []
    calls: list[tuple[Callable[..., Any], list[Any], Any, list[int | None]]] = []
    for op, samples in entries:
        for sample in samples:
            leaves, spec = pytree.tree_flatten((sample.input, sample.args, sample.kwargs))
            slots: list[int | None] = []
            for leaf in leaves:
                if isinstance(leaf, torch.Tensor):
                    slots.append(len(tensors))
                    tensors.append(leaf)
                else:
                    slots.append(None)
            calls.append((compiled_callable(op), leaves, spec, slots))

    def batch(inputs: list[torch.Tensor]) -> list[Any]:
        outputs = []
        for fn, leaves, spec, slots in calls:
            values = [x if i is None else inputs[i] for x, i in zip(leaves, slots, strict=True)]
            inp, args, kwargs = pytree.tree_unflatten(values, spec)
            outputs.append(fn(inp, *args, **kwargs))
        return outputs

    # A fresh dynamo cache: `batch` is one code object for every batch, and dynamo keeps at
    # most cache_size_limit graphs per code object before it runs the rest eagerly.
    torch._dynamo.reset()
    compiled = torch.compile(batch, backend="inductor", dynamic=dynamic, fullgraph=True)
    with torch.no_grad():
        flat = compiled(tensors)
    result: list[Any] = []
    position = 0
    for _, samples in entries:
        result.append(flat[position : position + len(samples)])
        position += len(samples)
    return result


def _compile_one(op: Any, samples: list[Any]) -> Compiled:
    """One op's samples compiled together: dynamic shapes first, then static."""
    errors = []
    for dynamic in (True, False):
        try:
            outputs = compile_batch([(op, own_copies(samples))], dynamic=dynamic)[0]
            return Compiled(outputs=outputs)
        except Exception as error:  # a compile failure is the case's finding, with its text
            errors.append(f"{'dynamic' if dynamic else 'static'}: {_first_line(error)}")
    return Compiled(error="; ".join(errors))


def _first_line(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}".strip()
    return text.splitlines()[0][:500] if text else type(error).__name__


# Per process: (device, dtype, base seed) -> op -> (samples, Compiled) of the quick batch.
_QUICK: dict[tuple[str, str, int], dict[str, tuple[list[Any], Compiled]]] = {}


def _quick_batch(device: str, dtype: str, base_seed: int) -> dict[str, tuple[list[Any], Compiled]]:
    """Every quick compiled op of `dtype` compiled together, once per process; where the
    batch cannot compile, each op on its own."""
    key = (device, dtype, base_seed)
    if key in _QUICK:
        return _QUICK[key]
    names = op_db_by_name()
    entries: list[tuple[str, Any, list[Any]]] = []
    for name in QUICK_COMPILED_OPS:
        if name not in names:
            continue
        op, case = names[name], OpinfoCase(name, dtype)
        if compiled_skip_reason(op, case, torch.device(device).type, "quick") is not None:
            continue
        samples = draw_samples(op, case, device, QUICK_COMPILED_SAMPLES, base_seed)
        entries.append((name, op, samples))
    results: dict[str, tuple[list[Any], Compiled]] = {}
    try:
        outputs = compile_batch([(op, own_copies(samples)) for _, op, samples in entries])
        for (name, _, samples), answer in zip(entries, outputs, strict=True):
            results[name] = (samples, Compiled(outputs=answer))
    except Exception:  # one op spoils the batch: compile each alone to say which
        for name, op, samples in entries:
            results[name] = (samples, _compile_one(op, samples))
    _QUICK[key] = results
    return results


@dataclass(frozen=True)
class CompiledRun:
    """What a compiled case checked: how many samples it compared, and the samples a
    COMPILE_SAMPLE_SKIPS entry left out, with its reason."""

    compared: int
    left_out: tuple[int, ...] = ()
    reason: str = ""
    by_peer: tuple[int, ...] = ()
    """The samples that passed by the peer rule only (`peer`)."""

    @property
    def note(self) -> str | None:
        """The case's message where samples were left out or passed by the peer rule, else
        None."""
        notes = []
        if self.left_out:
            which = ", ".join(str(i) for i in self.left_out)
            plural = "s" if len(self.left_out) > 1 else ""
            notes.append(f"{COMPILE_SKIP_PREFIX}sample{plural} {which} left out: {self.reason}")
        if self.by_peer:
            which = ", ".join(str(i) for i in self.by_peer)
            plural = "s" if len(self.by_peer) > 1 else ""
            notes.append(
                f"{peer.PEER_RULE_PREFIX}sample{plural} {which} outside the derived bound, "
                f"within {peer.PEER_FACTOR:g}x eager's error (which meets it) + "
                f"{peer.PEER_FLOOR_UNITS:g} units of rounding"
            )
        return "; ".join(notes) or None


def run_compiled_case(
    op: Any, case: OpinfoCase, device: str, breadth: str, base_seed: int
) -> CompiledRun:
    """The compiled case's samples against the reference: how many were compared, and which
    could not be compiled (COMPILE_SAMPLE_SKIPS)."""
    shared = _quick_batch(device, case.dtype, base_seed) if breadth == "quick" else {}
    left_out: list[int] = []
    reason = ""
    if case.op in shared:
        samples, answer = shared[case.op]
        indices = list(range(len(samples)))
    else:
        chosen = choose_samples(op, case, device, breadth, base_seed)
        indices, samples, left_out = chosen.indices, chosen.samples, chosen.left_out
        reason = chosen.skip.reason if chosen.skip is not None else ""
        answer = _compile_one(op, samples) if samples else Compiled(outputs=[])
    if answer.error is not None or answer.outputs is None:
        raise Mismatch(
            f"{case.op} ({case.dtype}): torch.compile(backend='inductor') failed: {answer.error}"
        )
    dtype = DTYPES[case.dtype]
    count = 0
    by_peer: list[int] = []
    for index, sample, raw in zip(indices, samples, answer.outputs, strict=True):
        checked = check_compiled_sample(op, case.op, device, dtype, index, sample, raw)
        if checked == PEER:
            by_peer.append(index)
        if checked:
            count += 1
    return CompiledRun(count, tuple(left_out), reason, tuple(by_peer))


def _call(fn: Callable[..., Any], sample: Any) -> Any:
    return fn(sample.input, *sample.args, **sample.kwargs)


PEER = "peer"
"""`check_compiled_sample`'s answer for a sample that passed by the peer rule only."""


def check_compiled_sample(
    op: Any, op_name: str, device: str, dtype: torch.dtype, index: int, sample: Any, raw: Any
) -> bool | str:
    """One compiled answer (`raw`) against the reference; False where the sample carries no
    digits to compare, PEER where it missed the derived bound but is as close to it as eager
    on the device, which meets it (`peer`). A Mismatch says whether eager gets the sample
    right, and by how much the compiled answer missed the peer rule."""
    summary = " ".join(str(sample.summary() if hasattr(sample, "summary") else sample).split())
    what = f"{op_name} compiled (inductor) sample {index} ({summary[:300]})"
    # Private copies (`own_copy`): a float64 sample is its own reference (no conversion
    # copies it), and an op that updates its inputs must change neither the samples after
    # this one nor the eager run below.
    ref = reference_sample(own_copy(sample), device)
    process = sample.output_process_fn_grad
    with torch.no_grad():
        expected = indices_as_values(op_name, ref, process(_call(op, ref)), what)
        actual = indices_as_values(op_name, ref, process(raw), what)
    magnitude = max_magnitude((ref.input, ref.args, ref.kwargs))
    base = Rules(
        inputs_dtype=inputs_dtype(sample), device_type=torch.device(device).type, kind="compiled"
    )
    try:
        rules = sample_rules(op, op_name, dtype, ref, base)
    except NoDigits:
        return False
    squared = squared_rules(op_name, ref, rules)
    if squared is not None:
        actual, expected, rules = squares(actual), squares(expected), squared
        what += " (compared as squares)"
    try:
        compare_with_steps(op, op_name, dtype, ref, actual, expected, what, magnitude, rules)
    except AssertionError as error:
        with torch.no_grad():
            eager_raw = _call(op, own_copy(sample))
            eager = indices_as_values(op_name, ref, process(eager_raw), what)
        if squared is not None:
            eager = squares(eager)
        try:
            compare_with_steps(op, op_name, dtype, ref, eager, expected, what, magnitude, rules)
        except AssertionError:
            verdict = f"eager on {device} fails too (see conformance/opinfo/{op_name})"
            raise Mismatch(f"{error} [{verdict}]") from None
        # Eager, the peer, is right: the compiled answer passes if it is as close (peer.py).
        by_peer = peer.judge(actual, eager, expected, dtype, elementwise=rules.elementwise)
        if by_peer.within:
            return PEER
        verdict = (
            f"eager on {device} matches the reference: the compiled code is wrong (its error "
            f"is {by_peer.ratio:.3g}x what the peer rule allows: {peer.PEER_FACTOR:g}x eager's "
            f"+ {peer.PEER_FLOOR_UNITS:g} units of rounding)"
        )
        raise Mismatch(f"{error} [{verdict}]") from None
    return True
