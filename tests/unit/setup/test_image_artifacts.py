"""`accelkit setup rocm --torch-wheel W` for a build with triton: W pins
`triton==<the triton that build made>`, which only the build's --output folder holds (listed
in its manifest with its sha256). Setup installs it from there with W (--no-deps), before
W's other requirements, and refuses one that is missing or differs before anything is built.
Nothing starts here: the plan, the install inputs and the install step's pip commands, from
wheelhouses of real wheel files (tests/rocm_standin.built_wheelhouse)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from accelkit.errors import BadInput
from accelkit.incontainer import image_install
from accelkit.setup import image
from accelkit.setup.image import image_tag, plan_setup, write_context
from accelkit.setup.request import SetupRequest
from accelkit.wheels.wheel import sha256
from tests import rocm_standin
from tests.rocm_standin import BUILT_INDEX as INDEX
from tests.rocm_standin import BUILT_SDK as SDK
from tests.rocm_standin import built_wheelhouse

TRITON = f"3.5.0+rocm{SDK}"
TRITON_FILE = f"triton-{TRITON}-cp311-cp311-linux_x86_64.whl"


def _plan(wheelhouse: Path) -> Any:
    return plan_setup(SetupRequest(backend="rocm", torch_wheel=wheelhouse, python="3.11"))


def test_the_plan_takes_the_builds_triton_from_beside_the_wheel(tmp_path: Path) -> None:
    wheel = built_wheelhouse(tmp_path / "wheelhouse", triton=TRITON)
    triton = wheel.parent / TRITON_FILE
    plan = _plan(wheel.parent)  # the folder, as the nightly's leg passes it
    assert plan.torch_wheel == wheel  # one torch wheel in the folder; triton beside it
    ((artifact),) = plan.torch_artifacts
    assert (artifact.requirement, artifact.path) == (f"triton=={TRITON}", triton)
    digest = sha256(triton)
    assert artifact.sha256 == digest
    assert plan.to_dict()["torch"]["build_artifacts"] == [
        {"requirement": f"triton=={TRITON}", "file": TRITON_FILE, "sha256": sha256(triton)}
    ]
    shown = f"    with its build's {TRITON_FILE} (for triton=={TRITON}; sha256 {digest[:12]}"
    assert any(line.startswith(shown) for line in plan.render()), plan.render()
    # Another triton, another image: the tag hashes the artifact's sha256.
    other = built_wheelhouse(tmp_path / "other", triton=TRITON, triton_requires=("filelock",))
    assert plan.torch_wheel.read_bytes() == other.read_bytes()  # the same torch wheel
    assert image_tag(plan, "sha256:base") != image_tag(_plan(other.parent), "sha256:base")
    # A build without triton installs nothing from beside the wheel.
    assert _plan(built_wheelhouse(tmp_path / "no-triton").parent).torch_artifacts == ()


@pytest.mark.parametrize("change", ["missing", "another sha256"])
def test_a_changed_or_missing_triton_is_refused_before_anything_is_built(
    tmp_path: Path, change: str
) -> None:
    wheel = built_wheelhouse(tmp_path / "wheelhouse", triton=TRITON)
    triton = wheel.parent / TRITON_FILE
    if change == "missing":
        triton.unlink()
        expected = f"and no {TRITON_FILE} is beside it"
    else:
        other = rocm_standin.make_wheel(tmp_path, "triton", TRITON, {"triton/x.py": ""})
        triton.write_bytes(other.read_bytes())
        expected = f"the {TRITON_FILE} beside it has another sha256 than its build's"
    with pytest.raises(BadInput) as caught:
        _plan(wheel.parent)
    assert expected in str(caught.value) and "\n" not in str(caught.value)
    assert caught.value.exit_code == 2


def test_an_artifact_pinning_another_sdk_is_refused(tmp_path: Path) -> None:
    """Installed with --no-deps, the artifact's own SDK pin must be the torch wheel's (the
    SDK install from the build's index covers it); another one no index here serves."""
    same = built_wheelhouse(
        tmp_path / "same", triton=TRITON, triton_requires=(f"rocm[libraries]=={SDK}",)
    )
    assert len(_plan(same.parent).torch_artifacts) == 1
    other = built_wheelhouse(
        tmp_path / "other", triton=TRITON, triton_requires=("rocm[libraries]==7.13.2",)
    )
    with pytest.raises(BadInput, match=r"requires rocm\[libraries\]==7\.13\.2, which only"):
        _plan(other.parent)


def _inputs(tmp_path: Path, wheel: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    accelkit_wheel = rocm_standin.make_wheel(tmp_path, "accelkit", "0.1.0", {"accelkit/x.py": ""})
    monkeypatch.setattr(image, "build_accelkit_wheel", lambda source, into: accelkit_wheel)
    inputs = tmp_path / "inputs"
    write_context(_plan(wheel.parent), tmp_path / "context", inputs, {})
    return inputs


def test_the_install_inputs_carry_the_builds_triton(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    requires = ("setuptools>=40.8", "filelock", f"rocm[libraries]=={SDK}")
    wheel = built_wheelhouse(tmp_path / "wheelhouse", triton=TRITON, triton_requires=requires)
    inputs = _inputs(tmp_path, wheel, monkeypatch)
    install = json.loads((inputs / "install.json").read_text())
    assert install["torch_wheels"] == [wheel.name]
    assert install["build_artifacts"] == [TRITON_FILE]
    assert sha256(inputs / "torch" / TRITON_FILE) == sha256(wheel.parent / TRITON_FILE)
    assert install["torch_sdk"] == {"index_url": INDEX, "requirements": [f"rocm[libraries]=={SDK}"]}
    # torch's filelock, then triton's own (installed --no-deps): no triton pin left for the
    # runner's indexes (which have no such triton), no SDK pin (the SDK's index serves it).
    lines = (inputs / "torch-requirements.txt").read_text().splitlines()
    assert lines == ["filelock", "setuptools>=40.8"]


def test_the_install_step_installs_triton_with_torch_before_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = built_wheelhouse(tmp_path / "wheelhouse", triton=TRITON)
    inputs = _inputs(tmp_path, wheel, monkeypatch)
    calls: list[list[str]] = []

    def run(argv: list[str], check: bool = False, env: Any = None, **kw: Any) -> Any:
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0)

    monkeypatch.setattr(image_install.subprocess, "run", run)
    recorder = SimpleNamespace(write_record=lambda source: source)
    monkeypatch.setattr(image_install, "load_torch_source", lambda context: recorder)
    assert image_install.main(inputs) == 0
    installs = [argv[argv.index("install") + 1 :] for argv in calls if "install" in argv]
    no_cache = "--no-cache-dir"
    assert installs[0] == [
        no_cache,
        "--no-deps",
        str(inputs / "torch" / wheel.name),
        str(inputs / "torch" / TRITON_FILE),
    ]
    sdk = installs[1]  # the SDK's index alone (tests/unit/setup/test_image_sdk.py)
    assert sdk[sdk.index("--index-url") + 1] == INDEX and sdk[-1] == f"rocm[libraries]=={SDK}"
    assert installs[2] == [no_cache, "-r", str(inputs / "torch-requirements.txt")]
    assert (inputs / "torch-requirements.txt").read_text() == "filelock\n"
