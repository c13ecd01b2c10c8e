"""The server of an image build's install inputs (accelkit.containers.build_inputs): the
folder's files under a random prefix on the loopback, GET only, 404 for anything else (no
directory listing, nothing outside the folder), a manifest of sizes and sha256, and a
clean stop when the block ends, on error too. With Docker: the test Dockerfiles' install
step fetches them and no layer or history entry of the image keeps them."""

from __future__ import annotations

import hashlib
import http.client
import json
import shutil
import threading
import urllib.parse
import uuid
from pathlib import Path
from typing import Any

import pytest

from accelkit.containers.build_inputs import manifest, serve_inputs
from accelkit.errors import BadInput
from accelkit.incontainer.fetch_inputs import MANIFEST_NAME


def _inputs(root: Path) -> Path:
    folder = root / "inputs"
    (folder / "pip").mkdir(parents=True)
    (folder / "torch").mkdir()
    (folder / "pip" / "pip.conf").write_text("[global]\nindex-url = https://u:secret@x/\n")
    (folder / "torch" / "torch-9.9.9-cp311-cp311-linux_x86_64.whl").write_bytes(b"\0wheel" * 999)
    (folder / "install.json").write_text("{}")
    return folder


def _get(url: str, path: str, method: str = "GET") -> tuple[int, bytes]:
    """(status, body) of a raw request for `path`, sent as is (no client-side cleanup)."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        connection.request(method, path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_serves_the_files_under_the_prefix_only(tmp_path: Path) -> None:
    folder = _inputs(tmp_path)
    outside = tmp_path / "secret.txt"
    outside.write_text("not to be served")
    (folder / "escape.txt").symlink_to(outside)
    with serve_inputs(folder) as url:
        parts = urllib.parse.urlsplit(url)
        assert parts.scheme == "http" and parts.hostname == "127.0.0.1" and url.endswith("/")
        prefix = parts.path
        assert len(prefix.strip("/")) >= 32  # secrets.token_urlsafe(24)
        wheel = "torch/torch-9.9.9-cp311-cp311-linux_x86_64.whl"
        assert _get(url, prefix + wheel) == (200, b"\0wheel" * 999)
        assert _get(url, prefix + "pip/pip.conf")[1].startswith(b"[global]")
        # Percent-encoded names are the same files.
        assert _get(url, prefix + "pip/pip%2Econf")[0] == 200
        not_found = [
            "/",
            "/pip/pip.conf",
            "/" + wheel,
            "/wrong-token/pip/pip.conf",
            prefix[:-1],
            prefix,  # no directory listing, not even inside
            prefix + "pip",
            prefix + "pip/",
            prefix + "torch/",
            prefix + "missing.txt",
            prefix + "../" + prefix.strip("/") + "/install.json",
            prefix + "pip/../install.json",
            prefix + "pip/%2E%2E/install.json",
            prefix + "pip%2F..%2F..%2Fsecret.txt",
            prefix + "..%2Fsecret.txt",
            prefix + "escape.txt",  # a link out of the folder
            prefix + "/etc/passwd",
            prefix + "pip//pip.conf",
        ]
        for path in not_found:
            status, body = _get(url, path)
            assert status == 404, path
            assert b"secret" not in body and b"[global]" not in body, path
        for method in ("HEAD", "POST", "PUT", "DELETE"):
            assert _get(url, prefix + "install.json", method)[0] == 501, method


def test_the_manifest_lists_every_file_with_its_size_and_sha256(tmp_path: Path) -> None:
    folder = _inputs(tmp_path)
    (folder / "link.txt").symlink_to(folder / "install.json")
    with serve_inputs(folder) as url:
        status, body = _get(url, urllib.parse.urlsplit(url).path + MANIFEST_NAME)
    assert status == 200
    served = json.loads(body)
    assert served == manifest(folder)
    files = {entry["path"]: entry for entry in served["files"]}
    assert sorted(files) == [
        "install.json",
        "pip/pip.conf",
        "torch/torch-9.9.9-cp311-cp311-linux_x86_64.whl",
    ]  # no link: the fetch would not find it
    wheel = folder / "torch" / "torch-9.9.9-cp311-cp311-linux_x86_64.whl"
    entry = files["torch/torch-9.9.9-cp311-cp311-linux_x86_64.whl"]
    assert entry["size"] == wheel.stat().st_size
    assert entry["sha256"] == hashlib.sha256(wheel.read_bytes()).hexdigest()


def test_every_build_gets_its_own_url(tmp_path: Path) -> None:
    folder = _inputs(tmp_path)
    with serve_inputs(folder) as first, serve_inputs(folder) as second:
        assert first != second
        assert urllib.parse.urlsplit(first).path != urllib.parse.urlsplit(second).path
        # Each answers under its own prefix only.
        assert _get(first, urllib.parse.urlsplit(second).path + "install.json")[0] == 404


def _serving_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "accelkit-build-inputs"]


def test_stops_when_the_block_ends(tmp_path: Path) -> None:
    folder = _inputs(tmp_path)
    before = len(_serving_threads())
    with serve_inputs(folder) as url:
        assert _get(url, urllib.parse.urlsplit(url).path + "install.json")[0] == 200
        assert len(_serving_threads()) == before + 1
    assert len(_serving_threads()) == before
    with pytest.raises(ConnectionRefusedError):
        _get(url, urllib.parse.urlsplit(url).path + "install.json")


def test_stops_on_error_and_interrupt(tmp_path: Path) -> None:
    folder = _inputs(tmp_path)
    urls = []
    for error in (RuntimeError("the build failed"), KeyboardInterrupt()):
        with pytest.raises(type(error)), serve_inputs(folder) as url:
            urls.append(url)
            raise error
    for url in urls:
        with pytest.raises(ConnectionRefusedError):
            _get(url, urllib.parse.urlsplit(url).path + "install.json")
    assert _serving_threads() == []


def test_a_folder_that_is_not_there_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="not a directory"), serve_inputs(tmp_path / "none"):
        pass


# --- the Dockerfiles' install step on the real engine ---------------------------------------

#: Stands in for install.py: proves the settings and the wheel reached the install step,
#: and leaves a mark in the venv (the layer that must not hold them).
STAND_IN_INSTALL = """\
import os, sys
from pathlib import Path
context = Path(sys.argv[1])
conf = Path(os.environ["PIP_CONFIG_FILE"]).read_text()
assert "index-url = https://" in conf and (context / "pip" / "ca.pem").is_file(), conf
assert len(list((context / "torch").glob("torch-*.whl"))) == 1
Path("/opt/venv/installed-by-stand-in").write_text("ok")
"""


def _install_step_context(dockerfile: str, context: Path) -> Path:
    """A build context whose Dockerfile is the install step of `dockerfile` (from its
    COPY of the fetch script on) on a bare venv of the base image's python3."""
    from accelkit.containers.build_inputs import FETCH_SCRIPT, fetch_script
    from tests.helpers import REPO

    text = (REPO / "dockerfiles" / dockerfile).read_text(encoding="utf-8")
    _, marker, install = text.partition("\nCOPY fetch_inputs.py ")
    assert marker, f"{dockerfile} has no install step starting with COPY fetch_inputs.py"
    context.mkdir()
    (context / "Dockerfile").write_text(
        "ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\n"
        'SHELL ["/bin/bash", "-o", "pipefail", "-c"]\n'
        "RUN python3 -m venv --without-pip /opt/venv" + marker + install
    )
    shutil.copyfile(fetch_script(), context / FETCH_SCRIPT)
    return context


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.parametrize("dockerfile", ["cpu.Dockerfile", "cuda.Dockerfile", "xpu.Dockerfile"])
def test_install_step_keeps_inputs_out_of_layers_and_history(
    dockerfile: str, docker_client: Any, base_image: str, tmp_path: Path
) -> None:
    """The install step of each test Dockerfile, as `accelkit setup` builds it (inputs served,
    URL as the build arg), on a bare venv: neither the image's layers nor its history hold
    the pip settings (an index URL with credentials, the CA bundle) or the torch wheel."""
    from accelkit.containers.build_inputs import INPUTS_URL_ARG
    from accelkit.containers.images import build_from_base
    from accelkit.wheels import pipconfig
    from tests.helpers import image_layer_files

    token = f"tok-{uuid.uuid4().hex}"
    ca_mark = f"CA-{uuid.uuid4().hex}"
    wheel_mark = f"WHEEL-{uuid.uuid4().hex}"
    wheel_name = "torch-9.9.9+standin-cp311-cp311-linux_x86_64.whl"
    context, inputs = _install_step_context(dockerfile, tmp_path / "context"), tmp_path / "inputs"
    (inputs / "torch").mkdir(parents=True)
    (inputs / "torch" / wheel_name).write_text(wheel_mark)
    (inputs / "install.py").write_text(STAND_IN_INSTALL)
    ca = tmp_path / "ca.pem"
    ca.write_text(f"-----BEGIN CERTIFICATE-----\n{ca_mark}\n-----END CERTIFICATE-----\n")
    settings = pipconfig.PipSettings(
        index_url=f"https://accelkit:{token}@127.0.0.1:9/simple", ca_bundle=ca
    )
    pipconfig.write_pip_dir(settings, inputs / "pip", "/tmp/accelkit-context/pip")
    tag = f"accelkit-test-inputs:{uuid.uuid4().hex[:12]}"
    lines: list[str] = []
    try:
        with serve_inputs(inputs) as url:
            build_from_base(
                docker_client,
                base_image,
                context,
                tag,
                build_args={INPUTS_URL_ARG: url},
                on_line=lines.append,
            )
        assert any(line.startswith("fetch_inputs.py: 4 files") for line in lines), lines
        history = json.dumps(docker_client.api.history(tag))
        assert url in history  # the build arg: dead now
        with pytest.raises(ConnectionRefusedError):
            _get(url, urllib.parse.urlsplit(url).path + MANIFEST_NAME)
        for secret in (token, ca_mark, wheel_mark, wheel_name, "BEGIN CERTIFICATE"):
            assert secret not in history, secret
        names, leaks = image_layer_files(
            docker_client, tag, [token.encode(), ca_mark.encode(), wheel_mark.encode()]
        )
        # The install step's layer is there, and nothing of what it fetched.
        assert "opt/venv/installed-by-stand-in" in names
        wanted_gone = (wheel_name, "/pip.conf", "/ca.pem", "fetch_inputs.py")
        assert leaks == set()
        kept = {n for n in names if "accelkit-context" in n or n.endswith(wanted_gone)}
        assert kept == set(), kept
    finally:
        if docker_client.images.list(name=tag):
            docker_client.images.remove(tag, force=True, noprune=True)


@pytest.mark.docker
def test_install_step_without_its_server_fails_the_build_in_one_line(
    docker_client: Any, base_image: str, tmp_path: Path
) -> None:
    from accelkit.containers.build_inputs import INPUTS_URL_ARG
    from accelkit.containers.images import BuildFailed, build_from_base

    context = _install_step_context("cpu.Dockerfile", tmp_path / "context")
    (tmp_path / "inputs").mkdir()
    with serve_inputs(tmp_path / "inputs") as url:
        pass  # a build that outlived its server, or a URL from an image's history
    tag = f"accelkit-test-inputs:{uuid.uuid4().hex[:12]}"
    try:
        with pytest.raises(BuildFailed) as info:
            build_from_base(
                docker_client, base_image, context, tag, build_args={INPUTS_URL_ARG: url}
            )
    finally:
        if docker_client.images.list(name=tag):
            docker_client.images.remove(tag, force=True, noprune=True)
    said = [line for line in info.value.log_tail if line.startswith("fetch_inputs.py:")]
    assert len(said) == 1 and "cannot download the install inputs" in said[0], info.value.log_tail
    assert "Connection refused" in said[0]
