"""accelkit.matrix.verdict: the checks and files around a night's verdict (`matrix compare`,
`matrix record`, `matrix run --baseline`). The verdict rule itself is tested in
tests/unit/results/; the commands in tests/integration/test_matrix_compare.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelkit.errors import BadInput
from accelkit.matrix.verdict import (
    check_compare_options,
    load_baseline_run,
    load_verdict,
    present_baseline,
)


def test_an_absent_or_empty_baseline_is_no_baseline(tmp_path: Path) -> None:
    assert present_baseline(None) is None
    assert present_baseline(tmp_path / "absent") is None
    assert present_baseline(tmp_path) is None
    (tmp_path / "leg").mkdir()
    assert present_baseline(tmp_path) == tmp_path


def test_the_baseline_run_is_one_object_or_none(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    for text in ("{}", "null"):
        path.write_text(text)
        assert load_baseline_run(path) is None
    path.write_text('{"databaseId": 7}')
    assert load_baseline_run(path) == {"databaseId": 7}
    path.write_text("[1]")
    with pytest.raises(BadInput, match=r"expected one run object of gh run list --json$"):
        load_baseline_run(path)
    with pytest.raises(BadInput, match=r"^--baseline-run .*absent.json: "):
        load_baseline_run(tmp_path / "absent.json")


def test_a_verdict_to_record_is_a_json_object(tmp_path: Path) -> None:
    path = tmp_path / "verdict.json"
    path.write_text('{"legs": []}')
    assert load_verdict(path) == {"legs": []}
    path.write_text("[]")
    with pytest.raises(BadInput, match=r"not the JSON of accelkit matrix compare --json$"):
        load_verdict(path)
    path.write_text("{")
    with pytest.raises(BadInput, match=r"^--verdict "):
        load_verdict(path)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"results": Path("/nonexistent")}, r"^--results /nonexistent: not a directory$"),
        ({"threshold": 1.0}, r"^--threshold 1.0: must be between 0 and 1"),
        ({"max_age_hours": 0.0}, r"^--max-baseline-age 0: must be more than 0 hours$"),
    ],
)
def test_compare_options_are_checked_in_one_line(
    tmp_path: Path, changes: dict[str, object], message: str
) -> None:
    values: dict[str, object] = {
        "results": tmp_path,
        "baseline": None,
        "max_age_hours": 48.0,
        "threshold": 0.03,
        "markdown": None,
        **changes,
    }
    results = values.pop("results")
    with pytest.raises(BadInput, match=message):
        check_compare_options(results, **values)  # type: ignore[arg-type]


def test_a_baseline_that_is_a_file_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "file"
    file.write_text("x")
    with pytest.raises(BadInput, match=r"^--baseline .*file: not a directory$"):
        check_compare_options(tmp_path, file, max_age_hours=48.0, threshold=0.03, markdown=None)
