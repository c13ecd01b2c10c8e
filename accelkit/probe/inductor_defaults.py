"""Inductor's config values that the capability probes need, read without importing it.

Importing `torch._inductor.config` costs 2.6 s here, because it loads torch._inductor and
Dynamo, and the probes run in every `accelkit test` to write its results file's header.
Where the config is loaded already, its live values are used (a case may have changed
them); otherwise the defaults it would load with, read from its source with `ast` (never
executed). A default that is not a literal falls back to importing the config.
"""

from __future__ import annotations

import ast
import importlib
import os
import sys
from pathlib import Path
from typing import Any

MISSING = object()


def inductor_default(torch: Any, section: str, name: str) -> Any:
    """`torch._inductor.config.<section>.<name>` as this process would see it: the loaded
    config's value where it is loaded, else the literal default in the config's source
    (read with `ast`, not imported: see `inductor_cxx_search`); `MISSING` where the
    option does not exist. A default that is not a literal (read from the environment,
    computed) falls back to importing the config."""
    config = sys.modules.get("torch._inductor.config")
    if config is None:
        found = literal_class_default(
            Path(torch.__file__).parent / "_inductor" / "config.py", section, name
        )
        if found is not NOT_LITERAL:
            return found
        config = importlib.import_module("torch._inductor.config")
    return getattr(getattr(config, section, None), name, MISSING)


NOT_LITERAL = object()


def literal_class_default(source: Path, section: str, name: str) -> Any:
    """The literal value assigned to `name` in class `section` of the module at `source`;
    `MISSING` when the class or the name is not there, `NOT_LITERAL` when the source
    cannot be read or the value is not a literal."""
    try:
        tree = ast.parse(source.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return NOT_LITERAL
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == section:
            for item in node.body:
                targets = (
                    [item.target]
                    if isinstance(item, ast.AnnAssign)
                    else item.targets
                    if isinstance(item, ast.Assign)
                    else []
                )
                if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                    value = getattr(item, "value", None)
                    if value is None:
                        return NOT_LITERAL
                    try:
                        return ast.literal_eval(value)
                    except ValueError:
                        return NOT_LITERAL
            return MISSING
    return MISSING


def inductor_cxx_search() -> list[Any]:
    """Inductor's `config.cpp.cxx`, the compilers it tries in order.

    Where the config is loaded already, its value (a case may have changed it). Otherwise
    the default it would load with: `(None, $CXX or "g++")` ("clang++" on macOS), as
    torch 2.14's torch/_inductor/config.py defines it. Importing the config to read it
    costs 2.6 s here, because it loads torch._inductor and Dynamo: that is most of what
    writing a results file's header costs, in every `accelkit test`."""
    config = sys.modules.get("torch._inductor.config")
    if config is None:
        default = "clang++" if sys.platform == "darwin" else "g++"
        return [None, os.environ.get("CXX", default)]
    cxx = config.cpp.cxx
    return list(cxx) if isinstance(cxx, (list, tuple)) else [cxx]
