"""`accelkit test --ab image:A image:B`: interleaved A/B passes in two test images, on the real
engine, with the session's CPU test image (`accelkit setup cpu`, torch 2.13.0+cpu) as both
sides."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import IMAGE_TESTS_TIMEOUT_S, CpuTestImage, managed_containers, run_cli

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.mark.timeout(IMAGE_TESTS_TIMEOUT_S)
def test_two_image_sides_take_turns_and_each_measures_its_own_torch(
    cpu_test_image: CpuTestImage, docker_client: Any, tmp_path: Path
) -> None:
    image = cpu_test_image.image
    before = managed_containers(docker_client, image)
    out = tmp_path / "r.json"
    proc = run_cli(
        *("test", "--device", "cpu", "--suite", "perf", "--ab", f"image:{image}", f"image:{image}"),
        *("-k", "canary and copy", "--passes", "2", "--json", str(out)),
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"against A (image:{image}), 2 interleaved passes each" in " ".join(proc.stdout.split())
    for side, path in (("A", tmp_path / "r.a.json"), ("B", tmp_path / "r.b.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        run = data["run"]
        assert run["image"] == image
        assert run["ab"]["side"] == side and run["ab"]["image"] == image
        # Both sides asked the baton for their turns, from inside their containers.
        assert int(run["ab"]["turns"]) >= 2 * 50, run["ab"]
        # The image's own torch, not this host's 2.14 (accelkit's copy shadows nothing).
        assert data["env"]["torch"]["version"] == "2.13.0+cpu"
        assert data["env"]["python"]["executable"].startswith("/opt/venv/")
        (case,) = data["cases"]
        assert case["id"] == "perf/canary/host/copy" and case["status"] == "passed"
        assert run["passes"] == 2
    compared = json.loads((tmp_path / "r.compare.json").read_text(encoding="utf-8"))
    assert compared["metrics"], compared
    assert managed_containers(docker_client, image) == before


@pytest.mark.timeout(300)
def test_an_image_side_that_is_not_there_is_unavailable(tmp_path: Path) -> None:
    proc = run_cli(
        *("test", "--device", "cpu", "--suite", "perf", "--ab", "image:accelkit-absent:1"),
        *("image:accelkit-absent:1", "-k", "canary and copy", "--passes", "2"),
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines == ["accelkit: error: image accelkit-absent:1 is not present on the Docker engine"]


@pytest.mark.timeout(300)
def test_an_image_without_the_suite_s_python_is_unavailable(base_image: str) -> None:
    """A base image has python3 but no `python` (and no pytest): exit 3, one line."""
    proc = run_cli(
        *("test", "--device", "cpu", "--suite", "perf", "--ab", f"image:{base_image}"),
        *(f"image:{base_image}", "-k", "canary and copy", "--passes", "2"),
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"accelkit: error: --ab image:{base_image}: cannot run the suite: ")
    assert "executable file not found" in line
