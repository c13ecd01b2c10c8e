"""Running one command in a fresh container, and copying files in and out of it.

Every container accelkit starts is created here, labelled `MANAGED_LABEL`, and removed in a
`finally` block, also when the run times out, fails or is interrupted (KeyboardInterrupt).
Commands are argument lists, never shell strings.
"""

from __future__ import annotations

import codecs
import collections
import io
import os
import posixpath
import stat
import tarfile
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import IO, Any

from accelkit.containers.engine import api_error_text
from accelkit.errors import BadInput, Failed, Unavailable

#: Label (value "1") on every container and image accelkit creates, next to any
#: `RunOptions.labels`. Find leftovers with `docker ps -a --filter label=org.accelkit.managed`.
MANAGED_LABEL = "org.accelkit.managed"

#: Network modes accelkit uses: none by default, the host's network when asked. The CI
#: engine runs with `--bridge=none`, so bridge networks are deliberately not offered.
NETWORK_MODES = ("none", "host")

#: Lines of output kept in `RunResult.output_tail`.
DEFAULT_TAIL_LINES = 200

LineCallback = Callable[[str], None]


@dataclass(frozen=True)
class Mount:
    """A bind mount of the host path `source` at the absolute container path `target`."""

    source: Path
    target: str
    read_only: bool = True

    def __post_init__(self) -> None:
        if not posixpath.isabs(self.target):
            raise BadInput(f"container mount target must be an absolute path: {self.target!r}")
        # The engine resolves host paths itself and needs them absolute.
        object.__setattr__(self, "source", Path(self.source).absolute())


@dataclass(frozen=True)
class DeviceRequest:
    """An engine device request (e.g. NVIDIA GPUs); mirrors `docker.types.DeviceRequest`.

    `count=-1` means all devices; `capabilities` is a list of alternatives, each a list of
    capabilities that must all be present, e.g. `(("gpu",),)`.
    """

    driver: str = ""
    count: int = 0
    device_ids: tuple[str, ...] = ()
    capabilities: tuple[tuple[str, ...], ...] = ()
    options: Mapping[str, str] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))


@dataclass(frozen=True)
class RunOptions:
    """How a container is set up: environment, mounts, user, network and device access.

    Backends produce the device part (`devices`, `device_requests`, `group_add`,
    `security_opt`, `cap_add`, `ipc_mode`, `shm_size`); combine with `dataclasses.replace`.
    """

    env: Mapping[str, str] = field(default_factory=dict, hash=False)
    mounts: tuple[Mount, ...] = ()
    working_dir: str | None = None
    user: str | None = None  # "uid[:gid]" or a name known in the image
    network_mode: str = "none"
    devices: tuple[str, ...] = ()  # "/dev/kfd" or "/dev/dri:/dev/dri:rwm"
    device_requests: tuple[DeviceRequest, ...] = ()
    group_add: tuple[str, ...] = ()  # group names or numeric GIDs (render's GID differs per host)
    security_opt: tuple[str, ...] = ()
    cap_add: tuple[str, ...] = ()
    ipc_mode: str | None = None  # "host", "private", ...
    shm_size: str | None = None  # "8g"
    labels: Mapping[str, str] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "env", MappingProxyType(dict(self.env)))
        object.__setattr__(self, "labels", MappingProxyType(dict(self.labels)))
        if self.network_mode not in NETWORK_MODES:
            raise BadInput(
                f"network mode {self.network_mode!r} is not supported; "
                f"use one of {', '.join(NETWORK_MODES)}"
            )
        if self.working_dir is not None and not posixpath.isabs(self.working_dir):
            raise BadInput(f"container working dir must be absolute: {self.working_dir!r}")
        for name in self.env:
            if not name or "=" in name:
                raise BadInput(f"bad environment variable name: {name!r}")


@dataclass(frozen=True)
class CopyIn:
    """Copy the host file or directory `source` into the existing container dir `target_dir`
    before the command starts."""

    source: Path
    target_dir: str


@dataclass(frozen=True)
class CopyOut:
    """Copy the container file or directory `source` into the host dir `target_dir` after the
    command ends (also after a failure or a timeout), like `docker cp`."""

    source: str
    target_dir: Path


@dataclass(frozen=True)
class RunResult:
    exit_code: int
    output_tail: tuple[str, ...]  # last lines of stdout and stderr together
    timed_out: bool
    duration_s: float
    copied_out: tuple[Path, ...] = ()  # host paths of the files copied out
    missing_out: tuple[str, ...] = ()  # CopyOut sources that did not exist in the container

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def check(self, what: str) -> RunResult:
        """Return self when the command succeeded, else raise Failed naming `what`."""
        if self.ok:
            return self
        if self.timed_out:
            reason = f"timed out after {self.duration_s:.0f} s"
        else:
            reason = f"exited with code {self.exit_code}"
        tail = "".join(f"\n  | {line}" for line in self.output_tail[-20:])
        raise Failed(f"{what} {reason}{tail}")


