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

Peers: a compiled case's is eager on the same device (`compiled`). The peer must itself
pass the derived bound: a peer that is wrong, or a known failure, rescues nothing. A case
that passes only by this rule says so in its message (PEER_RULE_PREFIX), and the run's
summary counts such cases per op.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.utils import _pytree as pytree

PEER_FACTOR = 2.0
"""C: the candidate may be this many times as far from float64 as its peer."""
PEER_FLOOR_UNITS = 2.0
"""The floor, in units of rounding (u = eps / 2) of the reference's magnitude."""
PEER_RULE_PREFIX = "passed by the peer rule: "
"""How a passing case's message begins when the peer rule passed one of its samples
(`accelkit.suite.outcome.PEER_RULE_PREFIX` says the same, for the run summary)."""


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
