"""The record types of the OpInfo rule tables, and how a case finds its entry in a table.

Each rule is a frozen record that names the cases it applies to and carries the reason for
it (a finding about the op, with what was measured), in the style of
`accelkit.backends.peaks`. The tables themselves: `skips` (what is not compared),
`exceptions` (the listed exceptions: widenings the model does not derive) and `sample_tables`
(bounds that each sample decides).

A `CaseRule` for `op` applies to its forward cases, with `grad=True` to its gradient cases,
and with `dtype` only to that dtype's; its `key` spells that as "op[/dtype][/grad]". A case
takes the most specific entry of a table (`case_keys`): the float16 gradient case of
`div.trunc_rounding` (op name "div.trunc_rounding/grad") looks up, in this order,

    "div.trunc_rounding/float16/grad", "div.trunc_rounding/grad",
    "div/float16/grad", "div/grad"

(the variants of an op share its generic name, here "div").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, TypeVar

import torch

from accelkit.suite.opinfo.op_db import DTYPES, op_db_by_name

# The values a backward forms in the case dtype: (factors, divisors) (see BackwardOverflow).
Intermediates = tuple[list[torch.Tensor], list[torch.Tensor]]
# f(op, reference sample, weights of the outputs or None for a forward)
TermsFunction = Callable[[Any, Any, list[torch.Tensor] | None], float | list[float]]
# f(op, reference sample)
ConditionFunction = Callable[[Any, Any], float]
# f(op, reference sample, weights of the outputs)
IntermediatesFunction = Callable[[Any, Any, list[torch.Tensor]], Intermediates]
# f(reference sample)
SquaredTermsFunction = Callable[[Any], float | None]
# f(sample): whether a rule applies to this sample
SamplePredicate = Callable[[Any], bool]

ConditionKind = Literal["normwise", "tie"]
DiscontinuityMode = Literal["relative", "normwise", "coordinates", "exponent", "clamp"]
CaseKind = Literal["forward", "grad"]
ExceptionKind = Literal["tolerance", "normwise", "kernel_ulps", "condition"]


@dataclass(frozen=True)
class KnownSkip:
    """Cases that cannot match a float64 reference, and the numerical reason (which becomes
    the skip message). A finding about the op, not a hidden failure: keep it precise."""

    op: str
    """The op's full name (with its variant)."""
    reason: str
    dtype: str | None = None
    """Only this dtype's cases (a key of DTYPES); None: every dtype."""
    kind: CaseKind | None = None
    """Only the forward or only the gradient cases; None: both."""
    quick_still_checked: bool = False
    """The reason is a property of later samples only: the quick breadth's first samples
    stay checked."""

    @property
    def key(self) -> tuple[str, str | None, CaseKind | None]:
        return (self.op, self.dtype, self.kind)


@dataclass(frozen=True)
class DeviceOnly:
    """Ops that only exist on some device types, whatever their OpInfo dtypes say."""

    prefix: str
    """Every op whose full name starts with this."""
    device_types: tuple[str, ...]
    reason: str


@dataclass(frozen=True, kw_only=True)
class CaseRule:
    """A rule for the cases of one op (its forward or gradient cases, in one or every dtype)."""

    op: str
    """The op's full name (with its variant) or its generic name (every variant)."""
    dtype: str | None = None
    """Only this dtype's cases (a key of DTYPES); None: every dtype."""
    grad: bool = False
    """The gradient cases instead of the forward ones."""
    reason: str
    """Why, and what was measured."""

    @property
    def key(self) -> str:
        """The cases it applies to, as `case_keys` spells them: "op[/dtype][/grad]"."""
        return self.op + (f"/{self.dtype}" if self.dtype else "") + ("/grad" if self.grad else "")


@dataclass(frozen=True, kw_only=True)
class ListedException(CaseRule):
    """A listed exception (`exceptions.EXCEPTIONS`): a widening of the bound that the model
    does not derive, kept for one op after a review found its cause, with the error measured
    and the backend it was measured on.

    kind "tolerance": `factor` multiplies the dtype's rtol and atol; "normwise": it
    multiplies the normwise atol (NORMWISE_EPS * eps * the largest magnitude); "kernel_ulps":
    `op` is an aten kernel's name ("aten::special_i1e") and `factor` its error in units of
    `dtype`'s rounding, by which a gradient's graph weighs that kernel's intermediates
    (`roundings.measure_graph`)."""

    kind: ExceptionKind
    factor: float
    measured: str
    """The error measured, as a short phrase ("2.0e-5 relative, complex64")."""
    backend: str
    """The backend it was measured on ("cpu")."""

    def __post_init__(self) -> None:
        if not (self.measured and self.backend and self.reason):
            raise ValueError(f"listed exception {self.key}: a measured error, backend, reason")
        if not self.factor > 1:
            raise ValueError(f"listed exception {self.key}: a factor above 1 (a widening)")
        if self.kind == "kernel_ulps" and not (self.op.startswith("aten::") and self.dtype):
            raise ValueError(f"listed exception {self.key}: a kernel's ulps in one dtype")

    def describe(self) -> str:
        """How a case's message names it."""
        return (
            f"listed exception: {self.key} {self.kind} x{self.factor:g} "
            f"(measured {self.measured} on {self.backend})"
        )


