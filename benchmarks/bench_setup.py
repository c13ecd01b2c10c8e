"""`accelkit setup cpu`: a cold test-image build against a cached one.

    python benchmarks/bench_setup.py --torch-wheel WHEEL [--base-image IMAGE] [--cached-runs N]

Needs a Docker engine and the local base image (.ci/run builds accelkit-base:bookworm).
The cold run builds from a copy of accelkit's source with a marker file unique to this run,
so its content tag is new even on an engine that kept earlier images; then the same setup
runs N more times, each a cache hit that only hashes its inputs and re-verifies the image.
Prints the wall time of each run and the `build_s` that setup reports. Target: a cached
setup costs a small fraction of a cold one (under a tenth of its build time, under a third
of its wall time, both measured here with room to spare). The image is removed at the end.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def _snapshot_source(target: Path) -> Path:
    target.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, target / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO / "accelkit", target / "accelkit", ignore=ignore)
    shutil.copytree(REPO / "dockerfiles", target / "dockerfiles")
    (target / "accelkit" / "_bench_run_marker.py").write_text(f"RUN = {uuid.uuid4().hex!r}\n")
    return target


def _setup(args: list[str]) -> tuple[float, dict[str, Any]]:
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "accelkit", "setup", "cpu", *args, "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"accelkit setup failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    outcome: dict[str, Any] = json.loads(proc.stdout)
    return wall, outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch-wheel", type=Path, required=True)
    parser.add_argument("--base-image", default="accelkit-base:bookworm")
    parser.add_argument("--cached-runs", type=int, default=3)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="accelkit-bench-setup-") as tmp:
        source = _snapshot_source(Path(tmp) / "accelkit-src")
        args = ["--torch-wheel", str(options.torch_wheel), "--base-image", options.base_image]
        args += ["--accelkit-source", str(source)]
        cold_wall, cold = _setup(args)
        print(f"cold:   {cold_wall:6.1f} s wall, build {cold['build_s']:.1f} s ({cold['image']})")
        try:
            walls, builds = [], []
            for index in range(options.cached_runs):
                wall, cached = _setup(args)
                if not cached["cached"]:
                    raise SystemExit(f"run {index + 1} rebuilt an unchanged image")
                walls.append(wall)
                builds.append(float(cached["build_s"]))
                print(f"cached: {wall:6.1f} s wall, build {cached['build_s']:.2f} s")
            wall_ratio = statistics.median(walls) / cold_wall
            build_ratio = statistics.median(builds) / max(cold["build_s"], 1e-9)
            print(
                f"cached/cold: wall {wall_ratio:.3f} (target < 0.33), "
                f"build {build_ratio:.4f} (target < 0.1)"
            )
        finally:
            subprocess.run(["docker", "rmi", "--force", cold["image"]], capture_output=True)


if __name__ == "__main__":
    main()
