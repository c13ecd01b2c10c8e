"""`accelkit repro perf/CASE --from R.json --baseline B.json`: compare's verdict of the
reproducer's measurement against a baseline, and whether the recorded slowdown reproduces.

Unit tests feed made-to-order samples to the judgement (`accelkit.triage.perf_baseline`).
The slow test measures a real planted slowdown: a clean baseline run B of one GEMM, a run R
on a "build" whose torch.mm does 3x its work (the fault plugin's "slow" kind, applied to
every process by tests/fixtures/faults/buggy_build), then R's reproducer on that build
(regressed against B: the regression reproduces) and on the clean one (it does not). The
minimum effect is 50%, so the machine's load cannot decide; no timing is asserted other
than through the verdicts.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from accelkit.triage.perf_baseline import against_baseline, conclusion, iter_lines, parse_measured
from accelkit.triage.perf_replay import MEASURED_PREFIX
from tests.factories import case, metric, results
from tests.helpers import FAULTS, REPO, assert_one_line_error, run_cli
from tests.helpers import SMALL_GEMM as GEMM


def _latency(medians: list[float], per_pass: int = 20) -> list[list[float]]:
    return [[m * (1 + 0.004 * ((i % 5) - 2)) for i in range(per_pass)] for m in medians]


def _case(medians: list[float]) -> object:
    passes = _latency(medians)
    samples = [v for p in passes for v in p]
    groups = [g for g, p in enumerate(passes) for _ in p]
    return case(GEMM, metrics={"latency": metric(samples=samples, groups=groups, unit="s")})


def _runs(medians: list[float]) -> list[dict[str, object]]:
    return [
        {"latency": {"unit": "s", "higher_is_better": False, "samples": p}}
        for p in _latency(medians)
    ]


BASE = [1e-4, 1.01e-4, 0.99e-4, 1e-4]


@pytest.mark.parametrize(
    ("recorded", "here", "verdict", "expected"),
    [
        (3.0, 3.0, "regressed", "the regression reproduces here"),
        (3.0, 1.0, "unchanged", "the regression does not reproduce here"),
        (1.0, 3.0, "regressed", "regressed here against the baseline (the recorded run was not)"),
        (1.0, 1.0, "unchanged", "no regression, recorded or here"),
        (1.0, 0.5, "improved", "no regression, recorded or here"),
    ],
)
def test_the_measurement_is_judged_against_the_baseline_beside_the_record(
    recorded: float, here: float, verdict: str, expected: str
) -> None:
    base = _case(BASE)
    record = _case([m * recorded for m in BASE])
    found = against_baseline(base, record, _runs([m * here for m in BASE]), threshold=0.1)  # type: ignore[arg-type]
    (latency,) = found
    assert latency.verdict == verdict
    assert latency.recorded_verdict == ("regressed" if recorded > 1 else "unchanged")
    assert latency.ratio == pytest.approx(here, rel=0.02)
    assert latency.ci is not None and latency.ci[0] <= latency.ratio <= latency.ci[1]
    assert "by group: 4 vs 4 groups" in latency.reason  # 4 runs against 4 passes
    assert conclusion(found) == expected
    lines = list(iter_lines(found, 0.1))
    assert lines[-1] == expected
    assert f"latency: here {verdict} ({latency.ratio:.3f}x, CI " in lines[1]


def test_one_run_is_judged_by_sample_and_disagreeing_runs_are_noisy() -> None:
    base = _case(BASE)
    (one,) = against_baseline(base, None, _runs([3e-4]), threshold=0.1)  # type: ignore[arg-type]
    assert one.verdict == "regressed" and "by sample" in one.reason
    assert one.recorded_verdict is None
    wild = _runs([0.3e-4, 3e-4, 0.3e-4, 3e-4])
    (noisy,) = against_baseline(base, _case(BASE), wild, threshold=0.1)  # type: ignore[arg-type]
    assert noisy.verdict == "noisy"
    assert conclusion([noisy]) == "no regression recorded; noisy here (more --passes)"


def test_the_measurement_line_is_the_reproducers_last_word() -> None:
    data = {"latency": {"unit": "s", "higher_is_better": False, "samples": [1.0]}}
    output = f"noise\n{MEASURED_PREFIX}{json.dumps(data)}\n"
    assert parse_measured(output) == data
    assert parse_measured("no measurement here") is None
    assert parse_measured(MEASURED_PREFIX + "{not json") is None


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["conformance/opinfo/exp/float32", "--baseline", "{r}"], "judges perf cases only"),
        ([GEMM, "--passes", "3"], "--passes: repeats a perf reproducer for --baseline"),
        ([GEMM, "--baseline", "{r}", "--no-run"], "--baseline: needs the reproducer to run"),
        ([GEMM, "--baseline", "{r}", "--threshold", "2"], "--threshold 2.0: must be between"),
        ([GEMM, "--baseline", "{o}"], f"--baseline: no case {GEMM} in that results file"),
    ],
)
def test_bad_input_is_one_line(tmp_path: Path, args: list[str], needle: str) -> None:
    from accelkit.results.io import write_results

    recorded = tmp_path / "r.json"
    write_results(results([_case(BASE)], suites=["perf"]), recorded)  # type: ignore[list-item]
    other = tmp_path / "o.json"
    write_results(results([case("perf/other", metrics={})], suites=["perf"]), other)
    argv = [a.format(r=recorded, o=other) for a in args]
    proc = run_cli("repro", *argv, "--from", str(recorded), "--out", str(tmp_path))
    assert_one_line_error(proc, 2, needle)


# --------------------------------------------------------------------------------------
# End to end: a real planted slowdown


def _slow_build() -> dict[str, str]:
    """The environment of a torch "build" whose mm does 3x its work, in every process."""
    path = os.pathsep.join(
        p for p in (str(FAULTS / "buggy_build"), str(REPO), os.environ.get("PYTHONPATH")) if p
    )
    return {"PYTHONPATH": path, "ACCELKIT_FAULTS": "mm:float32:slow:2"}


def _measure(out: Path, passes: int, env: dict[str, str] | None = None) -> Path:
    argv = ["test", "--device", "cpu", "--suite", "perf", "--case", GEMM, "--workers", "0"]
    proc = run_cli(*argv, "--passes", str(passes), "--json", str(out), env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_the_reproducer_of_a_slowed_case_says_whether_the_slowdown_reproduces(
    tmp_path: Path,
) -> None:
    baseline = _measure(tmp_path / "baseline.json", 2)
    recorded = _measure(tmp_path / "slowed.json", 1, _slow_build())
    common = ["repro", GEMM, "--from", str(recorded), "--baseline", str(baseline)]
    common += ["--passes", "2", "--threshold", "0.5", "--out", str(tmp_path), "--json"]
    answers = {}
    for name, env in (("slowed", _slow_build()), ("clean", None)):
        proc = run_cli(*common, env=env, timeout=600)
        assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
        answers[name] = (proc.returncode, json.loads(proc.stdout)["baseline"])
    code, slowed = answers["slowed"]
    verdicts = {m["metric"]: m for m in slowed["metrics"]}
    assert code == 1, slowed
    assert verdicts["latency"]["verdict"] == "regressed"
    assert verdicts["latency"]["recorded_verdict"] == "regressed"
    assert verdicts["flops"]["verdict"] == "regressed"  # throughput: lower is the bad side
    assert verdicts["latency"]["ratio"] > 1.5 and verdicts["latency"]["runs"] == 2
    assert slowed["conclusion"] == "the regression reproduces here"
    code, clean = answers["clean"]
    assert code == 0, clean
    assert {m["verdict"] for m in clean["metrics"]} <= {"unchanged", "improved"}
    assert clean["conclusion"] == "the regression does not reproduce here"
