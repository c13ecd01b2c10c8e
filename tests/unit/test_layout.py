"""The tests mirror the package (docs/design.md, "Testing accelkit itself").

- unit tests live in tests/unit/<package>/test_<module>.py, where tests/unit/<package>/ is a
  package of accelkit (tests/unit/suite/opinfo/ for accelkit/suite/opinfo/), and rules about
  the whole package (architecture, layout, requests) directly in tests/unit/;
- end-to-end tests of a command, and flows across commands, live in tests/integration/;
- no test file sits anywhere else (tests/fixtures/ holds cases that accelkit itself runs);
- every test folder is a Python package, so two test files may share a name
  (tests/unit/results/test_compare.py and tests/integration/test_compare.py);
- no test module imports another: what several share lives at tests/ top level
  (tests/factories.py for results objects and files, tests/matrices.py, tests/helpers.py, ...);
- no unit test runs the CLI (`run_cli`, or `python -m accelkit` in a subprocess): a test that
  does belongs in tests/integration/test_<command>.py.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Callable
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


def _python_files(root: Path) -> list[Path]:
    files = root.rglob("*.py")
    return sorted(p for p in files if not any(d in p.parents for d in NOT_TESTS))


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


# ---- no test module imports another --------------------------------------------------------

TEST_PACKAGES = ("tests.unit", "tests.integration")


def _imported_test_modules(source: str) -> list[tuple[int, str]]:
    """(line, module) for each import of a module of tests/unit or tests/integration
    (relative imports too: in those folders they can only name another test module)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            names = [module] if node.level == 0 else ["." * node.level + module]
            if node.level == 0 and module == "tests":
                names = [f"tests.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name.startswith(".") or any(
                name == package or name.startswith(package + ".") for package in TEST_PACKAGES
            ):
                found.append((node.lineno, name))
    return found


def _offences(root: Path, find: Callable[[str], list[tuple[int, str]]]) -> list[str]:
    """`path:line: what` for each place `find` finds in the Python files under `root`."""
    return [
        f"{path.relative_to(REPO)}:{line}: {what}"
        for path in _python_files(root)
        for line, what in find(path.read_text(encoding="utf-8"))
    ]


def test_no_test_module_imports_another() -> None:
    offences = _offences(TESTS, _imported_test_modules)
    assert offences == [], (
        "a test module imports another; move what they share into a helper module at tests/ "
        "top level (results objects and files: tests/factories.py; matrix texts: "
        f"tests/matrices.py; the rest: tests/helpers.py): {offences}"
    )


# ---- no unit test runs the CLI ---------------------------------------------------------------


def _constant(node: ast.expr) -> object:
    return node.value if isinstance(node, ast.Constant) else None


def _cli_runs(source: str) -> list[tuple[int, str]]:
    """(line, what) for each place that runs the CLI: `run_cli` (called, passed on or
    imported), or an argv literal holding "-m", "accelkit"."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and any(a.name == "run_cli" for a in node.names):
            found.append((node.lineno, "imports run_cli"))
        elif getattr(node, "id", None) == "run_cli" or getattr(node, "attr", None) == "run_cli":
            found.append((node.lineno, "run_cli"))
        elif isinstance(node, (ast.List, ast.Tuple)):
            values = [_constant(element) for element in node.elts]
            if any(a == "-m" and b == "accelkit" for a, b in itertools.pairwise(values)):
                found.append((node.lineno, "python -m accelkit"))
    return sorted(set(found))


def test_the_cli_check_sees_each_way_of_running_the_cli() -> None:
    # A guard against a rule that checks nothing, and against one that flags data.
    source = (
        "from tests.helpers import run_cli\n"
        "proc = run_cli('merge', 'a.json')\n"
        "helpers.run_cli('test')\n"
        "subprocess.run([sys.executable, '-m', 'accelkit', 'bisect'])\n"
        "argv = ('accelkit', 'test', '--device', 'cpu')\n"
        "inner = [sys.executable, '-m', 'accelkit.incontainer']\n"
    )
    assert [line for line, _ in _cli_runs(source)] == [1, 2, 3, 4]
    assert _imported_test_modules(
        "from tests.unit.results.test_compare import perf_run\n"
        "import tests.integration.test_matrix\n"
        "from tests import unit\n"
        "from .test_bisect import CASE\n"
        "from tests.factories import case\n"
        "from tests import helpers\n"
    ) == [
        (1, "tests.unit.results.test_compare"),
        (2, "tests.integration.test_matrix"),
        (3, "tests.unit"),
        (4, ".test_bisect"),
    ]


def test_no_unit_test_runs_the_cli() -> None:
    offences = _offences(UNIT, _cli_runs)
    assert offences == [], (
        "a unit test runs the CLI; a test that runs `accelkit <command>` belongs in "
        "tests/integration/test_<command>.py (`accelkit test`: test_test_<topic>.py), and the "
        f"unit file keeps the tests of the module's own functions: {offences}"
    )
