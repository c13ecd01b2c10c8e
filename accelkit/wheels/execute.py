"""Carrying out a `BuildPlan`: the builder image, the build container, the checks, the manifest.

1. The builder image `accelkit-builder-<backend>:<content tag>` is built unless the engine has
   it (an unchanged plan is a cache hit).
2. The build runs in one container (host network: package indexes), with accelkit's package,
   the plan, the source (read-only) and the ccache folder mounted; the host's pip settings
   come as a read-only mount, never as an image layer (the builder image's own build
   fetches them over the host's loopback: accelkit.containers.build_inputs).
   incontainer.py runs the steps and reports them with marker lines; every line goes to
   the log file next to the outputs.
3. The wheels are copied out of the container into a staging folder and only after every
   step passed are they validated (against the plan's expectation with the resolved values
   filled in) and moved to the output folder; a failed build, or a Ctrl-C, reports no wheel
   (and the container is removed either way).
4. The smoke test (on by default): the torch wheel installed in a fresh container, a fresh
   venv, with the SDK index as an extra index, and imported with the plan's smoke checks.
5. manifest.json: inputs, the plan, the resolved values, the builder image and its id,
   per-step durations, sha256 and size of every artifact, the validation and smoke results.
   `accelkit setup` reads it back (accelkit/wheels/manifest.py): the SDK index a wheel's
   SDK requirement is installed from.
"""

from __future__ import annotations

import collections
import fnmatch
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelkit import resources
from accelkit.errors import Failed, Unavailable
from accelkit.incontainer.build_steps import STEP_MARKER
from accelkit.incontainer.steps import UnsetVariable
from accelkit.wheels import pipconfig
from accelkit.wheels.manifest import MANIFEST_NAME, MANIFEST_SCHEMA
from accelkit.wheels.plan import (
    CONTAINER_ACCELKIT,
    CONTAINER_CCACHE,
    CONTAINER_DIST,
    CONTAINER_PLAN,
    CONTAINER_SOURCE,
    BuildPlan,
)
from accelkit.wheels.wheel import WheelReport, sha256, validate_wheel

#: Lines of the build log shown when a step fails.
FAILURE_TAIL_LINES = 40

LineCallback = Callable[[str], None]
StepCallback = Callable[[str, str], None]


@dataclass(frozen=True)
class BuildOutcome:
    wheels: tuple[Path, ...]
    manifest: Path
    log: Path
    builder_image: str
    builder_cached: bool
    durations: dict[str, float] = field(default_factory=dict)
    validation: tuple[WheelReport, ...] = ()
    resolved: dict[str, str] = field(default_factory=dict)
    smoke: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "wheels": [str(w) for w in self.wheels],
            "manifest": str(self.manifest),
            "log": str(self.log),
            "builder_image": self.builder_image,
            "builder_cached": self.builder_cached,
            "durations": self.durations,
            "resolved": self.resolved,
            "smoke": self.smoke,
        }


