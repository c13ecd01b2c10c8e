"""Looking inside wheels: their metadata and requirements, and the checks a built torch wheel
must pass before it is reported (ROCm: the +rocm version, the pinned rocm[libraries]
requirement, _rocm_init.py, no bundled ROCm libraries, the gfx targets recorded)."""

from __future__ import annotations

import email.parser
import fnmatch
import hashlib
import posixpath
import re
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from accelkit.errors import BadInput
from accelkit.wheels.plan import WheelExpectation

# PEP 427: {distribution}-{version}(-{build})?-{python}-{abi}-{platform}.whl
_WHEEL_NAME = re.compile(
    r"(?P<name>[^-]+)-(?P<version>[^-]+)(-(?P<build>\d[^-]*))?-(?P<python>[^-]+)-(?P<abi>[^-]+)"
    r"-(?P<platform>[^-]+)\.whl"
)
_EXTRA_MARKER = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass(frozen=True)
class WheelName:
    name: str
    version: str
    python: str
    abi: str
    platform: str


def parse_wheel_name(path: Path) -> WheelName:
    match = _WHEEL_NAME.fullmatch(path.name)
    if match is None:
        raise BadInput(f"{path.name}: not a wheel file name (name-version-python-abi-platform)")
    return WheelName(
        name=match["name"],
        version=match["version"],
        python=match["python"],
        abi=match["abi"],
        platform=match["platform"],
    )


def normalise_name(name: str) -> str:
    """PEP 503 normalisation: Typing_Extensions -> typing-extensions."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    match = _NAME.match(requirement.strip())
    return normalise_name(match.group(0)) if match else ""


def normalise_requirement(requirement: str) -> str:
    """Spaces removed, the name normalised: `Rocm[libraries] == 7.14` -> rocm[libraries]==7.14."""
    text = re.sub(r"\s+", "", requirement)
    match = _NAME.match(text)
    if match is None:
        return text
    return normalise_name(match.group(0)) + text[match.end() :]


def metadata(wheel: Path) -> email.message.Message:
    """The METADATA of a wheel (BadInput when it is not a readable wheel)."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            names = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
            if len(names) != 1:
                raise BadInput(
                    f"{wheel.name}: expected one .dist-info/METADATA, found {len(names)}"
                )
            text = archive.read(names[0]).decode("utf-8", errors="replace")
    except (OSError, zipfile.BadZipFile) as exc:
        raise BadInput(f"{wheel}: not a readable wheel: {exc}") from None
    return email.parser.Parser().parsestr(text)


def requires_dist(wheel: Path) -> list[str]:
    return [str(value) for value in metadata(wheel).get_all("Requires-Dist") or []]


def runtime_requirements(
    requirements: Iterable[str], *, extras: Iterable[str] = (), skip: Iterable[str] = ()
) -> list[str]:
    """Requirements to install for a distribution: those without an extra marker and those of
    `extras` (their marker dropped), minus names matching a `skip` pattern (fnmatch)."""
    wanted_extras = set(extras)
    patterns = tuple(skip)
    out: list[str] = []
    for line in requirements:
        requirement, _, marker = line.partition(";")
        marker = marker.strip()
        extra = _EXTRA_MARKER.search(marker)
        if extra is not None:
            if extra.group(1) not in wanted_extras:
                continue
            marker = ""  # "extra == ..." alone: nothing else to evaluate
        name = requirement_name(requirement)
        if not name or any(fnmatch.fnmatch(name, pattern) for pattern in patterns):
            continue
        out.append(requirement.strip() + (f"; {marker}" if marker else ""))
    return out


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class WheelReport:
    wheel: Path
    problems: tuple[str, ...] = ()
    checked: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return not self.problems


def validate_wheel(wheel: Path, expect: WheelExpectation) -> WheelReport:
    """Every way `wheel` falls short of `expect` (an empty `problems` when it passes)."""
    problems: list[str] = []
    checked: list[str] = []
    try:
        name = parse_wheel_name(wheel)
    except BadInput as exc:
        return WheelReport(wheel, (str(exc),))
    checked.append("file name")
    if normalise_name(name.name) != normalise_name(expect.distribution):
        problems.append(f"distribution is {name.name}, not {expect.distribution}")
    if expect.version and name.version != expect.version:
        problems.append(f"version in the file name is {name.version}, not {expect.version}")
    try:
        meta = metadata(wheel)
        with zipfile.ZipFile(wheel) as archive:
            members = archive.namelist()
            contents = {
                path: archive.read(path).decode("utf-8", errors="replace")
                for path in {*expect.files, *([expect.targets_file] if expect.targets_file else [])}
                if path in members
            }
    except BadInput as exc:
        return WheelReport(wheel, (*problems, str(exc)), tuple(checked))
    if expect.version and meta.get("Version") != expect.version:
        problems.append(f"METADATA Version is {meta.get('Version')}, not {expect.version}")
    checked.append("version")
    present = {normalise_requirement(r.split(";")[0]) for r in meta.get_all("Requires-Dist") or []}
    for requirement in expect.requires:
        if normalise_requirement(requirement) not in present:
            problems.append(f"no Requires-Dist on {requirement}")
    checked.append("requirements")
    for path in expect.files:
        if path not in members:
            problems.append(f"{path} is missing")
    checked.append("files")
    bundled = sorted(
        member
        for member in members
        if posixpath.basename(member).startswith(expect.forbidden_library_prefixes)
        and ".so" in posixpath.basename(member)
    ) if expect.forbidden_library_prefixes else []  # fmt: skip
    if bundled:
        shown = ", ".join(bundled[:5]) + (" ..." if len(bundled) > 5 else "")
        problems.append(f"bundles {len(bundled)} libraries it must depend on: {shown}")
    checked.append("bundled libraries")
    if expect.targets and expect.targets_file:
        text = contents.get(expect.targets_file, "")
        missing = [t for t in expect.targets if f"'{t}'" not in text and f'"{t}"' not in text]
        if missing:
            problems.append(f"{expect.targets_file} does not record targets {', '.join(missing)}")
        checked.append("targets")
    return WheelReport(wheel, tuple(problems), tuple(checked))
