"""The tolerance model of the OpInfo cases: how far one output may lie from the reference.

`case_tolerance` is the one function that decides the (rtol, atol) of an output of a case
(`scalar_tolerance` that of a Python number an op returns). rtol is
`accelkit.suite.numerics.reference`'s per-dtype rtol for the least precise dtype involved (a few
units
of the output's rounding), times the factor of the op's listed exception of kind "tolerance"
(`exceptions.TOLERANCE_SCALE`) where it has one. atol depends on what the op is:

- elementwise ops (OpInfo's unary and binary ufuncs, `is_elementwise`) are compared element
  by element: `sample_rules` brackets each element by the reference over the inputs moved by
  CONDITION_EPS units of the precision the kernel computes in (float32 for the 16-bit
  dtypes), so an element's bound is its own condition, |x f'(x)| eps, and atol is only the
  output dtype's smallest normal number (results below it may flush to zero); their float32
  and float64 gradients too, per input (`Rules.input_brackets`, `sample_rules.grad_brackets`:
  the reference gradient's range over the same moved inputs, widened by the rounding of a
  result the backward reads, or for a deeper backward by the roundings of every
  intermediate, `roundings.rounding_sensitivity`);
- every other op gets a normwise atol, NORMWISE_EPS * eps * the largest magnitude of the
  reference and the sample (times the factor of the op's listed exception of kind
  "normwise", `exceptions.NORMWISE_SCALE`): the rounding of sums whose terms are as large as
  the largest value involved;
- and the sample's own bounds (`Rules`, from `sample_rules`: term magnitudes and condition
  numbers that each sample decides, `SAMPLE_TERMS` and `SAMPLE_CONDITION`).

The op's own `toleranceOverride` metadata in `op_db` is honoured only where its test class,
device type, dtype and `active_if` apply to this comparison (`overrides`, `HONOURED_TESTS`);
each honoured one is named in the case's message, and so is each listed exception and
sample-table entry that widened the bound (`widening_rules`).

For example, the float32 forward of `exp` on a sample in [-9, 9] accepts at x = -9 an answer
within 1.3e-6 * exp(-9) of the reference's range over x (1 +- 2 * 1.19e-7): 0.1% off fails,
and so does 0.

`Rules` carries a sample's bounds and what else it allows (an overflowed intermediate, a
bracket for a step function or for an elementwise op's condition) from `sample_rules` to
`comparison`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils import _pytree as pytree

from accelkit.suite.numerics.reference import TOLERANCES, tolerance
from accelkit.suite.opinfo.exceptions import exception_for
from accelkit.suite.opinfo.op_db import op_db_by_name
from accelkit.suite.opinfo.records import ListedException, SampleCondition, SampleTerms

# Rounding error of a sum (matmul, conv, reductions, intermediate products) is relative
# to the magnitude of the summands, not of the result: an element where terms cancel
# carries an absolute error of order eps times the magnitudes that cancelled, however small
# the element. The largest magnitude in the reference stands for those:
# atol >= NORMWISE_EPS * eps(dtype) * max(|reference|, |inputs|): two roundings at the
# largest magnitude involved. A 0.1% error stays visible in float32 for every element above
# 0.1% of that magnitude.
NORMWISE_EPS = 2.0

# An elementwise kernel computes f at its inputs within a few roundings of the precision it
# computes in: the answer is compared with the reference's range over every input (Python
# numbers too: kernels round them to that precision) moved by CONDITION_EPS * eps * |x|.
CONDITION_EPS = 2.0


@dataclass(frozen=True)
class Rules:
    """How one sample's outputs are compared, beyond the per-dtype tolerance.

    inputs_dtype: the least precise floating dtype among the sample's inputs (a float64 case
    whose sample passes float32 weights is accurate to float32 only).
    may_overflow: the reference's forward outputs exceed the case dtype's range, so the
    device's forward legitimately overflowed; gradients computed from those inf values may
    be inf/NaN (finite elements are still compared).
    bracket: (low, high) elementwise bounds of the reference over inputs perturbed by their
    rounding (DISCONTINUOUS ops): an answer anywhere in [low, high] is right.
    terms: the magnitude of the terms the kernel rounds (SAMPLE_TERMS, times the entry's
    factor): atol >= NORMWISE_EPS * eps * terms; input_terms: the same per input that needs a
    gradient (run_grad uses the entry of each input's gradient as its terms).
    normwise_condition: factor * kappa of a SAMPLE_CONDITION entry: atol >=
    normwise_condition * eps * magnitude.
    elementwise: an elementwise op's output, compared element by element (its `bracket` is
    the reference's range over the inputs' rounding): no normwise atol.
    input_brackets: an elementwise op's gradients, per input that needs one: its `bracket`
    (`sample_rules.grad_brackets`), or None where that gradient is compared normwise.
    device_type: the torch device type the answer ran on; kind: "forward", "grad" or
    "compiled" (which of op_db's toleranceOverrides apply, `overrides`).
    own_units: the answer is in units of its own (SampleTerms.own_units): the sample's
    input and output magnitudes do not bound its error; only the reference answer's
    magnitude and `terms` do.
    exceptions: listed exceptions that widened this sample's own bounds (a kernel's ulps in
    its gradient's graph, `sample_rules.grad_brackets`), named in its failure message.
    entries: the sample tables' entries that set `terms` or a condition, named in a failure's
    message where they widened the bound (`widening_rules`).
    recheck: which re-check set `bracket` after the plain bound failed
    (`sample_rules.graph_rules`: the graph's roundings, or a backward-stable kernel's), named
    in a failure's message.
    """

    inputs_dtype: torch.dtype | None = None
    may_overflow: bool = False
    bracket: tuple[Any, Any] | None = None
    terms: float = 0.0
    input_terms: tuple[float, ...] = ()
    input_brackets: tuple[tuple[Any, Any] | None, ...] = ()
    normwise_condition: float = 0.0
    elementwise: bool = False
    device_type: str = "cpu"
    kind: str = "forward"
    own_units: bool = False
    exceptions: tuple[ListedException, ...] = ()
    entries: tuple[SampleTerms | SampleCondition, ...] = ()
    recheck: str = ""


NO_RULES = Rules()


def case_tolerance(
    op_name: str,
    case_dtype: torch.dtype,
    out_dtype: torch.dtype,
    reference: torch.Tensor,
    magnitude: float = 0.0,
    inputs_dtype: torch.dtype | None = None,
    rules: Rules | None = None,
) -> tuple[float, float]:
    """(rtol, atol) for one output: the reference module's per-dtype rtol for the least
    precise dtype involved (the case's, the output's or an input's), times a "tolerance"
    listed exception's factor (`exceptions.TOLERANCE_SCALE`);
    atol: for an elementwise op (`rules.elementwise`) the output dtype's smallest normal
    number, otherwise normwise (NORMWISE_EPS); at least the op's honoured toleranceOverrides
    in op_db (`overrides`), and at least the sample's own bounds (`rules`: SAMPLE_TERMS,
    SAMPLE_CONDITION, linear algebra's condition).

    `op_name` is the case's ("op" or "op/grad"), `reference` the reference's value of the
    output, `magnitude` the largest magnitude among the sample's inputs (and, for a gradient,
    the outputs; not used where `rules.own_units`)."""
    scale, normwise = _listed(op_name, case_dtype)
    return _case_tolerance(
        op_name,
        case_dtype,
        (out_dtype, inputs_dtype),
        reference,
        magnitude,
        rules if rules is not None else NO_RULES,
        (scale.factor if scale else 1.0, normwise.factor if normwise else 1.0),
    )


def widening_rules(
    op_name: str,
    case_dtype: torch.dtype,
    out_dtype: torch.dtype,
    reference: torch.Tensor,
    magnitude: float = 0.0,
    inputs_dtype: torch.dtype | None = None,
    rules: Rules | None = None,
) -> tuple[str, ...]:
    """How a failure's message names the rules that widened an output's (rtol, atol)
    (`case_tolerance`, same arguments): the listed exceptions without whose factor it would
    be tighter, the sample's own where its bracket judged (`rules.exceptions`), and the
    sample-table entries (`rules.entries`) without whose bound it would be tighter."""
    rules = rules if rules is not None else NO_RULES
    own = rules.exceptions if rules.bracket is not None else ()
    scale, normwise = _listed(op_name, case_dtype)
    factors = (scale.factor if scale else 1.0, normwise.factor if normwise else 1.0)
    dtypes = (out_dtype, inputs_dtype)
    full = _case_tolerance(op_name, case_dtype, dtypes, reference, magnitude, rules, factors)

    def tighter(rules: Rules, factors: tuple[float, float]) -> bool:
        plain = _case_tolerance(op_name, case_dtype, dtypes, reference, magnitude, rules, factors)
        return plain != full

    found = [
        entry
        for entry, without in ((scale, (1.0, factors[1])), (normwise, (factors[0], 1.0)))
        if entry is not None and tighter(rules, without)
    ]
    named = [e.describe() for e in (*found, *own)]
    bare = dataclasses.replace(rules, terms=0.0, input_terms=(), normwise_condition=0.0)
    if rules.entries and tighter(bare, factors):
        named += [_describe_entry(entry, rules) for entry in rules.entries]
    return tuple(named)


def _describe_entry(entry: SampleTerms | SampleCondition, rules: Rules) -> str:
    """A sample-table entry as a failure's message names it, with the bound it set (its
    factor included)."""
    if isinstance(entry, SampleTerms):
        return f"sample terms: {entry.key} (atol >= {NORMWISE_EPS:g} eps x {rules.terms:.3g})"
    return f"normwise condition: {entry.key} (atol >= {rules.normwise_condition:.3g} eps M)"


def _listed(
    op_name: str, case_dtype: torch.dtype
) -> tuple[ListedException | None, ListedException | None]:
    """A case's listed exceptions of kinds "tolerance" and "normwise" (or None)."""
    return (
        exception_for("tolerance", op_name, case_dtype),
        exception_for("normwise", op_name, case_dtype),
    )


