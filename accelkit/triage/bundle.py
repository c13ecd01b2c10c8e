"""One Python file that runs a case with nothing but torch: accelkit's own modules, embedded.

A reproducer must fail exactly as the case failed, so it runs the case's own code (the
OpInfo sample checks, the case function, the comparison with the float64 reference and its
tolerance), not a rewrite of it that could drift. `render_script` writes that code into
the file as source text, with `accelkit.triage.embedded` as its import hook, after a short
readable head: what failed, how to run it, and the case's record (`CASE`).

Only modules whose imports are closed can be embedded: `check_closed` refuses a set of
modules in which one imports, at module level, an accelkit module that is not in the set
(imports inside functions may stay open: the embedded finder makes them fail loudly if a
reproducer ever reaches one). For example, the modules of an OpInfo case are
`accelkit.suite.session.failures`, `accelkit.suite.numerics.reference`, the `accelkit.suite.opinfo`
package
and `accelkit.triage.replay_main`.
"""

from __future__ import annotations

import ast
import pprint
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelkit.errors import BadInput

ACCELKIT_ROOT = Path(__file__).resolve().parent.parent
"""The `accelkit` package folder whose sources are embedded."""

_FUTURE = "from __future__ import annotations"


@dataclass(frozen=True)
class Embedded:
    """A module to embed: its name, the path tracebacks show, its source, and whether it
    is a package (its source is the package's __init__)."""

    name: str
    path: str
    source: str
    package: bool = False


def accelkit_module(name: str) -> Embedded:
    """The source of accelkit module `name` (a package gives its __init__.py)."""
    parts = name.split(".")
    if parts[0] != "accelkit":
        raise ValueError(f"{name}: not an accelkit module")
    base = ACCELKIT_ROOT.joinpath(*parts[1:])
    if (base / "__init__.py").is_file():
        path, package = base / "__init__.py", True
    elif base.with_suffix(".py").is_file():
        path, package = base.with_suffix(".py"), False
    else:
        raise ValueError(f"{name}: no such module in {ACCELKIT_ROOT}")
    shown = path.relative_to(ACCELKIT_ROOT.parent).as_posix()
    return Embedded(name, shown, path.read_text(encoding="utf-8"), package)


def accelkit_package(name: str) -> list[Embedded]:
    """A package and every module in it (not its subpackages)."""
    package = accelkit_module(name)
    if not package.package:
        raise ValueError(f"{name}: not a package")
    folder = ACCELKIT_ROOT.joinpath(*name.split(".")[1:])
    modules = [
        accelkit_module(f"{name}.{path.stem}")
        for path in sorted(folder.glob("*.py"))
        if path.name != "__init__.py"
    ]
    return [package, *modules]


def file_module(name: str, path: Path, shown: str) -> Embedded:
    return Embedded(name, shown, path.read_text(encoding="utf-8"))


def module_imports(module: Embedded, *, top_level_only: bool) -> set[str]:
    """The absolute module names `module` imports (at module level only, if asked),
    leaving out imports under `if TYPE_CHECKING:`."""
    tree = ast.parse(module.source)
    found: set[str] = set()

    def visit(nodes: Iterable[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module)
                found.update(f"{node.module}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.If):
                test = node.test
                if isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
                    visit(node.orelse)
                    continue
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, (ast.Try, ast.With)):
                visit(node.body)
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)
                visit(getattr(node, "orelse", []))
                visit(getattr(node, "finalbody", []))
            elif not top_level_only and isinstance(
                node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
            ):
                visit(node.body)

    visit(tree.body)
    return found


def check_closed(modules: Sequence[Embedded], *, roots: Iterable[str] = ("accelkit",)) -> None:
    """BadInput naming the first module-level import of an accelkit module (or of another
    embedded root such as `pytest`'s stand-in) that `modules` do not hold."""
    names = {m.name for m in modules}
    packages = {".".join(n.split(".")[:end]) for n in names for end in range(1, n.count(".") + 1)}
    root_names = set(roots)
    for module in modules:
        # Deepest first: `from accelkit.a import b` names the module a.b before its package.
        for imported in sorted(
            module_imports(module, top_level_only=True), key=lambda n: (-n.count("."), n)
        ):
            if imported.split(".")[0] not in root_names:
                continue
            if imported in names or imported in packages:
                continue
            parent = imported.rpartition(".")[0]
            if parent in names:  # `from accelkit.x import name`: a name, not a module
                continue
            raise BadInput(
                f"{module.path} imports {imported}, which a standalone reproducer cannot "
                "carry (it needs more of accelkit than the case's own code)"
            )


def _source_literal(source: str) -> str:
    """A Python expression for `source`: one string literal per line, so the embedded code
    stays readable (and diffable) in the reproducer."""
    lines = source.splitlines(keepends=True)
    if not lines:
        return '""'
    return "(\n" + "".join(f"        {line!r}\n" for line in lines) + "    )"


def render_script(
    *,
    docstring: str,
    case: Mapping[str, Any],
    modules: Sequence[Embedded],
    entry: str,
    environ: Mapping[str, str] | None = None,
) -> str:
    """The reproducer: `docstring`, `CASE`, the import hook, the embedded `modules`, and a
    main that calls `entry` ("module:function") with CASE and exits with its status;
    `environ`: variables it sets as it starts, before torch (and numpy) load."""
    module_name, _, function = entry.partition(":")
    if module_name not in {m.name for m in modules}:
        raise ValueError(f"{entry}: its module is not embedded")
    check_closed(modules, roots={m.name.split(".")[0] for m in modules})
    hook = accelkit_module("accelkit.triage.embedded").source
    hook_body = _strip_docstring(hook)
    sources = ",\n".join(
        f"    {m.name!r}: (\n        {m.path!r},\n    {_source_literal(m.source)}\n    )"
        for m in modules
    )
    packages = sorted(m.name for m in modules if m.package)
    quoted = docstring.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    return (
        "#!/usr/bin/env python3\n"
        f'"""{quoted}"""\n\n'
        f"{_FUTURE}\n\n"
        "import sys\n\n"
        f"{_environ_lines(environ)}"
        "# The case as the results file recorded it (accelkit's results schema, `Case.repro`).\n"
        f"CASE = {pprint.pformat(dict(case), width=96, sort_dicts=False)}\n\n\n"
        "def main() -> int:\n"
        "    install(EMBEDDED, PACKAGES)\n"
        f"    from {module_name} import {function}\n\n"
        f"    return {function}(CASE)\n\n\n"
        "# ------------------------------------------------------------------------------------\n"
        "# The import hook (accelkit/triage/embedded.py) and the accelkit code this case runs,\n"
        "# embedded so that this file needs nothing but torch.\n\n"
        f"{hook_body}\n\n"
        f"PACKAGES = {packages!r}\n"
        f"EMBEDDED = {{\n{sources},\n}}\n\n"
        'if __name__ == "__main__":\n'
        "    sys.exit(main())\n"
    )


def _environ_lines(environ: Mapping[str, str] | None) -> str:
    if not environ:
        return ""
    return (
        "# The environment the run gave the case, set before torch and numpy load.\n"
        "import os\n\n"
        f"os.environ.update({dict(environ)!r})\n\n"
    )


def _strip_docstring(source: str) -> str:
    """`source` without its module docstring and its `from __future__` line."""
    tree = ast.parse(source)
    lines = source.splitlines()
    first = tree.body[0]
    skip_to = 0
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        skip_to = first.end_lineno or 0
    kept = [line for line in lines[skip_to:] if line.strip() != _FUTURE]
    return "\n".join(kept).strip("\n")
