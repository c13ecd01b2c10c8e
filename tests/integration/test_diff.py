"""Differential runs: the same seeded cases in two environments, compared by what they
computed (`accelkit test --record-outputs`, `accelkit diff`), shown by `accelkit report`.

The slow tests run a few cases with the installed torch (2.14.1) and with torch 2.13.0:
installed once per session into a site folder (as `accelkit bisect` installs builds), and in
the session's CPU test image (`accelkit test --image`, torch 2.13.0 inside a container).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
import torch

from accelkit.errors import BadInput
from accelkit.results.differential_file import Differential, load_differential
from accelkit.results.io import write_results
from accelkit.results.render.html import report_html
from accelkit.results.render.markdown import report_markdown
from accelkit.results.report.model import load_report
from accelkit.suite.session.outputs import file_name
from accelkit.triage.differential import compare_answers, differential
from tests.factories import case, results
from tests.helpers import (
    IMAGE_TESTS_TIMEOUT_S,
    REPO,
    CpuTestImage,
    assert_one_line_error,
    run_cli,
)


def test_answers_are_compared_element_by_element() -> None:
    x = torch.tensor([1.0, 2.0, 0.0, float("nan"), float("inf")], dtype=torch.float64)
    assert compare_answers(x, x.clone(), 1e-6, 1e-6) == (0.0, 0.0, False)
    y = torch.tensor([1.0, 2.002, 0.0, float("nan"), float("inf")], dtype=torch.float64)
    max_abs, max_rel, beyond = compare_answers(x, y, 1.3e-6, 1e-5)
    assert max_abs == pytest.approx(0.002)
    assert max_rel == pytest.approx(0.002 / 2.002)
    assert beyond
    assert not compare_answers(x, y, 1e-2, 1e-5)[2]  # within a looser tolerance
    nan_on_one_side = torch.tensor([1.0, 2.0, 0.0, 1.0, float("inf")])
    assert compare_answers(x, nan_on_one_side, 1.0, 1.0) == (math.inf, math.inf, True)
    ints = torch.tensor([1, 2, 3])
    assert compare_answers(ints, torch.tensor([1, 2, 4]), 0.0, 0.0)[0] == 1.0


Answers = dict[str, list[tuple[str, torch.Tensor]]]


def _run(
    folder: Path, name: str, answers: Answers, statuses: dict[str, str], inputs: str = ""
) -> Path:
    records = {
        case_id: [
            {"what": w, "actual": x, "rtol": 1.3e-6, "atol": 1e-5, "inputs": inputs}
            for w, x in kept
        ]
        for case_id, kept in answers.items()
    }
    return _judged(folder, name, records, statuses)


def test_a_differential_lists_cases_that_differ_and_flags_those_beyond_tolerance(
    tmp_path: Path,
) -> None:
    base = torch.linspace(-2, 2, 50, dtype=torch.float32)
    a = _run(
        tmp_path,
        "a",
        {
            "conformance/ops/same/float32": [("same", base)],
            "conformance/ops/close/float32": [("close", base)],
            "conformance/ops/far/float32": [("far[0]", base), ("far[1]", base)],
            "conformance/ops/only_a/float32": [("x", base)],
        },
        {
            "conformance/ops/same/float32": "passed",
            "conformance/ops/close/float32": "passed",
            "conformance/ops/far/float32": "passed",
            "conformance/ops/only_a/float32": "passed",
            "conformance/ops/skipped/float32": "skipped",
        },
    )
    b = _run(
        tmp_path,
        "b",
        {
            "conformance/ops/same/float32": [("same", base.clone())],
            "conformance/ops/close/float32": [("close", base * (1 + 1e-7))],
            "conformance/ops/far/float32": [("far[0]", base), ("far[1]", base * 1.001)],
        },
        {
            "conformance/ops/same/float32": "passed",
            "conformance/ops/close/float32": "passed",
            "conformance/ops/far/float32": "passed",
            "conformance/ops/only_a/float32": "skipped",
            "conformance/ops/skipped/float32": "skipped",
        },
    )
    found = differential(a, b)
    by_id = {c.id: c for c in found.cases}
    assert found.summary.model_dump() == {
        "compared": 4,
        "identical": 1,
        "differ": 2,
        "beyond_tolerance": 1,
        "beyond_tolerance_both_passed": 1,
        "not_comparable": 1,
        "failed_in_one": 0,
        "within_peer_rule": 0,
        "peer_factor": 2.0,
        "peer_floor_units": 2.0,
    }
    far = by_id["conformance/ops/far/float32"]
    assert far.beyond_tolerance and far.both_passed and far.worst == "far[1]"
    assert far.max_rel == pytest.approx(1e-3, rel=1e-3)
    assert far.outputs == 2
    close = by_id["conformance/ops/close/float32"]
    assert not close.beyond_tolerance and 0 < close.max_abs < 1e-6  # type: ignore[operator]
    assert by_id["conformance/ops/only_a/float32"].note == "only the first run recorded answers"
    assert found.cases[0].id == "conformance/ops/far/float32"  # beyond tolerance first

    # accelkit report shows it beside the runs: the case where both passed but disagree.
    out = tmp_path / "differential.json"
    out.write_text(json.dumps(found.to_json_dict()))
    assert load_differential(out) == found
    report = load_report([a, b, out])
    assert len(report.runs) == 2 and report.differentials == (found,)
    page = report_html(report)
    assert '<tr class="disagree"' in page and "yes, both passed" in page
    assert "conformance/ops/far/float32" in page
    text = report_markdown(report)
    assert "**1 beyond tolerance** (1 of them passed in both runs)" in text
    # Found in a folder too (not listed as a skipped input).
    folder_report = load_report([tmp_path])
    assert folder_report.differentials == (found,)
    assert not [s for s in folder_report.skipped_inputs if "differential" in s]


def _judged(
    folder: Path, name: str, records: dict[str, list[dict[str, object]]], statuses: dict[str, str]
) -> Path:
    """A run of `records` per case (with or without their float64 references, as
    `accelkit test --record-outputs` writes them) and the cases' statuses."""
    outputs = folder / f"{name}-outputs"
    outputs.mkdir(parents=True)
    for case_id, kept in records.items():
        torch.save({"case": case_id, "outputs": kept}, outputs / file_name(case_id))
    path = folder / f"{name}.json"
    cases = [case(c, s) for c, s in statuses.items()]
    write_results(results(cases, outputs=str(outputs), env={"torch": {"version": name}}), path)
    return path