def _case_tolerance(
    op_name: str,
    case_dtype: torch.dtype,
    dtypes: tuple[torch.dtype, torch.dtype | None],
    reference: torch.Tensor,
    magnitude: float,
    rules: Rules,
    factors: tuple[float, float],
) -> tuple[float, float]:
    """`case_tolerance` with the factors (on rtol and atol, on the normwise atol) given."""
    out_dtype, inputs_dtype = dtypes
    scale, normwise = factors
    if rules.own_units:
        magnitude = 0.0
    bound = least_precise(case_dtype, out_dtype, *([inputs_dtype] if inputs_dtype else []))
    rtol, atol = tolerance(bound)
    rtol *= scale
    eps = torch.finfo(bound).eps
    if rules.elementwise:
        atol = scale * torch.finfo(bound).tiny
    else:
        atol *= scale
        magnitude = max(magnitude, max_magnitude(reference))
        atol = max(atol, normwise * NORMWISE_EPS * eps * magnitude)
    kind = "grad" if op_name.endswith("/grad") else rules.kind
    for override in overrides(op_name.removesuffix("/grad"), case_dtype, rules.device_type, kind):
        rtol, atol = max(rtol, override.rtol), max(atol, override.atol)
    if rules.terms or rules.normwise_condition:
        magnitude = max(magnitude, max_magnitude(reference))
        atol = max(
            atol,
            NORMWISE_EPS * eps * rules.terms,
            rules.normwise_condition * eps * magnitude,
        )
    return rtol, atol


