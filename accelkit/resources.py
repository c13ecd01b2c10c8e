"""Files accelkit ships besides its code: the Dockerfiles, and its own source tree (from which
test images get an accelkit wheel)."""

from __future__ import annotations

from pathlib import Path

from accelkit.errors import BadInput

_PACKAGE = Path(__file__).resolve().parent


def dockerfiles_dir() -> Path:
    """The dockerfiles/ folder: packaged next to the code, or at the root of a checkout."""
    for candidate in (_PACKAGE / "_dockerfiles", _PACKAGE.parent / "dockerfiles"):
        if candidate.is_dir():
            return candidate
    raise BadInput(
        "accelkit's dockerfiles/ folder is missing from this installation "
        "(install accelkit from its source tree)"
    )


def dockerfile(name: str) -> Path:
    path = dockerfiles_dir() / name
    if not path.is_file():
        raise BadInput(f"no Dockerfile {name} in {dockerfiles_dir()}")
    return path


def package_dir() -> Path:
    """The installed `accelkit` package folder (mounted into builder containers)."""
    return _PACKAGE


def source_tree(explicit: Path | None = None) -> Path:
    """accelkit's source tree (with pyproject.toml): `explicit`, the checkout this package
    was installed from in editable mode, or the current directory."""
    candidates = [explicit] if explicit is not None else [_PACKAGE.parent, Path.cwd()]
    for candidate in candidates:
        pyproject = candidate / "pyproject.toml"
        if pyproject.is_file() and 'name = "accelkit"' in pyproject.read_text(encoding="utf-8"):
            return candidate.resolve()
    where = explicit if explicit is not None else "the installation or the current directory"
    raise BadInput(f"accelkit's source tree (pyproject.toml) not found in {where}")
