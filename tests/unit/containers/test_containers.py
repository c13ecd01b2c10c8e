"""accelkit.containers against a real Docker engine (and its pure parts without one)."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import tarfile
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker.errors
import pytest

from accelkit.containers.engine import connect, engine_version
from accelkit.containers.images import (
    BuildFailed,
    build_from_base,
    content_tag,
    ensure_image,
    image_exists,
)
from accelkit.containers.run import (
    MANAGED_LABEL,
    CopyIn,
    CopyOut,
    DeviceRequest,
    Mount,
    RunOptions,
    copy_from_container,
    create_kwargs,
    extract_tar_safely,
    run_container,
)
from accelkit.errors import BadInput, ExitCode, Failed, Unavailable

TEST_LABEL = "org.accelkit.test-run"

TINY_DOCKERFILE = """\
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
ARG GREETING=unset
COPY hello.txt /opt/hello.txt
RUN echo "$GREETING" > /opt/greeting.txt
"""


@pytest.fixture
def run_id() -> str:
    """A label value unique to one test, to find exactly the containers it created."""
    return uuid.uuid4().hex


def _containers_labelled(client: Any, run_id: str) -> list[Any]:
    return list(client.containers.list(all=True, filters={"label": f"{TEST_LABEL}={run_id}"}))


def _options(run_id: str, **kwargs: Any) -> RunOptions:
    return RunOptions(labels={TEST_LABEL: run_id}, **kwargs)


@pytest.fixture
def scratch_tags(docker_client: Any) -> Iterator[list[str]]:
    """Image tags a test builds; removed afterwards, their untagged parent layers kept
    (`noprune`): another test's build may be using them as its cache at that moment, and
    pruning them under it fails it with "unknown parent image ID"."""
    tags: list[str] = []
    yield tags
    for tag in tags:
        with contextlib.suppress(docker.errors.ImageNotFound):  # a build that failed
            docker_client.images.remove(tag, force=True, noprune=True)


def _tiny_context(tmp_path: Path, hello: str = "hello from the context\n") -> Path:
    context = tmp_path / "context"
    context.mkdir()
    (context / "Dockerfile").write_text(TINY_DOCKERFILE)
    (context / "hello.txt").write_text(hello)
    return context


# ----------------------------------------------------------------------------- running


@pytest.mark.docker
def test_run_returns_output_and_exit_code(docker_client: Any, base_image: str, run_id: str):
    lines: list[str] = []
    result = run_container(
        docker_client,
        base_image,
        ["python3", "-c", "import sys; print('to stdout'); print('to stderr', file=sys.stderr)"],
        _options(run_id),
        on_line=lines.append,
        timeout=60,
    )
    assert result.exit_code == 0
    assert result.ok and not result.timed_out
    assert sorted(lines) == ["to stderr", "to stdout"]
    assert sorted(result.output_tail) == ["to stderr", "to stdout"]
    assert result.check("printing") is result
    assert _containers_labelled(docker_client, run_id) == []


@pytest.mark.docker
def test_nonzero_exit_is_reported(docker_client: Any, base_image: str, run_id: str):
    result = run_container(
        docker_client,
        base_image,
        ["python3", "-c", "print('about to fail'); raise SystemExit(3)"],
        _options(run_id),
    )
    assert result.exit_code == 3
    assert not result.ok and not result.timed_out
    assert result.output_tail == ("about to fail",)
    with pytest.raises(Failed, match=r"exited with code 3(.|\n)*about to fail"):
        result.check("the failing command")
    assert _containers_labelled(docker_client, run_id) == []


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A host dir that a container's non-root user may read (pytest's tmp dirs are 0700)."""
    with tempfile.TemporaryDirectory(prefix="accelkit-test-") as name:
        Path(name).chmod(0o755)
        yield Path(name)


@pytest.mark.docker
def test_env_mounts_workdir_user(
    docker_client: Any, base_image: str, run_id: str, shared_dir: Path
):
    (shared_dir / "input.txt").write_text("from the host")
    (shared_dir / "input.txt").chmod(0o644)
    script = (
        "import os, pathlib\n"
        "print(os.environ['ACCELKIT_PROBE'], os.getcwd(), os.getuid(), os.getgid())\n"
        "print(pathlib.Path('input.txt').read_text())\n"
        "try:\n"
        "    pathlib.Path('written.txt').write_text('x')\n"
        "except OSError as exc:\n"
        "    print('read-only:', exc.errno)\n"
    )
    result = run_container(
        docker_client,
        base_image,
        ["python3", "-u", "-c", script],
        _options(
            run_id,
            env={"ACCELKIT_PROBE": "it works; $HOME `not expanded`"},
            mounts=(Mount(shared_dir, "/data", read_only=True),),
            working_dir="/data",
            user="1234:5678",
        ),
        timeout=60,
    )
    assert result.ok, result.output_tail
    assert result.output_tail[0] == "it works; $HOME `not expanded` /data 1234 5678"
    assert result.output_tail[1] == "from the host"
    assert result.output_tail[2] == "read-only: 30"  # EROFS
    assert not (shared_dir / "written.txt").exists()