def execute(
    plan: BuildPlan,
    client: Any,
    *,
    on_line: LineCallback | None = None,
    on_step: StepCallback | None = None,
    smoke_image: str | None = None,
    environ: dict[str, str] | None = None,
) -> BuildOutcome:
    from accelkit.containers.images import build_from_base, image_exists
    from accelkit.containers.run import CopyOut, Mount, RunOptions, run_container

    show = on_line or (lambda line: None)
    step_event = on_step or (lambda name, state: None)
    environ = dict(os.environ if environ is None else environ)
    output = Path(plan.inputs["output"])
    output.mkdir(parents=True, exist_ok=True)
    log_path = output / f"build-{plan.backend}.log"
    started = time.time()
    durations: dict[str, float] = {}
    resolved: dict[str, str] = {}
    unavailable: list[str] = []
    tail: collections.deque[str] = collections.deque(maxlen=FAILURE_TAIL_LINES)

    with (
        tempfile.TemporaryDirectory(prefix="accelkit-build-") as tmp,
        open(log_path, "w", encoding="utf-8") as log,
    ):

        def line(text: str) -> None:
            log.write(text + "\n")
            log.flush()
            if text.startswith(STEP_MARKER):
                _on_marker(text, durations, step_event, resolved, unavailable)
                return
            tail.append(text)
            show(text)

        pip_dir = pipconfig.write_pip_dir(pipconfig.host_settings(environ), Path(tmp, "pip"))
        # 1. The builder image.
        image = f"{plan.builder.repository}:{plan.builder.tag}"
        step_event("builder-image", "start")
        image_started = time.monotonic()
        cached = image_exists(client, image)
        if not cached:
            context = Path(tmp, "context")
            context.mkdir()
            shutil.copyfile(resources.dockerfile(plan.builder.dockerfile), context / "Dockerfile")
            build_from_base(
                client,
                plan.builder.base_image,
                context,
                image,
                dockerfile="Dockerfile",
                build_args=dict(plan.builder.build_args),
                on_line=line,
                inputs=pip_dir,  # served over the host's loopback, never in the context
            )
        durations["builder-image"] = round(time.monotonic() - image_started, 3)
        step_event("builder-image", "cached" if cached else "done")
        image_id = str(client.images.get(image).id)

        # 2. The build.
        plan_dir = Path(tmp, "plan")
        plan_dir.mkdir()
        Path(plan_dir, "plan.json").write_text(plan.to_json(), encoding="utf-8")
        mounts = [
            Mount(source=resources.package_dir(), target=f"{CONTAINER_ACCELKIT}/accelkit"),
            Mount(source=plan_dir, target=str(Path(CONTAINER_PLAN).parent)),
            Mount(source=pip_dir, target=pipconfig.CONTAINER_PIP_DIR),
        ]
        if plan.inputs.get("source"):
            mounts.append(Mount(source=Path(plan.inputs["source"]), target=CONTAINER_SOURCE))
        if plan.inputs.get("ccache"):
            ccache = Path(plan.inputs["ccache"])
            ccache.mkdir(parents=True, exist_ok=True)
            mounts.append(Mount(source=ccache, target=CONTAINER_CCACHE, read_only=False))
        options = RunOptions(
            env={
                "PYTHONPATH": CONTAINER_ACCELKIT,
                "PIP_CONFIG_FILE": f"{pipconfig.CONTAINER_PIP_DIR}/pip.conf",
                "PYTHONUNBUFFERED": "1",
            },
            mounts=tuple(mounts),
            network_mode="host",
            working_dir="/work",
        )
        staging = Path(tmp, "staging")
        result = run_container(
            client,
            image,
            ["python", "-m", "accelkit.incontainer.build_steps", CONTAINER_PLAN],
            options,
            on_line=line,
            copy_out=[CopyOut(source=CONTAINER_DIST, target_dir=staging)],
        )
        if unavailable:
            raise Unavailable(f"accelkit build {plan.backend}: {unavailable[0]}")
        if not result.ok:
            shown = "".join(f"\n  | {text}" for text in tail)
            raise Failed(
                f"accelkit build {plan.backend} failed (exit {result.exit_code}); "
                f"full log: {log_path}{shown}"
            )

        # 3. Validate, then report.
        built = sorted(staging.rglob("*.whl"))
        wheels = [w for w in built if any(fnmatch.fnmatch(w.name, p) for p in plan.outputs)]
        torch_wheels = [w for w in wheels if fnmatch.fnmatch(w.name, plan.outputs[0])]
        if not torch_wheels:
            names = ", ".join(w.name for w in built) or "nothing"
            raise Failed(
                f"accelkit build {plan.backend}: no wheel matching {plan.outputs[0]} "
                f"(built: {names}); full log: {log_path}"
            )
        try:
            expect = plan.expect.resolved(resolved)
        except UnsetVariable as exc:
            raise Failed(f"accelkit build {plan.backend}: the builder never set {exc}") from None
        reports = tuple(validate_wheel(w, expect) for w in torch_wheels)
        bad = [r for r in reports if not r.ok]
        if bad:
            problems = "; ".join(f"{r.wheel.name}: {', '.join(r.problems)}" for r in bad)
            raise Failed(f"accelkit build {plan.backend}: wheel check failed: {problems}")
        final = []
        for wheel in wheels:
            target = output / wheel.name
            shutil.move(str(wheel), target)
            final.append(target)

    smoke: dict[str, Any] | None = None
    if plan.inputs.get("smoke"):
        step_event("smoke", "start")
        smoke = run_smoke(plan, client, final[0], smoke_image or image, show, own=not smoke_image)
        durations["smoke"] = smoke["seconds"]
        step_event("smoke", "done")
    manifest = write_manifest(
        plan,
        output,
        image,
        image_id,
        cached,
        durations,
        final,
        reports,
        smoke,
        started,
        log_path,
        resolved,
    )
    return BuildOutcome(
        wheels=tuple(final),
        manifest=manifest,
        log=log_path,
        builder_image=image,
        builder_cached=cached,
        durations=durations,
        validation=reports,
        resolved=resolved,
        smoke=smoke,
    )


