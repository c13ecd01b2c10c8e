"""benchmarks/first_gpu_run.py: the CPU path end to end (doctor, compile-only for sm_90 with
the real triton and ptxas, a narrow conformance run, one perf pass; timing fidelity skipped
with its reason), and the device logic a GPU host takes, on given values."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.helpers import REPO

SCRIPT = REPO / "benchmarks" / "first_gpu_run.py"


@pytest.fixture(scope="module")
def first_run() -> ModuleType:
    spec = importlib.util.spec_from_file_location("first_gpu_run", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


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