@pytest.mark.docker
def test_device_and_ipc_options_reach_the_container(
    docker_client: Any, base_image: str, run_id: str
):
    script = (
        "import os\n"
        "print(os.path.exists('/dev/accelkit-null'))\n"
        "print(4321 in os.getgroups())\n"
        "st = os.statvfs('/dev/shm'); print(st.f_blocks * st.f_frsize // 2**20)\n"
        "print(sorted(os.listdir('/sys/class/net')))\n"
        "print([l for l in open('/proc/self/status') if l.startswith('NoNewPrivs')][0].split()[1])"
    )
    result = run_container(
        docker_client,
        base_image,
        ["python3", "-c", script],
        _options(
            run_id,
            devices=("/dev/null:/dev/accelkit-null:rwm",),
            group_add=("4321",),
            security_opt=("no-new-privileges",),
            ipc_mode="private",
            shm_size="96m",
        ),
        timeout=60,
    )
    assert result.ok, result.output_tail
    assert result.output_tail == ("True", "True", "96", "['lo']", "1")


@pytest.mark.docker
def test_host_network_when_asked(docker_client: Any, base_image: str, run_id: str):
    result = run_container(
        docker_client,
        base_image,
        ["python3", "-c", "import os; print(len(os.listdir('/sys/class/net')))"],
        _options(run_id, network_mode="host"),
        timeout=60,
    )
    assert result.ok, result.output_tail
    host_interfaces = len(list(Path("/sys/class/net").iterdir()))
    assert int(result.output_tail[-1]) == host_interfaces


@pytest.mark.docker
def test_copy_in_and_out(docker_client: Any, base_image: str, run_id: str, tmp_path):
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    (inputs / "numbers.txt").write_text("1 2 3\n")
    script = (
        "import pathlib\n"
        "total = sum(map(int, pathlib.Path('/tmp/inputs/numbers.txt').read_text().split()))\n"
        "out = pathlib.Path('/tmp/out/sub'); out.mkdir(parents=True)\n"
        "(out / 'total.txt').write_text(str(total))\n"
        "pathlib.Path('/tmp/out/note.txt').write_text('done')\n"
    )
    host_out = tmp_path / "host-out"
    result = run_container(
        docker_client,
        base_image,
        ["python3", "-c", script],
        _options(run_id),
        copy_in=[CopyIn(inputs, "/tmp")],
        copy_out=[CopyOut("/tmp/out", host_out), CopyOut("/tmp/never-written", host_out)],
        timeout=60,
    )
    assert result.ok, result.output_tail
    assert (host_out / "out" / "sub" / "total.txt").read_text() == "6"
    assert (host_out / "out" / "note.txt").read_text() == "done"
    assert sorted(result.copied_out) == sorted(
        [host_out / "out" / "sub" / "total.txt", host_out / "out" / "note.txt"]
    )
    assert result.missing_out == ("/tmp/never-written",)
    assert _containers_labelled(docker_client, run_id) == []


@pytest.mark.docker
@pytest.mark.slow
def test_timeout_kills_the_container(docker_client: Any, base_image: str, run_id: str):
    # A timeout that did not kill would wait out the 600 s sleep: pytest's timeout fails it.
    result = run_container(
        docker_client,
        base_image,
        ["python3", "-c", "import time; print('sleeping', flush=True); time.sleep(600)"],
        _options(run_id),
        timeout=3,
    )
    assert result.timed_out and not result.ok
    assert result.exit_code == 137  # SIGKILL
    assert result.output_tail == ("sleeping",)
    with pytest.raises(Failed, match="timed out"):
        result.check("sleeper")
    assert _containers_labelled(docker_client, run_id) == []


@pytest.mark.docker
def test_container_is_removed_after_every_kind_of_run(
    docker_client: Any, base_image: str, run_id: str
):
    options = _options(run_id)
    run_container(docker_client, base_image, ["true"], options)
    run_container(docker_client, base_image, ["false"], options)
    # The command cannot start: the engine refuses at start, after the container exists.
    with pytest.raises(Failed, match="could not start"):
        run_container(docker_client, base_image, ["/no/such/program"], options)

    def interrupt(line: str) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_container(
            docker_client,
            base_image,
            ["python3", "-c", "import time; print('x', flush=True); time.sleep(600)"],
            options,
            on_line=interrupt,
        )
    # A copy-in that fails after the container was created.
    with pytest.raises(Failed, match="does not exist"):
        run_container(
            docker_client,
            base_image,
            ["true"],
            options,
            copy_in=[CopyIn(Path(__file__), "/no/such/dir")],
        )
    assert _containers_labelled(docker_client, run_id) == []
    # Every container accelkit makes carries the managed label.
    assert create_kwargs(options)["labels"][MANAGED_LABEL] == "1"


