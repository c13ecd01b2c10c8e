"""Inductor's caches kept between runs (`ACCELKIT_COMPILE_CACHE`): a second run of one
compiled OpInfo case on the same cache folder finds its graph there, and says so in the
results file (`run.compile_cache`) and in the run's summary."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from accelkit.results.io import load_results
from accelkit.suite.session import compile_cache

# One compiled op (abs, float32: ~15 s of C++ compiles cold, ~2 s from the cache).
CASE = "conformance/opinfo_compiled/abs/float32"


def _run(cache: Path, results: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHINDUCTOR_", "TRITON_"))}
    env[compile_cache.ENV] = str(cache)
    argv = [sys.executable, "-m", "accelkit", "test", "--device", "cpu", "--suite"]
    argv += ["conformance", "--breadth", "full", "--case", CASE, "--workers", "0"]
    argv += ["--json", str(results)]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=280, check=False)


@pytest.mark.slow
def test_a_second_run_on_the_same_cache_hits(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    for path in (first, second):
        proc = _run(cache, path)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    key = compile_cache.torch_key()
    assert key is not None and [p.name for p in cache.iterdir()] == [key]
    cold = load_results(first).run.compile_cache
    warm = load_results(second).run.compile_cache
    assert cold is not None and warm is not None and cold.key == warm.key == key
    assert cold.misses >= 1 and cold.hits == 0
    assert warm.hits >= 1 and warm.misses == 0 and warm.hit_rate == 1.0
    assert f"Inductor cache ({key}): 100% hit rate" in proc.stdout
    assert [c.status for c in load_results(second).cases] == ["passed"]
