"""What an `accelkit test --ab A B` side may be called: a python interpreter, a venv folder or a
test image (`image:REF`), checked where the request is validated
(`accelkit.suite.run.request.validate`) as where the sides run (`accelkit.suite.run.ab`).

Its own module, not part of `ab`, because the request imports it to validate `--ab`, and
`ab` imports the request: in `ab` it would make a cycle (request -> ab -> request), and
validating a request would load the A/B run's machinery."""

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


#: The prefix of an image side: `--ab image:accelkit-test-cpu:abc image:...`.
IMAGE_PREFIX = "image:"


def image_of(spec: str) -> str | None:
    """The image an `--ab` side names (`image:REF`), or None for an interpreter or venv."""
    return spec.removeprefix(IMAGE_PREFIX) if spec.startswith(IMAGE_PREFIX) else None


def check_side(spec: str) -> None:
    """BadInput unless `spec` names an interpreter, a venv folder or a well-formed image
    reference (whether the image is there is found when the run starts: exit 3)."""
    image = image_of(spec)
    if image is None:
        interpreter(spec)
        return
    from accelkit.inputs import check_image

    if not image:
        raise BadInput(f"--ab {spec}: no image after {IMAGE_PREFIX!r}")
    check_image(f"--ab {spec}", image)
