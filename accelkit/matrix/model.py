"""The typed matrix: a file's entries before expansion, and the explicit legs after it.

Everything here is a frozen dataclass holding validated values; `accelkit.matrix.parse`
builds them from YAML, `accelkit.matrix.expand` turns entries into legs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Location:
    """Where something was written: a file and a 1-based line."""

    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class TorchSource:
    """Which torch a leg tests: a published channel, or a git ref to build from."""

    channel: str | None = None
    ref: str | None = None

    def label(self) -> str:
        return f"ref:{self.ref}" if self.ref is not None else f"channel:{self.channel}"


@dataclass(frozen=True)
class RunnerSpec:
    """Runner labels: one list for every leg of an entry, or one list per target."""

    labels: tuple[str, ...] = ()
    per_target: tuple[tuple[str, tuple[str, ...]], ...] = ()
    location: Location | None = field(default=None, compare=False)
    per_node: tuple[tuple[str, ...], ...] = ()
    """A `nodes: N` leg's labels, one list per node rank (node 0's runner hosts the
    rendezvous); `for_target` gives node 0's."""

    def for_target(self, target: str | None) -> tuple[str, ...]:
        if self.per_node:
            return self.per_node[0]
        if target is not None:
            for name, labels in self.per_target:
                if name == target:
                    return labels
        return self.labels


@dataclass(frozen=True)
class LegSettings:
    """What an entry (or one of its includes) sets for each leg it produces.

    Arguments may still hold placeholders (`{target}`, `{python}`, ...); expansion fills them.
    """

    torch: TorchSource
    suites: tuple[str, ...]
    runner: RunnerSpec
    image: str | None
    base_image: str | None
    container: bool
    build: bool
    build_args: tuple[str, ...]
    setup_args: tuple[str, ...]
    test_args: tuple[str, ...]
    timeout_minutes: int
    variant: str | None
    require: tuple[str, ...] = ()
    """Capabilities the legs must have besides their backend's (`accelkit test --require`)."""
    waive: tuple[tuple[str, str], ...] = ()
    """(capability, why) pairs the legs do without (`accelkit test --waive`)."""
    shards: int = 1
    """Jobs the leg's test is split into (`accelkit test --shard I/N`), merged before compare."""
    nodes: int = 1
    """Nodes the leg's distributed cases span (`accelkit test --nnodes N`), one job per node."""
    rdzv_endpoint: str | None = None
    """HOST:PORT of node 0 (`--rdzv-endpoint`) for a leg of 2 nodes or more."""
    explore_seeds: int = 0
    """N > 0: an explore leg (`accelkit test --explore-seeds N`): findings, not results."""


@dataclass(frozen=True)
class IncludeSpec:
    """Extra legs for one entry: one target (if the backend has targets) times pythons."""

    target: str | None
    pythons: tuple[str, ...]
    settings: LegSettings
    location: Location = field(compare=False)


@dataclass(frozen=True)
class LegMatcher:
    """An `exclude` item: a leg is dropped when every given key equals the leg's value."""

    criteria: tuple[tuple[str, str], ...]
    location: Location = field(compare=False)

    def matches(self, leg: MatrixEntry) -> bool:
        values = leg.match_values()
        return all(values.get(key) == value for key, value in self.criteria)


@dataclass(frozen=True)
class EntrySpec:
    """One item of `entries`: a backend and version, times targets, times pythons."""

    backend: str
    backend_version: str | None
    targets: tuple[str | None, ...]
    pythons: tuple[str, ...]
    settings: LegSettings
    includes: tuple[IncludeSpec, ...]
    excludes: tuple[LegMatcher, ...]
    location: Location = field(compare=False)


@dataclass(frozen=True)
class MatrixFile:
    """A whole matrix file, validated but not yet expanded."""

    path: str
    name: str | None
    description: str | None
    entries: tuple[EntrySpec, ...]
    excludes: tuple[LegMatcher, ...]


@dataclass(frozen=True)
class MatrixEntry:
    """One explicit leg: everything a runner needs to build and test one variant."""

    name: str
    backend: str
    backend_version: str | None
    target: str | None
    family: str | None
    device: str
    python: str
    torch: TorchSource
    suites: tuple[str, ...]
    runner: tuple[str, ...]
    image: str | None
    base_image: str | None
    """The base of the leg's test image: the matrix's, else the backend's default (None for
    legs without a container or with a prebuilt image)."""
    container: bool
    build: bool
    build_args: tuple[str, ...]
    """`accelkit build` arguments: the matrix's, then what the leg sets (--python, --torch-ref)."""
    setup_args: tuple[str, ...]
    """`accelkit setup` arguments: the matrix's, then what the leg sets (--python,
    --base-image, and the torch: --torch-channel with its index, or the built wheel)."""
    test_args: tuple[str, ...]
    timeout_minutes: int
    variant: str | None
    location: Location = field(compare=False)
    torch_index: str | None = None
    """The index a channel leg installs torch from (PyTorch's, for its backend and toolkit)."""
    require: tuple[str, ...] = ()
    waive: tuple[tuple[str, str], ...] = ()
    shards: int = 1
    nodes: int = 1
    rdzv_endpoint: str | None = None
    node_runners: tuple[tuple[str, ...], ...] = ()
    """Runner labels per node rank for a leg of 2 nodes or more (`runner` is node 0's)."""
    explore_seeds: int = 0
    """N > 0: an explore leg, whose job writes findings.json (and .md), not results.json."""

    def match_values(self) -> dict[str, str]:
        """The leg's values as `exclude` items and `--filter` see them (strings)."""
        values = {
            "name": self.name,
            "backend": self.backend,
            "device": self.device,
            "python": self.python,
            "build": "true" if self.build else "false",
            "container": "true" if self.container else "false",
        }
        optional = {
            "backend_version": self.backend_version,
            "target": self.target,
            "family": self.family,
            "variant": self.variant,
            "torch_channel": self.torch.channel,
            "torch_ref": self.torch.ref,
        }
        values.update({key: value for key, value in optional.items() if value is not None})
        return values

    def to_dict(self) -> dict[str, Any]:
        """The leg as JSON-ready data, keys in a fixed order (None where unset)."""
        return {
            "name": self.name,
            "backend": self.backend,
            "backend_version": self.backend_version,
            "target": self.target,
            "family": self.family,
            "device": self.device,
            "python": self.python,
            "torch_channel": self.torch.channel,
            "torch_ref": self.torch.ref,
            "torch_index": self.torch_index,
            "suites": list(self.suites),
            "runner": list(self.runner),
            "image": self.image,
            "base_image": self.base_image,
            "container": self.container,
            "build": self.build,
            "build_args": list(self.build_args),
            "setup_args": list(self.setup_args),
            "test_args": list(self.test_args),
            "timeout_minutes": self.timeout_minutes,
            "variant": self.variant,
            "require": list(self.require),
            "waive": dict(self.waive),
            "shards": self.shards,
            "nodes": self.nodes,
            "rdzv_endpoint": self.rdzv_endpoint,
            "node_runners": [list(labels) for labels in self.node_runners],
            "explore_seeds": self.explore_seeds,
            "source": str(self.location),
        }
