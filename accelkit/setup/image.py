"""`accelkit setup <backend>`: a backend's test image (torch under test + accelkit), built once
per content and verified by running `accelkit doctor --json` inside it.

The image tag hashes everything that goes into it: the Dockerfile, the install scripts, the
build args (the Python among them), the base image's id, the torch wheel (or index, spec
and channel), accelkit's source and the requirement filters. An unchanged setup finds its
tag on the engine and skips the build (and the accelkit wheel, and the build context).
The image builds in one stage: the build context holds only small files, and the install
inputs (the wheels, the install script, the host's pip settings) reach the install step
over the host's loopback while the build runs (accelkit.containers.build_inputs), so no
layer holds the pip settings or the torch wheel file.
Verification runs every time: it is cheap, and it is what says the image really holds what
was asked for, the Python of `--python` included.

The Python: `--python 3.13` makes the image's venv with CPython 3.13 from the base image's
package sources (`dockerfiles/install-python.sh`, which also checks it); a base image made
for that Python (Debian trixie for 3.13) needs nothing else. A `--torch-wheel` built for
another Python is refused before anything is built.

The torch: a wheel (`--torch-wheel`, installed without the GPU runtimes a CPU image does not
need; the SDK a ROCm build pins, `rocm[libraries]==<exact>`, from the index its build
installed the SDK from, named by the build's manifest beside the wheel:
accelkit.wheels.manifest; the wheels of the same build it pins, its triton, from that
build's --output folder, checked against the manifest's sha256s), an index (`--torch-index`,
`--torch-channel`), or the base image's own (`--torch-from-base`: NGC's PyTorch images, a
distribution's python3-torch such as Debian trixie's). For the last, the venv is made with
`--system-site-packages`, nothing installs torch, and the install step fails when the
venv's interpreter cannot import one; the base image's id, hashed into the tag, stands for
its torch.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from accelkit import resources
from accelkit.errors import BadInput, Failed
from accelkit.inputs import (
    PRERELEASE_CHANNELS,
    check_file,
    check_image,
    check_python,
    check_safe,
    check_torch_channel,
    check_url,
    python_problem,
)
from accelkit.setup.request import SetupRequest
from accelkit.wheels import pipconfig
from accelkit.wheels.manifest import (
    BuildArtifact,
    WheelSdk,
    build_artifacts,
    sdk_requirements,
    wheel_sdk,
)
from accelkit.wheels.wheel import (
    parse_wheel_name,
    requirement_name,
    requires_dist,
    runtime_requirements,
    sha256,
)

LineCallback = Callable[[str], None]

#: The accelkit extra whose requirements (torch excluded) go into test images.
_ACCELKIT_EXTRAS = ("torch",)
_SKIP_FROM_ACCELKIT = ("torch",)
#: Where the install step of every test Dockerfile downloads the install inputs (and deletes
#: them in the same RUN).
INPUTS_IN_IMAGE = "/tmp/accelkit-context"  # noqa: S108 (a path in the image, not here)
#: Seconds a verification command may take (importing torch cold in a fresh container).
VERIFY_TIMEOUT_S = 300.0
#: Seconds a check may take (the compile-only cases: ten kernels, about a second each).
CHECK_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class SetupPlan:
    backend: str
    repository: str
    dockerfile: Path
    base_image: str
    build_args: Mapping[str, str]
    torch_wheel: Path | None
    torch_index: str | None
    torch_spec: str
    skip_requirements: tuple[str, ...]
    probes: Mapping[str, tuple[str, ...]]
    arch: str | None
    accelkit_source: Path
    spec: Any = field(repr=False, compare=False)  # backends.TestImageSpec
    python: str | None = None
    """The image's Python (3.13, 3.13t); None: whatever python3 the base image has."""
    torch_channel: str | None = None
    """PyTorch's channel the index install comes from (pre-releases for nightly, test)."""
    torch_from_base: bool = False
    """The torch under test is the base image's own (no wheel, no index)."""
    torch_sdk: WheelSdk | None = None
    """The wheel's SDK requirements and the index its build installed the SDK from (its
    manifest): installed from that index alone, before the wheel's other requirements."""
    torch_artifacts: tuple[BuildArtifact, ...] = ()
    """The wheels of the torch wheel's build that it requires (its triton), sha256-checked
    against the manifest: installed with it (--no-deps), before its other requirements."""

    @property
    def torch_pre(self) -> bool:
        return self.torch_wheel is None and self.torch_channel in PRERELEASE_CHANNELS

    def torch_source(self) -> dict[str, Any]:
        """What the image records about its torch (accelkit.incontainer.torch_source)."""
        if self.torch_from_base:
            return {"kind": "base", "base_image": self.base_image}
        if self.torch_wheel is not None:
            return {"kind": "wheel", "wheel": self.torch_wheel.name}
        source: dict[str, Any] = {"kind": "index", "index": self.torch_index}
        source["spec"] = self.torch_spec
        if self.torch_channel is not None:
            source["channel"] = self.torch_channel
        return source

    def __post_init__(self) -> None:
        object.__setattr__(self, "build_args", MappingProxyType(dict(self.build_args)))
        object.__setattr__(self, "probes", MappingProxyType(dict(self.probes)))

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "arch": self.arch,
            "python": self.python,
            "repository": self.repository,
            "dockerfile": str(self.dockerfile),
            "base_image": self.base_image,
            "build_args": dict(self.build_args),
            "torch": {
                "wheel": str(self.torch_wheel) if self.torch_wheel else None,
                "index": self.torch_index,
                "spec": None if self.torch_wheel else self.torch_spec,
                "channel": self.torch_channel,
                "pre": self.torch_pre,
                "from_base": self.torch_from_base,
                "skip_requirements": list(self.skip_requirements),
                "sdk": self.torch_sdk.to_dict() if self.torch_sdk is not None else None,
                "build_artifacts": [a.to_dict() for a in self.torch_artifacts],
            },
            "accelkit_source": str(self.accelkit_source),
            "verify": ["accelkit doctor --json", *(" ".join(p) for p in self.probes.values())],
            "requirements": list(self.spec.requirements),
            "checks": {name: " ".join(argv) for name, argv in self.spec.checks.items()},
            "device_checks": {
                name: " ".join(argv) for name, argv in self.spec.device_checks.items()
            },
        }

    def render(self) -> list[str]:
        if self.torch_from_base:
            torch = f"the base image's own (in {self.base_image}; nothing installed)"
        elif self.torch_wheel:
            torch = str(self.torch_wheel)
        else:
            torch = f"{self.torch_spec} from {self.torch_index}"
        if self.torch_channel is not None:
            torch += f" (channel {self.torch_channel}{', pre-releases' if self.torch_pre else ''})"
        lines = [
            f"accelkit setup {self.backend}" + (f" --arch {self.arch}" if self.arch else ""),
            f"  image: {self.repository}:<content hash>",
            f"  from {self.dockerfile.name} on {self.base_image}",
        ]
        lines += [f"    --build-arg {k}={v}" for k, v in sorted(self.build_args.items())]
        lines.append(f"  python: {self.python or 'the base image python3'} (verified)")
        lines.append(f"  torch: {torch}")
        if self.torch_wheel and self.skip_requirements:
            lines.append("    not installed with it: " + ", ".join(self.skip_requirements))
        if self.torch_sdk is not None:
            lines.append(
                f"    its SDK: {', '.join(self.torch_sdk.requirements)} from "
                f"{self.torch_sdk.shown_index} alone (the index of its build: "
                f"{self.torch_sdk.manifest})"
            )
        for artifact in self.torch_artifacts:
            lines.append(
                f"    with its build's {artifact.path.name} (for {artifact.requirement}; "
                f"sha256 {artifact.sha256[:12]}, as its manifest lists)"
            )
        lines.append(f"  accelkit: a wheel of {self.accelkit_source} (installed with --no-deps)")
        lines += [f"  also installed: {requirement}" for requirement in self.spec.requirements]
        lines.append("  verify: accelkit doctor --json (with the device where this host has it)")
        lines += [f"  verify: {' '.join(argv)}" for argv in self.probes.values()]
        lines += [f"  verify: {' '.join(argv)} (no device)" for argv in self.spec.checks.values()]
        lines += [
            f"  verify: {' '.join(argv)} (with the device; only where this host has it)"
            for argv in self.spec.device_checks.values()
        ]
        return lines