@pytest.mark.docker
@pytest.mark.slow
def test_ctrl_c_while_waiting_removes_the_container(
    docker_client: Any, base_image: str, run_id: str
):
    """A real SIGINT while the caller is blocked reading the container's output."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("SIGINT reaches only the main thread")
    # Python's own Ctrl-C handler, whatever the test runner set (pytest-xdist's workers
    # ignore SIGINT, so that only the controller sees a Ctrl-C).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    interrupter = threading.Timer(2, os.kill, (os.getpid(), signal.SIGINT))
    interrupter.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_container(
                docker_client,
                base_image,
                ["sleep", "600"],
                _options(run_id),
                timeout=120,
            )
    finally:
        interrupter.cancel()
        signal.signal(signal.SIGINT, previous)
    assert _containers_labelled(docker_client, run_id) == []


@pytest.mark.docker
def test_missing_image_is_unavailable(docker_client: Any):
    with pytest.raises(Unavailable, match="not present"):
        run_container(docker_client, "accelkit-test/never-built:none", ["true"])


# ------------------------------------------------------------------------------ images


@pytest.mark.docker
@pytest.mark.slow
def test_build_from_base_then_run(
    docker_client: Any, base_image: str, run_id: str, tmp_path, scratch_tags
):
    context = _tiny_context(tmp_path)
    tag = f"accelkit-test/tiny:{run_id[:12]}"
    scratch_tags.append(tag)
    lines: list[str] = []
    image_id = build_from_base(
        docker_client,
        base_image,
        context,
        tag,
        build_args={"GREETING": "built with a build arg"},
        on_line=lines.append,
    )
    assert image_id.startswith("sha256:")
    assert image_exists(docker_client, tag)
    assert any(line.startswith("Step 1/") for line in lines)
    result = run_container(
        docker_client,
        tag,
        ["cat", "/opt/hello.txt", "/opt/greeting.txt"],
        _options(run_id),
        timeout=60,
    )
    assert result.output_tail == ("hello from the context", "built with a build arg")


@pytest.mark.docker
@pytest.mark.slow
def test_ensure_image_skips_unchanged_builds(
    docker_client: Any, base_image: str, tmp_path, scratch_tags
):
    context = _tiny_context(tmp_path, hello=f"unique {uuid.uuid4().hex}\n")
    first = ensure_image(docker_client, "accelkit-test/ensured", context, base_image=base_image)
    scratch_tags.append(first.tag)
    assert first.built

    def must_not_build(line: str) -> None:
        raise AssertionError(f"rebuilt an unchanged image: {line}")

    again = ensure_image(
        docker_client,
        "accelkit-test/ensured",
        context,
        base_image=base_image,
        on_line=must_not_build,
    )
    assert again == type(first)(tag=first.tag, built=False)


@pytest.mark.docker
@pytest.mark.slow
def test_failing_run_step_raises_failed_with_log_tail(
    docker_client: Any, base_image: str, run_id: str, tmp_path, scratch_tags
):
    context = tmp_path / "broken"
    context.mkdir()
    (context / "Dockerfile").write_text(
        "ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nRUN echo 'last words before the failure' && exit 7\n"
    )
    tag = f"accelkit-test/broken:{run_id[:12]}"
    scratch_tags.append(tag)
    with pytest.raises(BuildFailed) as caught:
        build_from_base(docker_client, base_image, context, tag)
    assert isinstance(caught.value, Failed)
    assert caught.value.exit_code == ExitCode.FAILED
    assert "non-zero code: 7" in caught.value.error
    assert "last words before the failure" in caught.value.log_tail
    assert "last words before the failure" in str(caught.value)
    assert not image_exists(docker_client, tag)
    # forcerm: the container of the failed step is gone too. One listing call with each
    # container's command: `containers.list` inspects each listed container afterwards, and
    # a container another test removed in between failed it with "No such container".
    leftovers = [
        c
        for c in docker_client.api.containers(all=True)
        if "last words before the failure" in (c.get("Command") or "")
    ]
    assert leftovers == []


def test_content_tag_is_stable_and_tracks_every_input(tmp_path):
    context = _tiny_context(tmp_path)
    dockerfile = context / "Dockerfile"
    inputs = [context]

    def tag(args: dict[str, str] | None = None) -> str:
        return content_tag(dockerfile, args or {"A": "1", "B": "2"}, inputs, root=context)

    first = tag()
    assert len(first) == 16 and int(first, 16) >= 0
    assert tag() == first
    assert tag({"B": "2", "A": "1"}) == first  # order of build args does not matter
    assert tag({"A": "1", "B": "3"}) != first
    assert tag({"A": "12"}) != tag({"A": "1", "2": ""})  # no ambiguity by concatenation

    (context / "hello.txt").write_text("changed\n")
    changed = tag()
    assert changed != first
    (context / "hello.txt").rename(context / "renamed.txt")
    assert tag() not in (first, changed)
    (context / "renamed.txt").rename(context / "hello.txt")
    assert tag() == changed
    (context / "hello.txt").chmod(0o755)
    assert tag() != changed
    (context / "hello.txt").chmod(0o644)
    dockerfile.write_text(TINY_DOCKERFILE + "RUN true\n")
    assert tag() != changed

    # The same files elsewhere give the same tag: names are relative to the root.
    final = tag()
    other = tmp_path / "elsewhere"
    context.rename(other)
    assert content_tag(other / "Dockerfile", {"A": "1", "B": "2"}, [other], root=other) == final


# ---------------------------------------------------------------- copying out, safely


def _tar(*members: tuple[tarfile.TarInfo, bytes | None]) -> io.BytesIO:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for info, data in members:
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    buffer.seek(0)
    return buffer


def _file(name: str, data: bytes = b"payload") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _symlink(name: str, target: str) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = tarfile.SYMTYPE
    info.linkname = target
    return info, None


@pytest.mark.parametrize(
    "hostile",
    [
        _file("../escaped.txt"),
        _file("results/../../escaped.txt"),
        _file("/tmp/absolute.txt"),
        _symlink("results/link", "/etc/passwd"),
    ],
    ids=["dotdot", "nested-dotdot", "absolute", "symlink"],
)
def test_copy_out_rejects_hostile_archives(tmp_path, hostile):
    target = tmp_path / "target"
    archive = _tar(_file("results/fine.txt"), hostile)
    with pytest.raises(Failed, match="refusing"):
        extract_tar_safely(archive, target)
    # Checked before anything is written: not even the harmless member landed.
    assert not (target / "results").exists()
    assert not (tmp_path / "escaped.txt").exists()

    class HostileContainer:
        """Stands in for a container whose get_archive is under an attacker's control."""

        def get_archive(self, path: str) -> tuple[list[bytes], dict[str, Any]]:
            return [_tar(_file("results/fine.txt"), hostile).getvalue()], {}

    with pytest.raises(Failed, match="refusing"):
        copy_from_container(HostileContainer(), "/results", target)
    assert not (target / "results").exists()


