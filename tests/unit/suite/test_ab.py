"""`accelkit test --ab A B`: interleaved A/B runs (accelkit/suite/run/ab.py), their paired
comparison, and the noise benchmark's smoke run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from accelkit.errors import BadInput
from accelkit.results.compare import compare, interleaved
from accelkit.results.merge import pool
from accelkit.results.model import Metric, Results
from accelkit.results.stats import MIN_PAIRS
from accelkit.suite.run import ab
from accelkit.suite.run.request import AB_DEFAULT_PASSES, RunRequest, validate
from tests.factories import case, grouped_metric, metric, results
from tests.helpers import REPO


def _executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    path.chmod(0o755)
    return path


def test_interpreter_accepts_an_executable_or_a_venv_folder(tmp_path: Path) -> None:
    python = _executable(tmp_path / "py")
    assert ab.interpreter(str(python)) == str(python)
    venv_python = _executable(tmp_path / "venv" / "bin" / "python")
    assert ab.interpreter(str(tmp_path / "venv")) == str(venv_python)


@pytest.mark.parametrize("what", ["missing", "folder", "not-executable"])
def test_interpreter_refuses_what_is_no_python(tmp_path: Path, what: str) -> None:
    target = tmp_path / "x"
    if what == "folder":
        target.mkdir()
    elif what == "not-executable":
        target.write_text("", encoding="utf-8")
    with pytest.raises(BadInput, match="--ab"):
        ab.interpreter(str(target))


def test_side_paths_sit_beside_the_json_path(tmp_path: Path) -> None:
    a, b, comparison = ab.side_paths(tmp_path / "r.json")
    assert (a.name, b.name, comparison.name) == ("r.a.json", "r.b.json", "r.compare.json")


def test_ab_is_validated_before_anything_runs(tmp_path: Path) -> None:
    python = str(_executable(tmp_path / "py"))
    with pytest.raises(BadInput, match="--suite perf"):
        validate(RunRequest(ab=(python, python)))
    with pytest.raises(BadInput, match="--image"):
        validate(RunRequest(suite="perf", ab=(python, python), image="accelkit-test-cpu:1"))
    with pytest.raises(BadInput, match="not an executable"):
        validate(RunRequest(suite="perf", ab=(python, str(tmp_path / "none"))))
    validate(RunRequest(suite="perf", ab=(python, python)))


def test_ab_round_trips_through_the_command_line(tmp_path: Path) -> None:
    request = RunRequest(suite="perf", ab=("/opt/a/bin/python", str(tmp_path / "venv-b")))
    argv = request.to_argv()
    assert argv[-3:] == ["--ab", "/opt/a/bin/python", str(tmp_path / "venv-b")]
    assert RunRequest.from_argv(argv) == request


def _side(side: str, factor: float, started: str = "2026-01-01T00:00:00+00:00") -> Results:
    cases = [
        case(
            "perf/gemm",
            metrics={
                "latency": grouped_metric(1e-3 * factor, passes=AB_DEFAULT_PASSES, between=0.0)
            },
        ),
    ]
    return results(cases, started=started, ab={"side": side, "python": "py", "order": "ABBA"})


def _pooled_side(side: str, compile_factor: float) -> Results:
    """One side of an --ab run as the runner pools it: 10 passes of a GEMM; the compile
    latency in the first pass only, its samples numbered by the case (one per turn)."""
    rng = np.random.default_rng(1 if side == "A" else 2)
    drift = np.exp(np.linspace(0.0, 0.3, MIN_PAIRS))  # the machine, shared by both sides
    compiles = compile_factor * drift * np.exp(rng.normal(0.0, 0.01, MIN_PAIRS))
    cold = metric(samples=list(compiles), groups=list(range(MIN_PAIRS)))
    passes = []
    for index in range(AB_DEFAULT_PASSES):
        gemm = metric(samples=list(1e-3 * np.exp(rng.normal(0.0, 0.01, 5))))
        cases = [case("perf/gemm", metrics={"latency": gemm})]
        if index == 0:
            cases.append(case("perf/compile/latency", metrics={"cold": cold}))
        passes.append(results(cases, ab={"side": side, "python": "py", "order": "ABBA"}))
    return pool(passes)


def test_a_single_pass_metric_taken_in_turns_pairs_sample_by_sample() -> None:
    a, b = _pooled_side("A", 1.0), _pooled_side("B", 1.1)
    by_id = {c.id: c for c in a.cases}
    assert by_id["perf/compile/latency"].metrics["cold"].sample_groups == list(range(MIN_PAIRS))
    assert set(by_id["perf/gemm"].metrics["latency"].sample_groups or []) == {
        0,
        *range(MIN_PAIRS, MIN_PAIRS + AB_DEFAULT_PASSES - 1),
    }
    verdicts = {(m.case, m.metric): m for m in compare(a, b).metrics}
    compiled = verdicts[("perf/compile/latency", "cold")]
    # A 30% drift over the run, shared pair by pair, leaves the 10% slowdown plain.
    assert "paired" in compiled.reason and compiled.verdict == "regressed"
    assert "paired" in verdicts[("perf/gemm", "latency")].reason


def test_the_two_sides_of_one_run_are_compared_paired() -> None:
    a, b = _side("A", 1.0), _side("B", 1.2)
    assert interleaved(a, b)
    comparison = compare(a, b)
    (metric,) = comparison.metrics
    assert "paired" in metric.reason and metric.verdict == "regressed"
    other_run = _side("B", 1.0, started="2026-01-02T00:00:00+00:00")
    assert not interleaved(a, other_run)
    assert not interleaved(results([]), results([]))


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_bench_ab_noise_smoke(tmp_path: Path) -> None:
    """The benchmark's interleaved A/A row, two passes of one canary: it runs end to end
    and prints its table (no timing is asserted)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, str(REPO / "benchmarks" / "bench_ab_noise.py")]
    argv += ["--modes", "interleaved", "--rows", "aa", "--passes", "2"]
    argv += ["-k", "canary and copy", "--keep", str(tmp_path)]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=850, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "interleaved A/A quiet" in proc.stdout
    assert (tmp_path / "ab-aa.a.json").is_file() and (tmp_path / "ab-aa.b.json").is_file()


