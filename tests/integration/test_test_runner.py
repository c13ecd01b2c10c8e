"""The suite runner end to end: real pytest, real worker processes, real crashes and hangs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from accelkit.results.io import load_results
from tests.helpers import (
    FIXTURE_CASES,
    REPO,
    SUITE_TESTS_TIMEOUT_S,
    SuiteRun,
    assert_one_line_error,
    run_cli,
)

pytestmark = pytest.mark.slow

#: `accelkit test` on the CPU over the fixture cases; each test adds its selection and outputs.
TEST_FIXTURE_CASES = ("test", "--device", "cpu", "--cases", str(FIXTURE_CASES))
#: The same command in a process of its own, for the tests that signal it.
ACCELKIT = (sys.executable, "-m", "accelkit")


def _statuses(path: Path) -> dict[str, str]:
    return {case.id: case.status for case in load_results(path).cases}


def test_every_status_is_reported_and_the_run_goes_on(tmp_path: Path) -> None:
    results, junit = tmp_path / "r.json", tmp_path / "r.xml"
    # 20 s a case: 8 s timed out a passing case on CI's loaded machine (the hang costs 20 s).
    select = ("-k", "statuses or records", "--timeout", "20", "--passes", "1")
    outputs = ("--json", str(results), "--junit", str(junit))
    proc = run_cli(*TEST_FIXTURE_CASES, *select, *outputs)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    statuses = _statuses(results)
    prefix = "conformance/statuses/"
    assert statuses == {
        prefix + "passes": "passed",
        prefix + "fails": "failed",
        prefix + "needs_xpu_graph": "skipped",
        prefix + "setup_error": "error",
        prefix + "crashes": "crashed",
        prefix + "hangs": "timeout",
        prefix + "after_the_others": "passed",
        "perf/metric/records": "passed",
    }
    loaded = load_results(results)
    by_id = {case.id: case for case in loaded.cases}
    assert "arithmetic is broken" in by_id[prefix + "fails"].message
    assert by_id[prefix + "needs_xpu_graph"].message == (
        "xpu_graph: " + loaded.capabilities["xpu_graph"].reason
    )
    assert loaded.capabilities["xpu_graph"].reason  # the reason is never empty
    assert "fixture exploded" in by_id[prefix + "setup_error"].message
    assert "20 s" in by_id[prefix + "hangs"].message
    metric = by_id["perf/metric/records"].metrics["latency"]
    assert (metric.value, metric.unit, metric.higher_is_better) == (0.5, "s", False)
    assert metric.samples == [0.4, 0.5, 0.6]
    counts = {"passed": 3, "failed": 1, "skipped": 1, "error": 1, "crashed": 1, "timeout": 1}
    assert loaded.summary.model_dump() == counts
    assert loaded.run.finished is not None
    assert loaded.run.device == "cpu" and loaded.env["torch"]

    root = ET.parse(junit).getroot()
    assert root.get("tests") == "8"
    assert root.get("failures") == "1" and root.get("errors") == "3" and root.get("skipped") == "1"
    skipped = root.find(".//testcase[@name='needs_xpu_graph']/skipped")
    assert skipped is not None and "xpu_graph" in (skipped.get("message") or "")
    # Human output names the bad cases.
    assert "CRASHED" in proc.stdout and "TIMEOUT" in proc.stdout


def test_a_killed_run_leaves_a_valid_results_file(tmp_path: Path) -> None:
    results = tmp_path / "r.json"
    argv = [*ACCELKIT, *TEST_FIXTURE_CASES, "-k", "tick", "--json", str(results)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    seen = 0
    for line in proc.stdout:
        if "PASSED" in line:
            seen += 1
            if seen == 5:
                break
    # Kill pytest itself (the process that writes the file) outright, mid-run.
    pytest_pids = subprocess.run(
        ["pgrep", "-f", f"accelkit-results {results}"], capture_output=True, text=True
    ).stdout.split()
    assert pytest_pids
    for pid in pytest_pids:
        os.kill(int(pid), signal.SIGKILL)
    proc.wait(timeout=60)
    loaded = load_results(results)  # valid JSON of the documented schema
    assert len(loaded.cases) >= 3
    assert all(case.status == "passed" for case in loaded.cases)
    assert loaded.run.finished is None  # the run did not finish
    assert proc.returncode == 1


def test_sigterm_stops_the_run_and_leaves_nothing_running(tmp_path: Path) -> None:
    results = tmp_path / "r.json"
    argv = [*ACCELKIT, *TEST_FIXTURE_CASES, "-k", "tick", "--json", str(results)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if "PASSED" in line:
            break
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out
    assert "interrupted" in out
    deadline = time.monotonic() + 15
    while True:
        leftover = subprocess.run(
            ["pgrep", "-f", f"accelkit-results {results}"], capture_output=True, text=True
        ).stdout.split()
        if not leftover or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert leftover == []
    assert len(load_results(results).cases) >= 1


def test_passes_repeat_perf_cases_in_separate_processes_and_pool_them(tmp_path: Path) -> None:
    results = tmp_path / "r.json"
    select = ("--passes", "3", "-k", "repeats or test_passes")
    proc = run_cli(*TEST_FIXTURE_CASES, *select, "--json", str(results))
    assert proc.returncode == 1, proc.stdout + proc.stderr  # one case broke in pass 2
    loaded = load_results(results)
    assert loaded.run.passes == 3 and loaded.run.finished is not None
    by_id = {case.id: case for case in loaded.cases}
    assert len(loaded.cases) == len(by_id) == 4  # every case once, whatever the passes
    numbered = by_id["perf/repeats/pass_numbered_metric"].metrics["pass"]
    assert numbered.samples == [1.0, 1.0, 2.0, 2.0, 3.0, 3.0]
    assert numbered.sample_groups == [0, 0, 1, 1, 2, 2]
    assert numbered.value == 2.0
    extra = numbered.model_extra or {}
    assert extra["iqr"] == 1.5 and extra["noisy"] is True  # recomputed from the pool
    once = by_id["perf/repeats/single_pass_metric"].metrics["seconds"]
    assert once.samples == [1.0, 2.0, 3.0] and set(once.sample_groups or [0]) == {0}
    broken = by_id["perf/repeats/breaks_in_pass_two"]
    assert broken.status == "failed" and broken.message.startswith("pass 2: ")
    # Conformance cases run once, in the first pass.
    assert by_id["conformance/statuses/passes"].status == "passed"
    assert "perf pass 3/3" in proc.stdout
    assert "[pass 2] FAILED" in proc.stdout


def test_perf_cases_run_after_conformance_in_their_own_single_worker_session(
    tmp_path: Path,
) -> None:
    # With --workers 2 conformance cases run two at a time; a perf case must never be timed
    # beside another case, so the perf cases get their own pytest session with one worker.
    results = tmp_path / "r.json"
    select = ("--workers", "2", "--passes", "1", "-k", "layout")
    proc = run_cli(*TEST_FIXTURE_CASES, *select, "--json", str(results))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    by_id = {case.id: case for case in load_results(results).cases}
    conformance = by_id["conformance/worker_layout/conformance_layout"].metrics["workers"]
    perf = by_id["perf/perf_layout"].metrics["workers"]
    assert (conformance.value, perf.value) == (2.0, 1.0)
    # Different controlling pytest processes: the sessions ran one after the other.
    assert (conformance.model_extra or {})["session"] != (perf.model_extra or {})["session"]
    assert proc.stdout.count("collected 1 cases") == 2


@pytest.mark.timeout(SUITE_TESTS_TIMEOUT_S)
def test_the_builtin_suite_passes_on_cpu(cpu_suite_run: SuiteRun) -> None:
    """The README's main job, `accelkit test --device cpu --json r.json --junit r.xml`
    (the session's shared run, with two measurement passes and measured ceilings; its
    perf cases: tests/unit/suite/perf/test_perf_cases.py)."""
    run = cpu_suite_run
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    raw = run.data()
    assert raw["schema"] == "accelkit.results/1"
    assert set(raw) >= {"schema", "run", "env", "capabilities", "cases", "summary"}
    assert raw["run"]["suites"] == ["conformance", "perf"]
    loaded = load_results(run.results)
    assert len(loaded.cases) >= 15
    ids = {case.id for case in loaded.cases}
    for feature in ("switch", "while_loop", "cond", "dynamic_spec", "all_reduce", "ops/matmul"):
        assert any(feature in case_id for case_id in ids), feature
    assert loaded.summary.failed == loaded.summary.error == loaded.summary.crashed == 0
    # The bundled expectations are true for the default run: nothing listed passes (a
    # `breadth: full` entry does not apply to this quick run).
    assert [c.id for c in loaded.cases if c.unexpected_pass] == []
    assert ET.parse(run.junit).getroot().get("tests") == str(len(loaded.cases))


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--device", "tpu"], "unknown backend 'tpu'"),
        (["--device", "cpu", "--suite", "fuzz"], "unknown suite 'fuzz'"),
        (["--device", "cpu", "--timeout", "-1"], "--timeout"),
        (["--device", "cpu", "--json", "missing-dir/r.json"], "does not exist"),
        (["--device", "cpu", "--json", "."], "is a directory"),
        (["--device", "cpu", "--junit", "nowhere/r.xml"], "does not exist"),
        (["--device", "cpu", "--cases", "no-such-dir"], "not a directory"),
        (["--device", "cpu", "--workers", "-2"], "--workers"),
        (["--device", "cpu", "--bogus"], "No such option"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_writes_nothing(
    tmp_path: Path, args: list[str], needle: str
) -> None:
    before = set(tmp_path.iterdir())
    proc = run_cli("test", *args, cwd=tmp_path)
    assert_one_line_error(proc, 2, needle)
    assert set(tmp_path.iterdir()) == before


def test_an_absent_device_exits_3_at_once(tmp_path: Path) -> None:
    results = tmp_path / "r.json"
    proc = run_cli("test", "--device", "xpu", "--json", str(results))
    assert_one_line_error(proc, 3, "xpu: not available: torch built without XPU support")
    # The device is checked before the results file's header is written, and the header
    # before pytest starts: no file means no suite ran.
    assert not results.exists()


def test_a_keyword_matching_nothing_is_bad_input(tmp_path: Path) -> None:
    results, junit = tmp_path / "r.json", tmp_path / "r.xml"
    proc = run_cli(
        *TEST_FIXTURE_CASES, "-k", "no_such_case_anywhere", "--json", str(results),
        "--junit", str(junit),
    )  # fmt: skip
    assert_one_line_error(proc, 2, "matched no case")
    # The header written before pytest started is removed: no file means no suite ran.
    assert not results.exists() and not junit.exists()


def test_a_suite_whose_plugin_cannot_import_is_a_one_line_error(tmp_path: Path) -> None:
    """A stale install (an editable install pointing at a removed checkout, say): the pytest
    child imports an `accelkit` without `accelkit.suite`, and pytest dies of the ImportError
    (exit 1) before any case. It is a one-line error naming the cause, not "FAILED: 0
    cases". The stale package is a stub first on the child's PYTHONPATH; accelkit itself
    runs from the checkout (put ahead of PYTHONPATH)."""
    stale = tmp_path / "stale"
    (stale / "accelkit").mkdir(parents=True)
    (stale / "accelkit" / "__init__.py").write_text("")
    run_from_checkout = (
        "import runpy, sys; sys.path.insert(0, sys.argv.pop(1)); "
        "runpy.run_module('accelkit', run_name='__main__', alter_sys=True)"
    )
    results = tmp_path / "r.json"
    argv = [sys.executable, "-c", run_from_checkout, str(REPO), *TEST_FIXTURE_CASES]
    proc = subprocess.run(
        [*argv, "-k", "statuses", "--json", str(results)],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "PYTHONPATH": str(stale)},
        check=False,
    )
    assert_one_line_error(proc, 1, "pytest failed before running any case")
    assert "No module named 'accelkit.suite'" in proc.stderr
    log = Path(proc.stderr.rsplit("(pytest log: ", 1)[1].split(")")[0])
    assert "Traceback" in log.read_text()  # the whole story is kept for the reader
    log.unlink()
    assert not results.exists()


def test_the_repo_has_no_stray_pytest_cache() -> None:
    # The suite runs with -p no:cacheprovider: nothing is written into the installed package.
    assert not (REPO / "accelkit" / "suite" / ".pytest_cache").exists()


def test_expectations_turn_known_failures_into_xfail_and_report_unexpected_passes(
    tmp_path: Path,
) -> None:
    results = tmp_path / "r.json"
    expectations = FIXTURE_CASES.parent / "expectations.yaml"
    select = ("-k", "passes or fails", "--expectations", str(expectations))
    proc = run_cli(*TEST_FIXTURE_CASES, *select, "--json", str(results))
    assert proc.returncode == 0, proc.stdout + proc.stderr  # the only failure is a known one
    by_id = {case.id: case for case in load_results(results).cases}
    known = by_id["conformance/statuses/fails"]
    assert (known.status, known.known_failure) == ("skipped", True)
    assert "arithmetic is broken on this fixture backend" in known.message
    unexpected = by_id["conformance/statuses/passes"]
    assert (unexpected.status, unexpected.unexpected_pass) == ("passed", True)
    assert "unexpected pass" in unexpected.message


def test_a_full_only_expectation_applies_to_full_runs_only(tmp_path: Path) -> None:
    """The run's breadth reaches the expectations: a `breadth: full` entry applies to a full
    run. (That a quick run ignores it is unit-tested, and the default quick run's own test
    would see the bundled full-only entries as unexpected passes.)"""
    expectations = tmp_path / "expectations.yaml"
    expectations.write_text(
        "".join(
            f"- id: conformance/statuses/{name}\n  reason: only at full breadth\n  breadth: full\n"
            for name in ("fails", "passes")
        )
    )
    results = tmp_path / "full.json"
    select = ("-k", "passes or fails", "--expectations", str(expectations), "--breadth", "full")
    proc = run_cli(*TEST_FIXTURE_CASES, *select, "--json", str(results))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    by_id = {case.id: case for case in load_results(results).cases}
    fails, passes = by_id["conformance/statuses/fails"], by_id["conformance/statuses/passes"]
    assert (fails.status, fails.known_failure) == ("skipped", True)
    assert (passes.status, passes.unexpected_pass) == ("passed", True)
