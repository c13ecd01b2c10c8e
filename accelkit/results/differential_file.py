"""The differential file (`accelkit diff A.json B.json --out PATH`): schema
`accelkit.differential/1`.

Two runs of the same seeded conformance cases in two environments (two torch builds, two
backends), compared by what they computed (`accelkit test --record-outputs`), not by
pass/fail: per case the largest absolute and relative difference between the two answers,
and whether they disagree beyond the case's tolerance, even when both passed against the
float64 reference. `accelkit report` shows these files beside the runs.

Only cases whose answers differ, or that cannot be compared (inputs or shapes differ, one
side has no record), are listed; `summary` counts every case. Example:

    {"schema": "accelkit.differential/1",
     "a": {"label": "torch 2.14.1+cu130 · cpu", "source": "host.json", ...},
     "b": {"label": "torch 2.13.0+cpu · cpu", ...},
     "cases": [{"id": "conformance/opinfo/exp/float32", "status_a": "passed",
                "status_b": "passed", "outputs": 3, "max_abs": 4.8e-07, "max_rel": 1.2e-07,
                "beyond_tolerance": false, "worst": "exp sample 1 (...)", "note": "",
                "peer_ratio": null}],
     "summary": {"compared": 2412, "identical": 2398, "differ": 14, "beyond_tolerance": 0,
                 "beyond_tolerance_both_passed": 0, "not_comparable": 3,
                 "failed_in_one": 0, "within_peer_rule": 0, "peer_factor": 2.0,
                 "peer_floor_units": 2.0}}

The peer rule (issue 45: for `accelkit diff` the peer is the other build): where a case
failed in one run and passed in the other, the failing run's answers are judged with the
passing run's as their peer (`accelkit.suite.opinfo.peer.judge`) against the float64
reference both recorded: `peer_ratio` <= 1 says the failing build is as near float64 as the
other, within PEER_FACTOR (2) times its error plus PEER_FLOOR_UNITS (2) units of rounding.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from accelkit.errors import BadInput

DIFFERENTIAL_SCHEMA: Final = "accelkit.differential/1"


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow")


class Side(_Model):
    label: str
    source: str
    device: str
    torch: str | None = None
    git: str | None = None


class CaseDifference(_Model):
    id: str
    status_a: str | None = None
    status_b: str | None = None
    outputs: int = 0
    """Answers compared (tensors the case checked against its reference)."""
    max_abs: float | None = None
    max_rel: float | None = None
    """Largest |a - b| / max(|a|, |b|) over the elements (0 where both are 0)."""
    beyond_tolerance: bool = False
    """Some element differs by more than atol + rtol * max(|a|, |b|), the case's tolerance
    against the reference (the larger of the two runs')."""
    worst: str = ""
    """The answer with the largest relative difference (the case's own label for it)."""
    note: str = ""
    """Why (part of) the case could not be compared: inputs differ, shapes differ, ..."""
    peer_ratio: float | None = None
    """For a case that failed in one run and passed in the other, both with their float64
    references recorded: the failing run's largest error against the reference over what the
    peer rule allows with the passing run as its peer (PEER_FACTOR times the passing run's
    error + PEER_FLOOR_UNITS units of rounding): <= 1 means the failing answer is as near
    float64 as the other build's, a rounding of its own rather than a regression."""

    @property
    def failed_side(self) -> str | None:
        """ "A" or "B" where exactly one run failed the case."""
        if self.status_a == "passed" and self.status_b == "failed":
            return "B"
        if self.status_a == "failed" and self.status_b == "passed":
            return "A"
        return None

    @property
    def peer_verdict(self) -> str:
        """The peer rule's verdict on the failing run, in the words every view uses: "B
        within the peer rule of A (0.62)", "B beyond the peer rule of A (3.1)", or ""."""
        side = self.failed_side
        if side is None or self.peer_ratio is None:
            return ""
        other = "A" if side == "B" else "B"
        where = "within" if self.peer_ratio <= 1.0 else "beyond"
        return f"{side} {where} the peer rule of {other} ({self.peer_ratio:.2g})"

    @property
    def both_passed(self) -> bool:
        return self.status_a == "passed" and self.status_b == "passed"


class DifferentialSummary(_Model):
    compared: int = 0
    identical: int = 0
    differ: int = 0
    beyond_tolerance: int = 0
    beyond_tolerance_both_passed: int = 0
    not_comparable: int = 0
    failed_in_one: int = 0
    """Cases that failed in one run and passed in the other, their references recorded."""
    within_peer_rule: int = 0
    """Of those, the cases whose failing answer is within the peer rule of the other run's."""
    peer_factor: float | None = None
    peer_floor_units: float | None = None
    """The peer rule's C and floor (units of rounding) the cases were judged with."""

    def peer_sentence(self) -> str:
        """What the peer rule says of the cases that failed in one run only, in the words
        every view uses ("" when there are none)."""
        if not self.failed_in_one:
            return ""
        return (
            f"{self.within_peer_rule} of the {self.failed_in_one} cases that failed in one "
            f"run only are within the peer rule of the other (at most {self.peer_factor:g}x "
            f"its error against float64 + {self.peer_floor_units:g} units of rounding)"
        )


class Differential(_Model):
    schema_: Literal["accelkit.differential/1"] = Field(default=DIFFERENTIAL_SCHEMA, alias="schema")
    a: Side
    b: Side
    cases: list[CaseDifference] = Field(default_factory=list)
    summary: DifferentialSummary = Field(default_factory=DifferentialSummary)

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    def to_json_dict(self) -> dict[str, object]:
        return self.model_dump(mode="json", by_alias=True)

    def disagreeing(self) -> list[CaseDifference]:
        """Cases beyond tolerance, those where both runs passed first, then by size."""
        found = [c for c in self.cases if c.beyond_tolerance]
        return sorted(found, key=lambda c: (not c.both_passed, -(c.max_rel or 0.0)))


def is_differential_document(path: Path) -> bool:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    schema = raw.get("schema") if isinstance(raw, dict) else None
    return isinstance(schema, str) and schema.startswith("accelkit.differential/")


def load_differential(path: Path) -> Differential:
    """Load and validate a differential file; any problem is a one-line BadInput."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BadInput(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise BadInput(f"{path}: cannot read a differential file: {exc}") from None
    schema = raw.get("schema") if isinstance(raw, dict) else None
    if schema != DIFFERENTIAL_SCHEMA:
        raise BadInput(
            f"{path}: unknown schema {schema!r} (this accelkit reads {DIFFERENTIAL_SCHEMA!r})"
        )
    try:
        return Differential.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise BadInput(f"{path}: invalid differential file at {where}: {first['msg']}") from None