@dataclass(frozen=True)
class SetupResult:
    image: str
    cached: bool
    verified: Mapping[str, Any]
    build_s: float
    verify_s: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "image": self.image,
            "cached": self.cached,
            "verified": dict(self.verified),
            "build_s": round(self.build_s, 3),
            "verify_s": round(self.verify_s, 3),
        }


def plan_setup(request: SetupRequest, *, check_files: bool = True) -> SetupPlan:
    """Check the request and lay out the image; starts nothing. With `check_files` False the
    torch wheel need not exist yet (a matrix leg's setup installs what its build writes)."""
    from accelkit import backends

    backend = backends.get(request.backend, flag="backend")
    if request.arch is not None:
        check_safe("--arch", request.arch)
    spec = backend.test_image(request.arch)
    python = check_python(request.python) if request.python is not None else None
    if request.torch_wheel is not None and request.torch_index is not None:
        raise BadInput("--torch-wheel and --torch-index are alternatives: give one")
    if request.torch_from_base:
        _check_torch_from_base(request)
    channel = None
    if request.torch_channel is not None:
        channel = check_torch_channel(request.torch_channel)
        if request.torch_wheel is not None:
            raise BadInput(
                "--torch-channel names an index to install from; with --torch-wheel there "
                "is none: give one"
            )
    wheel = None
    sdk = None
    artifacts: tuple[BuildArtifact, ...] = ()
    if request.torch_wheel is not None and not check_files:
        wheel = request.torch_wheel
    elif request.torch_wheel is not None:
        wheel = check_file("--torch-wheel", _single_torch_wheel(request.torch_wheel))
        parsed = parse_wheel_name(wheel)
        if parsed.name.lower() != "torch":
            raise BadInput(f"--torch-wheel: {wheel.name} is not a torch wheel")
        if python is not None:
            problem = wheel_python_problem(parsed.python, parsed.abi, python)
            if problem is not None:
                raise BadInput(f"--torch-wheel {wheel.name}: {problem}")
        # A wheel built against a pip SDK (ROCm's rocm[libraries]==<exact>) gets it from the
        # index its build used, which the build's manifest beside the wheel names.
        sdk = wheel_sdk(wheel, spec.sdk_requirements)
        # What the same build made and the wheel pins (its triton) is on no index either:
        # installed from beside it, as the build's manifest lists it.
        artifacts = build_artifacts(wheel, spec.skip_requirements)
        _check_artifact_sdk_pins(artifacts, sdk, spec)
    index = spec.build_args.get("TORCH_INDEX_URL")
    if channel is not None:
        index = backend.torch_index(channel)
        if index is None and request.torch_index is None:
            raise BadInput(
                f"--torch-channel {channel}: PyTorch publishes no {backend.name} wheels; "
                "give --torch-wheel (a build) or --torch-index"
            )
    if request.torch_index is not None:
        index = check_url("--torch-index", request.torch_index)
    if wheel is None and index is None and not request.torch_from_base:
        raise BadInput(
            f"accelkit setup {backend.name} needs --torch-wheel PATH, --torch-channel "
            "CHANNEL, --torch-index URL or --torch-from-base"
        )
    check_safe("--torch-spec", request.torch_spec)
    base = check_image("--base-image", request.base_image or spec.default_base_image)
    args = {k: v for k, v in spec.build_args.items() if k != "TORCH_INDEX_URL"}
    if python is not None:
        args["PYTHON_VERSION"] = python  # the Dockerfiles' default (empty): the base's python3
    if request.torch_from_base:
        args["SYSTEM_SITE_PACKAGES"] = "1"  # the venv sees the base's torch (install-python.sh)
    return SetupPlan(
        backend=backend.name,
        repository=f"accelkit-test-{backend.name}",
        dockerfile=resources.dockerfile(spec.dockerfile),
        base_image=base,
        build_args=args,
        torch_wheel=wheel,
        torch_index=None if wheel or request.torch_from_base else index,
        torch_spec=request.torch_spec,
        skip_requirements=spec.skip_requirements,
        probes=spec.probes,
        arch=request.arch,
        accelkit_source=resources.source_tree(request.accelkit_source),
        spec=spec,
        python=python,
        torch_channel=channel if wheel is None else None,
        torch_from_base=request.torch_from_base,
        torch_sdk=sdk,
        torch_artifacts=artifacts,
    )


