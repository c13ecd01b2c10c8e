"""accelkit.triage.repro: the command's checks (`ReproRequest`), the exit status mapping and
the `--baseline` judgement of a reproducer run several times (`judge_reproducer`), with a
stand-in reproducer script that prints a measurement. The real reproducers run in
tests/integration/test_repro*.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from accelkit.errors import BadInput, Failed
from accelkit.results.model import Case
from accelkit.triage.perf_replay import MEASURED_PREFIX
from accelkit.triage.repro import ReproRequest, exit_code, judge_reproducer
from tests.factories import case, metric, results, write_results

GEMM = "perf/gemm/float32/n256"


def _samples(median: float, n: int = 20) -> list[float]:
    return [median * (1 + 0.004 * ((i % 5) - 2)) for i in range(n)]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"passes": 0}, r"^--passes: must be >= 1, got 0$"),
        ({"threshold": 1.5}, r"^--threshold 1.5: must be between 0 and 1"),
        ({"baseline": Path("b.json"), "case": "conformance/x"}, r"judges perf cases only"),
        ({"baseline": Path("b.json"), "run": False}, r"drop --no-run"),
        ({"passes": 4}, r"^--passes: repeats a perf reproducer for --baseline; add --baseline$"),
    ],
)
def test_bad_options_are_one_line_bad_input(fields: dict[str, object], message: str) -> None:
    values: dict[str, object] = {"case": GEMM, "source": Path("r.json"), **fields}
    with pytest.raises(BadInput, match=message):
        ReproRequest(**values)  # type: ignore[arg-type]


def test_out_must_be_a_folder(tmp_path: Path) -> None:
    file = tmp_path / "file"
    file.write_text("x")
    with pytest.raises(BadInput, match=r"^--out .*file: not a directory$"):
        ReproRequest(GEMM, Path("r.json"), out=file)


def test_the_reproducers_statuses_become_accelkits() -> None:
    assert [exit_code(code) for code in (0, 1, 2, 5, -9)] == [0, 1, 3, 1, 1]
    assert ReproRequest(GEMM, Path("r.json")).interpreter == ()
    assert ReproRequest(GEMM, Path("r.json"), python="/py").interpreter == ("/py",)


def _script(tmp_path: Path, median: float, status: int = 0) -> Path:
    measured = {"latency": {"unit": "s", "higher_is_better": False, "samples": _samples(median)}}
    script = tmp_path / "repro.py"
    script.write_text(
        f"print('timing');print({MEASURED_PREFIX!r} + {json.dumps(measured)!r})\n"
        f"raise SystemExit({status})\n"
    )
    return script


def _baseline() -> Case:
    samples = [v for _ in range(4) for v in _samples(1e-4)]
    groups = [g for g in range(4) for _ in range(20)]
    return case(GEMM, metrics={"latency": metric(samples=samples, groups=groups, unit="s")})


def test_a_slower_reproducer_is_judged_regressed(tmp_path: Path) -> None:
    source = write_results(tmp_path / "r.json", results([_baseline()]))
    script = _script(tmp_path, 3e-4)
    first = f"{MEASURED_PREFIX}" + json.dumps(
        {"latency": {"unit": "s", "higher_is_better": False, "samples": _samples(3e-4)}}
    )
    runs: list[int] = []
    judgement = judge_reproducer(
        script,
        first,
        baseline=_baseline(),
        source=source,
        case_id=GEMM,
        passes=4,
        threshold=0.5,
        python=(sys.executable,),
        on_run=runs.append,
    )
    assert runs == [2, 3, 4]
    assert judgement.regressed and [v.verdict for v in judgement.metrics] == ["regressed"]
    data = judgement.to_json_dict()
    assert data["threshold"] == 0.5 and data["conclusion"] == judgement.lines[-1]
    assert judgement.metrics[0].runs == 4


def test_a_failed_rerun_or_a_missing_measurement_fails(tmp_path: Path) -> None:
    source = write_results(tmp_path / "r.json", results([_baseline()]))
    script = _script(tmp_path, 1e-4, status=1)
    with pytest.raises(Failed, match=r"^run 2 of the reproducer exited 1$"):
        judge_reproducer(
            script,
            "",
            baseline=_baseline(),
            source=source,
            case_id=GEMM,
            passes=2,
            threshold=0.03,
        )
    with pytest.raises(Failed, match=r"printed no measurement"):
        judge_reproducer(
            script,
            "no measurement here",
            baseline=_baseline(),
            source=source,
            case_id=GEMM,
            passes=1,
            threshold=0.03,
        )