def test_extract_writes_plain_files_and_dirs(tmp_path):
    archive = _tar(_file("out/a.txt", b"a"), _file("out/deep/b.txt", b"b"))
    written = extract_tar_safely(archive, tmp_path)
    assert sorted(written) == [tmp_path / "out" / "a.txt", tmp_path / "out" / "deep" / "b.txt"]
    assert (tmp_path / "out" / "deep" / "b.txt").read_bytes() == b"b"


# ------------------------------------------------------------------ options, engine


def test_run_options_are_validated_and_frozen(tmp_path):
    with pytest.raises(BadInput, match="network mode"):
        RunOptions(network_mode="bridge")
    with pytest.raises(BadInput, match="absolute"):
        Mount(tmp_path, "relative/path")
    with pytest.raises(BadInput, match="absolute"):
        RunOptions(working_dir="work")
    env = {"A": "1"}
    options = RunOptions(env=env)
    env["A"] = "changed"
    assert options.env == {"A": "1"}
    with pytest.raises(TypeError):
        options.env["B"] = "2"  # type: ignore[index]
    assert hash(options) == hash(RunOptions(env={"A": "1"}))


def test_device_requests_become_docker_types():
    import docker.types

    options = RunOptions(
        device_requests=(DeviceRequest(count=-1, capabilities=(("gpu",),)),),
        devices=("/dev/kfd", "/dev/dri"),
        group_add=("video", "109"),
        ipc_mode="host",
    )
    kwargs = create_kwargs(options)
    (request,) = kwargs["device_requests"]
    assert isinstance(request, docker.types.DeviceRequest)
    assert request["Count"] == -1 and request["Capabilities"] == [["gpu"]]
    assert kwargs["devices"] == ["/dev/kfd", "/dev/dri"]
    assert kwargs["group_add"] == ["video", "109"]
    assert kwargs["network_mode"] == "none"
    assert kwargs["ipc_mode"] == "host"


def test_commands_are_argument_lists_not_shell_strings():
    with pytest.raises(BadInput, match="argument list"):
        run_container(object(), "any", "echo hi")  # type: ignore[arg-type]


def test_unreachable_engine_is_unavailable(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent.sock")
    with pytest.raises(Unavailable) as caught:
        connect(timeout=5)
    assert caught.value.exit_code == ExitCode.UNAVAILABLE == 3
    assert engine_version(timeout=2) is None
