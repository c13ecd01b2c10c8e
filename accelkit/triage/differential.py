"""`accelkit diff A.json B.json`: what two runs of the same seeded cases computed differently.

Each run must have recorded its cases' answers (`accelkit test --record-outputs DIR`, one
file per case: `accelkit.suite.session.outputs`). For every conformance case both runs recorded,
the answers are paired by the label the case gave them (`what`, in order); per pair:

- not comparable when the inputs' digests differ (a sample generator that changed between
  torch releases makes other inputs from the same seed) or the shapes differ;
- else the largest |a - b| and |a - b| / max(|a|, |b|) (NaN on one side only, or infinities
  of different sign, count as infinitely far), and whether some element differs by more
  than atol + rtol * max(|a|, |b|) with the case's tolerance against the reference (the
  larger of the two runs'): then the two environments disagree beyond what the case allows
  either of them, even if both passed;
- where the case failed in one run and passed in the other, the failing run's answers judged
  by the peer rule with the passing run's as their peer, against the float64 reference both
  recorded (`accelkit.suite.opinfo.peer.judge`; issue 45: for a diff the peer is the other
  build): `peer_ratio` <= 1, the failing build is as near float64 as the other.

The result is a `Differential` (accelkit.results.differential_file); `accelkit report` shows it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from accelkit.errors import BadInput
from accelkit.results.differential_file import (
    CaseDifference,
    Differential,
    DifferentialSummary,
    Side,
)
from accelkit.results.io import load_results
from accelkit.results.model import Results


def _side(results: Results, source: Path) -> Side:
    torch = results.env.get("torch")
    torch = torch if isinstance(torch, dict) else {}
    version = torch.get("version")
    label = " · ".join(
        p for p in (f"torch {version}" if version else "", results.run.device, source.name) if p
    )
    return Side(
        label=label,
        source=str(source),
        device=results.run.device,
        torch=str(version) if version else None,
        git=str(torch.get("git_version")) if torch.get("git_version") else None,
    )


def _outputs_folder(results: Results, source: Path) -> Path:
    if not results.run.outputs:
        raise BadInput(
            f"{source}: the run recorded no outputs "
            "(rerun it with accelkit test --record-outputs DIR)"
        )
    folder = Path(results.run.outputs)
    if not folder.is_absolute():
        folder = source.parent / folder
    if not folder.is_dir():
        raise BadInput(f"{source}: its outputs folder {folder} is missing")
    return folder


def _pairs(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[tuple[Any, Any]]:
    """Records paired by label and occurrence (a step function's case checks twice)."""

    def keyed(records: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
        seen: dict[str, int] = {}
        out: dict[tuple[str, int], dict[str, Any]] = {}
        for record in records:
            n = seen.get(record["what"], 0)
            seen[record["what"]] = n + 1
            out[(record["what"], n)] = record
        return out

    ka, kb = keyed(a), keyed(b)
    return [(ka.get(k), kb.get(k)) for k in [*ka, *(k for k in kb if k not in ka)]]


def compare_answers(x: Any, y: Any, rtol: float, atol: float) -> tuple[float, float, bool]:
    """(max |x - y|, max relative difference, beyond tolerance) of two answers."""
    import torch

    target = torch.complex128 if (x.is_complex() or y.is_complex()) else torch.float64
    x, y = x.to(target), y.to(target)
    if x.numel() == 0:
        return 0.0, 0.0, False
    diff = (x - y).abs()
    same = (x == y) | (x.isnan() & y.isnan())
    diff = torch.where(same, torch.zeros_like(diff), diff.nan_to_num(nan=math.inf))
    scale = torch.maximum(x.abs(), y.abs()).nan_to_num(nan=math.inf)
    rel = torch.where(diff == 0, torch.zeros_like(diff), diff / scale)
    rel = rel.nan_to_num(nan=math.inf)
    beyond = bool((diff > atol + rtol * scale.nan_to_num(posinf=0.0)).any())
    return float(diff.max()), float(rel.max()), beyond


def _case_difference(
    case_id: str, a: dict[str, Any], b: dict[str, Any], status_a: str, status_b: str
) -> CaseDifference:
    result = CaseDifference(id=case_id, status_a=status_a, status_b=status_b)
    notes: list[str] = []
    worst_rel = -1.0
    for ra, rb in _pairs(a["outputs"], b["outputs"]):
        if ra is None or rb is None:
            notes.append(f"only one run checked: {(ra or rb)['what'][:120]}")
            continue
        if ra.get("inputs") != rb.get("inputs"):
            notes.append(f"inputs differ: {ra['what'][:120]}")
            continue
        x, y = ra["actual"], rb["actual"]
        if tuple(x.shape) != tuple(y.shape):
            notes.append(
                f"shapes differ ({tuple(x.shape)} vs {tuple(y.shape)}): {ra['what'][:120]}"
            )
            continue
        rtol, atol = max(ra["rtol"], rb["rtol"]), max(ra["atol"], rb["atol"])
        max_abs, max_rel, beyond = compare_answers(x, y, rtol, atol)
        result.outputs += 1
        result.max_abs = max(result.max_abs or 0.0, max_abs)
        result.max_rel = max(result.max_rel or 0.0, max_rel)
        result.beyond_tolerance |= beyond
        if max_rel > worst_rel:
            worst_rel, result.worst = max_rel, ra["what"]
    result.note = "; ".join(dict.fromkeys(notes))[:1000]
    result.peer_ratio = _peer_ratio(result, a, b)
    return result


def _peer_ratio(result: CaseDifference, a: dict[str, Any], b: dict[str, Any]) -> float | None:
    """The failing run's largest error over the peer rule's allowance, the passing run its
    peer (`CaseDifference.peer_ratio`); None unless exactly one run failed, every answer the
    failing run checked (it stops at its first failure) pairs with the passing run's, from the
    same inputs, with its reference recorded, and one of them misses its own recorded
    tolerance (a failure the records do not show is not the peer rule's to judge)."""
    from accelkit.suite.opinfo.peer import judge

    side = result.failed_side
    if side is None:
        return None
    failing, passing = (b, a) if side == "B" else (a, b)
    worst, shown = 0.0, False
    for rf, rp in _pairs(failing["outputs"], passing["outputs"]):
        if rf is None:  # checked by the passing run only: after the failing run stopped
            continue
        if rp is None or rf.get("inputs") != rp.get("inputs"):
            return None
        if "expected" not in rf or "expected" not in rp:
            return None
        got, peer, want = rf["actual"], rp["actual"], rf["expected"]
        if not (tuple(got.shape) == tuple(peer.shape) == tuple(want.shape)):
            return None
        if not (got.is_floating_point() or got.is_complex()):
            exact = bool((got == want.to(got.dtype)).all())
            shown |= not exact
            worst = max(worst, 0.0 if exact else math.inf)
            continue
        _, _, missed = compare_answers(got, want, rf["rtol"], rf["atol"])
        shown |= missed
        elementwise = bool(rf.get("elementwise", True))
        worst = max(worst, judge(got, peer, want, got.dtype, elementwise=elementwise).ratio)
    return worst if shown else None


def differential(
    a_path: Path, b_path: Path, *, on_case: Callable[[int, int], None] | None = None
) -> Differential:
    """The differential of two runs that recorded their outputs; BadInput for runs that did
    not, or share no case."""
    import torch

    from accelkit.suite.session.outputs import file_name

    runs = [load_results(a_path), load_results(b_path)]
    folders = [_outputs_folder(r, p) for r, p in zip(runs, (a_path, b_path), strict=True)]
    cases = [{c.id: c for c in r.cases if c.suite == "conformance"} for r in runs]
    ids = [i for i in cases[0] if i in cases[1]]
    if not ids:
        raise BadInput(f"{a_path} and {b_path} have no conformance case in common")
    from accelkit.suite.opinfo.peer import PEER_FACTOR, PEER_FLOOR_UNITS

    summary = DifferentialSummary(peer_factor=PEER_FACTOR, peer_floor_units=PEER_FLOOR_UNITS)
    listed: list[CaseDifference] = []
    for n, case_id in enumerate(ids):
        if on_case is not None:
            on_case(n, len(ids))
        files = [folder / file_name(case_id) for folder in folders]
        present = [f.is_file() for f in files]
        statuses = (cases[0][case_id].status, cases[1][case_id].status)
        if not any(present):  # skipped on both, or compared nothing
            continue
        summary.compared += 1
        if not all(present):
            summary.not_comparable += 1
            which = "the first" if present[0] else "the second"
            listed.append(
                CaseDifference(
                    id=case_id,
                    status_a=statuses[0],
                    status_b=statuses[1],
                    note=f"only {which} run recorded answers",
                )
            )
            continue
        records = [torch.load(f, weights_only=True) for f in files]
        found = _case_difference(case_id, records[0], records[1], *statuses)
        if found.outputs == 0:
            summary.not_comparable += 1
            listed.append(found)
            continue
        if not found.max_abs and not found.note:
            summary.identical += 1
            continue
        summary.differ += 1 if found.max_abs else 0
        summary.not_comparable += 1 if found.note and not found.max_abs else 0
        if found.beyond_tolerance:
            summary.beyond_tolerance += 1
            summary.beyond_tolerance_both_passed += found.both_passed
        if found.peer_ratio is not None:
            summary.failed_in_one += 1
            summary.within_peer_rule += found.peer_ratio <= 1.0
        listed.append(found)
    listed.sort(key=lambda c: (not c.beyond_tolerance, -(c.max_rel or 0.0), c.id))
    return Differential(
        a=_side(runs[0], a_path), b=_side(runs[1], b_path), cases=listed, summary=summary
    )
