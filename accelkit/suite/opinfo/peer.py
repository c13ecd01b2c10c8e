"""The peer rule: an answer that misses the derived bound passes when a peer computing the same
thing is as far from float64 as it is.

The derived bound (`tolerances`, `sample_rules`) models one implementation's roundings; a
correct kernel that rounds differently (another summation order, a fused decomposition,
another algorithm) can land outside it. Where a peer exists, the peer's own error measures
what this computation costs in this dtype on these inputs: the candidate passes when its
error against the float64 reference is at most PEER_FACTOR times the peer's plus a floor of
PEER_FLOOR_UNITS units of rounding of the reference (as Inductor's accuracy check passes
compiled code whose fp64 error is within a multiplier of eager's). The comparison is
element by element where the op's bound is, else normwise (largest error against largest).

Peers: a compiled case's is eager on the same device (`compiled`); a device case's (cuda,
rocm, xpu, mps) is the CPU at the same dtype, computed in the same run from the same inputs
(`DevicePeer`, used by `running`). The peer must itself pass the derived bound: a peer that
is wrong, or a known failure (the CPU's own, `expectations/cpu.yaml`), rescues nothing. A
case that passes only by this rule says so in its message (PEER_RULE_PREFIX), and the run's
summary counts such cases per op.

The CPU can play the device (`cpu_plays_device`): a CPU case then has the CPU as its peer,
and the peer's answers are computed outside every dispatch mode, so kernels that a
TorchDispatchMode plants for the case (tests/fixtures/faults/kernel_variants.py: correct
kernels that round as a GPU's do, or wrong ones) stand in for a device's while the peer
stays the CPU's own. This is how the device rule is tested without a device.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import _disable_current_modes

from accelkit.suite.opinfo.eigen import EIGEN_OPS, align_eigen
from accelkit.suite.opinfo.sample_measures import differentiable
from accelkit.suite.session.failures import add_failure_info, failure_info

PEER_FACTOR = 2.0
"""C: the candidate may be this many times as far from float64 as its peer."""
PEER_FLOOR_UNITS = 2.0
"""The floor, in units of rounding (u = eps / 2) of the reference's magnitude."""
PEER_RULE_PREFIX = "passed by the peer rule: "
"""How a passing case's message begins when the peer rule passed one of its samples
(`accelkit.suite.run.outcome.PEER_RULE_PREFIX` says the same, for the run summary)."""


@dataclass(frozen=True)
class PeerVerdict:
    within: bool
    ratio: float
    """The largest candidate error over the peer rule's allowance (<= 1: within)."""


def _floating(value: Any) -> list[torch.Tensor]:
    return [
        x.detach().to("cpu")
        for x in pytree.tree_leaves(value)
        if isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex())
    ]


def judge(
    candidate: Any, peer: Any, reference: Any, dtype: torch.dtype, *, elementwise: bool
) -> PeerVerdict:
    """Whether `candidate` is within the peer rule of `peer`, both against `reference`."""
    got, mine, want = _floating(candidate), _floating(peer), _floating(reference)
    if not (len(got) == len(mine) == len(want)):
        return PeerVerdict(False, float("inf"))
    u = torch.finfo(dtype).eps / 2 if dtype.is_floating_point or dtype.is_complex else 0.0
    worst = 0.0
    for c, p, r in zip(got, mine, want, strict=True):
        if not (c.shape == p.shape == r.shape):
            return PeerVerdict(False, float("inf"))
        c, p, r = (t.to(torch.complex128 if t.is_complex() else torch.float64) for t in (c, p, r))
        finite = torch.isfinite(r)
        # Where the reference is not finite, the candidate must say what it says.
        same = (c == r) | (c.isnan() & r.isnan())
        if not bool(same[~finite].all()):
            return PeerVerdict(False, float("inf"))
        if not bool(finite.any()):
            continue
        c, p, r = c[finite], p[finite], r[finite]
        if not bool(torch.isfinite(c).all()):
            return PeerVerdict(False, float("inf"))
        error, peer_error = (c - r).abs(), (p - r).abs()
        if not elementwise:
            error, peer_error = error.max(), peer_error.max()
            scale = r.abs().max()
        else:
            scale = r.abs()
        allowed = PEER_FACTOR * peer_error + PEER_FLOOR_UNITS * u * scale
        allowed = torch.clamp(allowed, min=torch.finfo(torch.float64).tiny)
        worst = max(worst, float((error / allowed).max()))
    return PeerVerdict(worst <= 1.0, worst)