def _check_torch_from_base(request: SetupRequest) -> None:
    """--torch-from-base installs no torch: no other torch source goes with it, and the base
    image must be named (no backend's default base image carries torch)."""
    given = [
        flag
        for flag, value in (
            ("--torch-wheel", request.torch_wheel),
            ("--torch-index", request.torch_index),
            ("--torch-channel", request.torch_channel),
        )
        if value is not None
    ]
    if request.torch_spec != "torch":
        given.append("--torch-spec")
    if given:
        raise BadInput(
            f"--torch-from-base tests the base image's torch and installs none: drop "
            f"{', '.join(given)}"
        )
    if request.base_image is None:
        raise BadInput(
            "--torch-from-base needs --base-image: an image whose python3 has torch (no "
            "backend's default base image has it)"
        )


def wheel_python_problem(python_tag: str, abi_tag: str, python: str) -> str | None:
    """Why a wheel tagged `python_tag`-`abi_tag` (cp311-cp311, cp313-cp313t, py3-none) does
    not install into Python `python` (3.13, 3.13t), as pip would refuse it; None if it does."""
    if not python_tag.startswith("cp"):
        return None  # pure-Python or abi3-style tags: not tied to one interpreter
    major, minor = python.rstrip("t").split(".")
    wanted = f"cp{major}{minor}"
    if wanted not in python_tag.split("."):
        return f"built for {python_tag}, the image's Python is {python} ({wanted})"
    free_threaded = abi_tag.endswith("t")
    if abi_tag.startswith("cp") and free_threaded != python.endswith("t"):
        build = "the free-threaded build" if free_threaded else "the build with the GIL"
        return f"built for {build} ({abi_tag}), the image's Python is {python}"
    return None