@dataclass(frozen=True, kw_only=True)
class SampleTerms(CaseRule):
    """The normwise bound at the magnitude of the terms the kernel rounds, computed from each
    sample: atol >= factor * NORMWISE_EPS * eps * terms. `terms` returns one magnitude, or a
    list of them (one per input that needs a gradient)."""

    factor: float
    terms: TermsFunction
    own_units: bool = False
    """The terms are in the answer's own units, which the inputs' and outputs' are not (the
    gradient of an op invariant under scaling its input is in units of 1 / x): the normwise
    bounds then take the reference answer's magnitude and these terms only."""


@dataclass(frozen=True, kw_only=True)
class SampleCondition(CaseRule):
    """An error of eps times a condition number kappa that each sample decides.

    kind "normwise": atol >= factor * eps * kappa * magnitude (the largest input, output or
    reference magnitude); "tie": no wider bound. For every kind, where factor * eps * kappa
    reaches 1 the sample carries no digits of the dtype (for "tie": the answer depends on a
    choice that rounding decides) and is not compared.
    """

    kind: ConditionKind
    factor: float
    kappa: ConditionFunction


@dataclass(frozen=True, kw_only=True)
class BackwardOverflow(CaseRule):
    """Values a backward forms in the case dtype before it scales them by the incoming
    gradient (factors) or divides by them (divisors), computed from each sample. Where a
    factor reaches the dtype's overflow threshold the gradient may be inf/NaN though the
    exact one is in range; where a divisor does, the gradient comes out 0 whatever the exact
    one, and the sample is not compared."""

    intermediates: IntermediatesFunction

    def __post_init__(self) -> None:
        if not self.grad:
            raise ValueError(f"BackwardOverflow for {self.op}: a rule of gradient cases")


@dataclass(frozen=True, kw_only=True)
class Squared(CaseRule):
    """Samples (those whose `terms` is not None) whose outputs are compared as squares, with
    the normwise bound at factor * terms."""

    factor: float
    terms: SquaredTermsFunction


@dataclass(frozen=True, kw_only=True)
class Discontinuity(CaseRule):
    """A step function of its inputs: a mismatch is re-checked against the reference's range
    over the inputs perturbed by their rounding (`mode`, see `sample_tables.DISCONTINUOUS`),
    with `cumulative`: the first output compared as cumulative sums."""

    mode: DiscontinuityMode
    cumulative: bool = False
    factor: float | None = None
    """How far the inputs move, in units of the case dtype's rounding (None:
    `discontinuity.PERTURB_EPS`)."""


@dataclass(frozen=True, kw_only=True)
class SampleSkip(CaseRule):
    """Samples of a case that are left out (those `applies` selects), and why: the case
    checks its other samples, and its message names the ones left out."""

    applies: SamplePredicate


R = TypeVar("R", bound=CaseRule)


def by_key(*rules: R) -> Mapping[str, R]:
    """A read-only table of `rules` by their keys; two rules for the same cases are an error."""
    table: dict[str, R] = {}
    for rule in rules:
        if rule.key in table:
            raise ValueError(f"two rules for {rule.key!r}")
        table[rule.key] = rule
    return MappingProxyType(table)


def skips_by_key(
    *skips: KnownSkip,
) -> Mapping[tuple[str, str | None, CaseKind | None], KnownSkip]:
    """A read-only table of known skips by (op, dtype, kind); two for the same cases are an
    error."""
    table: dict[tuple[str, str | None, CaseKind | None], KnownSkip] = {}
    for skip in skips:
        if skip.key in table:
            raise ValueError(f"two known skips for {skip.key!r}")
        table[skip.key] = skip
    return MappingProxyType(table)


def case_keys(op_name: str, case_dtype: torch.dtype) -> tuple[str, ...]:
    """The table keys that apply to a case, most specific first: "op/dtype[/grad]",
    "op[/grad]", then the same for the op's generic name (its variants share it)."""
    base, _, kind = op_name.partition("/")
    generic = op_db_by_name()[base].name + (f"/{kind}" if kind else "")
    dtype_name = next((n for n, d in DTYPES.items() if d == case_dtype), "")
    suffix = f"/{dtype_name}" + (f"/{kind}" if kind else "")
    return (base + suffix, op_name, generic.partition("/")[0] + suffix, generic)


def entry_for(table: Mapping[str, R], op_name: str, case_dtype: torch.dtype) -> R | None:
    """The most specific entry of a table for a case (`case_keys`), or None."""
    return next((table[k] for k in case_keys(op_name, case_dtype) if k in table), None)
