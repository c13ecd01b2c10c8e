"""The tests mirror the package (docs/design.md, "Testing accelkit itself").

- unit tests live in tests/unit/<package>/test_<module>.py, where tests/unit/<package>/ is a
  package of accelkit (tests/unit/suite/opinfo/ for accelkit/suite/opinfo/), and rules about
  the whole package (architecture, layout, requests) directly in tests/unit/;
- end-to-end tests of a command, and flows across commands, live in tests/integration/;
- no test file sits anywhere else (tests/fixtures/ holds cases that accelkit itself runs);
- every test folder is a Python package, so two test files may share a name
  (tests/unit/results/test_compare.py and tests/integration/test_compare.py).
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers import REPO

TESTS = REPO / "tests"
UNIT = TESTS / "unit"
INTEGRATION = TESTS / "integration"
PACKAGE = REPO / "accelkit"
#: Data, not tests of accelkit: the fixture cases are run by accelkit's own suite runner.
NOT_TESTS = (TESTS / "fixtures", TESTS / "tools")


def _folders(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_dir() and p.name != "__pycache__")


def _test_files() -> list[Path]:
    files = TESTS.rglob("test_*.py")
    return sorted(p for p in files if not any(d in p.parents for d in NOT_TESTS))


def test_no_test_file_outside_unit_and_integration() -> None:
    stray = [
        str(p.relative_to(REPO))
        for p in _test_files()
        if UNIT not in p.parents and INTEGRATION not in p.parents
    ]
    assert stray == [], f"move these into tests/unit/<package>/ or tests/integration/: {stray}"


def test_every_unit_folder_names_an_accelkit_package() -> None:
    unknown = [
        str(folder.relative_to(REPO))
        for folder in _folders(UNIT)
        if not (PACKAGE / folder.relative_to(UNIT) / "__init__.py").is_file()
    ]
    assert unknown == [], f"no accelkit package of that name: {unknown}"


def test_integration_tests_are_one_flat_folder() -> None:
    assert _folders(INTEGRATION) == [], "tests/integration/ holds test files only"


def test_every_test_folder_is_a_package() -> None:
    folders = [UNIT, INTEGRATION, *_folders(UNIT)]
    missing = [str(f.relative_to(REPO)) for f in folders if not (f / "__init__.py").is_file()]
    assert missing == [], f"add __init__.py to {missing}"


def test_the_rules_see_the_tests() -> None:
    # A guard against a rule that checks nothing: the tree has files on both sides.
    files = _test_files()
    assert any(UNIT in p.parents for p in files)
    assert any(INTEGRATION in p.parents for p in files)
    assert Path(__file__).resolve() in [p.resolve() for p in files]