def image_tag(plan: SetupPlan, base_image_id: str) -> str:
    from accelkit.containers.build_inputs import fetch_script
    from accelkit.containers.images import BASE_IMAGE_ARG, content_tag

    hashed = dict(plan.build_args)
    hashed[BASE_IMAGE_ARG] = base_image_id
    hashed["accelkit:install.py"] = _file_digest(_install_script())
    hashed["accelkit:torch_source.py"] = _file_digest(_torch_source_script())
    hashed["accelkit:install-python.sh"] = _file_digest(_python_script())
    hashed["accelkit:fetch_inputs.py"] = _file_digest(fetch_script())
    hashed["accelkit:torch-source"] = json.dumps(plan.torch_source(), sort_keys=True)
    hashed["accelkit:source"] = source_digest(plan.accelkit_source)
    hashed["accelkit:skip"] = ",".join(plan.skip_requirements)
    hashed["accelkit:requirements"] = ",".join(plan.spec.requirements)
    hashed["accelkit:links"] = json.dumps(dict(plan.spec.links), sort_keys=True)
    if plan.torch_from_base:
        hashed["accelkit:torch"] = "from the base image"  # its id is hashed above
    elif plan.torch_wheel is not None:
        hashed["accelkit:torch"] = f"{plan.torch_wheel.name}:{sha256(plan.torch_wheel)}"
        if plan.torch_sdk is not None:
            # The index itself (never shown; only its hash is in the tag): another index may
            # serve other files under the same version.
            sdk = {"index": plan.torch_sdk.index_url, "requires": plan.torch_sdk.requirements}
            hashed["accelkit:torch-sdk"] = json.dumps(sdk, sort_keys=True)
        if plan.torch_artifacts:
            built = [f"{a.path.name}:{a.sha256}" for a in plan.torch_artifacts]
            hashed["accelkit:torch-artifacts"] = ",".join(built)
    else:
        hashed["accelkit:torch"] = f"{plan.torch_spec} from {plan.torch_index}"
    return f"{plan.repository}:" + content_tag(plan.dockerfile, hashed)


