"""Recording what each conformance case computed, for differential runs (`accelkit diff`).

With `accelkit test --record-outputs DIR`, every answer a case compares with its float64
reference is kept: `reference.assert_matches_reference` and the OpInfo comparison call
`record(what, actual, rtol, atol)` for each tensor they check, and the plugin writes one file
per case, `DIR/<case id with / as __>.pt` (torch.save of a dict, loadable with
`weights_only=True`):

    {"case": "conformance/opinfo/exp/float32",
     "outputs": [{"what": "exp sample 0 (...)", "actual": <tensor>, "rtol": 1.3e-06,
                  "atol": 1e-05, "inputs": "<sha1 of the sample's inputs, or ''>",
                  "expected": <the float64 reference>, "elementwise": true}, ...]}

Two runs of the same seeded cases (two torch builds, two backends) then differ only by what
they computed, and `accelkit diff` lines the records up by `what`. `inputs` tells the cases
whose inputs differ (a sample generator that changed between releases) from those whose
answers do. Nothing is recorded unless a case is being recorded (`recording`).
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_current: list[dict[str, Any]] | None = None
_inputs_digest = ""


def file_name(case_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", case_id.replace("/", "__")) + ".pt"


@contextlib.contextmanager
def recording(case_id: str, folder: Path) -> Iterator[None]:
    """Record the case's outputs while it runs; write them when it ends (pass or fail)."""
    global _current, _inputs_digest
    _current, _inputs_digest = [], ""
    try:
        yield
    finally:
        kept, _current = _current, None
        if kept:
            import torch

            folder.mkdir(parents=True, exist_ok=True)
            torch.save({"case": case_id, "outputs": kept}, folder / file_name(case_id))


def inputs_seen(*values: Any) -> None:
    """The inputs of what is compared next (an OpInfo sample): their digest goes with it."""
    global _inputs_digest
    if _current is None:
        return
    import torch
    from torch.utils import _pytree as pytree

    digest = hashlib.sha1(usedforsecurity=False)
    for leaf in pytree.tree_leaves(values):
        if isinstance(leaf, torch.Tensor):
            tensor = leaf.detach().to("cpu")
            if tensor.layout != torch.strided:
                tensor = tensor.to_dense()
            digest.update(f"{tensor.dtype}{tuple(tensor.shape)}".encode())
            digest.update(tensor.contiguous().view(-1).view(torch.uint8).numpy().tobytes())
        else:
            digest.update(repr(leaf).encode())
    _inputs_digest = digest.hexdigest()


def record(
    what: str,
    actual: Any,
    rtol: float,
    atol: float,
    expected: Any = None,
    *,
    elementwise: bool = True,
) -> None:
    """Keep one compared answer (a tensor), if the case is being recorded; `expected`, the
    float64 reference it was compared with, and whether its bound is element by element
    (`elementwise`) let `accelkit diff` judge one run's answer with the other's as its peer."""
    if _current is None:
        return
    import torch

    if not isinstance(actual, torch.Tensor):
        return

    def dense(x: torch.Tensor) -> torch.Tensor:
        x = x.detach().to("cpu")
        return (x.to_dense() if x.layout != torch.strided else x).clone()

    kept: dict[str, Any] = {
        "what": what,
        "actual": dense(actual),
        "rtol": float(rtol),
        "atol": float(atol),
        "inputs": _inputs_digest,
    }
    if isinstance(expected, torch.Tensor) and tuple(expected.shape) == tuple(actual.shape):
        kept["expected"] = dense(expected)
        kept["elementwise"] = bool(elementwise)
    _current.append(kept)
