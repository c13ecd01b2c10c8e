"""Known-failure lists per backend."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelkit.errors import ConfigError
from accelkit.suite.expectations import BREADTHS, BUNDLED, load_expectations


def test_bundled_lists_load_for_every_backend() -> None:
    from accelkit import backends

    for name in backends.names():
        assert (BUNDLED / f"{name}.yaml").exists(), name
        load_expectations(name)


def test_a_valid_list(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("- id: conformance/opinfo/add/float16\n  reason: slow path rounds\n")
    known = load_expectations("xpu", path)
    assert known["conformance/opinfo/add/float16"].reason == "slow path rounds"


@pytest.mark.parametrize(
    ("text", "needle", "line"),
    [
        ("- id: conformance/opinfo/*\n  reason: r\n", "no wildcards", 1),
        ("- id: conformance\n  reason: r\n", "must name one case", 1),
        ("- id: conformance/a/b\n  reasn: r\n", "did you mean 'reason'", 2),
        ("- id: conformance/a/b\n", "entry without reason", 1),
        ("- id: conformance/a/b\n  reason: r\n- id: conformance/a/b\n  reason: r\n", "twice", 3),
        ("- id: conformance/a/b\n  reason: r\n  link: javascript:x\n", "https://", 1),
        ("id: conformance/a/b\n", "expected a list", 1),
        ("- [unclosed\n", "not valid YAML", 2),
    ],
)
def test_bad_lists_name_file_and_line(tmp_path: Path, text: str, needle: str, line: int) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_expectations("cpu", path)
    assert needle in str(info.value)
    assert str(info.value).startswith(f"{path}:{line}: ")


FULL_ONLY = (
    "- id: conformance/opinfo/add/bfloat16\n"
    "  reason: a sample only the full breadth runs\n"
    "  breadth: full\n"
    "- id: conformance/opinfo/exp/float32\n"
    "  reason: every breadth\n"
)


def test_a_full_only_entry_applies_to_full_runs_only(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text(FULL_ONLY)
    quick = load_expectations("cpu", path, "quick")
    assert set(quick) == {"conformance/opinfo/exp/float32"}  # no unexpected pass at quick
    full = load_expectations("cpu", path, "full")
    assert set(full) == {"conformance/opinfo/add/bfloat16", "conformance/opinfo/exp/float32"}
    assert full["conformance/opinfo/add/bfloat16"].breadth == "full"
    assert full["conformance/opinfo/exp/float32"].breadth is None
    assert set(load_expectations("cpu", path)) == set(full)  # no breadth: every entry


@pytest.mark.parametrize("value", ["fast", "'Full'", "''"])
def test_a_bad_breadth_is_one_line_naming_file_line_and_entry(tmp_path: Path, value: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "- id: conformance/a/b\n  reason: r\n"
        f"- id: conformance/opinfo/add/bfloat16\n  reason: r\n  breadth: {value}\n"
    )
    with pytest.raises(ConfigError) as info:
        load_expectations("cpu", path, "quick")  # validated even where it would not apply
    message = str(info.value)
    assert message.startswith(f"{path}:3: conformance/opinfo/add/bfloat16: breadth ")
    assert "must be one of quick, full" in message
    assert "\n" not in message


def test_breadths_are_the_runs_breadths() -> None:
    from typing import get_args

    from accelkit.suite.run.request import Breadth

    assert get_args(Breadth) == BREADTHS


def test_bundled_cpu_list_has_full_only_entries_for_samples_quick_does_not_run() -> None:
    full_only = {k for k, v in load_expectations("cpu").items() if v.breadth == "full"}
    assert "conformance/opinfo/add/bfloat16" in full_only
    assert full_only.isdisjoint(load_expectations("cpu", breadth="quick"))
