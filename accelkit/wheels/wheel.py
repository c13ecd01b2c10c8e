"""Looking inside wheels: their metadata and requirements, and the checks a built torch wheel
must pass before it is reported. What to check comes from the recipe's `WheelExpectation`
(ROCm: the +rocm<exact SDK> version, a platform tag, the exact rocm[libraries] and triton pins,
torch/_rocm_init.py preloading names the SDK knows and checking the exact version, no bundled
ROCm libraries, and a code object for each gfx target in the libraries' offload bundles)."""

from __future__ import annotations

import ast
import email.parser
import fnmatch
import hashlib
import posixpath
import re
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from accelkit.errors import BadInput
from accelkit.wheels.offload import CodeObject, OffloadError, gpu_code_objects
from accelkit.wheels.plan import CodeObjects, InitModule, WheelExpectation

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
    if expect.platform_specific and (name.platform == "any" or name.abi == "none"):
        problems.append(
            f"tagged {name.python}-{name.abi}-{name.platform}: a wheel with native libraries "
            "needs a platform tag"
        )
    checked.append("platform tag")
    try:
        meta = metadata(wheel)
        with zipfile.ZipFile(wheel) as archive:
            members = archive.namelist()
            init = expect.init_module
            init_text = (
                archive.read(init.path).decode("utf-8", errors="replace")
                if init is not None and init.path in members
                else None
            )
            if expect.code_objects is not None:
                problems += _code_object_problems(archive, members, expect.code_objects)
                checked.append("GPU code objects")
    except (BadInput, OSError, zipfile.BadZipFile) as exc:
        return WheelReport(wheel, (*problems, str(exc)), tuple(checked))
    if expect.version and meta.get("Version") != expect.version:
        problems.append(f"METADATA Version is {meta.get('Version')}, not {expect.version}")
    checked.append("version")
    present = {normalise_requirement(r.split(";")[0]) for r in meta.get_all("Requires-Dist") or []}
    for requirement in expect.requires:
        if normalise_requirement(requirement) not in present:
            wanted = requirement_name(requirement)
            pinned = sorted(r for r in present if requirement_name(r) == wanted)
            got = f" (it has {', '.join(pinned)})" if pinned else ""
            problems.append(f"no Requires-Dist on {requirement}{got}")
    checked.append("requirements")
    for path in expect.files:
        if path not in members:
            problems.append(f"{path} is missing")
    checked.append("files")
    if expect.init_module is not None:
        problems += _init_module_problems(expect.init_module, init_text, expect.values)
        checked.append(expect.init_module.path)
    bundled = sorted(
        member
        for member in members
        if expect.forbidden_library_prefixes
        and posixpath.basename(member).startswith(expect.forbidden_library_prefixes)
        and ".so" in posixpath.basename(member)
    )
    if bundled:
        shown = ", ".join(bundled[:5]) + (" ..." if len(bundled) > 5 else "")
        problems.append(f"bundles {len(bundled)} libraries it must depend on: {shown}")
    checked.append("bundled libraries")
    return WheelReport(wheel, tuple(problems), tuple(checked))


def init_module_call(text: str) -> tuple[list[str] | None, str | None]:
    """The `preload_shortnames` list and `check_version` string of the
    `rocm_sdk.initialize_process(...)` call in a generated init module (None for either
    when it is not a literal there)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None, None
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr != "initialize_process":
            continue
        preload: list[str] | None = None
        version: str | None = None
        for keyword in node.keywords:
            try:
                value = ast.literal_eval(keyword.value)
            except ValueError:
                continue
            if keyword.arg == "preload_shortnames" and isinstance(value, (list, tuple)):
                preload = [str(v) for v in value]
            elif keyword.arg == "check_version" and isinstance(value, str):
                version = value
        return preload, version
    return None, None


def _init_module_problems(
    init: InitModule, text: str | None, values: Mapping[str, str]
) -> list[str]:
    if text is None:
        return [f"{init.path} is missing (import torch would not preload the SDK)"]
    preload, version = init_module_call(text)
    problems = []
    if preload is None:
        problems.append(f"{init.path} has no literal preload_shortnames list")
    else:
        known = [n for n in values.get(init.known_variable, "").split(",") if n]
        unknown = [n for n in preload if known and n not in known]
        if unknown:
            problems.append(
                f"{init.path} preloads {', '.join(unknown)}, unknown to the SDK of the build"
            )
        missing = [n for n in init.preload if n not in preload]
        if missing:
            problems.append(f"{init.path} does not preload {', '.join(missing)}")
    if version != init.check_version:
        problems.append(
            f"{init.path} checks the SDK version {version!r}, not {init.check_version!r}"
        )
    return problems


def _code_object_problems(
    archive: zipfile.ZipFile, members: list[str], expect: CodeObjects
) -> list[str]:
    found: dict[str, list[CodeObject]] = {}
    libraries = [m for m in members if re.search(r"\.so(\.\d+)*$", posixpath.basename(m))]
    for member in libraries:
        data = archive.read(member)
        if not data.startswith(b"\x7fELF"):
            continue
        try:
            objects = gpu_code_objects(data, expect.bundle_prefix)
        except OffloadError as exc:
            return [f"{member}: {exc}"]
        for target, items in objects.items():
            found.setdefault(target, []).extend(items)
    if not found:
        return [
            f"no GPU code objects in the offload bundles of its {len(libraries)} libraries "
            f"(expected {', '.join(expect.targets)})"
        ]
    problems = []
    missing = [t for t in expect.targets if t not in found]
    if missing:
        problems.append(
            f"no code objects for {', '.join(missing)} in its libraries' offload bundles "
            f"(they hold {', '.join(sorted(found))})"
        )
    for target in expect.targets:
        wrong = [
            o
            for o in found.get(target, [])
            if o.machine != expect.elf_machine
            or (target in expect.elf_mach and o.mach != expect.elf_mach[target])
        ]
        if wrong:
            problems.append(
                f"{len(wrong)} code objects bundled as {target} are not {target} ELF files "
                f"(e_machine {wrong[0].machine}, mach {wrong[0].mach:#x})"
            )
    return problems
