"""The import hook of a standalone reproducer: serves the accelkit modules it embeds.

`accelkit repro` writes this module's source into every reproducer, together with the
sources of the accelkit modules the case runs (`accelkit.triage.bundle`). `install` puts a
finder first on `sys.meta_path`, so the embedded copies are used even where accelkit is
installed, and any other `accelkit.*` module fails to import: a reproducer runs what it
carries and nothing else. Tracebacks show the embedded lines. Standard library only.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import linecache
import sys
from collections.abc import Mapping, Sequence
from types import ModuleType


class EmbeddedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Modules from source text: name -> (path shown in tracebacks, source)."""

    def __init__(self, sources: Mapping[str, tuple[str, str]], packages: Sequence[str]) -> None:
        self.sources = dict(sources)
        self.packages = set(packages)
        for name in list(self.sources):  # parents without their own source are empty
            parts = name.split(".")
            for end in range(1, len(parts)):
                self.packages.add(".".join(parts[:end]))

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname in self.sources or fullname in self.packages:
            origin = self.sources.get(fullname, (f"<package {fullname}>", ""))[0]
            return importlib.util.spec_from_loader(
                fullname, self, origin=origin, is_package=fullname in self.packages
            )
        if fullname.split(".")[0] in {name.split(".")[0] for name in self.packages}:
            raise ModuleNotFoundError(
                f"{fullname} is not embedded in this reproducer", name=fullname
            )
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        origin, source = self.sources.get(module.__name__, ("", ""))
        if not source:
            return
        filename = f"<embedded {origin}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        module.__file__ = filename
        exec(compile(source, filename, "exec"), module.__dict__)  # noqa: S102


def install(sources: Mapping[str, tuple[str, str]], packages: Sequence[str] = ()) -> None:
    """Serve `sources` ({module: (path, source)}) before anything else on sys.path."""
    sys.meta_path.insert(0, EmbeddedModules(sources, packages))
