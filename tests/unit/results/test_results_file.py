"""Results file: model, published schema, atomic writer, JUnit, case ids."""

from __future__ import annotations

import ast
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from accelkit.errors import BadInput
from accelkit.results.io import load_results, write_results
from accelkit.results.junit import junit_xml
from accelkit.results.model import Metric, Results, Summary, json_schema
from accelkit.results.writer import ResultsWriter, now_iso
from accelkit.suite.session.caseid import case_id, suite_of
from tests.factories import case, grouped_metric, metric, results
from tests.helpers import REPO

SCHEMA_FILE = REPO / "accelkit" / "results" / "schema.json"


def _header() -> Results:
    return results(started=now_iso(), suites=["conformance"], argv=[])


def test_published_schema_matches_the_model() -> None:
    # Regenerate with: python -m accelkit.results.model > accelkit/results/schema.json
    assert json.loads(SCHEMA_FILE.read_text()) == json.loads(json.dumps(json_schema()))


def test_writer_keeps_a_valid_file_after_every_case(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    writer = ResultsWriter(path, _header())
    writer.write()
    assert load_results(path).cases == []
    statuses = ["passed", "failed", "skipped", "error", "crashed", "timeout"]
    for i, status in enumerate(statuses):
        writer.add(case(f"conformance/x/{i}", status))
        loaded = load_results(path)
        assert [c.status for c in loaded.cases] == statuses[: i + 1]
        assert loaded.run.finished is None
    final = writer.finish()
    assert load_results(path).run.finished == final.run.finished
    assert final.summary == Summary(passed=1, failed=1, skipped=1, error=1, crashed=1, timeout=1)
    assert not [p for p in tmp_path.iterdir() if p.name != "r.json"]  # no temp files left


def test_throttled_writer_never_holds_back_failures(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    writer = ResultsWriter(path, _header(), min_interval_s=3600)
    writer.write()
    writer.add(case("a", suite="conformance"))
    assert load_results(path).cases == []  # held back
    writer.add(case("b", "failed", suite="conformance"))
    assert [c.id for c in load_results(path).cases] == ["a", "b"]


def test_write_results_round_trips_and_leaves_no_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text("an older file", encoding="utf-8")
    written = results(
        [case("perf/gemm", metrics={"latency": grouped_metric(1e-3, passes=2, per_pass=3)})],
        finished=now_iso(),
    )
    write_results(written, path)
    assert load_results(path) == written
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_results_package_imports_nothing_from_suite() -> None:
    # results/ reads and renders files any run wrote; the suite depends on it, not the
    # other way round.
    package = SCHEMA_FILE.parent
    offenders: list[str] = []
    for module in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            offenders += [
                f"{module.relative_to(package)}:{node.lineno}: {name}"
                for name in names
                if name == "accelkit.suite" or name.startswith("accelkit.suite.")
            ]
    assert offenders == []


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("{not json", "not valid JSON"),
        ('{"schema": "accelkit.results/9"}', "unknown schema"),
        ("[]", "not an accelkit results file"),
        ('{"schema": "accelkit.results/1", "run": {}}', "invalid results file"),
    ],
)
def test_load_results_rejects_bad_files_in_one_line(
    tmp_path: Path, content: str, needle: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(BadInput) as info:
        load_results(path)
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_junit_maps_statuses() -> None:
    run = results(
        [
            case("conformance/a/ok"),
            case("conformance/a/bad", "failed", message="x\ny"),
            case("conformance/a/boom", "crashed", message="died"),
            case("conformance/a/slow", "timeout", message="t"),
            case("conformance/a/no", "skipped", message="why"),
            case(
                "perf/gemm",
                metrics={"tflops": metric(1.5, unit="TFLOP/s", higher_is_better=True)},
            ),
        ]
    )
    root = ET.fromstring(junit_xml(run))
    counts = [root.get(name) for name in ("tests", "failures", "errors", "skipped")]
    assert counts == ["6", "1", "2", "1"]
    failure = root.find(".//testcase[@name='bad']/failure")
    assert failure is not None and failure.get("message") == "x" and failure.text == "x\ny"
    crashed = root.find(".//testcase[@name='boom']/error")
    assert crashed is not None and crashed.get("type") == "crashed"
    prop = root.find(".//testcase[@name='gemm']/properties/property")
    assert prop is not None and prop.get("value") == "1.5 TFLOP/s"


@pytest.mark.parametrize(
    ("nodeid", "expected"),
    [
        ("conformance/test_ops.py::test_ops[add/float32]", "conformance/ops/add/float32"),
        (
            "conformance/test_control_flow.py::test_switch[eager]",
            "conformance/control_flow/switch/eager",
        ),
        ("perf/test_gemm.py::test_gemm", "perf/gemm"),
        ("perf/test_gemm.py::test_bf16[4096]", "perf/gemm/bf16/4096"),
    ],
)
def test_case_ids(nodeid: str, expected: str) -> None:
    assert case_id(nodeid) == expected
    assert suite_of(nodeid) == expected.split("/")[0]


def test_a_metric_says_how_it_was_measured_and_old_files_still_load() -> None:
    """`Metric.method` is optional: a file written before it loads with None."""
    old = Metric.model_validate({"value": 1e-3, "unit": "s", "higher_is_better": False})
    assert old.method is None
    method = {
        "timer": "perf_counter",
        "threads": 1,
        "cache": "rotated",
        "input_sets": 8,
        "input_bytes": 4456448,
    }
    new = Metric.model_validate({**old.model_dump(exclude={"method"}), "method": method})
    assert new.method is not None and new.method.model_dump() == method
    assert Metric.model_validate_json(new.model_dump_json()) == new
    with pytest.raises(ValueError, match="cache"):
        Metric.model_validate({**old.model_dump(), "method": {**method, "cache": "lukewarm"}})
