"""The build manifest read back beside a built wheel (accelkit/wheels/manifest.py): the SDK a
ROCm wheel pins, and the index its build installed that SDK from. The manifests are written
by `accelkit build`'s own `write_manifest` from a real ROCm plan; the wheels are real wheel
files (tests/rocm_standin.make_wheel). Also the wheels of the same build that the torch
wheel pins (its triton), which only the build's folder holds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from accelkit.errors import BadInput
from accelkit.wheels.manifest import (
    MANIFEST_NAME,
    BuildArtifact,
    build_artifacts,
    sdk_requirements,
    wheel_sdk,
)
from accelkit.wheels.pipconfig import shown_url
from accelkit.wheels.wheel import sha256
from tests.rocm_standin import BUILT_INDEX as INDEX
from tests.rocm_standin import BUILT_SDK as SDK
from tests.rocm_standin import built_wheelhouse, make_wheel

#: A triton as TheRock's build names it (TRITON_WHEEL_VERSION_SUFFIX: +rocm<SDK>).
TRITON = f"3.5.0+rocm{SDK}"
TRITON_FILE = f"triton-{TRITON}-cp311-cp311-linux_x86_64.whl"


def _edit(wheel: Path, change: Any) -> None:
    path = wheel.parent / MANIFEST_NAME
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def test_the_sdk_pin_and_the_index_of_its_build(tmp_path: Path) -> None:
    wheel = built_wheelhouse(tmp_path / "wheelhouse")
    sdk = wheel_sdk(wheel, ("rocm",))
    assert sdk is not None
    assert sdk.index_url == INDEX
    assert sdk.requirements == (f"rocm[libraries]=={SDK}",)  # exactly as the wheel pins it
    assert sdk.manifest == wheel.parent / MANIFEST_NAME
    # A wheel that requires no SDK distribution reads no manifest (a CPU wheel, PyTorch's
    # own ROCm wheels, which bundle the libraries).
    cpu = built_wheelhouse(tmp_path / "cpu", requires=("filelock",), manifest=False)
    assert wheel_sdk(cpu, ("rocm",)) is None
    assert wheel_sdk(wheel, ()) is None
    assert sdk_requirements(["Rocm[libraries] == 7.14", "rocm-sdk-core==1", "x"], ["rocm"]) == [
        "Rocm[libraries] == 7.14"
    ]


def test_credentials_in_the_index_are_kept_for_pip_and_never_shown(tmp_path: Path) -> None:
    secret = "https://ci:s3cr3t-token@rocm.example.org/whl/"
    wheel = built_wheelhouse(tmp_path / "wheelhouse", index=secret)
    sdk = wheel_sdk(wheel, ("rocm",))
    assert sdk is not None and sdk.index_url == secret
    assert sdk.shown_index == "https://****@rocm.example.org/whl/"
    assert "s3cr3t" not in json.dumps(sdk.to_dict())
    assert shown_url(INDEX) == INDEX


def _refusal(wheel: Path) -> str:
    with pytest.raises(BadInput) as caught:
        wheel_sdk(wheel, ("rocm",))
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_a_wheel_without_its_manifest_is_refused(tmp_path: Path) -> None:
    wheel = built_wheelhouse(tmp_path / "wheelhouse", manifest=False)
    message = _refusal(wheel)
    assert f"requires rocm[libraries]=={SDK}, which only its SDK's index serves" in message
    assert "no manifest.json of its build is beside it" in message


def test_a_manifest_of_another_build_is_refused(tmp_path: Path) -> None:
    wheel = built_wheelhouse(tmp_path / "wheelhouse")
    _edit(wheel, lambda d: d["artifacts"][0].update(sha256="0" * 64))
    assert "is another build's: its torch-2.14.1" in _refusal(wheel)
    _edit(wheel, lambda d: d.update(artifacts=[]))
    assert "is another build's: it lists no torch-2.14.1" in _refusal(wheel)


def test_a_manifest_naming_another_index_or_none_is_refused(tmp_path: Path) -> None:
    wheel = built_wheelhouse(tmp_path / "wheelhouse")
    other = "https://ci:tok@mirror.example.org/rocm/"
    _edit(wheel, lambda d: d["plan"].update(index_url=other))
    message = _refusal(wheel)
    assert "names two SDK indexes: https://****@mirror.example.org/rocm/ (plan.index_url)" in (
        message
    )
    assert f"and {INDEX} (inputs.index)" in message and "tok" not in message
    _edit(wheel, lambda d: (d["plan"].update(index_url=None), d["inputs"].pop("index")))
    assert "names no SDK index" in _refusal(wheel)
    for index in ("file:///opt/rocm-index/", "https://x.org/$(id)/"):
        _edit(wheel, lambda d, i=index: d["plan"].update(index_url=i))
        assert "is not an http(s):// URL that a test image's pip can use" in _refusal(wheel)


def test_an_unreadable_manifest_and_a_loose_pin_are_refused(tmp_path: Path) -> None:
    wheel = built_wheelhouse(tmp_path / "wheelhouse")
    (wheel.parent / MANIFEST_NAME).write_text("{not json")
    assert "not a readable build manifest" in _refusal(wheel)
    (wheel.parent / MANIFEST_NAME).write_text('{"schema": "other/1"}')
    assert "not an accelkit build manifest (schema 'other/1'" in _refusal(wheel)
    loose = built_wheelhouse(tmp_path / "loose", requires=("rocm[libraries]>=7.14",))
    assert "a built wheel pins its SDK exactly (==)" in _refusal(loose)


def test_the_wheels_of_its_build_that_a_wheel_pins(tmp_path: Path) -> None:
    wheel = built_wheelhouse(tmp_path / "wheelhouse", triton=TRITON)
    triton = wheel.parent / TRITON_FILE
    listed = json.loads((wheel.parent / MANIFEST_NAME).read_text())["artifacts"]
    assert [a["file"] for a in listed] == [wheel.name, TRITON_FILE]  # as the build wrote it
    assert build_artifacts(wheel) == (
        BuildArtifact(requirement=f"triton=={TRITON}", path=triton, sha256=sha256(triton)),
    )
    # A build without triton: torch pins none, nothing to install from beside it.
    assert build_artifacts(built_wheelhouse(tmp_path / "no-triton")) == ()
    # No manifest: a wheel from elsewhere gets its requirements from the indexes.
    plain = built_wheelhouse(tmp_path / "plain", requires=("filelock",), manifest=False)
    assert build_artifacts(plain) == ()
    # A requirement left out (`skip`: a CPU image's GPU runtimes) is not installed either.
    assert build_artifacts(wheel, skip=("triton",)) == ()


def _artifact_refusal(wheel: Path) -> str:
    with pytest.raises(BadInput) as caught:
        build_artifacts(wheel)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_a_pinned_artifact_missing_or_changed_is_refused(tmp_path: Path) -> None:
    wheel = built_wheelhouse(tmp_path / "wheelhouse", triton=TRITON)
    triton = wheel.parent / TRITON_FILE
    # Another triton of the same name: a real wheel, another sha256 than the build's.
    other = make_wheel(tmp_path, "triton", TRITON, {"triton/__init__.py": "x = 1\n"})
    triton.write_bytes(other.read_bytes())
    message = _artifact_refusal(wheel)
    assert message.startswith(f"--torch-wheel {wheel.name} requires triton=={TRITON}: the ")
    assert f"{TRITON_FILE} beside it has another sha256 than its build's" in message
    triton.unlink()
    message = _artifact_refusal(wheel)
    assert f"requires triton=={TRITON}, which its build made" in message
    assert f"and no {TRITON_FILE} is beside it" in message


def test_a_manifest_listing_another_version_or_not_this_wheel_is_refused(tmp_path: Path) -> None:
    wheel = built_wheelhouse(tmp_path / "wheelhouse", triton=TRITON)
    older = "triton-3.4.0-cp311-cp311-linux_x86_64.whl"
    _edit(wheel, lambda d: d["artifacts"][1].update(file=older))
    message = _artifact_refusal(wheel)
    assert f"requires triton=={TRITON}, and its build's" in message
    assert f"lists {older} instead" in message
    # Entries that are no file name beside the manifest are nothing a requirement can name.
    _edit(wheel, lambda d: d["artifacts"][1].update(file=f"../{TRITON_FILE}"))
    assert build_artifacts(wheel) == ()
    _edit(wheel, lambda d: d["artifacts"][0].update(sha256="0" * 64))
    assert "is another build's: its torch-2.14.1" in _artifact_refusal(wheel)


def test_a_backend_without_a_pip_sdk_does_not_open_the_wheel(tmp_path: Path) -> None:
    """The CPU's wheels need nothing from an SDK index: setup plans without reading them
    (a matrix rehearsal's stand-in torch wheel is a name, not a zip)."""
    stand_in = tmp_path / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    stand_in.write_text("not a zip")
    assert wheel_sdk(stand_in, ()) is None
