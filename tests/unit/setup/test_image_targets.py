"""`accelkit setup <backend> --arch T`: images that prove their target (issue 11).

The verification's plan is checked with the container runner replaced by a recorder that
answers like the real commands would (no engine, no image); what runs with a device and
what without depends on the host's device nodes, read under a fake host root.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from accelkit import backends
from accelkit.backends.rocm import PRELOAD_SHORTNAMES
from accelkit.containers import run as container_run
from accelkit.containers.run import RunOptions, RunResult
from accelkit.errors import Failed
from accelkit.incontainer import image_install
from accelkit.setup.image import plan_setup, verify
from accelkit.setup.request import SetupRequest

CUDA_TORCH_ARCHS = "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120"  # torch 2.14.1+cu130


def _doctor(backend: str, *, arch_list: str, ptxas: str | None = "/opt/venv/bin/ptxas") -> str:
    versions = {"cuda_arch_list": arch_list} if backend == "cuda" else {"arch_list": arch_list}
    env = {"TORCH_CUDA_ARCH_LIST": "10.7"} if backend == "cuda" else {}
    if ptxas is not None and backend == "cuda":
        env |= {"TRITON_PTXAS_PATH": ptxas, "TRITON_PTXAS_BLACKWELL_PATH": ptxas}
    torch = {"version": "2.14.1", "cuda": "13.0"} if backend == "cuda" else {}
    if backend == "rocm":
        torch = {"version": "2.14.1+rocm7.14.0", "hip": "7.14.0"}
    return json.dumps(
        {
            "env": {
                "torch": torch,
                "env": env,
                "backends": {backend: {"versions": versions}},
                "accelkit": "0.1.0",
            },
            "capabilities": {"sm_107": {"available": True, "reason": ""}},
        }
    )


class Recorder:
    """Stands in for `run_container`: records (argv, options) and answers from `answer`."""

    def __init__(self, answer: Callable[[list[str]], tuple[int, list[str]]]) -> None:
        self.answer = answer
        self.calls: list[tuple[list[str], RunOptions]] = []

    def __call__(
        self, client: Any, image: str, argv: Sequence[str], options: Any = None, **kw: Any
    ) -> RunResult:
        assert client == "no engine" and image == "img:1"
        self.calls.append((list(argv), options or RunOptions()))
        code, lines = self.answer(list(argv))
        return RunResult(exit_code=code, output_tail=tuple(lines), timed_out=False, duration_s=0)

    def options_of(self, word: str) -> RunOptions:
        return next(options for argv, options in self.calls if word in " ".join(argv))


def _answers(doctor: str, compile_result: tuple[int, list[str]] = (0, ["OK: 10 cases"])) -> Any:
    def answer(argv: list[str]) -> tuple[int, list[str]]:
        if argv[:2] == ["accelkit", "doctor"]:
            return 0, [doctor]
        if argv[:1] == ["nvcc"]:
            return 0, ["sm_100", "sm_107", "sm_107a"]
        if "--compile-only" in argv:
            return compile_result
        if "graph_capture" in argv:
            return 0, ["OK: 8 cases"]
        # The ROCm preload probe: torch/_rocm_init.py ran and every preload is mapped.
        return 0, ["rocm_init=True", *(f"loaded={name}" for name in PRELOAD_SHORTNAMES)]

    return answer


def _plan(backend: str, arch: str) -> Any:
    return plan_setup(
        SetupRequest(backend=backend, arch=arch, torch_index="https://download.pytorch.org/whl")
    )


def _host(tmp_path: Path, *nodes: str) -> Path:
    for node in nodes:
        path = tmp_path / node.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    return tmp_path


def test_without_the_device_the_target_is_proven_by_compiling_and_capture_is_not_claimed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = Recorder(_answers(_doctor("cuda", arch_list=CUDA_TORCH_ARCHS)))
    monkeypatch.setattr(container_run, "run_container", recorder)
    verified = verify(_plan("cuda", "sm_107"), "no engine", "img:1", host_root=_host(tmp_path))
    assert verified["device"] is False
    assert verified["checks"] == {
        "accelkit doctor": "without device",
        "gpu_codes": "without device",
        "compile-only sm_107": "without device",
        "graph capture": "not run: this host has no cuda device",
    }
    compile_argv = next(argv for argv, _ in recorder.calls if "--compile-only" in argv)
    assert compile_argv == [
        "accelkit",
        "test",
        "--device",
        "cuda",
        "--target",
        "sm_107",
        "--compile-only",
    ]
    assert recorder.options_of("--compile-only") == RunOptions()
    assert recorder.options_of("doctor").device_requests == ()


def test_with_the_device_doctor_and_the_capture_cases_run_with_its_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = Recorder(_answers(_doctor("cuda", arch_list=CUDA_TORCH_ARCHS)))
    monkeypatch.setattr(container_run, "run_container", recorder)
    host = _host(tmp_path, "/dev/nvidiactl", "/dev/nvidia0")
    verified = verify(_plan("cuda", "sm_107"), "no engine", "img:1", host_root=host)
    assert verified["device"] is True
    assert verified["checks"]["accelkit doctor"] == "with device"
    assert verified["checks"]["graph capture"] == "with device"
    assert verified["checks"]["compile-only sm_107"] == "without device"
    assert recorder.options_of("doctor").device_requests  # --gpus all
    capture = recorder.options_of("graph_capture")
    assert capture.device_requests
    capture_argv = next(argv for argv, _ in recorder.calls if "graph_capture" in argv)
    # The run's target makes cuda_graph_while_loop required: a capture that fails, fails.
    assert capture_argv[-2:] == ["--target", "sm_107"]


def test_a_torch_that_cannot_run_the_target_and_a_ptxas_that_does_not_know_it_fail_clearly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old_ptxas = (
        3,
        [
            "accelkit: error: ptxas 13.3 (/opt/venv/lib/python3.12/site-packages/triton/"
            "backends/nvidia/bin/ptxas-blackwell) does not know sm_107a; it knows sm_75, sm_80"
        ],
    )
    doctor = _doctor("cuda", arch_list="sm_80 sm_90 sm_120", ptxas=None)
    monkeypatch.setattr(container_run, "run_container", Recorder(_answers(doctor, old_ptxas)))
    with pytest.raises(Failed) as failed:
        verify(_plan("cuda", "sm_107"), "no engine", "img:1", host_root=_host(tmp_path))
    message = str(failed.value)
    assert "\n" not in message
    assert "torch 2.14.1: torch cannot run sm_107 code: it carries SASS and PTX for sm_80" in (
        message
    )
    assert "TRITON_PTXAS_BLACKWELL_PATH is None in the image, not '/opt/venv/bin/ptxas'" in (
        message
    )
    assert "compile-only sm_107 (accelkit test --device cuda --target sm_107 --compile-only) " in (
        message
    )
    assert "exited 3: ptxas 13.3 (" in message and "does not know sm_107a" in message


def test_failed_compile_cases_are_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    failing = (
        1,
        [
            "[5/10] FAILED   conformance/cross_compile/sm_107/gemm_fp16  (no tcgen05.mma)",
            "FAILED: 10 cases in 9.0 s",
        ],
    )
    doctor = _doctor("cuda", arch_list=CUDA_TORCH_ARCHS)
    monkeypatch.setattr(container_run, "run_container", Recorder(_answers(doctor, failing)))
    with pytest.raises(Failed, match=r"exited 1: FAILED: 10 cases"):
        verify(_plan("cuda", "sm_107"), "no engine", "img:1", host_root=_host(tmp_path))


def test_a_rocm_image_proves_its_gfx_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = _doctor("rocm", arch_list="gfx90a gfx942:sramecc+:xnack- gfx950")
    monkeypatch.setattr(container_run, "run_container", Recorder(_answers(good)))
    verified = verify(_plan("rocm", "gfx942"), "no engine", "img:1", host_root=_host(tmp_path))
    assert verified["checks"]["compile-only gfx942"] == "without device"
    assert verified["checks"]["graph capture"] == "not run: this host has no rocm device"
    bad = _doctor("rocm", arch_list="gfx1100 gfx1101")
    monkeypatch.setattr(container_run, "run_container", Recorder(_answers(bad)))
    with pytest.raises(Failed, match="has no code for gfx942: it was built for gfx1100 gfx1101"):
        verify(_plan("rocm", "gfx942"), "no engine", "img:1", host_root=_host(tmp_path))
    with_kfd = _host(tmp_path / "gpu", "/dev/kfd")
    monkeypatch.setattr(container_run, "run_container", Recorder(_answers(good)))
    verified = verify(_plan("rocm", "gfx942"), "no engine", "img:1", host_root=with_kfd)
    assert verified["checks"]["graph capture"] == "with device"


def test_xpu_graph_capture_is_a_device_check() -> None:
    spec = backends.get("xpu").test_image()
    assert spec.device_checks["graph capture"][:4] == ("accelkit", "test", "--device", "xpu")
    assert spec.checks == {}


def test_install_links_a_file_a_requirement_brought(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site-packages"
    for version in ("cu12", "cu13"):
        tool = site / "nvidia" / version / "bin" / "ptxas"
        tool.parent.mkdir(parents=True)
        tool.write_text(version)
    monkeypatch.setattr(image_install.sysconfig, "get_paths", lambda: {"purelib": str(site)})
    link = tmp_path / "venv" / "bin" / "ptxas"
    image_install.link_files({str(link): "nvidia/cu*/bin/ptxas"})
    assert link.is_symlink() and link.read_text() == "cu13"  # the newest
    with pytest.raises(SystemExit, match="nothing matches nvidia/cu\\*/bin/nvdisasm"):
        image_install.link_files({str(link): "nvidia/cu*/bin/nvdisasm"})
