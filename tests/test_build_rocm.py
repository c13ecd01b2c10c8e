"""`accelkit build rocm` end to end against fixtures: a local package index serving a tiny
`rocm` SDK (tests/fixtures/rocm/sdk) and a tiny source tree standing in for PyTorch
(tests/fixtures/rocm/torch-src). Same code path as the real build; only the inputs differ."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import shutil
import socket
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from accelkit.containers.run import MANAGED_LABEL
from accelkit.wheels.plan import WheelExpectation
from accelkit.wheels.wheel import validate_wheel
from tests.helpers import REPO, run_cli

FIXTURES = REPO / "tests" / "fixtures" / "rocm"
SDK_VERSION = "7.14"
GFX = "gfx942"
BUILD_TIMEOUT_S = 420


def make_wheel(
    directory: Path,
    name: str,
    version: str,
    files: dict[str, str],
    *,
    requires: list[str] = (),  # type: ignore[assignment]
    extras: dict[str, list[str]] | None = None,
    scripts: dict[str, str] | None = None,
) -> Path:
    """A pure-Python wheel written by hand (no build backend, no network)."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    meta += [f"Requires-Dist: {r}" for r in requires]
    for extra, reqs in (extras or {}).items():
        meta.append(f"Provides-Extra: {extra}")
        meta += [f'Requires-Dist: {r}; extra == "{extra}"' for r in reqs]
    contents = dict(files)
    contents[f"{info}/METADATA"] = "\n".join(meta) + "\n"
    contents[f"{info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: accelkit-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    if scripts:
        contents[f"{info}/entry_points.txt"] = "[console_scripts]\n" + "".join(
            f"{k} = {v}\n" for k, v in scripts.items()
        )
    record = []
    for path, text in contents.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    record.append(f"{info}/RECORD,,")
    contents[f"{info}/RECORD"] = "\n".join(record) + "\n"
    wheel = directory / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in contents.items():
            archive.writestr(path, text)
    return wheel


def write_index(root: Path) -> Path:
    """A PEP 503 index of the fake SDK: rocm with extras, and the packages they pull in."""
    files = root / "files"
    files.mkdir(parents=True)
    sdk = {
        f"rocm_sdk/{p.name}": p.read_text().replace("@VERSION@", SDK_VERSION)
        for p in (FIXTURES / "sdk" / "rocm_sdk").glob("*.py")
    }
    wheels = [
        make_wheel(
            files, "rocm", SDK_VERSION, sdk,
            extras={
                "libraries": [f"rocm-sdk-libraries=={SDK_VERSION}"],
                "devel": [f"rocm-sdk-devel=={SDK_VERSION}"],
                f"device-{GFX}": [f"rocm-sdk-device-{GFX}=={SDK_VERSION}"],
            },
            scripts={"rocm-sdk": "rocm_sdk.cli:main"},
        ),
        make_wheel(files, "rocm-sdk-libraries", SDK_VERSION,
                   {"_rocm_sdk_libraries/__init__.py": ""}),
        make_wheel(files, "rocm-sdk-devel", SDK_VERSION, {"_rocm_sdk_devel/__init__.py": ""}),
        make_wheel(files, f"rocm-sdk-device-{GFX}", SDK_VERSION,
                   {f"_rocm_sdk_device_{GFX}/__init__.py": ""}),
    ]  # fmt: skip
    simple = root / "simple"
    for wheel in wheels:
        project = wheel.name.split("-")[0].replace("_", "-")
        (simple / project).mkdir(parents=True)
        (simple / project / "index.html").write_text(
            f'<html><body><a href="../../files/{wheel.name}">{wheel.name}</a></body></html>\n'
        )
    return simple


@pytest.fixture(scope="module")
def rocm_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("rocm-index")
    write_index(root)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
         "--directory", str(root)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
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


def _managed(client: Any) -> set[str]:
    return {c.id for c in client.containers.list(all=True, filters={"label": MANAGED_LABEL})}


def _left_behind(client: Any, before: set[str]) -> set[str]:
    """Builder containers made since `before` that still exist (others share the engine:
    their containers come and go, and only a builder container of this test counts)."""
    return {
        c.id
        for c in client.containers.list(all=True, filters={"label": MANAGED_LABEL})
        if c.id not in before and c.attrs["Config"]["Image"].startswith("accelkit-builder-")
    }


def _build_args(source: Path, index: str, base_image: str, output: Path) -> list[str]:
    return [
        "build", "rocm", f"--rocm-version={SDK_VERSION}", f"--gfx={GFX}", "--python=3.11",
        "--source", str(source), "--index-url", index, "--builder-base-image", base_image,
        "--no-triton", "--output", str(output), "--json",
    ]  # fmt: skip


@pytest.mark.slow
@pytest.mark.docker
# A cold builder image (apt and pip inside) took ~170 s with two test sessions beside it.
@pytest.mark.timeout(2 * BUILD_TIMEOUT_S)
def test_build_rocm_end_to_end(
    rocm_index: str, base_image: str, docker_client: Any, tmp_path: Path
) -> None:
    before = _managed(docker_client)
    output = tmp_path / "wheelhouse"
    proc = run_cli(*_build_args(FIXTURES / "torch-src", rocm_index, base_image, output),
                   "--smoke", timeout=BUILD_TIMEOUT_S)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    outcome = json.loads(proc.stdout)
    wheels = [Path(w) for w in outcome["wheels"]]
    assert [w.name for w in wheels] == [f"torch-2.14.1+rocm{SDK_VERSION}-py3-none-any.whl"]
    manifest = json.loads((output / "manifest.json").read_text())
    assert manifest["schema"] == "accelkit.build-manifest/1"
    assert manifest["artifacts"][0]["sha256"] == hashlib.sha256(wheels[0].read_bytes()).hexdigest()
    assert manifest["validation"][0]["ok"] is True
    assert manifest["smoke"]["ok"] is True
    for step in ("sdk", "sdk-env", "checkout", "hipify", "rocm-init", "wheel"):
        assert step in manifest["durations_s"], manifest["durations_s"]
    log = (output / "build-rocm.log").read_text()
    assert "hipified 1 files" in log
    assert f"rocm[libraries,devel,device-{GFX}]=={SDK_VERSION}" in log
    with zipfile.ZipFile(wheels[0]) as archive:
        init = archive.read("torch/_rocm_init.py").decode()
    assert f"TARGETS = ['{GFX}']" in init and "rocm_sdk.initialize_process" in init
    assert _left_behind(docker_client, before) == set()  # every container removed

    # Unchanged inputs: the builder image is a cache hit.
    again = run_cli(*_build_args(FIXTURES / "torch-src", rocm_index, base_image,
                                 tmp_path / "again"), timeout=BUILD_TIMEOUT_S)  # fmt: skip
    assert again.returncode == 0, again.stderr[-4000:]
    assert json.loads(again.stdout)["builder_cached"] is True


@pytest.mark.slow
@pytest.mark.docker
def test_failing_step_reports_no_wheel(
    rocm_index: str, base_image: str, docker_client: Any, tmp_path: Path
) -> None:
    source = tmp_path / "broken-src"
    shutil.copytree(FIXTURES / "torch-src", source)
    (source / "tools" / "amd_build" / "build_amd.py").write_text(
        "raise SystemExit('hipify exploded')\n"
    )
    before = _managed(docker_client)
    output = tmp_path / "out"
    proc = run_cli(*_build_args(source, rocm_index, base_image, output), timeout=BUILD_TIMEOUT_S)
    assert proc.returncode == 1, proc.stderr
    assert "hipify exploded" in proc.stderr
    assert str(output / "build-rocm.log") in proc.stderr
    assert not list(output.glob("*.whl"))
    assert not (output / "manifest.json").exists()
    assert _left_behind(docker_client, before) == set()


def test_wheel_without_rocm_requirement_fails_validation(tmp_path: Path) -> None:
    expect = WheelExpectation(
        version=f"2.14.1+rocm{SDK_VERSION}",
        requires=(f"rocm[libraries]=={SDK_VERSION}",),
        files=("torch/_rocm_init.py",),
        forbidden_library_prefixes=("libamdhip64",),
        targets=(GFX,),
        targets_file="torch/_rocm_init.py",
    )
    init = {"torch/__init__.py": "", "torch/_rocm_init.py": f"TARGETS = ['{GFX}']\n"}
    good = make_wheel(tmp_path, "torch", f"2.14.1+rocm{SDK_VERSION}", init,
                      requires=[f"rocm[libraries] == {SDK_VERSION}"])  # fmt: skip
    assert validate_wheel(good, expect).ok
    (tmp_path / "bad").mkdir()
    bad = make_wheel(tmp_path / "bad", "torch", f"2.14.1+rocm{SDK_VERSION}",
                     {**init, "torch/lib/libamdhip64.so.7": ""})  # fmt: skip
    problems = validate_wheel(bad, expect).problems
    assert any("no Requires-Dist on rocm[libraries]==7.14" in p for p in problems), problems
    assert any("bundles 1 libraries" in p for p in problems), problems
    (tmp_path / "noinit").mkdir()
    noinit = make_wheel(tmp_path / "noinit", "torch", "2.14.1", {"torch/__init__.py": ""})
    problems = validate_wheel(noinit, expect).problems
    assert any("torch/_rocm_init.py is missing" in p for p in problems)
    assert any("version in the file name is 2.14.1" in p for p in problems)
