"""How long a 50+-leg nightly takes to load, validate and expand (and export for GitHub).

    python benchmarks/bench_matrix.py [--runs N]

Generates a large matrix file in a temporary directory, then reports the median and the
spread of N in-process runs of load+validate+expand+github, and of a few whole
`accelkit matrix github` processes (interpreter start-up included). The target is "well
under a second" for the whole command.

Also times the rejection of two hostile files (a billion-laughs alias bomb and a merge-key
bomb): the loader's node limit must refuse each in well under a second
(tests/unit/matrix/test_matrix.py checks that they are refused, with which error).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PYTHONS = '["3.10", "3.11", "3.12", "3.13"]'

LARGE_NIGHTLY = f"""\
schema: 1
name: bench-nightly
defaults:
  python: {PYTHONS}
  torch: {{channel: nightly}}
  suites: [conformance, perf]
  timeout_minutes: 180
  base_image: ubuntu:24.04
entries:
  - &rocm
    backend: rocm
    backend_version: "7.14"
    targets: [gfx942, gfx950, gfx1100, gfx1201]
    torch: {{ref: release/2.14}}
    build: true
    build_args:
      - --rocm-version={{backend_version}}
      - --gfx={{target}}
      - --family={{family}}
      - --python={{python}}
    runner:
      gfx942: [self-hosted, linux.rocm.gpu.gfx942.1]
      gfx950: [self-hosted, linux.rocm.gpu.gfx950.1]
      gfx1100: [self-hosted, linux.rocm.gpu.gfx1100.1]
      gfx1201: [self-hosted, linux.rocm.gpu.gfx1201.1]
  - <<: *rocm
    torch: {{ref: main}}
    variant: main
  - backend: cuda
    backend_version: "13.4"
    targets: [sm_80, sm_90, sm_100, sm_103, sm_107, sm_120]
    setup_args: ["--arch={{target}}"]
    base_image: nvidia/cuda:13.4.0-devel-ubuntu24.04
    runner:
      sm_80: [self-hosted, linux.dgx.a100]
      sm_90: [self-hosted, linux.dgx.h100]
      sm_100: [self-hosted, linux.dgx.b200]
      sm_103: [self-hosted, linux.dgx.b300]
      sm_107: [self-hosted, linux.dgx.rubin]
      sm_120: [self-hosted, linux.rtx.5090]
  - backend: xpu
    backend_version: "2025.3"
    targets: [pvc, bmg]
    runner: {{pvc: [self-hosted, linux.idc.xpu], bmg: [self-hosted, linux.arc.b580.xpu]}}
  - backend: cpu
    runner: [self-hosted, linux.4xlarge]
  - backend: mps
    container: false
    base_image: null
    runner: [self-hosted, macOS, ARM64, macos-m2-15]
exclude:
  - {{backend: cuda, target: sm_80, python: "3.10"}}
"""


def _bombs() -> dict[str, str]:
    laughs = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in "bcdefghi":
        previous = chr(ord(level) - 1)
        laughs.append(f"{level}: &{level} [{','.join([f'*{previous}'] * 9)}]")
    merge = ["a0: &a0 {k0: 1, k1: 2, k2: 3, k3: 4, k4: 5, k5: 6, k6: 7, k7: 8}"]
    for level in range(1, 9):
        refs = ", ".join(f"x{n}: *a{level - 1}" for n in range(8))
        merge.append(f"a{level}: &a{level} {{{refs}}}")
    return {"billion laughs": "\n".join(laughs) + "\n", "merge-key bomb": "\n".join(merge) + "\n"}


def _time_rejections(directory: Path, runs: int) -> dict[str, list[float]]:
    from accelkit.errors import ConfigError
    from accelkit.matrix import load_legs

    timings: dict[str, list[float]] = {}
    for name, text in _bombs().items():
        path = directory / f"{name.replace(' ', '-')}.yaml"
        path.write_text(text)
        samples = timings.setdefault(name, [])
        for _ in range(runs):
            start = time.perf_counter()
            try:
                load_legs(str(path))
            except ConfigError:
                samples.append(time.perf_counter() - start)
            else:
                raise SystemExit(f"{name}: loaded without an error")
    return timings


def _time_in_process(path: Path, runs: int) -> tuple[list[float], int]:
    from accelkit.matrix import expand, github_matrix, load_matrix

    samples: list[float] = []
    legs = 0
    for _ in range(runs):
        start = time.perf_counter()
        expanded = expand(load_matrix(path))
        json.dumps(github_matrix(expanded), separators=(",", ":"))
        samples.append(time.perf_counter() - start)
        legs = len(expanded)
    return samples, legs


def _time_command(path: Path, runs: int) -> list[float]:
    samples: list[float] = []
    command = [sys.executable, "-m", "accelkit", "matrix", "github", str(path)]
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        samples.append(time.perf_counter() - start)
    return samples


def _describe(samples: list[float]) -> str:
    q1, median, q3 = statistics.quantiles(samples, n=4) if len(samples) > 1 else samples * 3
    return f"median {median * 1000:.1f} ms, IQR {(q3 - q1) * 1000:.1f} ms ({len(samples)} runs)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--command-runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "nightly-large.yaml"
        path.write_text(LARGE_NIGHTLY)
        _time_in_process(path, 1)  # warm-up: imports and backend registry
        samples, legs = _time_in_process(path, args.runs)
        print(f"matrix file: {legs} legs")
        print(f"load+validate+expand+github (in process): {_describe(samples)}")
        command = _time_command(path, args.command_runs)
        print(f"accelkit matrix github (whole process):   {_describe(command)}")
        for name, rejected in _time_rejections(Path(tmp), args.runs).items():
            print(f"{name} refused (in process): {_describe(rejected)} (target < 1 s)")


if __name__ == "__main__":
    main()
