"""The host's pip settings, handed to builds without baking them into image layers or logs.

Image builds (test images and builder images, each built in one stage) never get them in
the build context: a `pip/` folder (pip.conf, ca.pem) among the install inputs accelkit
serves on the host's loopback while the build runs (accelkit.containers.build_inputs), which
the one RUN step that installs downloads, uses through PIP_CONFIG_FILE and deletes. So
neither the image's layers nor its history hold an index URL with credentials or the CA
bundle; the history shows only the server's URL, dead once the build is over. Builder
containers get the same folder as a read-only bind mount. Only http(s) indexes are passed:
a file:// index of the host means nothing inside a container.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

#: Where the folder is inside a builder image's build step or a build container.
CONTAINER_PIP_DIR = "/tmp/accelkit-pip"  # noqa: S108 (a path in containers, not here)
#: The CA bundle containers get when the host names none (Debian's and Ubuntu's path).
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
#: The user-info part of a URL (`user:token@`), which may hold a secret.
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/@]*@")


def shown_url(url: str) -> str:
    """`url` as logs, plans and errors may show it: any user-info replaced by `****`
    (https://user:token@host/simple/ -> https://****@host/simple/), as pip redacts it."""
    return _USERINFO.sub(r"\1****@", url)


@dataclass(frozen=True)
class PipSettings:
    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    trusted_hosts: tuple[str, ...] = ()
    ca_bundle: Path | None = None


def host_settings(environ: Mapping[str, str]) -> PipSettings:
    """PIP_INDEX_URL, PIP_EXTRA_INDEX_URL, PIP_TRUSTED_HOST and the CA bundle of the host."""

    def urls(value: str | None) -> tuple[str, ...]:
        return tuple(u for u in (value or "").split() if u.startswith(("http://", "https://")))

    index = urls(environ.get("PIP_INDEX_URL"))
    ca: Path | None = None
    for name in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"):
        if environ.get(name) and Path(environ[name]).is_file():
            ca = Path(environ[name])
            break
    if ca is None and HOST_CA_BUNDLE.is_file():
        ca = HOST_CA_BUNDLE
    return PipSettings(
        index_url=index[0] if index else None,
        extra_index_urls=urls(environ.get("PIP_EXTRA_INDEX_URL")),
        trusted_hosts=tuple((environ.get("PIP_TRUSTED_HOST") or "").split()),
        ca_bundle=ca,
    )


def write_pip_dir(
    settings: PipSettings, directory: Path, container_dir: str = CONTAINER_PIP_DIR
) -> Path:
    """Write pip.conf (and ca.pem) for `settings` into `directory`, which containers see at
    `container_dir`; returns the folder."""
    directory.mkdir(parents=True, exist_ok=True)
    lines = ["[global]", "disable-pip-version-check = true", "no-cache-dir = true"]
    if settings.index_url:
        lines.append(f"index-url = {settings.index_url}")
    if settings.extra_index_urls:
        lines.append("extra-index-url = " + " ".join(settings.extra_index_urls))
    if settings.trusted_hosts:
        lines.append("trusted-host = " + " ".join(settings.trusted_hosts))
    if settings.ca_bundle is not None:
        shutil.copyfile(settings.ca_bundle, directory / "ca.pem")
        lines.append(f"cert = {container_dir}/ca.pem")
    conf = directory / "pip.conf"
    conf.write_text("\n".join(lines) + "\n", encoding="utf-8")
    conf.chmod(0o644)
    return directory