def scalar_tolerance(case_dtype: torch.dtype) -> tuple[float, float]:
    """(rtol, atol) for a Python float or complex an op returns: the per-dtype tolerance of
    the case dtype (or float64's, if less precise)."""
    return tolerance(least_precise(case_dtype, torch.float64))


def least_precise(*dtypes: torch.dtype) -> torch.dtype:
    """The dtype whose tolerance bounds the answer: the one with the largest epsilon."""
    known = [d for d in dtypes if d in TOLERANCES]
    return max(known, key=lambda d: torch.finfo(d).eps)


def is_elementwise(op: Any) -> bool:
    """OpInfo's own classification: unary and binary ufuncs compute each output element from
    the input elements at its position."""
    from torch.testing._internal.opinfo.core import BinaryUfuncInfo, UnaryUfuncInfo

    return isinstance(op, (UnaryUfuncInfo, BinaryUfuncInfo))


@dataclass(frozen=True, kw_only=True)
class HonouredTest:
    """A test of PyTorch's own suite whose comparison is the kind this suite makes, so a
    toleranceOverride that op_db attaches to it applies here too."""

    cls_name: str | None
    """The test class (None: an override for every class)."""
    test_prefix: str | None
    """Test names it covers (prefix); None: an override for every test of the class."""
    kinds: tuple[str, ...]
    """"forward", "grad", "compiled": which of the suite's comparisons it matches."""
    device_types: tuple[str, ...] | None
    """The device types the class runs on (None: any)."""
    reason: str


_EVERY_KIND = ("forward", "grad", "compiled")
_VALUES = ("forward", "compiled")