def test_canaries_of_interleaved_sides_are_not_divided_out() -> None:
    """Both sides of an --ab run share the machine: a canary that differs between them (a
    different numpy) is environment-shifted itself, and the build's metrics keep their
    verdicts."""

    def side(name: str, canary_factor: float, gemm_factor: float) -> Results:
        def timed(median: float, seed: int, **tags: str) -> Metric:
            return grouped_metric(median, seed=seed, between=0.0, **tags)

        cases = [
            case(
                "perf/canary/host/copy",
                metrics={"time": timed(1e-5 * canary_factor, 1, canary="memory", scope="host")},
            ),
            case(
                "perf/gemm",
                metrics={"time": timed(1e-3 * gemm_factor, 2, bound="memory", scope="host")},
            ),
        ]
        return results(cases, ab={"side": name, "python": "py", "order": "ABBA"})

    comparison = compare(side("A", 1.0, 1.0), side("B", 1.5, 1.5))
    verdicts = {m.case: m.verdict for m in comparison.metrics}
    assert verdicts == {"perf/canary/host/copy": "environment-shifted", "perf/gemm": "regressed"}


def test_an_interpreter_that_cannot_run_the_suite_is_unavailable(tmp_path: Path) -> None:
    from accelkit.errors import Unavailable

    broken = tmp_path / "py"
    broken.write_text(
        "#!/bin/sh\necho \"ModuleNotFoundError: No module named 'torch'\" >&2\nexit 1\n",
        encoding="utf-8",
    )
    broken.chmod(0o755)
    side = ab.HostSide(str(broken), str(broken), dict(os.environ))
    with pytest.raises(Unavailable, match="cannot run the suite: ModuleNotFoundError"):
        ab.probe(side, RunRequest(suite="perf"))