def test_a_case_failed_in_one_run_is_judged_with_the_other_run_as_its_peer(
    tmp_path: Path,
) -> None:
    """The peer rule in accelkit diff (issue 45): where one build failed a case the other
    passed, its answer passes the rule when its error against float64 is at most 2x the other
    build's + 2 units of rounding, element by element or normwise as the case's bound is."""
    exact = torch.linspace(1, 2, 64, dtype=torch.float64)
    u = torch.finfo(torch.float32).eps / 2
    wiggle = torch.where(torch.arange(64) % 2 == 0, 1.0, -1.0).double()

    def answer(units: float) -> torch.Tensor:  # off float64 by `units` roundings, alternating
        return (exact * (1 + units * u * wiggle)).float()

    def kept(what: str, actual: torch.Tensor, elementwise: bool = True) -> dict[str, object]:
        return {
            "what": what,
            "actual": actual,
            "rtol": 4.5 * u,  # the bound the failing answers miss (the passing ones meet it)
            "atol": 0.0,
            "inputs": "x",
            "expected": exact,
            "elementwise": elementwise,
        }

    ids = {
        "near": "conformance/opinfo/near/float32",  # B 5 units off where A is 4: within
        "far": "conformance/opinfo/far/float32",  # B 30 units off where A is 4: beyond
        "a_fails": "conformance/opinfo/a_fails/float32",  # the other way round
        "integers": "conformance/opinfo/integers/float32",  # an index B gets wrong
        "both": "conformance/opinfo/both/float32",  # both failed: no peer
    }
    ints = torch.arange(4)
    a = _judged(
        tmp_path,
        "a",
        {
            ids["near"]: [kept("near", answer(4))],
            ids["far"]: [kept("far", answer(4))],
            ids["a_fails"]: [kept("a_fails", answer(5), elementwise=False)],
            ids["integers"]: [kept("v", answer(0)), {**kept("i", ints), "expected": ints}],
            ids["both"]: [kept("both", answer(9))],
        },
        {**dict.fromkeys(ids.values(), "passed"), ids["a_fails"]: "failed", ids["both"]: "failed"},
    )
    b = _judged(
        tmp_path,
        "b",
        {
            ids["near"]: [kept("near", answer(5))],
            ids["far"]: [kept("far", answer(30))],
            ids["a_fails"]: [kept("a_fails", answer(4), elementwise=False)],
            ids["integers"]: [kept("v", answer(0)), {**kept("i", ints.flip(0)), "expected": ints}],
            ids["both"]: [kept("both", answer(10))],
        },
        {
            **dict.fromkeys(ids.values(), "failed"),
            ids["a_fails"]: "passed",
        },
    )
    found = differential(a, b)
    by_id = {c.id: c for c in found.cases}
    near, far, other = by_id[ids["near"]], by_id[ids["far"]], by_id[ids["a_fails"]]
    assert near.peer_ratio is not None and near.peer_ratio <= 1.0
    assert near.peer_verdict.startswith("B within the peer rule of A (")
    assert far.peer_ratio is not None and far.peer_ratio > 3.0
    assert far.peer_verdict.startswith("B beyond the peer rule of A (")
    assert other.peer_verdict.startswith("A within the peer rule of B (")
    assert by_id[ids["integers"]].peer_ratio == math.inf  # an integer answer must be exact
    assert by_id[ids["both"]].peer_ratio is None and by_id[ids["both"]].peer_verdict == ""
    s = found.summary
    assert (s.failed_in_one, s.within_peer_rule) == (4, 2)
    sentence = (
        "2 of the 4 cases that failed in one run only are within the peer rule of the other "
        "(at most 2x its error against float64 + 2 units of rounding)"
    )
    assert s.peer_sentence() == sentence
    # One wording in every view: the terminal's (accelkit diff), the Markdown's and the HTML's.
    proc = run_cli("diff", str(a), str(b), env={"COLUMNS": "200"})
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the index is beyond tolerance
    assert sentence in " ".join(proc.stdout.split())
    assert "B within the peer rule of A" in proc.stdout
    out = tmp_path / "differential.json"
    out.write_text(json.dumps(found.to_json_dict()))
    report = load_report([a, b, out])
    assert sentence in report_markdown(report)
    page = report_html(report)
    assert sentence in page and "B beyond the peer rule of A" in page


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_build_with_a_wrong_kernel_is_beyond_the_peer_rule_of_a_right_one(
    tmp_path: Path,
) -> None:
    """Two real runs of one OpInfo case, the second with exp 0.1% off (the fault-injection
    plugin): accelkit test records each answer with its float64 reference, and accelkit diff
    judges the failing build with the passing one as its peer: far beyond the rule."""
    faults = REPO / "tests" / "fixtures" / "faults"
    args = ["--device", "cpu", "--case", "conformance/opinfo/exp/float32", "--workers", "0"]
    runs = {}
    for name, env in (
        ("right", {}),
        (
            "wrong",
            {
                "PYTHONPATH": os.pathsep.join((str(faults), str(REPO))),
                "PYTEST_PLUGINS": "perturb_plugin",
                "ACCELKIT_FAULT_OP": "aten.exp.default",
                "ACCELKIT_FAULT_REL": "1e-3",
            },
        ),
    ):
        out = tmp_path / f"{name}.json"
        record = ["--json", str(out), "--record-outputs", str(tmp_path / name)]
        proc = run_cli("test", *args, *record, env=env, timeout=600)
        assert proc.returncode == (0 if name == "right" else 1), proc.stdout[-3000:]
        runs[name] = out
    proc = run_cli("diff", str(runs["right"]), str(runs["wrong"]), env={"COLUMNS": "200"})
    found = differential(runs["right"], runs["wrong"])
    (exp,) = [c for c in found.cases if c.id == "conformance/opinfo/exp/float32"]
    assert exp.status_a == "passed" and exp.status_b == "failed"
    assert exp.peer_ratio is not None and exp.peer_ratio > 100  # 1e-3 against ~1 ulp
    assert found.summary.failed_in_one >= 1 and found.summary.within_peer_rule == 0
    assert "B beyond the peer rule of A" in proc.stdout