HONOURED_TESTS: tuple[HonouredTest, ...] = (
    HonouredTest(
        cls_name=None,
        test_prefix=None,
        kinds=_EVERY_KIND,
        device_types=None,
        reason="an override for every test of the op",
    ),
    HonouredTest(
        cls_name="TestCommon",
        test_prefix="test_numpy_ref",
        kinds=_VALUES,
        device_types=None,
        reason="the op against NumPy's reference",
    ),
    HonouredTest(
        cls_name="TestCommon",
        test_prefix="test_compare_cpu",
        kinds=_VALUES,
        device_types=None,
        reason="the op on the device against the CPU",
    ),
    HonouredTest(
        cls_name="TestUnaryUfuncs",
        test_prefix="test_reference_numerics",
        kinds=_VALUES,
        device_types=None,
        reason="unary ufuncs against NumPy's reference in higher precision",
    ),
    HonouredTest(
        cls_name="TestBinaryUfuncsDevice",
        test_prefix="test_reference_numerics",
        kinds=_VALUES,
        device_types=None,
        reason="binary ufuncs against NumPy's reference in higher precision",
    ),
    HonouredTest(
        cls_name="TestReductions",
        test_prefix="test_ref",
        kinds=_VALUES,
        device_types=None,
        reason="reductions against NumPy's reference",
    ),
    HonouredTest(
        cls_name="TestConsistency",
        test_prefix="test_output_match",
        kinds=_VALUES,
        device_types=("mps",),
        reason="MPS against the CPU (test/test_mps.py: the class runs on MPS only)",
    ),
    HonouredTest(
        cls_name="TestConsistency",
        test_prefix="test_output_grad_match",
        kinds=("grad",),
        device_types=("mps",),
        reason="MPS gradients against the CPU's",
    ),
    HonouredTest(
        cls_name="TestInductorOpInfo",
        test_prefix="test_comprehensive",
        kinds=("compiled",),
        device_types=None,
        reason="Inductor-compiled against eager (test/inductor/test_torchinductor_opinfo.py)",
    ),
)


@dataclass(frozen=True)
class Override:
    """A toleranceOverride of op_db that applies to a case, and where it comes from."""

    atol: float
    rtol: float
    source: str

    def describe(self) -> str:
        return f"op_db toleranceOverride {self.source}: atol={self.atol:g}, rtol={self.rtol:g}"


def _matches(info: Any, test: HonouredTest, device_type: str, dtype: torch.dtype) -> bool:
    """Whether the DecorateInfo `info` applies to `test`'s comparisons on `device_type`."""
    if test.device_types is not None and device_type not in test.device_types:
        return False
    cls_name = getattr(info, "cls_name", None)
    test_name = getattr(info, "test_name", None)
    if cls_name != test.cls_name:
        return False
    if test.test_prefix is not None and test_name is not None:
        if not test_name.startswith(test.test_prefix):
            return False
    elif test.test_prefix is None and test_name is not None:
        return False
    wanted = getattr(info, "device_type", None)
    if isinstance(wanted, str) and wanted != device_type:
        return False
    if isinstance(wanted, (list, tuple)) and device_type not in wanted:
        return False
    dtypes = getattr(info, "dtypes", None)
    if dtypes is not None and dtype not in dtypes:
        return False
    active = getattr(info, "active_if", True)
    return bool(active({}) if callable(active) else active)


@functools.cache
def overrides(
    op_name: str, dtype: torch.dtype, device_type: str = "cpu", kind: str = "forward"
) -> tuple[Override, ...]:
    """The op's `toleranceOverride`s in op_db that apply to a `kind` comparison
    ("forward", "grad", "compiled") of `dtype` on `device_type`: those attached to a test in
    HONOURED_TESTS for that kind, whose device type, dtypes and `active_if` match (an override
    given directly, outside a DecorateInfo, applies to every test)."""
    from torch.testing._internal.common_device_type import toleranceOverride

    found: list[Override] = []
    op = op_db_by_name()[op_name]
    for info in op.decorators:
        for decorator in getattr(info, "decorators", [info]):
            if not isinstance(decorator, toleranceOverride) or dtype not in decorator.d:
                continue
            tol = decorator.d[dtype]
            if decorator is info:
                found.append(Override(tol.atol, tol.rtol, "(every test)"))
                continue
            for test in HONOURED_TESTS:
                if kind in test.kinds and _matches(info, test, device_type, dtype):
                    where = f"{info.cls_name or 'every class'}"
                    if info.test_name:
                        where += f".{info.test_name}"
                    if info.device_type:
                        where += f" on {info.device_type}"
                    found.append(Override(tol.atol, tol.rtol, f"({where})"))
                    break
    return tuple(found)


def overflow_threshold(dtype: torch.dtype) -> float:
    """The smallest magnitude that rounds to inf in `dtype` (round to nearest, ties to even):
    max + ulp(max) / 2, where ulp(max) = eps * 2 ** floor(log2(max)) (inf for float64)."""
    info = torch.finfo(dtype)
    exponent = math.frexp(info.max)[1] - 1  # max = 1.xxx * 2 ** exponent
    return info.max + math.ldexp(info.eps / 2, exponent)


def max_magnitude(value: Any) -> float:
    """The largest finite magnitude among the floating tensors in `value` (0 if none)."""
    largest = 0.0
    for x in pytree.tree_leaves(value):
        if isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex()):
            x = x.detach()
            if x.layout != torch.strided:
                x = x.to_dense()
            finite = x[torch.isfinite(x)]
            if finite.numel():
                largest = max(largest, float(finite.abs().max()))
    return largest