def setup(
    plan: SetupPlan,
    client: Any,
    *,
    on_line: LineCallback | None = None,
    environ: Mapping[str, str] | None = None,
) -> SetupResult:
    """Build the test image unless it exists, then verify it (Failed names what is missing)."""
    from accelkit.containers.images import build_from_base, image_exists
    from accelkit.errors import Unavailable

    started = time.monotonic()
    try:
        base_id = str(client.images.get(plan.base_image).id)
    except Exception:
        raise Unavailable(
            f"base image {plan.base_image} is not present on the Docker engine "
            "(it is never pulled: build or load it, or pass --base-image)"
        ) from None
    tag = image_tag(plan, base_id)
    cached = image_exists(client, tag)
    if not cached:
        with tempfile.TemporaryDirectory(prefix="accelkit-setup-") as tmp:
            context, inputs = Path(tmp, "context"), Path(tmp, "inputs")
            write_context(plan, context, inputs, dict(os.environ if environ is None else environ))
            build_from_base(
                client,
                plan.base_image,
                context,
                tag,
                dockerfile="Dockerfile",
                build_args=dict(plan.build_args),
                on_line=on_line,
                inputs=inputs,  # served over the host's loopback, never in the context
            )
    built = time.monotonic()
    verified = verify(plan, client, tag)
    return SetupResult(
        image=tag,
        cached=cached,
        verified=verified,
        build_s=built - started,
        verify_s=time.monotonic() - built,
    )


def verify(
    plan: SetupPlan, client: Any, image: str, *, host_root: Path = Path("/")
) -> dict[str, Any]:
    """Verify `image`: `accelkit doctor --json` and the backend's probes, its checks (with
    no device: the compile-only cases of the target) and, on a host that has the device,
    its device checks (with the backend's container options: graph capture really runs).
    Failed names every problem found. The result says what ran with a device and what
    without (`setup --json`)."""
    from accelkit import backends
    from accelkit.containers.run import RunOptions, run_container

    backend = backends.get(plan.backend)
    has_device = backend.host_has_device(host_root)
    device = backend.container_options(dict(os.environ), host_root=host_root)
    with_device = device if has_device else RunOptions()
    result = run_container(
        client, image, ["accelkit", "doctor", "--json"], with_device, timeout=VERIFY_TIMEOUT_S
    )
    result.check(f"accelkit doctor --json in {image}")
    doctor = _last_json_object(result.output_tail)
    if doctor is None:
        raise Failed(f"accelkit doctor --json in {image} printed no JSON object")
    probes: dict[str, str] = {}
    for name, argv in plan.probes.items():
        probe = run_container(client, image, list(argv), timeout=VERIFY_TIMEOUT_S)
        probes[name] = "\n".join(probe.output_tail)
    problems = python_problems(doctor, plan.python)
    problems += backend.verify_test_image(doctor, probes, plan.spec)
    ran: dict[str, str] = {"accelkit doctor": "with device" if has_device else "without device"}
    ran.update(dict.fromkeys(plan.probes, "without device"))
    checks = [
        (name, argv, RunOptions(), "without device") for name, argv in plan.spec.checks.items()
    ]
    for name, argv in plan.spec.device_checks.items():
        if has_device:
            checks.append((name, argv, device, "with device"))
        else:
            ran[name] = f"not run: this host has no {plan.backend} device"
    for name, argv, options, how in checks:
        outcome = run_container(client, image, list(argv), options, timeout=CHECK_TIMEOUT_S)
        ran[name] = how
        if outcome.exit_code != 0 or outcome.timed_out:
            problems.append(f"{name} ({' '.join(argv)}) {_check_failure(outcome)}")
    if problems:
        raise Failed(f"{image} is not set up as asked: " + "; ".join(problems))
    env = doctor.get("env") if isinstance(doctor.get("env"), dict) else {}
    torch = env.get("torch", {}) if isinstance(env, dict) else {}
    caps = doctor.get("capabilities") if isinstance(doctor.get("capabilities"), dict) else {}
    python = env.get("python", {}) if isinstance(env, dict) else {}
    return {
        "python": {key: python.get(key) for key in ("version", "free_threaded")},
        "torch": {
            key: torch.get(key)
            for key in ("version", "git_version", "cuda", "hip", "xpu", "source")
        },
        "accelkit": env.get("accelkit") if isinstance(env, dict) else None,
        "capabilities": {
            name: bool(value.get("available"))
            for name, value in (caps or {}).items()
            if isinstance(value, dict)
        },
        "probes": probes,
        "device": has_device,
        "checks": ran,
    }