def run_container(
    client: Any,
    image: str,
    argv: Sequence[str],
    options: RunOptions | None = None,
    *,
    on_line: LineCallback | None = None,
    timeout: float | None = None,
    copy_in: Sequence[CopyIn] = (),
    copy_out: Sequence[CopyOut] = (),
    tail_lines: int = DEFAULT_TAIL_LINES,
) -> RunResult:
    """Run `argv` in a fresh container from the local image `image`, then remove it.

    Output lines (stdout and stderr interleaved) go to `on_line` as they arrive. After
    `timeout` seconds the container is killed and the result says `timed_out`. The image is
    never pulled: a missing image raises Unavailable.
    """
    import docker.errors

    if isinstance(argv, str) or not argv:
        raise BadInput("a container command must be a non-empty argument list")
    options = options or RunOptions()
    for mount in options.mounts:
        if not mount.source.exists():
            raise BadInput(f"mount source does not exist: {mount.source}")

    # Named up front so that the finally block can remove it even when an interrupt lands
    # between the engine creating it and docker-py returning its id.
    name = f"accelkit-{uuid.uuid4().hex[:16]}"
    started = time.monotonic()
    killer: threading.Timer | None = None
    timed_out = threading.Event()
    tail: collections.deque[str] = collections.deque(maxlen=tail_lines)
    try:
        try:
            container = client.containers.create(
                image, list(argv), name=name, **create_kwargs(options)
            )
        except docker.errors.ImageNotFound:
            raise Unavailable(f"image {image} is not present on the Docker engine") from None
        except docker.errors.APIError as exc:
            raise Failed(
                f"could not create a container from {image}: {api_error_text(exc)}"
            ) from None
        for into in copy_in:
            copy_to_container(container, into.source, into.target_dir)
        try:
            container.start()
        except docker.errors.APIError as exc:
            raise Failed(f"could not start {argv[0]!r} in {image}: {api_error_text(exc)}") from None
        if timeout is not None:
            killer = threading.Timer(timeout, _kill_for_timeout, (container, timed_out))
            killer.daemon = True
            killer.start()
        stream = container.logs(stream=True, follow=True, stdout=True, stderr=True)
        for line in _lines(stream):
            tail.append(line)
            if on_line is not None:
                on_line(line)
        exit_code = int(container.wait().get("StatusCode", -1))
        if killer is not None:
            # A kill may be in flight: wait for it, so that `timed_out` is settled.
            killer.cancel()
            killer.join()
        copied: list[Path] = []
        missing: list[str] = []
        for out in copy_out:
            try:
                copied.extend(copy_from_container(container, out.source, out.target_dir))
            except FileNotFoundError:
                missing.append(out.source)
        return RunResult(
            exit_code=exit_code,
            output_tail=tuple(tail),
            timed_out=timed_out.is_set(),
            duration_s=time.monotonic() - started,
            copied_out=tuple(copied),
            missing_out=tuple(missing),
        )
    finally:
        if killer is not None:
            killer.cancel()
        remove_container(client, name)


def create_kwargs(options: RunOptions) -> dict[str, Any]:
    """Keyword arguments of `client.containers.create` for `options` (no engine needed)."""
    import docker.types

    kwargs: dict[str, Any] = {
        "environment": dict(options.env),
        "mounts": [
            docker.types.Mount(
                target=m.target, source=str(m.source), type="bind", read_only=m.read_only
            )
            for m in options.mounts
        ],
        "network_mode": options.network_mode,
        "labels": {MANAGED_LABEL: "1", **options.labels},
        "detach": True,
        "stdin_open": False,
        "tty": False,
    }
    if options.working_dir is not None:
        kwargs["working_dir"] = options.working_dir
    if options.user is not None:
        kwargs["user"] = options.user
    if options.devices:
        kwargs["devices"] = list(options.devices)
    if options.device_requests:
        kwargs["device_requests"] = [
            docker.types.DeviceRequest(
                driver=r.driver,
                count=r.count,
                device_ids=list(r.device_ids),
                capabilities=[list(c) for c in r.capabilities],
                options=dict(r.options),
            )
            for r in options.device_requests
        ]
    if options.group_add:
        kwargs["group_add"] = list(options.group_add)
    if options.security_opt:
        kwargs["security_opt"] = list(options.security_opt)
    if options.cap_add:
        kwargs["cap_add"] = list(options.cap_add)
    if options.ipc_mode is not None:
        kwargs["ipc_mode"] = options.ipc_mode
    if options.shm_size is not None:
        kwargs["shm_size"] = options.shm_size
    return kwargs