def run_smoke(
    plan: BuildPlan, client: Any, wheel: Path, image: str, show: LineCallback, *, own: bool
) -> dict[str, Any]:
    """Install `wheel` in a fresh container of `image` (a fresh builder container when `own`:
    its Python is the wheel's; otherwise the image's python3), in a fresh venv, with the
    plan's SDK index as an extra index, and import it with the plan's smoke checks."""
    from accelkit.containers.run import Mount, RunOptions, run_container

    spec = {
        "wheel": f"/wheels/{wheel.name}",
        "index_url": plan.index_url,
        "python": "python" if own else "python3",
        "module": plan.smoke.module,
        "warnings_as_errors": list(plan.smoke.warnings_as_errors),
        "libraries": dict(plan.smoke.libraries),
    }
    with tempfile.TemporaryDirectory(prefix="accelkit-smoke-") as tmp:
        pip_dir = pipconfig.write_pip_dir(pipconfig.host_settings(dict(os.environ)), Path(tmp))
        argv = [str(spec["python"]), "-m", "accelkit.incontainer.build_steps", "smoke"]
        argv.append(json.dumps(spec))
        options = RunOptions(
            env={
                "PYTHONPATH": CONTAINER_ACCELKIT,
                "PIP_CONFIG_FILE": f"{pipconfig.CONTAINER_PIP_DIR}/pip.conf",
            },
            mounts=(
                Mount(source=resources.package_dir(), target=f"{CONTAINER_ACCELKIT}/accelkit"),
                Mount(source=wheel.parent, target="/wheels"),
                Mount(source=pip_dir, target=pipconfig.CONTAINER_PIP_DIR),
            ),
            network_mode="host",
        )
        result = run_container(client, image, argv, options, on_line=show)
    result.check(f"smoke test of {wheel.name} in {image}")
    return {"image": image, "ok": True, "seconds": round(result.duration_s, 3), "checks": spec}


def write_manifest(
    plan: BuildPlan,
    output: Path,
    image: str,
    image_id: str,
    cached: bool,
    durations: dict[str, float],
    wheels: list[Path],
    reports: tuple[WheelReport, ...],
    smoke: dict[str, Any] | None,
    started: float,
    log_path: Path,
    resolved: dict[str, str],
) -> Path:
    from accelkit.results.io import atomic_write_text

    manifest = {
        "schema": MANIFEST_SCHEMA,
        "started": _iso(started),
        "finished": _iso(time.time()),
        "inputs": dict(plan.inputs),
        "plan": plan.to_dict(),
        "resolved": resolved,
        "builder": {"image": image, "id": image_id, "cached": cached},
        "durations_s": durations,
        "artifacts": [
            {"file": w.name, "sha256": sha256(w), "size": w.stat().st_size} for w in wheels
        ],
        "validation": [
            {
                "file": r.wheel.name,
                "ok": r.ok,
                "checked": list(r.checked),
                "problems": list(r.problems),
            }
            for r in reports
        ],
        "smoke": smoke,
        "log": str(log_path),
    }
    path = output / MANIFEST_NAME
    atomic_write_text(path, json.dumps(manifest, indent=2, default=str) + "\n")
    return path


def _on_marker(
    text: str,
    durations: dict[str, float],
    step_event: StepCallback,
    resolved: dict[str, str],
    unavailable: list[str],
) -> None:
    try:
        data = json.loads(text[len(STEP_MARKER) :])
    except ValueError:
        return
    name, state = str(data.get("step")), str(data.get("state"))
    if state == "resolved":
        resolved.update({str(k): str(v) for k, v in dict(data.get("values") or {}).items()})
        return
    if data.get("unavailable"):
        unavailable.append(str(data["unavailable"]))
    if "seconds" in data:
        durations[name] = float(data["seconds"])
    step_event(name, state)


def _iso(timestamp: float) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(timestamp, tz=timezone.utc).isoformat(timespec="seconds")