PEER_DEVICE = "cpu"
"""The device whose answer, at the case's dtype, is a device case's peer."""
OPINFO_CASE_PREFIX = "conformance/opinfo/"
"""An OpInfo case's id is this and its param id (`planning.OpinfoCase.param_id`)."""

_STAND_IN: ContextVar[bool] = ContextVar("accelkit_cpu_plays_device", default=False)


@contextlib.contextmanager
def cpu_plays_device() -> Iterator[None]:
    """While active, a case on the CPU is judged as a device case: the CPU (outside every
    dispatch mode, `peer_side`) is its peer."""
    token = _STAND_IN.set(True)
    try:
        yield
    finally:
        _STAND_IN.reset(token)


@contextlib.contextmanager
def peer_side() -> Iterator[None]:
    """Where the peer's answer is computed: the CPU as it is. With the CPU playing the
    device, outside the dispatch modes that plant the stand-in's kernels."""
    if not _STAND_IN.get():
        yield
        return
    with _disable_current_modes():
        yield


@functools.cache
def _cpu_known_failures(breadth: str) -> dict[str, Any]:
    from accelkit.suite.expectations import load_expectations

    return load_expectations(PEER_DEVICE, None, breadth)


@dataclass
class DevicePeer:
    """The CPU at the same dtype as the peer of one device case (`running` consults it where
    a sample misses the derived bound), and what it passed."""

    known_failure: str | None = None
    """Why the peer's own case is a known failure (`expectations/cpu.yaml`): then the peer
    rescues nothing."""
    passed: list[str] = field(default_factory=list)
    """The samples (their labels) that passed by the peer rule only."""

    @property
    def note(self) -> str | None:
        """The case's message when the peer rule passed some of its samples, else None."""
        if not self.passed:
            return None
        plural = "s" if len(self.passed) > 1 else ""
        return (
            f"{PEER_RULE_PREFIX}sample{plural} {', '.join(self.passed)} outside the derived "
            f"bound, within {PEER_FACTOR:g}x the error of the CPU at the same dtype (which "
            f"meets it) + {PEER_FLOOR_UNITS:g} units of rounding"
        )

    def rescue(
        self,
        error: AssertionError,
        sample: str,
        candidate: Any,
        reference: Any,
        dtype: torch.dtype,
        elementwise: bool,
        answer: Callable[[], Any],
        meets_bound: Callable[[Any], object],
    ) -> None:
        """Pass `candidate` (which missed the derived bound with `error`) when it is within
        the peer rule of the CPU's `answer()`, which must itself meet the bound
        (`meets_bound` raises where it does not); otherwise raise `error`, saying why the
        peer did not pass it. `sample`: the sample's label for the case message."""
        if self.known_failure is not None:
            _raise(error, f"the CPU's own case is a known failure: {self.known_failure}")
        with peer_side():
            mine = answer()
            try:
                meets_bound(mine)
            except AssertionError:
                _raise(error, "the CPU at the same dtype misses the bound too")
            verdict = judge(candidate, mine, reference, dtype, elementwise=elementwise)
        if not verdict.within:
            _raise(
                error,
                f"the CPU at the same dtype meets the bound: its error is {verdict.ratio:.3g}x "
                f"what the peer rule allows ({PEER_FACTOR:g}x the CPU's + "
                f"{PEER_FLOOR_UNITS:g} units of rounding)",
            )
        if sample not in self.passed:
            self.passed.append(sample)


_CASE_PEER: ContextVar[DevicePeer | None] = ContextVar("accelkit_case_peer", default=None)


@contextlib.contextmanager
def judging(device_peer: DevicePeer | None) -> Iterator[None]:
    """The case run inside has `device_peer` as its peer (None: none)."""
    token = _CASE_PEER.set(device_peer)
    try:
        yield
    finally:
        _CASE_PEER.reset(token)