def remove_container(client: Any, name_or_id: str) -> None:
    """Force-remove a container (killing it if it runs); gone already is fine."""
    import docker.errors

    try:
        client.api.remove_container(name_or_id, force=True, v=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        if exc.status_code == 409 and "already in progress" in str(exc):
            return
        raise Failed(f"could not remove container {name_or_id}: {api_error_text(exc)}") from exc


def copy_to_container(container: Any, source: Path, target_dir: str) -> None:
    """Copy the host file or directory `source` into the container directory `target_dir`."""
    import docker.errors

    source = Path(source)
    if not source.exists():
        raise BadInput(f"nothing to copy into the container: {source} does not exist")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        archive.add(source, arcname=source.name, filter=_owned_by_root)
    try:
        container.put_archive(target_dir, buffer.getvalue())
    except docker.errors.NotFound:
        raise Failed(f"container directory {target_dir} does not exist") from None
    except docker.errors.APIError as exc:
        raise Failed(f"copying {source} into {target_dir} failed: {api_error_text(exc)}") from None


def copy_from_container(container: Any, source: str, target_dir: Path) -> list[Path]:
    """Copy the container file or directory `source` into the host dir `target_dir`.

    Returns the host paths of the regular files written. Raises FileNotFoundError when
    `source` does not exist in the container and Failed for an unsafe archive (see
    `extract_tar_safely`).
    """
    import docker.errors

    try:
        chunks, _stat = container.get_archive(source)
    except docker.errors.NotFound:
        raise FileNotFoundError(source) from None
    except docker.errors.APIError as exc:
        raise Failed(
            f"copying {source} out of the container failed: {api_error_text(exc)}"
        ) from None
    with tempfile.SpooledTemporaryFile(max_size=16 * 1024 * 1024) as spool:
        for chunk in chunks:
            spool.write(chunk)
        spool.seek(0)
        return extract_tar_safely(spool, Path(target_dir))


def extract_tar_safely(fileobj: IO[bytes], target_dir: Path) -> list[Path]:
    """Extract regular files and directories of an uncompressed tar stream under
    `target_dir`; returns the files written.

    Every member is checked before anything is written: absolute names, `..` components,
    links and special files raise Failed, so a hostile container cannot write outside
    `target_dir` (the CVE-2007-4559 class of bugs).
    """
    target_dir.mkdir(parents=True, exist_ok=True)
    root = target_dir.resolve()
    try:
        with tarfile.open(fileobj=fileobj, mode="r:") as archive:
            members = archive.getmembers()
            planned = [(member, _safe_destination(root, member)) for member in members]
            written: list[Path] = []
            for member, destination in planned:
                if member.isdir():
                    destination.mkdir(parents=True, exist_ok=True)
                    continue
                destination.parent.mkdir(parents=True, exist_ok=True)
                if not destination.parent.resolve().is_relative_to(root):
                    raise Failed(f"refusing to write outside {root}: {member.name!r}")
                if destination.is_symlink():
                    destination.unlink()
                source = archive.extractfile(member)
                if source is None:  # pragma: no cover - regular files always have data
                    raise Failed(f"archive member {member.name!r} has no data")
                with source, open(destination, "wb") as out:
                    while block := source.read(1024 * 1024):
                        out.write(block)
                os.chmod(destination, stat.S_IMODE(member.mode) & 0o755 | 0o600)
                written.append(destination)
            return written
    except tarfile.TarError as exc:
        raise Failed(f"bad archive from the container: {exc}") from None


def _safe_destination(root: Path, member: tarfile.TarInfo) -> Path:
    name = member.name
    if not (member.isfile() or member.isdir()):
        raise Failed(f"refusing archive member that is not a file or directory: {name!r}")
    if name.startswith(("/", "\\")):
        raise Failed(f"refusing absolute path in archive: {name!r}")
    parts = [part for part in name.replace("\\", "/").split("/") if part not in ("", ".")]
    if ".." in parts:
        raise Failed(f"refusing '..' in archive path: {name!r}")
    destination = root.joinpath(*parts)
    if not parts and member.isfile():
        raise Failed(f"refusing archive member without a name: {name!r}")
    return destination


def _owned_by_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def _lines(chunks: Iterable[bytes]) -> Iterator[str]:
    """Split a stream of byte chunks (arbitrary boundaries) into decoded lines."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending = ""
    for chunk in chunks:
        pending += decoder.decode(chunk)
        *complete, pending = pending.split("\n")
        for line in complete:
            yield line.rstrip("\r")
    pending += decoder.decode(b"", final=True)
    if pending:
        yield pending.rstrip("\r")


def _kill_for_timeout(container: Any, timed_out: threading.Event) -> None:
    import docker.errors

    try:
        container.kill()
    except docker.errors.APIError:
        return  # it ended on its own just now (409 not running) or is gone already
    timed_out.set()
