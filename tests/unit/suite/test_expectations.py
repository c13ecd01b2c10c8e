"""Known-failure lists per backend."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelkit.errors import ConfigError
from accelkit.suite.expectations import BUNDLED, load_expectations


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