def rescue(
    error: AssertionError,
    sample: str,
    candidate: Any,
    reference: Any,
    dtype: torch.dtype,
    elementwise: bool,
    answer: Callable[[], Any],
    meets_bound: Callable[[Any], object],
) -> None:
    """`DevicePeer.rescue` by the peer of the case being judged (`judging`); without one,
    raise `error`."""
    device_peer = _CASE_PEER.get()
    if device_peer is None:
        raise error
    device_peer.rescue(error, sample, candidate, reference, dtype, elementwise, answer, meets_bound)


def _raise(error: AssertionError, verdict: str) -> None:
    from accelkit.suite.opinfo.comparison import Mismatch

    wrapped = Mismatch(f"{error} [{verdict}]")
    add_failure_info(wrapped, **failure_info(error))
    raise wrapped from None


def device_peer(device: str, param_id: str, breadth: str) -> DevicePeer | None:
    """The peer of the OpInfo case `param_id` on `device`: the CPU at the same dtype, where
    the device is not the CPU itself (or the CPU plays a device, `cpu_plays_device`)."""
    own = torch.device(device).type == torch.device(PEER_DEVICE).type
    if own and not _STAND_IN.get():
        return None
    known = _cpu_known_failures(breadth).get(OPINFO_CASE_PREFIX + param_id)
    return DevicePeer(known_failure=None if known is None else known.describe())


def peer_sample(sample: Any, device: str, *, grad: bool = False) -> Any:
    """`sample` on the CPU at the same dtypes, every tensor a copy (laid out as it is, where
    it is dense), a leaf that requires a gradient where the device's did (with `grad`); device
    arguments naming the case's device become the CPU's."""
    from torch.testing._internal.opinfo.core import SampleInput

    device_type = torch.device(device).type

    def convert(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            mine = x.detach().to(PEER_DEVICE, copy=True)
            return mine.requires_grad_(grad and x.requires_grad)
        if isinstance(x, torch.device) and x.type == device_type:
            return torch.device(PEER_DEVICE)
        if isinstance(x, str) and x.partition(":")[0] == device_type:
            return PEER_DEVICE
        return x

    return SampleInput(  # type: ignore[no-untyped-call]
        pytree.tree_map(convert, sample.input),
        args=pytree.tree_map(convert, sample.args),
        kwargs=pytree.tree_map(convert, sample.kwargs),
        output_process_fn_grad=sample.output_process_fn_grad,
        broadcasts_input=sample.broadcasts_input,
        name=sample.name,
    )


def grads(
    op: Any,
    op_name: str,
    sample: Any,
    device: str,
    dtype: torch.dtype,
    ref: Any,
    ref_outputs: Any,
    weights: Any,
) -> list[torch.Tensor]:
    """The CPU's gradients at the case's dtype (as `running`'s gradient check computes the
    device's: the same wrapper, processing and weights), zeros for an unused input."""
    with peer_side():
        mine = peer_sample(sample, device, grad=True)
        inputs = differentiable((mine.input, mine.args, mine.kwargs))
        wrapped = op.gradcheck_wrapper(op.op, mine.input, *mine.args, **mine.kwargs)
        outputs = differentiable(sample.output_process_fn_grad(wrapped))
        if op_name in EIGEN_OPS:
            outputs = align_eigen(outputs, ref_outputs, ref.input, dtype, op_name)
        found = torch.autograd.grad(outputs, inputs, weights, allow_unused=True)
    return [torch.zeros_like(x) if g is None else g for g, x in zip(found, inputs, strict=True)]


def lazy_grads(
    op: Any,
    op_name: str,
    sample: Any,
    device: str,
    dtype: torch.dtype,
    ref: Any,
    ref_outputs: Any,
    weights: Any,
) -> Callable[[int], torch.Tensor]:
    """The CPU's gradient of input i (`grads`), all computed on the first call."""
    found: list[torch.Tensor] = []

    def grad(i: int) -> torch.Tensor:
        if not found:
            found.extend(grads(op, op_name, sample, device, dtype, ref, ref_outputs, weights))
        return found[i]

    return grad


def label(index: int, layout: str | None) -> str:
    """A sample as the peer rule's note names it: its index, and its layout if any."""
    return f"{index}" + (f" in layout {layout}" if layout else "")
