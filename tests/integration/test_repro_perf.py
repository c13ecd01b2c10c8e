"""`accelkit repro` for perf cases: the case timed alone with the suite's timing method.

The slow test runs a small real perf run on the CPU (one GEMM, the copy kernel and a
transfer case, which skips there), writes the GEMM's and the copy's reproducers and runs
them with accelkit unimportable, from a temporary folder: each prints its metrics measured
here beside the recorded ones. No timing is asserted, only that it measured.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from accelkit.errors import BadInput
from accelkit.results.model import Case, Repro
from accelkit.triage import perf_repro
from accelkit.triage.bundle import accelkit_module, module_imports
from tests.factories import case, metric, results
from tests.helpers import SMALL_GEMM as GEMM
from tests.helpers import assert_one_line_error, run_cli

COPY = "perf/memory/stream/copy/float32/262144"
TRANSFER = "perf/transfer/h2d/pinned/67108864"
SELECTION = (
    "test_gemm and float32/128x128x128 and not tfloat32 "
    "or test_stream and copy or test_transfer and h2d/pinned"
)

# Runs one reproducer with accelkit unimportable (a finder ahead of every other that
# refuses accelkit; the reproducer's own finder, installed later, goes ahead of it and
# serves only what the file embeds), under `python -I` (no PYTHONPATH, no user site).
RUN_WITHOUT_ACCELKIT = r"""
import runpy, sys

class NoAccelkit:
    def find_spec(self, name, path=None, target=None):
        if name == "accelkit" or name.startswith("accelkit."):
            raise ImportError(f"accelkit is not installed here ({name})")
        return None

sys.meta_path.insert(0, NoAccelkit())
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.fixture(scope="module")
def perf_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("perf_run")
    out = folder / "results.json"
    argv = ["test", "--device", "cpu", "--suite", "perf", "-k", SELECTION, "--passes", "1"]
    proc = run_cli(*argv, "--json", str(out), timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ids = {c["id"]: c["status"] for c in json.loads(out.read_text())["cases"]}
    assert ids.get(GEMM) == "passed" and ids.get(COPY) == "passed", ids
    assert ids.get(TRANSFER) == "skipped", ids
    return out


def _isolated(script: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-I", "-c", RUN_WITHOUT_ACCELKIT, str(script)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(cwd)},
        timeout=300,
        check=False,
    )


@pytest.mark.slow
def test_gemm_and_copy_reproducers_time_the_case_alone(perf_run: Path, tmp_path: Path) -> None:
    written = tmp_path / "written"
    written.mkdir()
    for case_id, name, unit in ((GEMM, "flops", "FLOP/s"), (COPY, "bandwidth", "B/s")):
        proc = run_cli(
            "repro", case_id, "--from", str(perf_run), "--out", str(written), "--no-run", "--json"
        )
        assert proc.returncode == 0, proc.stderr
        data = json.loads(proc.stdout)
        assert data["kind"] == "perf"
        assert "accelkit.suite.perf.timing" in data["embedded"]
        script = Path(data["script"])
        cwd = tmp_path / f"cwd_{name}"
        cwd.mkdir()
        ran = _isolated(script, cwd)
        output = ran.stdout + ran.stderr
        assert ran.returncode == 0, output[-3000:]
        assert "Traceback" not in output
        assert f"{name} ({unit}, higher is better)" in output, output
        assert "latency (s, lower is better)" in output, output
        assert "recorded: median" in output and "here:     median" in output, output
        assert "ratio here/recorded:" in output, output
        assert "threads 1" in output, output  # the run's recorded perf threads
        assert "timed with perf_counter" in output, output  # the suite's CPU timer


@pytest.mark.slow
def test_a_transfer_case_has_a_one_line_error(perf_run: Path, tmp_path: Path) -> None:
    proc = run_cli("repro", TRANSFER, "--from", str(perf_run), "--out", str(tmp_path))
    assert_one_line_error(proc, 2, "no standalone perf reproducer: host-device transfers")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("case_id", "why"),
    [
        ("perf/compile/latency", "compile latency"),
        ("perf/collectives/all_reduce", "collectives need several rank processes"),
        ("perf/graphs/replay_overhead", "graph replay needs"),
        ("perf/transfer/d2h/pinned/67108864", "host-device transfers"),
    ],
)
def test_unsupported_perf_families_name_why(case_id: str, why: str) -> None:
    with pytest.raises(BadInput, match=why):
        perf_repro.check_reproducible(case_id)


def test_covered_perf_families_pass_the_check() -> None:
    for case_id in (GEMM, COPY, "perf/gemv/float32/1x1024x512", "perf/canary/host/copy"):
        perf_repro.check_reproducible(case_id)


