"""The python interpreters of `accelkit test --ab A B` (`accelkit.suite.ab`), checked where
the request is validated (`accelkit.suite.request.validate`) as where it runs."""

from __future__ import annotations

import os
from pathlib import Path

from accelkit.errors import BadInput


def interpreter(spec: str) -> str:
    """The python executable `spec` names: itself, or a venv folder's `bin/python`
    (`Scripts/python.exe` on Windows); BadInput otherwise. Not resolved: a venv's python is
    a symbolic link whose own path makes it the venv's."""
    path = Path(spec).expanduser()
    if path.is_dir():
        for candidate in (path / "bin" / "python", path / "Scripts" / "python.exe"):
            if candidate.is_file():
                path = candidate
                break
        else:
            raise BadInput(f"--ab {spec}: a folder without bin/python (not a venv)")
    if not path.is_file() or not os.access(path, os.X_OK):
        raise BadInput(f"--ab {spec}: not an executable python interpreter or venv folder")
    return str(path.absolute())
