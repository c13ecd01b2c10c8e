"""The build manifest beside a built wheel, read back by `accelkit setup`.

`accelkit build` writes `manifest.json` next to the wheels it made (accelkit/wheels/execute.py):
its inputs, the plan (the SDK's index among them), the resolved values and each artifact's
sha256. A wheel built against a pip-installed SDK requires that SDK at the exact version it
was built with, and only the SDK's own index serves it (TheRock's; PyPI's `rocm` is a
placeholder). So a test image installs those requirements from the index the build installed
its SDK from, which only the manifest knows; `wheel_sdk` reads it and refuses a manifest that
is not this wheel's build, or that names no index, two indexes or one a container cannot use.

Example: `wheelhouse/torch-2.14.1+rocm7.14.1rc1-cp311-cp311-linux_x86_64.whl` requires
`rocm[libraries]==7.14.1rc1`; `wheelhouse/manifest.json` lists that file with its sha256 and
names the index `https://rocm.nightlies.amd.com/whl-multi-arch/` (`plan.index_url`, and
`inputs.index`); `wheel_sdk(wheel, ("rocm",))` gives that URL and
`("rocm[libraries]==7.14.1rc1",)`. A CPU wheel requires no SDK distribution: None, and no
manifest is read.

The wheel may also require what the same build made: a ROCm build with triton pins
`triton==3.5.0+rocm7.14.1rc1` (the `triton_requirement` its triton-install step resolved),
and that wheel exists only in the build's --output folder, listed in the manifest with its
sha256. `build_artifacts(wheel)` gives each such requirement with its file beside the
manifest, checked against the listed sha256; a requirement naming a listed artifact whose
file is missing, differs, or is not the version pinned is refused in one line. No manifest
beside the wheel: nothing of its build to install, ().
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from accelkit.errors import BadInput
from accelkit.wheels.pipconfig import shown_url
from accelkit.wheels.wheel import (
    normalise_name,
    requirement_name,
    requires_dist,
    runtime_requirements,
    sha256,
)

#: The file `accelkit build` writes into its --output folder, beside the wheels.
MANIFEST_NAME = "manifest.json"
MANIFEST_SCHEMA = "accelkit.build-manifest/1"
#: An exact pin as the build writes it: `rocm[libraries]==7.14.1rc1` (no marker, no range).
_EXACT_PIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,-]+\])?==[A-Za-z0-9.+!_-]+")
#: An index a test image's pip can use: http(s), nothing a shell or pip.conf would read.
_HTTP_URL = re.compile(r"https?://[A-Za-z0-9._~:/%@=+,-]+")


@dataclass(frozen=True)
class WheelSdk:
    """The SDK a built wheel requires: its exact pins, and the index its build installed the
    SDK from (which may hold credentials: shown only through `shown_index`)."""

    index_url: str
    requirements: tuple[str, ...]
    manifest: Path

    @property
    def shown_index(self) -> str:
        return shown_url(self.index_url)

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.shown_index,
            "requirements": list(self.requirements),
            "manifest": str(self.manifest),
        }


@dataclass(frozen=True)
class BuildArtifact:
    """A wheel of the same build that the torch wheel requires (its triton): the requirement
    it satisfies, its file beside the manifest and the sha256 the manifest lists for it."""

    requirement: str
    path: Path
    sha256: str

    def to_dict(self) -> dict[str, Any]:
        return {"requirement": self.requirement, "file": self.path.name, "sha256": self.sha256}


def sdk_requirements(requirements: Iterable[str], distributions: Sequence[str]) -> list[str]:
    """The requirements (Requires-Dist lines to install) that name one of `distributions`."""
    names = {normalise_name(name) for name in distributions}
    return [line for line in requirements if requirement_name(line) in names]


def wheel_sdk(wheel: Path, distributions: Sequence[str]) -> WheelSdk | None:
    """What `wheel` needs from its SDK's index, from its build's manifest beside it; None when
    it requires none of `distributions` (the SDK's packages). BadInput, one line, when it does
    and the manifest is missing, is another build's, or names no usable index."""
    if not distributions:
        return None  # a backend without a pip SDK (the CPU): the wheel is not opened
    pins = sdk_requirements(runtime_requirements(requires_dist(wheel)), distributions)
    if not pins:
        return None
    required = ", ".join(pins)
    loose = [pin for pin in pins if not _EXACT_PIN.fullmatch(pin.replace(" ", ""))]
    if loose:
        raise BadInput(
            f"--torch-wheel {wheel.name}: requires {', '.join(loose)}: a built wheel pins its "
            "SDK exactly (==), as accelkit build writes it"
        )
    path = wheel.parent / MANIFEST_NAME
    if not path.is_file():
        raise BadInput(
            f"--torch-wheel {wheel.name} requires {required}, which only its SDK's index "
            f"serves, and no {MANIFEST_NAME} of its build is beside it to name that index "
            "(keep accelkit build's --output folder together)"
        )
    data = _load(path)
    _check_artifact(data, path, wheel)
    index = _sdk_index(data, path, required)
    return WheelSdk(
        index_url=index,
        requirements=tuple(pin.replace(" ", "") for pin in pins),
        manifest=path,
    )


def build_artifacts(wheel: Path, skip: Sequence[str] = ()) -> tuple[BuildArtifact, ...]:
    """The wheels of `wheel`'s build that it requires (its runtime requirements, minus names
    matching `skip`), each named by its build's manifest beside it and checked against the
    sha256 listed there; () when no manifest is beside it (a wheel from elsewhere gets its
    requirements from the indexes). BadInput, one line, when the manifest is not this wheel's
    build's, or a requirement names a listed wheel whose file is missing, whose sha256 differs
    or whose version is not the one pinned."""
    path = wheel.parent / MANIFEST_NAME
    if not path.is_file():
        return ()
    data = _load(path)
    _check_artifact(data, path, wheel)
    listed: dict[str, list[tuple[str, str, str]]] = {}
    for entry in _entries(data):
        file, digest = entry.get("file"), entry.get("sha256")
        if not isinstance(file, str) or file == wheel.name or Path(file).name != file:
            continue  # not a file name beside the manifest (a manifest accelkit wrote has none)
        try:
            dist, version, _, _ = parse_wheel_filename(file)
        except InvalidWheelFilename:
            continue  # not a wheel: nothing a requirement can name
        listed.setdefault(str(dist), []).append((file, str(version), str(digest)))
    found: list[BuildArtifact] = []
    for line in runtime_requirements(requires_dist(wheel), skip=skip):
        name = requirement_name(line)
        if name not in listed:
            continue
        try:
            specifier = Requirement(line).specifier
        except InvalidRequirement:
            raise BadInput(f"--torch-wheel {wheel.name}: unreadable requirement {line!r}") from None
        matching = [e for e in listed[name] if specifier.contains(e[1], prereleases=True)]
        if not matching:
            files = ", ".join(e[0] for e in listed[name])
            raise BadInput(
                f"--torch-wheel {wheel.name} requires {line}, and its build's {path} lists "
                f"{files} instead: rebuild, or keep one build's files together"
            )
        file, _, digest = matching[-1]
        artifact = wheel.parent / file
        if not artifact.is_file():
            raise BadInput(
                f"--torch-wheel {wheel.name} requires {line}, which its build made ({path} "
                f"lists {file}), and no {file} is beside it (keep accelkit build's --output "
                "folder together)"
            )
        if sha256(artifact) != digest:
            raise BadInput(
                f"--torch-wheel {wheel.name} requires {line}: the {file} beside it has another "
                f"sha256 than its build's {path} lists (not the file that build made)"
            )
        found.append(BuildArtifact(requirement=line, path=artifact, sha256=digest))
    return tuple(found)


def _entries(data: dict[str, Any]) -> list[dict[str, Any]]:
    artifacts = data.get("artifacts")
    return [a for a in artifacts if isinstance(a, dict)] if isinstance(artifacts, list) else []


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise BadInput(f"{path}: not a readable build manifest ({exc})") from None
    if not isinstance(data, dict) or data.get("schema") != MANIFEST_SCHEMA:
        schema = data.get("schema") if isinstance(data, dict) else None
        raise BadInput(
            f"{path}: not an accelkit build manifest (schema {schema!r}, expected "
            f"{MANIFEST_SCHEMA!r})"
        )
    return data


def _check_artifact(data: dict[str, Any], path: Path, wheel: Path) -> None:
    """The manifest lists `wheel` with the file's own sha256: it is this wheel's build."""
    listed = [a for a in _entries(data) if a.get("file") == wheel.name]
    if not listed:
        raise BadInput(f"{path} is another build's: it lists no {wheel.name}")
    if listed[0].get("sha256") != sha256(wheel):
        raise BadInput(
            f"{path} is another build's: its {wheel.name} has another sha256 than the file "
            "beside it"
        )


def _sdk_index(data: dict[str, Any], path: Path, required: str) -> str:
    """The index the build installed its SDK from: `plan.index_url`, which `inputs.index`
    (the build's resolved --index-url) must repeat."""
    plan = data.get("plan")
    plan = plan if isinstance(plan, dict) else {}
    inputs = data.get("inputs")
    inputs = inputs if isinstance(inputs, dict) else {}
    index = plan.get("index_url")
    if not isinstance(index, str) or not index:
        raise BadInput(
            f"{path} names no SDK index (its build installed no SDK from one), and the wheel "
            f"requires {required}"
        )
    recorded = inputs.get("index")
    if recorded is not None and recorded != index:
        raise BadInput(
            f"{path} names two SDK indexes: {shown_url(index)} (plan.index_url) and "
            f"{shown_url(str(recorded))} (inputs.index); rebuild the wheel"
        )
    if not _HTTP_URL.fullmatch(index):
        raise BadInput(
            f"{path}: the SDK index {shown_url(index)!r} is not an http(s):// URL that a test "
            "image's pip can use"
        )
    return index
