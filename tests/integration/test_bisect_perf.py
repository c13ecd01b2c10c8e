"""`accelkit bisect` of a perf case through the CLI: bad input as one line, and a bisect
that names the build which planted a real slowdown.

The slow test bisects four real environments sharing the host's torch: in the fourth,
`torch.mm` does 3x its work (the fault plugin, entered by the environment's sitecustomize),
and the second cannot import torch; bisect must name the fourth as first bad, the third as
last good, and skip the second. No timing is asserted other than through the verdicts."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import FAULTS, SMALL_GEMM, assert_one_line_error, run_cli


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--envs", "{d}", "--wheels", "{d}"], "--wheels DIR, --index URL or --envs DIR"),
        (["--envs", "{d}/nope"], "--envs {d}/nope: not a directory"),
        (["--envs", "{d}", "--threshold", "0"], "--threshold 0.0: must be between 0 and 1"),
        (["--envs", "{d}"], "no torch build for this Python and platform in {d}"),
    ],
)
def test_bad_input_is_one_line(tmp_path: Path, args: list[str], needle: str) -> None:
    argv = [
        "--case",
        SMALL_GEMM,
        "--good",
        "1",
        "--bad",
        "2",
        *(a.format(d=tmp_path) for a in args),
    ]
    proc = run_cli("bisect", *argv)
    assert_one_line_error(proc, 2, needle.format(d=tmp_path))


SLOW_SITECUSTOMIZE = """\
# A build with a perf regression: torch.mm (float32) does 3x its work, answers unchanged.
import sys
sys.path.insert(0, {faults!r})
from faults import Fault, injected
_SLOW = injected(Fault("mm", ("float32",), "slow", 2.0))
_SLOW.__enter__()
"""


@contextlib.contextmanager
def _environments(root: Path, *, slow_from: int, broken: int, n: int) -> Iterator[list[str]]:
    """n site folders sharing the host's torch, named by nightly version: build `broken`
    cannot import torch, builds `slow_from`.. carry the slowdown."""
    versions = [f"2.15.0.dev202601{i + 1:02d}" for i in range(n)]
    for i, version in enumerate(versions):
        folder = root / version
        folder.mkdir(parents=True)
        if i == broken:
            (folder / "torch").mkdir()
            (folder / "torch" / "__init__.py").write_text(
                "raise ImportError('this build is broken (planted)')\n"
            )
        elif i >= slow_from:
            text = SLOW_SITECUSTOMIZE.format(faults=str(FAULTS))
            (folder / "sitecustomize.py").write_text(text)
    yield versions


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_bisect_names_the_build_that_planted_a_real_slowdown(tmp_path: Path) -> None:
    """Builds 0..3; the slowdown in build 3; build 1 broken. The search tests 0 (the
    reference), 3 (bad), 1 (unusable: skipped), 2 (good): each measured build one
    interleaved run of 2 passes a side, with a 50% band so the machine's load cannot
    decide."""
    envs = tmp_path / "envs"
    with _environments(envs, slow_from=3, broken=1, n=4) as versions:
        argv = ["--case", SMALL_GEMM, "--good", "2026-01-01", "--bad", versions[-1]]
        argv += ["--envs", str(envs), "--passes", "2", "--threshold", "0.5", "--json"]
        proc = run_cli("bisect", *argv, "--work", str(tmp_path / "work"), timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    answer = json.loads(proc.stdout)
    assert answer["first_bad"]["version"] == versions[3], answer
    assert answer["last_good"]["version"] == versions[2], answer
    assert answer["unusable_between"] == []
    steps = {s["version"]: s for s in answer["steps"]}
    assert [s["version"] for s in answer["steps"]] == [versions[i] for i in (0, 3, 1, 2)]
    assert steps[versions[1]]["verdict"] == "unusable"
    assert "this build is broken (planted)" in steps[versions[1]]["detail"]
    assert steps[versions[3]]["verdict"] == "bad"
    assert "latency regressed" in steps[versions[3]]["detail"]
    assert steps[versions[2]]["verdict"] == "good"
    assert "latency unchanged" in steps[versions[2]]["detail"]
    import torch

    assert answer["first_bad"]["git_version"] == torch.version.git_version
    # Each step's interleaved run left both sides' files: side B of a bad step is slower.
    assert sorted(p.name for p in (tmp_path / "work").glob("*-ab.b.json"))