def test_perf_replay_needs_only_the_standard_library_and_what_it_embeds() -> None:
    """The reproducer's perf code imports torch and numpy lazily, and of accelkit only the
    modules `accelkit repro` embeds with it."""
    module = accelkit_module("accelkit.triage.perf_replay")
    top = module_imports(module, top_level_only=True)
    assert all(name.split(".")[0] in sys.stdlib_module_names for name in top), top
    every = module_imports(module, top_level_only=False)
    ours = {name for name in every if name.startswith("accelkit.")}
    assert ours <= {
        "accelkit.suite.perf.timing",
        "accelkit.suite.perf.timing.Timer",
        "accelkit.suite.perf.timing.spread",
    }, ours
    ast.parse(module.source)


def _perf_case(case_id: str, function: str, params: dict[str, object], **tags: object) -> Case:
    record = Repro.model_validate(
        {
            "kind": "perf",
            "seed": 7,
            "device": "cpu",
            "file": f"perf/test_{case_id.split('/')[1]}.py",
            "function": function,
            "params": params,
        }
    )
    samples = [1e-4, 1.1e-4, 1.2e-4]
    latency = metric(samples=samples, threads=1, **tags)
    return case(case_id, metrics={"latency": latency}, repro=record)


@pytest.mark.parametrize(
    ("case_id", "function", "params", "tags", "expected"),
    [
        (
            "perf/gemv/float32/1x1024x512",
            "test_gemv",
            {"gemv_case": {"__tuple__": [1024, 512]}},
            {"shape": [1, 1024, 512]},
            {"family": "gemv", "dtype": "float32", "shape": [1, 1024, 512], "sets": 64},
        ),
        (
            "perf/attention/sdpa/float32/b1h4s128d32/causal",
            "test_sdpa",
            {"sdpa_mask": "causal"},
            {"shape": [1, 4, 128, 32]},
            {"family": "sdpa", "dtype": "float32", "shape": [1, 4, 128, 32], "causal": True},
        ),
        (
            "perf/memory/stream/triad/float32/262144",
            "test_stream",
            {"stream_case": "triad"},
            {"elements": 262144},
            {"family": "stream", "kernel": "triad", "elements": 262144, "sets": 64},
        ),
        (
            "perf/memory/rows/softmax/float32/128x1024",
            "test_rows",
            {"row_case": "softmax"},
            {"shape": [128, 1024]},
            {"family": "rows", "kernel": "softmax", "shape": [128, 1024], "sets": 128},
        ),
        (
            "perf/canary/host/copy",
            "test_canary",
            {"canary": "host/copy"},
            {"size": 262144},
            {"family": "canary", "kernel": "host/copy", "size": 262144, "sets": 64},
        ),
    ],
)
def test_perf_spec_rebuilds_the_op_from_the_record(
    case_id: str,
    function: str,
    params: dict[str, object],
    tags: dict[str, object],
    expected: dict[str, object],
    llc_32mib: int,
) -> None:
    """Memory-bound cases rotate through 4x the last-level cache (32 MiB here: 128 MiB)."""
    from accelkit.suite.perf.harness import SIZE_TIERS

    recorded = _perf_case(case_id, function, params, **tags)
    spec = perf_repro.perf_spec(results([recorded], threads=1), recorded)
    assert {k: spec[k] for k in expected} == expected
    host = SIZE_TIERS["host"].timing
    assert spec["tier"] == "host" and spec["threads"] == 1 and spec["timer_device"] is None
    assert spec["timing"]["min_block_time"] == host.min_block_time
    assert spec["timing"]["max_run_time"] == host.max_run_time
    assert spec["metrics"]["latency"]["samples"] == [1e-4, 1.1e-4, 1.2e-4]


def test_a_record_from_another_size_tier_is_a_one_line_error() -> None:
    recorded = _perf_case(
        "perf/gemv/bfloat16/1x8192x8192",
        "test_gemv",
        {"gemv_case": {"__tuple__": [8192, 8192]}},
        shape=[1, 8192, 8192],
    )
    with pytest.raises(BadInput, match="another size tier"):
        perf_repro.perf_spec(results([recorded]), recorded)


def test_a_record_without_the_shape_tag_is_a_one_line_error() -> None:
    recorded = _perf_case(
        "perf/gemm/float32/128x128x128",
        "test_gemm",
        {"gemm_case": {"__tuple__": ["float32", {"__tuple__": [128, 128, 128]}]}},
    )
    with pytest.raises(BadInput, match="lack what rebuilds the case"):
        perf_repro.perf_spec(results([recorded]), recorded)