def test_an_image_side_is_checked_as_an_image_reference(tmp_path: Path) -> None:
    python = str(_executable(tmp_path / "py"))
    with pytest.raises(BadInput, match="no image after 'image:'"):
        validate(RunRequest(suite="perf", ab=(python, "image:")))
    with pytest.raises(BadInput, match="malformed value"):
        validate(RunRequest(suite="perf", ab=("image:UPPER/Case..x", python)))
    # A host interpreter against an image, and two images: whether they exist is found
    # when the run starts (exit 3), as for --image.
    validate(RunRequest(suite="perf", ab=(python, "image:accelkit-test-cpu:1")))
    request = RunRequest(suite="perf", ab=("image:a:1", "image:registry.example/b:2"))
    validate(request)
    assert RunRequest.from_argv(request.to_argv()) == request


def test_the_sides_import_a_copy_that_holds_accelkit_alone(tmp_path: Path) -> None:
    """The folder of an installed accelkit is site-packages: first on a side's PYTHONPATH,
    it would hand the side this host's torch. The copy's folder holds accelkit only."""
    source = ab.copy_accelkit(tmp_path / "src")
    assert [p.name for p in source.iterdir()] == ["accelkit"]
    assert (source / "accelkit" / "suite" / "pytest.ini").is_file()
    assert not list(source.rglob("__pycache__"))
    request = RunRequest(suite="perf", ab=("a", "b"))
    assert ab.side_request(request, source).cases_dir == source / "accelkit" / "suite"
    own = RunRequest(suite="perf", ab=("a", "b"), cases_dir=tmp_path)
    assert ab.side_request(own, source).cases_dir == tmp_path
    host = ab.side_env(request, source)["PYTHONPATH"].split(os.pathsep)
    assert host[0] == str(source)
    python = str(_executable(tmp_path / "py"))
    assert isinstance(ab.make_side(python, request, tmp_path, source), ab.HostSide)


def test_an_image_side_mounts_the_run_folder_and_the_named_files_at_their_paths(
    tmp_path: Path,
) -> None:
    expectations = tmp_path / "exp.yaml"
    expectations.write_text("{}", encoding="utf-8")
    folder, source = tmp_path / "run", tmp_path / "run" / "src"
    source.mkdir(parents=True)
    request = RunRequest(suite="perf", ab=("image:a:1", "image:a:1"), expectations=expectations)
    side = ab.make_side("image:a:1", request, folder, source)
    assert isinstance(side, ab.ImageSide) and side.image == "a:1"
    options = side._options(request, source)
    mounts = {m.target: m.read_only for m in options.mounts}
    assert mounts == {str(folder): False, str(source): True, str(expectations.resolve()): True}
    assert options.network_mode == "none"
    assert options.user == f"{os.getuid()}:{os.getgid()}"
    assert options.env["PYTHONPATH"] == str(source)
    assert options.env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] == "1"
    assert side.record == {"image": "a:1", "python": "python"}


def test_an_events_file_is_read_line_by_line_as_it_grows(tmp_path: Path) -> None:
    from accelkit.suite.run.ab import _EventsTail

    path = tmp_path / "events"
    path.write_bytes(b"")
    seen: list[dict[str, object]] = []
    tail = _EventsTail(path, seen.append)
    with open(path, "ab") as out:
        out.write(b'{"event": "collected", "total": 1}\n{"event": "ca')
        out.flush()
        tail.poll()
        assert seen == [{"event": "collected", "total": 1}]
        out.write(b'se", "case": {}}\nnot json\n')
    tail.start()
    tail.stop()
    assert seen == [{"event": "collected", "total": 1}, {"event": "case", "case": {}}]


def test_a_side_that_measured_alone_is_called_out(capsys: pytest.CaptureFixture[str]) -> None:
    from rich.console import Console

    from accelkit.cli.test import _ab_summary
    from accelkit.errors import ExitCode

    a, b = _side("A", 1.0), _side("B", 1.0)
    a.run.ab = {**(a.run.ab or {}), "turns": "120"}
    b.run.ab = {**(b.run.ab or {}), "turns": "0"}
    outcome = ab.AbOutcome((a, b), compare(a, b), None, ExitCode.OK, None)
    console = Console(record=True, width=200)
    request = RunRequest(suite="perf", ab=("/py/a", "/py/b"))
    _ab_summary(console, outcome, 1.0, request)
    text = console.export_text()
    assert "warning: side B measured alone (0 lockstep turns)" in text
    assert "side A measured alone" not in text
