"""fetch_inputs.py, which a Dockerfile's install step runs to download the inputs the host
serves (accelkit.containers.build_inputs): every file arrives checked, and every failure
is one line and a non-zero exit, with nothing half-written left behind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from accelkit.containers.build_inputs import fetch_script, serve_inputs
from accelkit.incontainer import fetch_inputs
from accelkit.incontainer.fetch_inputs import FetchError, fetch, safe_path


def _inputs(root: Path) -> Path:
    folder = root / "served"
    (folder / "pip").mkdir(parents=True)
    (folder / "torch").mkdir()
    (folder / "pip" / "pip.conf").write_text("[global]\ncert = /tmp/accelkit-context/pip/ca.pem\n")
    (folder / "torch" / "torch-9.9.9+x-cp311-cp311-linux_x86_64.whl").write_bytes(
        bytes(range(256)) * 5000
    )
    (folder / "install.json").write_text('{"accelkit": []}')
    (folder / "empty.txt").write_text("")
    return folder


def _files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def _run(url: str, target: Path) -> subprocess.CompletedProcess[str]:
    """The script as the Dockerfiles run it: alone, isolated (-I), standard library only."""
    argv = [sys.executable, "-I", str(fetch_script()), url, str(target)]
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)


def test_downloads_every_file_as_the_dockerfiles_run_it(tmp_path: Path) -> None:
    served = _inputs(tmp_path)
    with serve_inputs(served) as url:
        proc = _run(url, tmp_path / "context")
    assert proc.returncode == 0, proc.stderr
    assert _files(tmp_path / "context") == _files(served)
    assert proc.stdout.startswith("fetch_inputs.py: 4 files, 1.3 MB into ")


def test_a_server_that_is_gone_fails_in_one_line(tmp_path: Path) -> None:
    served = _inputs(tmp_path)
    with serve_inputs(served) as url:
        pass
    proc = _run(url, tmp_path / "context")
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("fetch_inputs.py: cannot download the install inputs: ")
    assert "Connection refused" in lines[0] and "host networking" in lines[0]


def test_no_url_says_how_to_build_the_image(tmp_path: Path) -> None:
    # `docker build` without accelkit: the build arg's default, empty.
    proc = _run("", tmp_path / "context")
    assert proc.returncode == 1
    assert "ACCELKIT_INPUTS_URL" in proc.stderr and len(proc.stderr.splitlines()) == 1
    assert not (tmp_path / "context").exists()


def test_a_file_that_differs_from_the_manifest_is_refused(tmp_path: Path) -> None:
    served = _inputs(tmp_path)
    with serve_inputs(served) as url:
        # Changed after the server listed it: the size no longer matches.
        (served / "install.json").write_text('{"accelkit": ["other"]}')
        with pytest.raises(FetchError, match=r"install\.json: got 23 bytes .* says 16 bytes"):
            fetch(url, tmp_path / "context")
        # Same size, other bytes: the sha256 catches it.
        (served / "install.json").write_text('{"accelkit": {}}')
        with pytest.raises(FetchError, match="sha256"):
            fetch(url, tmp_path / "context2")
    assert not list((tmp_path / "context2").rglob("*.part"))
    assert not (tmp_path / "context2" / "install.json").exists()


def test_a_missing_file_is_http_404(tmp_path: Path) -> None:
    served = _inputs(tmp_path)
    with serve_inputs(served) as url:
        (served / "empty.txt").unlink()
        with pytest.raises(FetchError, match=r"empty\.txt: HTTP 404"):
            fetch(url, tmp_path / "context")


@pytest.mark.parametrize("name", ["../x", "/etc/passwd", "a/../../x", "a//b", "./a", "", None, 3])
def test_manifest_paths_cannot_leave_the_folder(name: object) -> None:
    with pytest.raises(FetchError):
        safe_path(name)


def test_manifest_paths_inside_the_folder() -> None:
    assert str(safe_path("torch/torch-2.13.0+cpu-cp311-cp311-linux_x86_64.whl")).startswith(
        "torch/"
    )


def test_main_usage() -> None:
    assert fetch_inputs.main(["only-one"]) == 2
