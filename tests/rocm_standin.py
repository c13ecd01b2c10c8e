"""A stand-in for TheRock's package index, as strict as the real one, for `accelkit build rocm`
tests: the packages TheRock's packaging makes (`rocm`, `rocm-sdk-core`, `rocm-sdk-libraries`
or `rocm-sdk-libraries-<family>`, `rocm-sdk-devel`, `rocm-sdk-device-<gfx>`), at several
versions, with a real gcc-built shared object behind every entry of the library table, served
as a PEP 503 index by `python -m http.server` on 127.0.0.1.

The `rocm` package's module is tests/fixtures/rocm/sdk/rocm_sdk (see its _dist_info.py for the
library table); the stand-in PyTorch tree is tests/fixtures/rocm/torch-src. Everything is made
on the host (gcc; the CI base image has none) and shipped inside the wheels.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import importlib.util
import json
import re
import shutil
import socket
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from tests.helpers import REPO

FIXTURES = REPO / "tests" / "fixtures" / "rocm"
SDK_SOURCE = FIXTURES / "sdk"
TORCH_SOURCE = FIXTURES / "torch-src"
#: The versions the stand-in index holds: a release series with a newer pre-release and
#: nightly, an older and a newer series.
VERSIONS = ("7.13.2", "7.14.0a20261128", "7.14.0", "7.14.1rc1", "7.15.0a20270105")
#: `python -c PRELOAD_CHECK NAMES VERSION`: rocm_sdk.initialize_process as _rocm_init.py calls
#: it, with comma-separated preload names and the version to check.
PRELOAD_CHECK = """\
import sys, rocm_sdk
names = sys.argv[1].split(",")
rocm_sdk.initialize_process(preload_shortnames=names, check_version=sys.argv[2])
print(len(rocm_sdk._ALL_CDLLS), "loaded")
"""
PLATFORM_TAG = "py3-none-linux_x86_64"
#: SONAME major versions of the stand-in libraries (1 where not listed).
SO_MAJOR = {"amdhip64": 7, "hiprtc": 7, "rocm_sysdeps_liblzma": 5, "rocm-openblas": 0}
#: The GPU families of the legacy layout, and the targets each covers.
FAMILY_TARGETS = {"gfx94X-dcgpu": ("gfx942",), "gfx950-dcgpu": ("gfx950",)}


def make_wheel(
    directory: Path,
    name: str,
    version: str,
    files: dict[str, str | bytes],
    *,
    requires: Sequence[str] = (),
    extras: dict[str, list[str]] | None = None,
    scripts: dict[str, str] | None = None,
    tag: str = "py3-none-any",
) -> Path:
    """A wheel written by hand (no build backend, no network); a platform `tag` makes it a
    platlib wheel."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    meta += [f"Requires-Dist: {r}" for r in requires]
    for extra, reqs in (extras or {}).items():
        meta.append(f"Provides-Extra: {extra}")
        meta += [f'Requires-Dist: {r}; extra == "{extra}"' for r in reqs]
    contents: dict[str, bytes] = {
        path: data.encode() if isinstance(data, str) else data for path, data in files.items()
    }
    contents[f"{info}/METADATA"] = ("\n".join(meta) + "\n").encode()
    purelib = "true" if tag.endswith("-any") else "false"
    contents[f"{info}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: accelkit-tests\nRoot-Is-Purelib: {purelib}\nTag: {tag}\n"
    ).encode()
    if scripts:
        contents[f"{info}/entry_points.txt"] = (
            "[console_scripts]\n" + "".join(f"{k} = {v}\n" for k, v in scripts.items())
        ).encode()
    record = []
    for path, data in contents.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(data)}")
    record.append(f"{info}/RECORD,,")
    contents[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel = directory / f"{dist}-{version}-{tag}.whl"
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path, data in contents.items():
            info_ = zipfile.ZipInfo(path, date_time=(2026, 1, 1, 0, 0, 0))
            info_.external_attr = 0o644 << 16
            archive.writestr(info_, data, compress_type=zipfile.ZIP_DEFLATED)
    return wheel


def dist_info_module() -> ModuleType:
    """The stand-in's _dist_info.py as a module (its library table)."""
    spec = importlib.util.spec_from_file_location(
        "standin_dist_info", SDK_SOURCE / "rocm_sdk" / "_dist_info.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Library:
    shortname: str
    package: str  # core or libraries
    relpath: str  # folder inside the package
    file: str  # versioned file name, which is also its SONAME


def library_table() -> list[Library]:
    libraries = []
    for shortname, package, pattern, _dll, relpath in dist_info_module().LIBRARY_TABLE:
        major = SO_MAJOR.get(shortname, 1)
        stem = pattern.rstrip("*").rstrip(".")  # libamdhip64.so* and lib...so.* alike
        libraries.append(Library(shortname, package, relpath, f"{stem}.{major}"))
    return libraries


def build_libraries(out: Path) -> dict[str, bytes]:
    """One real shared object per library-table entry, built with gcc: file name -> bytes."""
    out.mkdir(parents=True, exist_ok=True)
    built = {}
    for library in library_table():
        symbol = "accelkit_standin_" + re.sub(r"\W", "_", library.shortname)
        target = out / library.file
        subprocess.run(
            [
                "gcc",
                "-shared",
                "-fPIC",
                "-O0",
                f"-Wl,-soname,{library.file}",
                f"-DSTANDIN_SYMBOL={symbol}",
                "-o",
                str(target),
                str(SDK_SOURCE / "libstub.c"),
            ],
            check=True,
        )
        built[library.file] = target.read_bytes()
    return built


def _rocm_sdk_files(version: str, layout: str, families: Sequence[str], default: str) -> dict:
    files: dict[str, str | bytes] = {}
    for source in sorted((SDK_SOURCE / "rocm_sdk").glob("*.py")):
        text = source.read_text(encoding="utf-8")
        for key, value in {
            "@VERSION@": version,
            "@NONCE@": "",
            "@LAYOUT@": layout,
            "@DEFAULT_TARGET_FAMILY@": default,
            "@TARGET_FAMILIES@": ",".join(families),
        }.items():
            text = text.replace(key, value)
        files[f"rocm_sdk/{source.name}"] = text
    return files


#: The devel tree's files beyond the library links: headers PyTorch includes from the SDK,
#: the device bitcode, the CMake prefix, pkg-config data for aotriton.
DEVEL_FILES = {
    "include/rocm_smi/kfd_ioctl.h": "#include <libdrm/drm.h>  /* from the sysdeps */\n",
    "include/roctracer/roctracer.h": "#define ACCELKIT_ROCTRACER 1\n",
    "lib/rocm_sysdeps/include/libdrm/drm.h": "#define ACCELKIT_SYSDEPS_DRM 1\n",
    "lib/rocm_sysdeps/lib/pkgconfig/liblzma.pc": "Name: liblzma\nVersion: 5.8\n",
    "lib/llvm/amdgcn/bitcode/ocml.bc": "BC\xc0\xde",
    "lib/cmake/hip/hip-config.cmake": "# stand-in\n",
    "bin/hipconfig": "#!/bin/sh\necho stand-in\n",
}


def write_packages(
    files_dir: Path,
    version: str,
    libraries: dict[str, bytes],
    *,
    layout: str,
    targets: Sequence[str] = ("gfx942",),
    family: str = "gfx94X-dcgpu",
) -> list[Path]:
    """The wheels of one SDK version in one layout ("multi-arch" or "family")."""
    table = library_table()
    if layout == "family":
        families = list(FAMILY_TARGETS)
        libraries_dist = f"rocm-sdk-libraries-{family}"
        extras = {"libraries": [f"{libraries_dist}=={version}"]}
        targets = FAMILY_TARGETS[family]
    else:
        families = list(targets)
        libraries_dist = "rocm-sdk-libraries"
        extras = {"libraries": [f"{libraries_dist}=={version}"]}
        extras.update({f"device-{t}": [f"rocm-sdk-device-{t}=={version}"] for t in targets})
    extras["devel"] = [f"rocm-sdk-devel=={version}"]
    meta = make_wheel(
        files_dir,
        "rocm",
        version,
        _rocm_sdk_files(version, layout, families, families[0]),
        requires=[f"rocm-sdk-core=={version}"],
        extras=extras,
        scripts={"rocm-sdk": "rocm_sdk.__main__:main"},
    )

    def package(dist: str, members: dict[str, str | bytes], **kw: object) -> Path:
        py = "_" + dist.replace("-", "_")
        files = {f"{py}/__init__.py": "", **{f"{py}/{k}": v for k, v in members.items()}}
        return make_wheel(files_dir, dist, version, files, tag=PLATFORM_TAG, **kw)  # type: ignore[arg-type]

    def libs(kind: str) -> dict[str, str | bytes]:
        return {
            f"{lib.relpath}/{lib.file}": libraries[lib.file] for lib in table if lib.package == kind
        }

    info = json.dumps({"dist_amdgpu_targets": ";".join(targets)})
    wheels = [
        meta,
        package("rocm-sdk-core", {**libs("core"), "share/therock/dist_info.json": info}),
        package(libraries_dist, libs("libraries")),
        package("rocm-sdk-devel", dict(DEVEL_FILES)),
    ]
    if layout != "family":
        for target in targets:
            # Device code overlays the libraries package (kpack files next to the libraries).
            kpack = {f"_rocm_sdk_libraries/.kpack/blas_lib_{target}.kpack": f"{target}\n"}
            wheels.append(
                make_wheel(
                    files_dir,
                    f"rocm-sdk-device-{target}",
                    version,
                    kpack,
                    requires=[f"rocm-sdk-libraries=={version}"],
                    tag=PLATFORM_TAG,
                )
            )
    return wheels


def write_index(root: Path, libraries: dict[str, bytes], *, layout: str = "multi-arch") -> Path:
    """A PEP 503 index under root/simple holding every version of VERSIONS in `layout`."""
    files = root / "files"
    files.mkdir(parents=True, exist_ok=True)
    wheels = [w for v in VERSIONS for w in write_packages(files, v, libraries, layout=layout)]
    projects: dict[str, list[Path]] = {}
    for wheel in wheels:
        dist = wheel.name.split("-")[0]
        projects.setdefault(re.sub(r"[-_.]+", "-", dist).lower(), []).append(wheel)
    simple = root / "simple"
    for project, members in projects.items():
        (simple / project).mkdir(parents=True, exist_ok=True)
        links = "".join(f'<a href="../../files/{w.name}">{w.name}</a>\n' for w in members)
        (simple / project / "index.html").write_text(f"<html><body>\n{links}</body></html>\n")
    return simple


@contextlib.contextmanager
def serve(root: Path) -> Iterator[str]:
    """`python -m http.server` on 127.0.0.1 for `root`; yields the index URL (root/simple)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "http.server",
            str(port),
            "--bind",
            "127.0.0.1",
            "--directory",
            str(root),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/simple/"
    finally:
        server.terminate()
        server.wait(timeout=10)


def fresh_venv(path: Path) -> Path:
    """A new venv at `path` (its python), without pip's network self-check."""
    if path.exists():
        shutil.rmtree(path)
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    return path / "bin" / "python"


#: The repository `accelkit build` clones PyTorch from (the nightly's leg job clones it on the
#: runner, at the leg's ref).
PYTORCH_REMOTE = "https://github.com/pytorch/pytorch.git"


def pytorch_remote(dest: Path, ref: str) -> Path:
    """A bare repository standing in for github.com/pytorch/pytorch: TORCH_SOURCE committed on
    the branch `ref` (release/2.14) and nothing else, so a clone of any other ref fails as
    GitHub's would. Point git at it with `url.file://<dest>.insteadOf PYTORCH_REMOTE` (a
    file:// URL: git honours --depth for it, as for GitHub)."""
    tree = dest.with_name(dest.name + "-tree")
    shutil.copytree(TORCH_SOURCE, tree, ignore=shutil.ignore_patterns("__pycache__"))
    git = ["git", "-C", str(tree), "-c", "user.name=standin", "-c", "user.email=s@example.com"]
    subprocess.run([*git, "init", "--quiet", "--initial-branch", ref], check=True)
    subprocess.run([*git, "add", "--all"], check=True)
    subprocess.run([*git, "commit", "--quiet", "-m", f"PyTorch stand-in at {ref}"], check=True)
    subprocess.run(["git", "init", "--quiet", "--bare", str(dest)], check=True)
    subprocess.run([*git, "push", "--quiet", str(dest), f"HEAD:refs/heads/{ref}"], check=True)
    subprocess.run(
        ["git", "-C", str(dest), "symbolic-ref", "HEAD", f"refs/heads/{ref}"], check=True
    )
    shutil.rmtree(tree)
    return dest


#: What `built_wheelhouse` makes by default: a wheel built against this SDK from this index.
BUILT_SDK = "7.14.1rc1"
BUILT_INDEX = "https://rocm.nightlies.amd.com/whl-multi-arch/"


def built_wheelhouse(
    output: Path,
    *,
    index: str = BUILT_INDEX,
    requires: tuple[str, ...] = (f"rocm[libraries]=={BUILT_SDK}", "filelock"),
    manifest: bool = True,
    triton: str | None = None,
    triton_requires: tuple[str, ...] = (),
) -> Path:
    """A wheelhouse as `accelkit build rocm --output OUTPUT` leaves it: a torch wheel that pins
    its SDK, and the manifest of its build (from the real plan, `--index-url index`). With
    `triton` (a version), the build made triton too (`--triton`): a triton wheel beside torch,
    which pins it exactly (`triton==<version>`, the triton-install step's variable)."""
    output.mkdir(parents=True, exist_ok=True)
    wheels: list[Path] = []
    if triton is not None:
        requires = (*requires, f"triton=={triton}")
        triton_wheel = make_wheel(
            output,
            "triton",
            triton,
            {"triton/__init__.py": f"__version__ = {triton!r}\n"},
            requires=triton_requires,
            tag="cp311-cp311-linux_x86_64",
        )
        wheels.append(triton_wheel)
    wheel = make_wheel(
        output,
        "torch",
        f"2.14.1+rocm{BUILT_SDK}",
        {"torch/__init__.py": ""},
        requires=requires,
        tag="cp311-cp311-linux_x86_64",
    )
    if manifest:
        from accelkit.wheels.execute import write_manifest
        from accelkit.wheels.recipes import plan
        from accelkit.wheels.request import BuildRequest

        request = BuildRequest.from_params(
            dict(
                backend="rocm",
                output=output,
                rocm_version="7.14",
                pre=True,
                gfx="gfx942",
                index_url=index,
                triton=triton is not None,
            )
        )
        resolved = {"rocm_version": BUILT_SDK, "rocm_local": f"rocm{BUILT_SDK}"}
        if triton is not None:
            resolved["triton_requirement"] = f"triton=={triton}"
        log = output / "build-rocm.log"
        write_manifest(
            plan(request), output, "builder:1", "sha256:0", True, {}, [wheel, *wheels], (), None,
            time.time(), log, resolved,
        )  # fmt: skip
    return wheel
