"""`accelkit doctor`: what this machine and this torch can do, and why not."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import typer

from accelkit import options
from accelkit.cli.app import app
from accelkit.options import Opt

DOCTOR_OPTIONS = (
    Opt(
        "as_json",
        ("--json",),
        bool,
        False,
        'Print one JSON object {"env": ..., "capabilities": ...} on stdout instead.',
    ),
)


def doctor(as_json: bool) -> None:
    # Lazy: the probes import torch, and CLI start-up must not.
    from accelkit.probe.capabilities import capabilities
    from accelkit.probe.fingerprint import fingerprint

    env = fingerprint()
    caps = {
        name: {"available": result.available, "reason": result.reason}
        for name, result in capabilities().items()
    }
    if as_json:
        typer.echo(json.dumps({"env": env, "capabilities": caps}, sort_keys=False))
        return
    _render(env, caps)


app.command(
    help="Describe the environment and check every backend and PyTorch 2.14 feature.",
)(options.command(DOCTOR_OPTIONS, doctor))


def _render(env: Mapping[str, Any], caps: Mapping[str, Mapping[str, Any]]) -> None:
    from rich.table import Table
    from rich.text import Text

    from accelkit.cli.console import make_console

    console = make_console()

    summary = Table(title="Environment", show_header=False, title_justify="left")
    summary.add_column("what", style="bold")
    summary.add_column("value", overflow="fold")
    for label, value, style in _summary_rows(env):
        summary.add_row(label, Text(value, style=style))
    console.print(summary)

    backends = _section(env, "backends")
    last_backend = [name for name in caps if name in backends][-1:]
    table = Table(title="Capabilities", title_justify="left")
    table.add_column("capability", style="bold", overflow="fold")
    table.add_column("", justify="center")
    table.add_column("reason", overflow="fold")
    for name, result in caps.items():
        mark = Text("✓", style="green") if result["available"] else Text("✗", style="red")
        table.add_row(name, mark, Text(str(result["reason"])), end_section=[name] == last_backend)
    console.print(table)
    available = sum(1 for result in caps.values() if result["available"])
    console.print(f"{available} of {len(caps)} capabilities available.")


Row = tuple[str, str, str]  # label, value, rich style of the value


def _summary_rows(env: Mapping[str, Any]) -> list[Row]:
    rows: list[Row] = [("accelkit", str(env.get("accelkit")), "")]

    def add(label: str, section: Mapping[str, Any], describe: Any) -> None:
        if section.get("error"):
            rows.append((label, str(section["error"]), "red"))
        else:
            rows.append((label, describe(section), ""))

    add(
        "python",
        _section(env, "python"),
        lambda s: f"{s.get('version')} ({s.get('implementation')}) {s.get('executable')}",
    )
    add("os", _section(env, "os"), _describe_os)
    add(
        "cpu",
        _section(env, "cpu"),
        lambda s: f"{s.get('model')}, {s.get('logical_cpus')} logical CPUs",
    )
    add("host", _section(env, "host"), lambda s: str(s.get("name")))
    torch = _section(env, "torch")
    if torch.get("version"):
        rows.append(("torch", _describe_torch(torch), ""))
    else:
        rows.append(("torch", str(torch.get("error", "unknown")), "red"))

    for name, info in _section(env, "backends").items():
        if not isinstance(info, Mapping):
            continue
        label = f"  {name}"
        if info.get("error"):
            rows.append((label, str(info["error"]), "red"))
        elif info.get("available"):
            devices = [d for d in info.get("devices") or [] if isinstance(d, Mapping)]
            listed = ", ".join(str(d.get("name")) for d in devices)
            rows.append((label, f"available: {len(devices)} device(s): {listed}", "green"))
        else:
            rows.append((label, str(info.get("reason", "")), "dim"))

    variables = _section(env, "env")
    if variables:
        rows.append(("env", " ".join(f"{k}={v}" for k, v in variables.items()), ""))
    else:
        rows.append(("env", "none of the relevant variables set", "dim"))
    docker = _section(env, "docker")
    if docker.get("engine"):
        rows.append(("docker", f"engine {docker['engine']}", ""))
    else:
        rows.append(("docker", str(docker.get("error") or "no engine answered"), "dim"))
    return rows


def _describe_os(section: Mapping[str, Any]) -> str:
    distro = section.get("distro")
    name = distro.get("name") if isinstance(distro, Mapping) else None
    parts = (name, f"kernel {section.get('kernel')}", section.get("machine"))
    return ", ".join(str(part) for part in parts if part)


def _describe_torch(torch: Mapping[str, Any]) -> str:
    built = ", ".join(f"{key} {torch[key]}" for key in ("cuda", "hip", "xpu") if torch.get(key))
    details = [f"git {str(torch.get('git_version'))[:12]}"]
    if torch.get("debug"):
        details.append("debug")
    details.append(built or "CPU only")
    return f"{torch['version']} ({', '.join(details)}) {torch.get('path') or ''}".rstrip()


def _section(env: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = env.get(key)
    return value if isinstance(value, Mapping) else {}
