"""The design's structural rules, checked on the source (docs/design.md, "Layout"):

- no import cycle between accelkit's modules, counting imports inside functions too;
- nothing outside accelkit/backends/ branches on a backend's name or device type;
- the rooms of accelkit/suite/ import each other one way only (`SUITE_ROOMS`);
- the code that runs inside containers (accelkit/incontainer/) imports only the standard
  library and itself, and runs under `python -I` with nothing else installed;
- results/ imports nothing from suite/;
- no module of accelkit/ imports, or reads as an attribute of an imported accelkit module,
  another module's private (underscore) name, and an underscored module is imported only
  inside its own package: what two modules share is public, in the module that owns it
  (the results views: results/render/); a package's `__init__` re-exports public names only;
- the OpInfo verdict's listed exceptions (`opinfo/exceptions.py`, docs/design.md "Listed
  exceptions") are at most MAX_LISTED_EXCEPTIONS, each with its measured error, the backend
  it was measured on and its reason.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import REPO

PACKAGE = REPO / "accelkit"
#: The rooms of accelkit/suite/ (a subpackage, or a top-level module) and the other rooms
#: each may import; each subpackage's docstring says why. The case rooms (conformance/,
#: perf/) are pytest case folders that may import any room; nothing imports them back.
SUITE_ROOMS: dict[str, frozenset[str]] = {
    "expectations": frozenset(),
    "session": frozenset({"expectations"}),
    "distributed": frozenset({"session"}),
    "numerics": frozenset({"session"}),
    "opinfo": frozenset({"numerics", "session", "expectations"}),
    "zoo": frozenset({"numerics"}),
    "crosscompile": frozenset({"zoo"}),
    "run": frozenset({"session", "distributed", "crosscompile", "expectations"}),
}
CASE_ROOMS = frozenset({"conformance", "perf"})
BACKEND_WORDS = frozenset({"cpu", "cuda", "rocm", "xpu", "mps", "hip"})
#: Mentions that are data, not branches: (file, what the finder reports) and why.
NOT_BRANCHES = {
    ("accelkit/probe/fingerprint.py", "a mapping keyed by 'cpu'"): "the host CPU's section",
}


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> Iterator[str]:
    """The accelkit modules `name` imports, at any depth of its code."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            # `from pkg import mod` imports the module pkg.mod when there is one.
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                for alias in node.names
            ]
        else:
            continue
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name:
                yield target