def _check_failure(outcome: Any) -> str:
    """How a check command failed, in one line: its error line, or its failed cases."""
    if outcome.timed_out:
        return f"did not finish within {CHECK_TIMEOUT_S:g} s"
    lines = [line.strip() for line in outcome.output_tail if line.strip()]
    errors = [line for line in lines if line.startswith("accelkit: error: ")]
    if errors:
        return f"exited {outcome.exit_code}: {errors[-1].removeprefix('accelkit: error: ')}"
    failed = [line for line in lines if line.split()[:1] in (["FAILED"], ["ERROR"], ["CRASHED"])]
    shown = "; ".join(failed[:5]) or (lines[-1] if lines else "no output")
    return f"exited {outcome.exit_code}: {shown[:600]}"


def python_problems(doctor: dict[str, Any], wanted: str | None) -> list[str]:
    """What differs between the image's interpreter (from `accelkit doctor --json` inside it)
    and the Python the setup asked for; empty when it asked for none or got it."""
    if wanted is None:
        return []
    env = doctor.get("env") if isinstance(doctor.get("env"), dict) else {}
    python = env.get("python") if isinstance(env, dict) else None
    if not isinstance(python, dict) or not isinstance(python.get("version"), str):
        return [f"the image reports no Python version (--python {wanted})"]
    problem = python_problem(wanted, python["version"], bool(python.get("free_threaded")))
    return [] if problem is None else [f"the image runs {problem} (--python {wanted})"]


def write_context(plan: SetupPlan, context: Path, inputs: Path, environ: Mapping[str, str]) -> None:
    """The build context (the Dockerfile, install-python.sh: small files a layer may keep;
    `build_from_base` adds fetch_inputs.py) and, apart from it, the install inputs the build
    downloads from the host while it runs (install.py/json, the wheels, the requirement
    lists, pip/)."""
    context.mkdir(parents=True)
    shutil.copyfile(plan.dockerfile, context / "Dockerfile")
    shutil.copyfile(_python_script(), context / "install-python.sh")
    inputs.mkdir(parents=True)
    shutil.copyfile(_install_script(), inputs / "install.py")
    shutil.copyfile(_torch_source_script(), inputs / "torch_source.py")
    install: dict[str, Any] = {"torch_source": plan.torch_source()}
    (inputs / "torch").mkdir()
    if plan.torch_wheel is not None:
        _link_or_copy(plan.torch_wheel, inputs / "torch" / plan.torch_wheel.name)
        install["torch_wheels"] = [plan.torch_wheel.name]
        torch_reqs = runtime_requirements(
            requires_dist(plan.torch_wheel), skip=plan.skip_requirements
        )
        if plan.torch_sdk is not None:
            # From the SDK's index alone (install.py), before the rest from pip's settings.
            install["torch_sdk"] = {
                "index_url": plan.torch_sdk.index_url,
                "requirements": list(plan.torch_sdk.requirements),
            }
            from_sdk = set(sdk_requirements(torch_reqs, plan.spec.sdk_requirements))
            torch_reqs = [line for line in torch_reqs if line not in from_sdk]
        if plan.torch_artifacts:
            # The build's own wheels, with torch and --no-deps; their requirements join the rest.
            torch_reqs = _with_build_artifacts(plan, torch_reqs, inputs / "torch")
            install["build_artifacts"] = [a.path.name for a in plan.torch_artifacts]
    elif plan.torch_from_base:
        install["torch_from_base"] = True
        install["torch_skip"] = list(plan.skip_requirements)
        torch_reqs = []
    else:
        install["torch_index"] = plan.torch_index
        install["torch_spec"] = plan.torch_spec
        install["torch_pre"] = plan.torch_pre
        torch_reqs = []
    _write_lines(inputs / "torch-requirements.txt", torch_reqs)
    accelkit_wheel = build_accelkit_wheel(plan.accelkit_source, inputs / "accelkit")
    install["accelkit"] = [accelkit_wheel.name]
    _write_lines(
        inputs / "accelkit-requirements.txt",
        runtime_requirements(
            requires_dist(accelkit_wheel), extras=_ACCELKIT_EXTRAS, skip=_SKIP_FROM_ACCELKIT
        ),
    )
    install["requirements"] = list(plan.spec.requirements)
    install["links"] = dict(plan.spec.links)
    (inputs / "install.json").write_text(json.dumps(install, indent=2), encoding="utf-8")
    pipconfig.write_pip_dir(
        pipconfig.host_settings(environ), inputs / "pip", f"{INPUTS_IN_IMAGE}/pip"
    )


