"""What a run ran on, read from its results file: the facts two runs must share before their
numbers can be compared (`accelkit compare`) or set side by side (`accelkit report`).

Example: `run_environment(results)["device_name"]` is "NVIDIA H200" for a CUDA run, from the
fingerprint every backend fills the same way (`env.backends[<device>].devices[0]`); the
CPU's is its model. A fact the file does not record is None.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelkit.results.model import Results

#: The facts, in the order they are shown, with their labels.
ENVIRONMENT_FIELDS: tuple[tuple[str, str], ...] = (
    ("device", "backend"),
    ("target", "GPU target"),
    ("device_name", "device"),
    ("driver", "driver"),
    ("torch_version", "torch"),
    ("torch_git", "torch git hash"),
    ("accelkit", "accelkit"),
)


def run_environment(results: Results) -> dict[str, str | None]:
    """Each of ENVIRONMENT_FIELDS for `results` (None where the file does not say)."""
    device = _first_device(results)
    torch = results.env.get("torch")
    torch = torch if isinstance(torch, dict) else {}
    return {
        "device": results.run.device,
        "target": results.run.target,
        "device_name": _text(device.get("name")),
        "driver": _text(device.get("driver")),
        "torch_version": _text(torch.get("version")),
        "torch_git": _text(torch.get("git_version")),
        "accelkit": _text(results.env.get("accelkit")),
    }


def _first_device(results: Results) -> dict[str, Any]:
    backends = results.env.get("backends")
    entry = backends.get(results.run.device) if isinstance(backends, dict) else None
    devices = entry.get("devices") if isinstance(entry, dict) else None
    if isinstance(devices, list) and devices and isinstance(devices[0], dict):
        return devices[0]
    return {}


def _text(value: object) -> str | None:
    return str(value) if value not in (None, "") else None


@dataclass(frozen=True)
class EnvironmentDifference:
    field: str
    label: str
    base: str | None
    new: str | None

    def to_json_dict(self) -> dict[str, Any]:
        return {"field": self.field, "label": self.label, "base": self.base, "new": self.new}

    def describe(self) -> str:
        return f"{self.label}: {self.base or 'not recorded'} -> {self.new or 'not recorded'}"


def environment_differences(base: Results, new: Results) -> tuple[EnvironmentDifference, ...]:
    """The environment facts that differ between two runs, in ENVIRONMENT_FIELDS order."""
    before, after = run_environment(base), run_environment(new)
    return tuple(
        EnvironmentDifference(field, label, before[field], after[field])
        for field, label in ENVIRONMENT_FIELDS
        if before[field] != after[field]
    )
