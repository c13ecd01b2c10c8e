"""What a backward-stable kernel may leave in each output element, from the op's derivative.

Where the op's graph cannot be measured (`magnitudes`: an op without a decomposition, as
most of linear algebra: householder_product, solve, eigh, svd), its kernel is judged as
backward stable, the property LAPACK's and cuSOLVER's algorithms are proven to have: the
answer is the exact result of inputs moved by at most K u(d) times each input's largest
element (normwise per input), K the size of the matrices (an input's largest trailing
dimension). To first order the answer then moves by at most

    e_k = K u(d) sum_j max|x_j| sum_i |d y_k / d x_ji|

the derivative taken in float64 by autograd (its Jacobian, one backward pass per output
element): the op's own condition at this sample, computed, not written per op (a product of
reflectors far from unitary, an eigenvector's 1 / gap, a solve's kappa all come out of it).
For a gradient the map is (inputs, the outputs' weights) -> the gradients, whose Jacobian
needs the op's second derivative. Complex tensors are taken as pairs of reals, e bounding
each part. Where autograd has no derivative for the op (ldl_factor_ex's factor), and the
caller allows it (`differences`), the Jacobian is taken by central differences in float64
instead, one pair of runs per input element: at most MAX_DIFFERENCED_INPUTS elements. None
where the Jacobian cannot be taken, or the map has more than MAX_OUTPUTS output elements
(cost).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

MAX_OUTPUTS = 4096
"""Maps with more output elements than this are not measured (one backward pass each)."""

MAX_DIFFERENCED_INPUTS = 512
"""Maps without a derivative with more input elements than this are not measured."""

DIFFERENCE_STEP = 1e-6
"""The central difference's step, relative to each input's largest magnitude (float64)."""


def _real(x: torch.Tensor) -> torch.Tensor:
    return torch.view_as_real(x) if x.is_complex() else x


def slack(
    run: Callable[..., Sequence[torch.Tensor | None]],
    inputs: Sequence[torch.Tensor],
    dtype: torch.dtype,
    *,
    differences: bool = False,
) -> list[torch.Tensor | None] | None:
    """Per output of `run(*inputs)` (float64 or complex128 tensors; None for one it leaves
    out), e of each element (for a complex output, of each part), or None for the whole map
    where its Jacobian cannot be taken (by autograd, or with `differences` by central
    differences where autograd has no derivative)."""
    if not inputs:
        return None
    u = torch.finfo(dtype).eps / 2
    size = max([max(x.shape[-2:], default=1) for x in inputs] + [1])
    largest = [float(x.detach().abs().max()) if x.numel() else 0.0 for x in inputs]
    complex_inputs = [x.is_complex() for x in inputs]
    reals = tuple(_real(x.detach()) for x in inputs)

    def real_map(*parts: torch.Tensor) -> tuple[torch.Tensor, ...]:
        values = [
            torch.view_as_complex(p) if was else p
            for p, was in zip(parts, complex_inputs, strict=True)
        ]
        return tuple(_real(y) for y in run(*values) if y is not None)

    try:
        with torch.enable_grad():  # which outputs there are, and their shapes
            shapes = [
                None if y is None else y.detach()
                for y in run(*(x.detach().requires_grad_(True) for x in inputs))
            ]
        if sum(y.numel() for y in shapes if y is not None) > MAX_OUTPUTS:
            return None
        try:
            jacobian = torch.autograd.functional.jacobian(  # type: ignore[no-untyped-call]
                real_map, reals, strict=False
            )
        except (RuntimeError, NotImplementedError):  # no derivative
            if not differences or sum(x.numel() for x in reals) > MAX_DIFFERENCED_INPUTS:
                return None
            jacobian = _differenced(real_map, reals, largest)
    except (RuntimeError, NotImplementedError, TypeError, ValueError, IndexError):
        return None
    kept = iter(range(len(shapes)))
    found: list[torch.Tensor | None] = []
    for y in shapes:
        if y is None:
            found.append(None)
            continue
        k = next(kept)
        rows = _real(y).numel()
        e = torch.zeros(rows, dtype=torch.float64)
        for j, x in enumerate(reals):
            part = jacobian[k][j].reshape(rows, x.numel()).abs().sum(dim=1)
            e = e + part.nan_to_num(0.0, posinf=torch.inf) * largest[j]
        e = size * u * e.reshape(_real(y).shape)
        found.append(e.amax(-1) if y.is_complex() else e)  # the box: both parts' largest
    return found


def _differenced(
    real_map: Callable[..., tuple[torch.Tensor, ...]],
    reals: tuple[torch.Tensor, ...],
    largest: Sequence[float],
) -> list[list[torch.Tensor]]:
    """The Jacobian of `real_map` at `reals` by central differences, laid out as autograd's
    (`jacobian[k][j]`: output k by input j, flattened): each element of input j moved by
    DIFFERENCE_STEP times `largest[j]`, its largest magnitude (1 for an input of zeros), up
    and down."""
    outputs = real_map(*reals)
    found = [
        [torch.zeros(y.numel(), x.numel(), dtype=torch.float64) for x in reals] for y in outputs
    ]
    for j, x in enumerate(reals):
        step = DIFFERENCE_STEP * (largest[j] or 1.0)
        for i in range(x.numel()):
            ends = []
            for sign in (1.0, -1.0):
                moved = list(reals)
                moved[j] = x.clone()
                moved[j].view(-1)[i] += sign * step
                ends.append(real_map(*moved))
            for k, (up, down) in enumerate(zip(*ends, strict=True)):
                found[k][j][:, i] = ((up - down) / (2 * step)).reshape(-1).to(torch.float64)
    return found