def test_inputs_that_differ_make_a_case_not_comparable(tmp_path: Path) -> None:
    x = torch.ones(3)
    a = _run(tmp_path, "a", {"conformance/x/y": [("y", x)]}, {"conformance/x/y": "passed"}, "1")
    b = _run(tmp_path, "b", {"conformance/x/y": [("y", x)]}, {"conformance/x/y": "passed"}, "2")
    (found,) = differential(a, b).cases
    assert found.note.startswith("inputs differ: y") and found.max_abs is None


def test_runs_without_recorded_outputs_are_one_line_errors(tmp_path: Path) -> None:
    path = tmp_path / "plain.json"
    write_results(results([case("conformance/x/y")]), path)
    with pytest.raises(BadInput, match="recorded no outputs"):
        differential(path, path)
    assert_one_line_error(run_cli("diff", str(path), str(path)), 2, "recorded no outputs")
    assert_one_line_error(run_cli("diff", str(path), str(tmp_path / "no.json")), 2, "no such file")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema": "accelkit.differential/1", "a": 1}))
    assert_one_line_error(run_cli("report", str(path), str(bad)), 2, "invalid differential")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_torch_2_14_against_2_13_lists_the_cases_that_differ(
    tmp_path: Path, old_torch: object
) -> None:
    args = ["--device", "cpu", "--case", "conformance/linalg/lstsq", "--workers", "0"]
    runs = {}
    for name, path in (("new", []), ("old", [str(old_torch.site)])):  # type: ignore[attr-defined]
        pythonpath = os.pathsep.join([*path, str(REPO)])
        out = tmp_path / f"{name}.json"
        outputs = ["--json", str(out), "--record-outputs", str(tmp_path / name)]
        proc = run_cli("test", *args, *outputs, env={"PYTHONPATH": pythonpath}, timeout=900)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        runs[name] = out
    out = tmp_path / "differential.json"
    proc = run_cli("diff", str(runs["new"]), str(runs["old"]), "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr  # nothing beyond tolerance
    found = Differential.model_validate_json(out.read_text())
    assert found.a.torch == torch.__version__ and found.b.torch == "2.13.0+cpu"
    assert found.b.git == "cf30153c4c131c8164ee7798e5022d810682e2cb"
    # lstsq's answers differ between the releases (LAPACK underneath changed), all within
    # the cases' tolerance: measured here, 12 of 12 cases, up to 5.8e-3 absolute (an
    # ill-conditioned float32 system) and relative differences near 2 where an element of
    # the solution is close to 0 and changes sign.
    differing = [c for c in found.cases if c.max_abs]
    assert differing, found.cases
    assert all(c.id.startswith("conformance/linalg/lstsq/") for c in differing)
    assert all(c.status_a == c.status_b == "passed" for c in differing)
    assert found.summary.beyond_tolerance == 0
    s = found.summary
    assert s.compared == s.identical + s.differ + s.not_comparable == 12
    assert "cases compared" in proc.stdout


LSTSQ = ["--device", "cpu", "--case", "conformance/linalg/lstsq", "--workers", "0"]


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.timeout(IMAGE_TESTS_TIMEOUT_S)
def test_the_host_against_a_2_13_image_lists_the_cases_that_differ(
    tmp_path: Path, cpu_test_image: CpuTestImage
) -> None:
    """torch 2.14.1 on the host against the same cases in a test image with torch 2.13.0:
    the image's answers come back through the mounted --record-outputs folder."""
    sides = {"host": [], "image": ["--image", cpu_test_image.image]}
    runs = {}
    for name, where in sides.items():
        out = tmp_path / f"{name}.json"
        outputs = ["--json", str(out), "--record-outputs", str(tmp_path / name)]
        proc = run_cli("test", *LSTSQ, *where, *outputs, timeout=900)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        runs[name] = out
    out = tmp_path / "differential.json"
    proc = run_cli("diff", str(runs["host"]), str(runs["image"]), "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = Differential.model_validate_json(out.read_text())
    assert found.a.torch == torch.__version__ and found.b.torch == "2.13.0+cpu"
    differing = [c for c in found.cases if c.max_abs]
    assert differing and all(c.id.startswith("conformance/linalg/lstsq/") for c in differing)
    assert found.summary.compared == 12 and found.summary.beyond_tolerance == 0