def _check_artifact_sdk_pins(
    artifacts: tuple[BuildArtifact, ...], sdk: WheelSdk | None, spec: Any
) -> None:
    """An artifact installed with --no-deps may pin the SDK only as the torch wheel does (the
    SDK install from its index covers it): BadInput, one line, for another SDK pin."""
    covered = set(sdk.requirements) if sdk is not None else set()
    for artifact in artifacts:
        own = runtime_requirements(requires_dist(artifact.path), skip=spec.skip_requirements)
        for line in sdk_requirements(own, spec.sdk_requirements):
            if line.replace(" ", "") not in covered:
                raise BadInput(
                    f"--torch-wheel: its build's {artifact.path.name} requires {line}, which "
                    "only the SDK's index serves and the torch wheel does not pin"
                )


def _with_build_artifacts(plan: SetupPlan, torch_reqs: list[str], into: Path) -> list[str]:
    """Copies the torch wheel's build artifacts into `into` and gives the requirements left to
    install from pip's settings: torch's, less those the artifacts satisfy, plus the
    artifacts' own, less what torch and the artifacts are and the SDK pins (installed from
    the SDK's index: `_check_artifact_sdk_pins`)."""
    installed = {requirement_name(a.requirement) for a in plan.torch_artifacts} | {"torch"}
    satisfied = {a.requirement for a in plan.torch_artifacts}
    remaining = [line for line in torch_reqs if line not in satisfied]
    for artifact in plan.torch_artifacts:
        _link_or_copy(artifact.path, into / artifact.path.name)
        own = runtime_requirements(requires_dist(artifact.path), skip=plan.skip_requirements)
        from_sdk = set(sdk_requirements(own, plan.spec.sdk_requirements))
        for line in own:
            if requirement_name(line) in installed or line in from_sdk or line in remaining:
                continue
            remaining.append(line)
    return remaining


def _single_torch_wheel(path: Path) -> Path:
    """`path` itself, or the one torch wheel in the folder `path` (`accelkit build --output`)."""
    if not path.is_dir():
        return path
    wheels = sorted(path.glob("torch-*.whl"))
    if len(wheels) != 1:
        found = ", ".join(w.name for w in wheels) or "none"
        raise BadInput(
            f"--torch-wheel {path}: expected one torch wheel in the folder, found {found}"
        )
    return wheels[0]


def build_accelkit_wheel(source: Path, wheel_dir: Path) -> Path:
    """A wheel of accelkit from its source tree (pip wheel --no-deps)."""
    wheel_dir.mkdir(parents=True, exist_ok=True)
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet"]
    argv = [*pip_wheel, "--wheel-dir", str(wheel_dir), str(source)]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=600)
    wheels = sorted(wheel_dir.glob("accelkit-*.whl"))
    if proc.returncode != 0 or len(wheels) != 1:
        tail = "".join(f"\n  | {ln}" for ln in (proc.stdout + proc.stderr).splitlines()[-15:])
        raise Failed(f"building accelkit's wheel from {source} failed{tail}")
    return wheels[0]


def source_digest(source: Path) -> str:
    """sha256 over what accelkit's wheel is made of (its package, the Dockerfiles it ships,
    pyproject.toml)."""
    digest = hashlib.sha256(b"accelkit-source-v1\0")
    files = [source / "pyproject.toml", source / "README.md"]
    for top in ("accelkit", "dockerfiles"):
        for directory, subdirs, names in os.walk(source / top):
            subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
            files += [Path(directory, n) for n in sorted(names) if not n.endswith((".pyc", ".pyo"))]
    for path in files:
        if path.is_file():
            digest.update(path.relative_to(source).as_posix().encode() + b"\0")
            digest.update(_file_digest(path).encode() + b"\0")
    return digest.hexdigest()


def _install_script() -> Path:
    return Path(__file__).resolve().parent.parent / "incontainer" / "image_install.py"


def _torch_source_script() -> Path:
    return Path(__file__).resolve().parent.parent / "incontainer" / "torch_source.py"


def _python_script() -> Path:
    return resources.dockerfile("install-python.sh")


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def _write_lines(path: Path, lines: Iterable[str]) -> None:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")


def _last_json_object(lines: Iterable[str]) -> dict[str, Any] | None:
    for line in reversed(list(lines)):
        text = line.strip()
        if text.startswith("{"):
            try:
                value = json.loads(text)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
    return None
