"""`accelkit build`'s toolkit and target options are the backends' declarations
(`Backend.build_flags`), and the request carries their values as data."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelkit import backends
from accelkit.errors import BadInput
from accelkit.wheels.request import BUILD_OPTIONS, TARGET_OPTIONS, TOOLKIT_OPTIONS, BuildRequest


def test_the_backends_declare_the_toolkit_and_target_options() -> None:
    declared = [b.build_flags for b in backends.BUILDS]
    assert tuple(f.toolkit for f in declared if f.toolkit is not None) == TOOLKIT_OPTIONS
    by_name = {opt.name: opt for opt in TARGET_OPTIONS}
    for backend in backends.BUILDS:
        flags = backend.build_flags
        if flags.targets is not None:
            opt = by_name[flags.targets.name]
            assert opt.flag == flags.targets.flag
            assert flags.targets.owner in opt.help and flags.targets.example in opt.help
        if flags.family is not None:
            assert by_name[flags.family.name] == flags.family
    # Between the backend and the options every build shares, in BUILDS' order.
    names = [opt.name for opt in BUILD_OPTIONS]
    assert names[: 1 + len(TOOLKIT_OPTIONS) + len(TARGET_OPTIONS)] == [
        "backend",
        *(opt.name for opt in TOOLKIT_OPTIONS),
        *(opt.name for opt in TARGET_OPTIONS),
    ]
    assert BUILD_OPTIONS[0].help == "rocm, cuda, xpu or cpu."  # the backends of BUILDS


def test_a_shared_target_flag_names_every_backend_that_takes_it() -> None:
    arch = next(opt for opt in TARGET_OPTIONS if opt.flag == "--arch")
    assert arch.help == "CUDA or XPU targets, comma separated (sm_107; pvc,bmg)."


def test_the_request_carries_the_backends_options_as_data(tmp_path: Path) -> None:
    request = BuildRequest.from_params(
        {
            "backend": "rocm",
            "rocm_version": "7.14",
            "gfx": "gfx942,gfx950",
            "family": "gfx94X-dcgpu",
            "output": tmp_path,
        }
    )
    assert request.toolkit == {"rocm_version": "7.14"}
    assert request.target_options == {"gfx": "gfx942,gfx950", "family": "gfx94X-dcgpu"}
    assert (request.version, request.version_flag) == ("7.14", "--rocm-version")
    assert (request.targets, request.targets_flag) == (("gfx942", "gfx950"), "--gfx")
    assert request.family == "gfx94X-dcgpu"
    # As plain data every option has its key, as the manifest's inputs always had.
    values = request.values()
    assert values["cuda_version"] is None and values["arch"] is None
    assert values["gfx"] == "gfx942,gfx950" and values["build_number"] == 1
    cuda = BuildRequest.from_params({"backend": "cuda", "arch": "sm_107", "output": tmp_path})
    assert cuda.toolkit == {} and cuda.version is None and cuda.targets == ("sm_107",)
    assert cuda.family is None and cuda.targets_flag == "--arch"
    with pytest.raises(ValueError, match="not options of accelkit build: gpu"):
        BuildRequest(backend="cuda", target_options={"gpu": "sm_90"})


def test_alternatives_are_refused_as_before(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=r"^--rocm-version and --cuda-version are alternatives"):
        BuildRequest.from_params(
            {"backend": "rocm", "rocm_version": "7.14", "cuda_version": "13.4"}
        )
    with pytest.raises(
        BadInput, match=r"^--gfx \(ROCm\) and --arch \(CUDA, XPU\) are alternatives: give one$"
    ):
        BuildRequest.from_params({"backend": "rocm", "gfx": "gfx942", "arch": "sm_90"})
