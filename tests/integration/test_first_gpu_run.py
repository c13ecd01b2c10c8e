"""benchmarks/first_gpu_run.py: the CPU path end to end (doctor, compile-only for sm_90 with
the real triton and ptxas, a narrow conformance run, one perf pass; timing fidelity skipped
with its reason), and the device logic a GPU host takes, on given values."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from tests.helpers import REPO, load_script

SCRIPT = REPO / "benchmarks" / "first_gpu_run.py"


@pytest.fixture(scope="module")
def first_run() -> ModuleType:
    return load_script(SCRIPT)


def test_device_targets_and_slugs(first_run: ModuleType) -> None:
    assert first_run.cuda_target((9, 0)) == "sm_90"
    assert first_run.cuda_target((10, 7)) == "sm_107"
    assert first_run.rocm_target("gfx942:sramecc+:xnack-") == "gfx942"
    assert first_run.slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert first_run.slug("AMD Instinct MI300X") == "amd-instinct-mi300x"
    assert first_run.unknown_target("cuda", "sm_90") == ""
    assert "does not know sm_37" in first_run.unknown_target("cuda", "sm_37")
    assert first_run.compile_device("gfx942") == "rocm"
    assert first_run.compile_device("sm_107") == "cuda"
    # Every step's limit together stays under the 10 minutes.
    assert sum(first_run.STEP_BUDGETS_S.values()) + first_run.GRACE_S <= 600


def test_fidelity_verdict_line(first_run: ModuleType) -> None:
    text = (
        "case ...\nwithin 3% of each reference: do_bench 9 of 13\n"
        "9 of 13 cases within 3% of every judged reference\n"
        "load average at start 0.5, at end 0.6\n"
    )
    assert first_run.fidelity_key(text) == "9 of 13 cases within 3% of every judged reference"


@pytest.mark.slow
def test_cpu_path_runs_every_step_that_needs_no_device(tmp_path: Path) -> None:
    out = tmp_path / "first-run"
    argv = [
        sys.executable,
        str(SCRIPT),
        "--device",
        "cpu",
        "--out",
        str(out),
        "--target",
        "sm_90",
        # Narrow selections: this proves the path and the files, not the suite.
        "--compile-k",
        "elementwise",
        "--conformance-k",
        "opinfo and abs and float32",
        "--perf-k",
        "stream and copy",
        "--passes",
        "1",
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=280, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    steps = {s["name"]: s for s in json.loads((out / "steps.json").read_text())["steps"]}
    assert {name: s["status"] for name, s in steps.items()} == {
        "doctor": "ran",
        "compile_only": "ran",
        "conformance": "ran",
        "perf": "ran",
        "timing_fidelity": "skipped",
    }
    assert "do_bench" in steps["timing_fidelity"]["reason"]
    assert all(isinstance(s["argv"], list) for s in steps.values())
    for name in ("doctor.json", "summary.md", "logs/doctor.log"):
        assert (out / name).is_file(), name
    for name in ("compile_only", "conformance", "perf"):
        assert (out / f"{name}.json").is_file() and (out / f"{name}.xml").is_file(), name
    compile_only = json.loads((out / "compile_only.json").read_text())
    assert compile_only["run"]["target"] == "sm_90" and compile_only["run"]["compile_only"]
    assert [c["status"] for c in compile_only["cases"]] == ["passed"]
    assert "ptxas" in steps["compile_only"]["key"]
    # The perf case's bandwidth as a fraction of the ceiling measured on the spot.
    assert "of the measured ceiling" in steps["perf"]["key"]

    summary = (out / "summary.md").read_text()
    assert "| step | status | time | key numbers |" in summary
    assert "| timing_fidelity | skipped |" in summary
    assert "## Perf against the measured ceilings" in summary


def _fake_torch(*, hip: str | None, xpu: bool = False) -> Any:
    """A torch that sees one GPU (no GPU is lent to CI): an H100, an MI300X or an Arc B580."""
    props = SimpleNamespace(
        name="AMD Instinct MI300X" if hip else "NVIDIA H100 80GB HBM3",
        gcnArchName="gfx942:sramecc+:xnack-",
    )
    cuda = SimpleNamespace(
        is_available=lambda: not xpu,
        get_device_properties=lambda index: props,
        get_device_capability=lambda index: (9, 0),
    )
    xpu_module = SimpleNamespace(is_available=lambda: xpu, get_device_name=lambda i: "Arc B580")
    return SimpleNamespace(cuda=cuda, version=SimpleNamespace(hip=hip), xpu=xpu_module)


@pytest.mark.parametrize(
    ("hip", "xpu", "backend", "target", "slug"),
    [
        (None, False, "cuda", "sm_90", "nvidia-h100-80gb-hbm3"),
        ("7.1.0", False, "rocm", "gfx942", "amd-instinct-mi300x"),
        (None, True, "xpu", None, "arc-b580"),
    ],
)
def test_a_gpu_host_runs_every_step_for_its_own_arch(
    first_run: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    hip: str | None,
    xpu: bool,
    backend: str,
    target: str | None,
    slug: str,
) -> None:
    """The GPU path's plan, with a stand-in torch and the steps recorded instead of run."""
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(hip=hip, xpu=xpu))
    device = first_run.detect("auto", "sm_90")
    assert (device.backend, device.target, device.slug) == (backend, target, slug)
    ran: list[list[str]] = []

    def record(argv: list[str], timeout: float, log: Path, stdout: Path | None = None) -> Any:
        ran.append(list(argv))
        assert timeout <= first_run.STEP_BUDGETS_S[log.stem]
        return 0, 0.5

    monkeypatch.setattr(first_run, "run_step", record)
    options = first_run.Options(tmp_path, device, 600.0, 1, None, None, None, 3)
    steps = {step.name: step for step in first_run.run_all(options)}
    commands = [argv[3:5] if argv[1:3] == ["-m", "accelkit"] else argv[1:2] for argv in ran]
    assert commands[0] == ["doctor", "--json"]
    tests = [argv[argv.index("test") + 1 :] for argv in ran if "test" in argv]
    if target is not None:
        assert tests[0][:5] == ["--device", backend, "--target", target, "--compile-only"]
        assert steps["compile_only"].status == "ran"
    else:
        assert steps["compile_only"].status == "skipped"
        assert "XPU" in steps["compile_only"].reason
    suites = [t[: t.index("--json")] for t in tests if "--suite" in t]
    assert suites[0] == ["--device", backend, "--suite", "conformance"]
    assert suites[1][:5] == ["--device", backend, "--suite", "perf", "--measure-ceilings"]
    fidelity = [argv for argv in ran if argv[1].endswith("bench_timing_fidelity.py")]
    if backend == "xpu":
        assert not fidelity and "do_bench" in steps["timing_fidelity"].reason
    else:
        assert fidelity and steps["timing_fidelity"].status == "ran"
