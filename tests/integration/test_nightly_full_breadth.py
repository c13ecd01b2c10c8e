"""The nightly's full breadth catches what the default run cannot: a wrong Inductor
decomposition of mish, an op outside the quick compiled set (QUICK_COMPILED_OPS) and the
compile zoo, so only its compiled OpInfo case (`--breadth full`) compiles it; eager mish is
right. Rehearsed as `accelkit matrix run` of a sharded CPU leg with the nightly's CPU leg's
test arguments, run on this host (no container, so the fault plugin reaches the suite),
narrowed with -k."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from accelkit.matrix import load_legs
from accelkit.results.io import load_results
from accelkit.suite.opinfo.compiled import QUICK_COMPILED_OPS
from tests.helpers import FAULTS, REPO, run_cli

COMPILED = "conformance/opinfo_compiled/nn.functional.mish/float32"
EAGER = "conformance/opinfo/nn.functional.mish/float32"


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_a_compiled_only_fault_is_caught_by_the_nightlys_sharded_full_breadth(
    tmp_path: Path,
) -> None:
    # The default run has no compiled mish case: only the full breadth can see the fault.
    assert "nn.functional.mish" not in QUICK_COMPILED_OPS
    (nightly_cpu,) = [
        leg
        for leg in load_legs(str(REPO / "matrices" / "nightly.yaml"))
        if leg.name == "cpu-py3.12"
    ]
    assert "--breadth=full" in nightly_cpu.test_args and nightly_cpu.shards > 1
    matrix = tmp_path / "rehearsal.yaml"
    matrix.write_text(
        "schema: 1\n"
        "entries:\n"
        "  - backend: cpu\n"
        '    python: ["3.11"]\n'
        "    torch: {channel: nightly}\n"
        "    suites: [conformance]\n"
        "    container: false\n"
        "    runner: [self-hosted, linux.4xlarge]\n"
        "    timeout_minutes: 120\n"
        f"    test_args: {json.dumps(list(nightly_cpu.test_args))}\n"
        "    shards: 2\n"
    )
    out = tmp_path / "leg-results"
    env = {
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(FAULTS), str(REPO), os.environ.get("PYTHONPATH", "")) if p
        ),
        "PYTEST_PLUGINS": "perturb_plugin",
        "ACCELKIT_FAULT_DECOMP": "mish",
        # A fresh Inductor cache: a graph cached without the fault would hide it.
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor-cache"),
    }
    proc = run_cli(
        "matrix",
        "run",
        str(matrix),
        "-k",
        "mish and float32 and not grad and not noncontiguous",  # one case a shard
        "--test-arg=--workers=0",
        "--output",
        str(out),
        "--json",
        env=env,
        timeout=400,
    )
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    (leg,) = json.loads(proc.stdout)["outcome"]["legs"]
    assert leg["status"] == "failed"
    merged = load_results(out / "cpu-py3.11" / "results.json")
    assert merged.run.shards == 2 and merged.run.breadth == "full"
    cases = {case.id: case for case in merged.cases}
    assert cases[COMPILED].status == "failed" and "compiled" in cases[COMPILED].message
    assert cases[EAGER].status == "passed"  # what the default run checks of mish
