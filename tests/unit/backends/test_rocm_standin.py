"""The stand-in of TheRock's SDK is as strict as the real one (tests/rocm_standin.py): the
library table it carries is TheRock's, shortnames outside it are refused with TheRock's error,
the libraries are real shared objects loaded with ctypes, a version mismatch warns in TheRock's
words (an error under the tests' warning filter), and both package layouts install: the
multi-arch one (rocm[libraries,devel,device-gfx942]; tests/integration/test_build.py checks it in
the venv its end-to-end build installs) and the legacy per-family one
(rocm-sdk-libraries-gfx94X-dcgpu, here)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from accelkit.backends import rocm as backend
from tests import rocm_standin

WARNINGS_ARE_ERRORS = ["-W", f"error::UserWarning:{backend.SDK_MODULE}"]
CHECK = rocm_standin.PRELOAD_CHECK


def test_the_preload_table_matches_therocks_library_table() -> None:
    table = {e[0]: e for e in rocm_standin.dist_info_module().LIBRARY_TABLE}
    for library in backend.PRELOADS:
        assert library.shortname in table, library
        assert table[library.shortname][2] == library.so_pattern, library


@pytest.fixture(scope="module")
def indexes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    root = tmp_path_factory.mktemp("standin")
    libraries = rocm_standin.build_libraries(root / "libs")
    urls = {}
    with rocm_standin.serve(root) as url:
        for layout in ("family",):
            rocm_standin.write_index(root / layout, libraries, layout=layout)
            urls[layout] = url.replace("/simple/", f"/{layout}/simple/")
        yield urls


def _venv(path: Path, index: str, requirement: str) -> Path:
    python = rocm_standin.fresh_venv(path)
    env = {**os.environ, "PIP_EXTRA_INDEX_URL": "", "PIP_FIND_LINKS": ""}
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--index-url", index, requirement],
        check=True,
        env=env,
    )
    return python


def _run(
    python: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
        cwd="/",
    )


@pytest.mark.slow
def test_legacy_family_layout(indexes: dict[str, str], tmp_path: Path) -> None:
    python = _venv(tmp_path / "v", indexes["family"], "rocm[libraries,devel]==7.14.0")
    site = next((tmp_path / "v" / "lib").glob("python3*/site-packages"))
    assert (site / "_rocm_sdk_libraries_gfx94X_dcgpu").is_dir()
    assert not (site / "_rocm_sdk_libraries").exists()
    preload = ",".join(backend.PRELOAD_SHORTNAMES)
    good = _run(python, *WARNINGS_ARE_ERRORS, "-c", CHECK, preload, "7.14.0")
    assert good.returncode == 0, good.stderr
    # Another family's libraries are not installed: TheRock's missing-extras error.
    other = _run(
        python, "-c", CHECK, "hipblas", "7.14.0", env={"ROCM_SDK_TARGET_FAMILY": "gfx950-dcgpu"}
    )
    assert "Missing required rocm libraries" in other.stderr
    assert "pip install rocm[libraries]" in other.stderr