def _graph() -> dict[str, set[str]]:
    return {name: set(_imports(name, path)) for name, path in MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                item = stack.pop()
                on_stack.discard(item)
                component.append(item)
                if item == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycles() -> None:
    assert _cycles(_graph()) == []


def test_the_cycle_finder_finds_a_planted_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _backend_branches(path: Path) -> Iterator[tuple[int, str]]:
    """Places that compare with, test membership in, or key a mapping by a backend name."""
    tree = ast.parse(path.read_text(encoding="utf-8"))

    def named(node: ast.AST) -> str | None:
        if isinstance(node, ast.Constant) and node.value in BACKEND_WORDS:
            return str(node.value)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            for element in node.elts:
                if (word := named(element)) is not None:
                    return word
        return None

    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                if (word := named(operand)) is not None:
                    yield node.lineno, f"compares with {word!r}"
        elif isinstance(node, ast.Dict):
            for key in node.keys:
                if key is not None and (word := named(key)) is not None:
                    yield node.lineno, f"a mapping keyed by {word!r}"
        elif isinstance(node, ast.MatchValue) and (word := named(node.value)) is not None:
            yield node.lineno, f"matches {word!r}"


def test_nothing_outside_backends_branches_on_a_backend() -> None:
    found = [
        f"{path.relative_to(REPO)}:{line}: {what}"
        for name, path in MODULES.items()
        if not name.startswith("accelkit.backends")
        for line, what in _backend_branches(path)
        if (path.relative_to(REPO).as_posix(), what) not in NOT_BRANCHES
    ]
    assert found == []


def test_the_branch_finder_finds_planted_branches(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(
        "if device == 'cuda': pass\n"
        "if kind in ('xpu', 'other'): pass\n"
        "TABLE = {'rocm': 1}\n"
        "match d:\n    case 'mps': pass\n"
    )
    assert [line for line, _ in _backend_branches(planted)] == [1, 2, 3, 5]


def _suite_room(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if parts[:2] == ["accelkit", "suite"] and len(parts) > 2 else None


def _room_violations(graph: dict[str, set[str]]) -> list[str]:
    """Imports between suite rooms that `SUITE_ROOMS` does not allow."""
    found = []
    for module, targets in sorted(graph.items()):
        room = _suite_room(module)
        if room is None or room in CASE_ROOMS:
            continue
        for target in sorted(targets):
            other = _suite_room(target)
            if other is None or other == room:
                continue
            if other not in SUITE_ROOMS.get(room, frozenset()):
                found.append(f"{module} -> {target}")
    return found


def test_every_suite_room_is_listed() -> None:
    rooms = {_suite_room(name) for name in MODULES} - {None}
    assert rooms == set(SUITE_ROOMS) | CASE_ROOMS


def test_suite_rooms_import_one_way() -> None:
    assert _room_violations(_graph()) == []


def test_the_room_check_finds_planted_violations() -> None:
    planted = {
        "accelkit.suite.session.plugin": {"accelkit.suite.run.runner"},
        "accelkit.suite.numerics.reference": {"accelkit.suite.opinfo.running"},
        "accelkit.suite.run.runner": {"accelkit.suite.session.plugin"},
        "accelkit.suite.perf.harness": {"accelkit.suite.run.request"},
    }
    assert _room_violations(planted) == [
        "accelkit.suite.numerics.reference -> accelkit.suite.opinfo.running",
        "accelkit.suite.session.plugin -> accelkit.suite.run.runner",
    ]


def test_incontainer_imports_only_the_standard_library_and_itself() -> None:
    stdlib = set(sys.stdlib_module_names)
    for name, path in MODULES.items():
        if not name.startswith("accelkit.incontainer"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                tops = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                tops = [node.module or ""]
            else:
                continue
            for top in tops:
                allowed = top.split(".")[0] in stdlib or top == "__future__"
                allowed = allowed or top in ("accelkit", "accelkit.incontainer")
                allowed = allowed or top.startswith("accelkit.incontainer.")
                assert allowed, f"{path.relative_to(REPO)} imports {top}"


@pytest.mark.parametrize(
    "module",
    sorted(name for name in MODULES if name.startswith("accelkit.incontainer.")),
)
def test_incontainer_modules_import_in_isolated_mode(module: str, tmp_path: Path) -> None:
    """`python -I` (no site-packages, no user paths) with only accelkit/'s folder on the path:
    what the builder and the test-image build stage have."""
    code = f"import sys; sys.path.insert(0, {str(REPO)!r}); import {module}"
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


def test_results_import_nothing_from_suite() -> None:
    graph = _graph()
    bad = {
        name: sorted(t for t in targets if t.startswith("accelkit.suite"))
        for name, targets in graph.items()
        if name.startswith("accelkit.results")
    }
    assert {k: v for k, v in bad.items() if v} == {}


def _private_names(name: str, path: Path) -> Iterator[tuple[int, str]]:
    """Another accelkit module's private names that `name` reaches: `from m import _x`, or
    `m._x` (also `pkg.m._x`) where `m` or `pkg` was imported as a module; and an underscored
    module (`pkg._m`) imported from outside its package `pkg`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    modules: dict[str, str] = {}  # a local name -> the accelkit module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.partition(".")[0] != "accelkit":
                    continue
                yield from _private_module(name, node.lineno, alias.name)
                # `import accelkit.a.b` binds `accelkit`; `import accelkit.a.b as m` binds `m`.
                bound = alias.name if alias.asname else "accelkit"
                modules[alias.asname or "accelkit"] = bound
            continue
        if not isinstance(node, ast.ImportFrom):
            continue
        base = node.module or ""
        if node.level:
            anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join([*anchor, *([base] if base else [])])
        if base != "accelkit" and not base.startswith("accelkit."):
            continue
        yield from _private_module(name, node.lineno, base)
        for alias in node.names:
            if f"{base}.{alias.name}" in MODULES:
                modules[alias.asname or alias.name] = f"{base}.{alias.name}"
                yield from _private_module(name, node.lineno, f"{base}.{alias.name}")
            elif _private(alias.name) and base != name:
                yield node.lineno, f"{base}.{alias.name}"

    def module_of(node: ast.expr) -> str | None:
        """The accelkit module an expression names (`m`, `pkg.m`), if it names one."""
        if isinstance(node, ast.Name):
            return modules.get(node.id)
        if isinstance(node, ast.Attribute) and (owner := module_of(node.value)) is not None:
            dotted = f"{owner}.{node.attr}"
            return dotted if dotted in MODULES else None
        return None

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            owner = module_of(node.value)
            if owner is not None and owner != name and f"{owner}.{node.attr}" not in MODULES:
                yield node.lineno, f"{owner}.{node.attr}"


def _private_module(importer: str, line: int, module: str) -> Iterator[tuple[int, str]]:
    """`module` when it is, or lies in, an underscored module outside `importer`'s package."""
    parts = module.split(".")
    for depth, part in enumerate(parts):
        if _private(part):
            package = ".".join(parts[:depth])
            if not importer.startswith(f"{package}."):
                yield line, module
            return


def _private(attribute: str) -> bool:
    return attribute.startswith("_") and not attribute.startswith("__")


#: Reaches the check lets through for now: (file, the private name) and why. None today.
PRIVATE_EXCEPTIONS: dict[tuple[str, str], str] = {}


def _reaches() -> set[tuple[str, str]]:
    return {
        (path.relative_to(REPO).as_posix(), what)
        for name, path in MODULES.items()
        for _, what in _private_names(name, path)
    }


def test_no_module_reaches_another_modules_private_name() -> None:
    found = [
        f"{path.relative_to(REPO)}:{line}: {what}"
        for name, path in MODULES.items()
        for line, what in _private_names(name, path)
        if (path.relative_to(REPO).as_posix(), what) not in PRIVATE_EXCEPTIONS
    ]
    assert found == []


def test_every_listed_exception_is_still_a_reach() -> None:
    """An exception that no longer reaches is taken off the list."""
    assert set(PRIVATE_EXCEPTIONS) - _reaches() == set()


def test_the_private_name_finder_finds_planted_imports(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(
        "from accelkit.cli.compare import _print_table\n"
        "from accelkit.cli import console, _register\n"
        "from . import report\n"
        "import accelkit.results.io as results_io\n"
        "from accelkit.cli.console import make_console, __doc__\n"
        "def f():\n"
        "    console._hidden()\n"
        "    results_io._atomic\n"
        "    report._print_summary\n"
        "    console.make_console()\n"
        "    _own()\n"
        "import accelkit.suite.run.runner\n"
        "accelkit.suite.run.runner._keep\n"
        "from accelkit.suite import run\n"
        "run.runner._run_pytest\n"
        "from accelkit.backends._tools import tool_output\n"
        "from accelkit.backends import _tools\n"
        "accelkit.__version__\n"
        "from .planted import _mine\n"
    )
    found = sorted(_private_names("accelkit.cli.planted", planted))
    assert found == [
        (1, "accelkit.cli.compare._print_table"),
        (2, "accelkit.cli._register"),
        (7, "accelkit.cli.console._hidden"),
        (8, "accelkit.results.io._atomic"),
        (9, "accelkit.cli.report._print_summary"),
        (13, "accelkit.suite.run.runner._keep"),
        (15, "accelkit.suite.run.runner._run_pytest"),
        (16, "accelkit.backends._tools"),
        (17, "accelkit.backends._tools"),
    ]


def test_the_private_name_finder_lets_a_package_use_its_own(tmp_path: Path) -> None:
    """A backend imports the backends' underscored modules; a package's `__init__` may
    re-export a public name of its module, not a private one."""
    backend = tmp_path / "backend.py"
    backend.write_text(
        "from accelkit.backends._tools import tool_output\n"
        "from accelkit.backends import _tools\n"
        "_tools.tool_output\n"
    )
    assert list(_private_names("accelkit.backends.planted", backend)) == []
    init = tmp_path / "__init__.py"
    init.write_text("from .runner import run_suite, _keep\nfrom . import runner\nrunner._x\n")
    assert sorted(_private_names("accelkit.suite.run", init)) == [
        (1, "accelkit.suite.run.runner._keep"),
        (3, "accelkit.suite.run.runner._x"),
    ]


#: The cap on the OpInfo verdict's listed exceptions (issue 45): a widening the model does not
#: derive is the exception, and a new one replaces an old one rather than growing the list.
MAX_LISTED_EXCEPTIONS = 20


def test_listed_exceptions_are_few_and_each_says_what_was_measured_where_and_why() -> None:
    from accelkit.suite.opinfo.exceptions import EXCEPTIONS

    assert len(EXCEPTIONS) <= MAX_LISTED_EXCEPTIONS
    for entry in EXCEPTIONS:
        assert entry.measured.strip(), entry.key
        assert entry.backend in BACKEND_WORDS, entry.key
        assert entry.reason.strip(), entry.key
