"""Runs a build plan INSIDE the builder: `python -m accelkit.incontainer.build_steps PLAN`.

Standard library only (the builder has nothing else of accelkit's). The plan is JSON written
by the host (accelkit.wheels.plan); every command is an argument list, nothing goes through a
shell. Progress reaches the host as marker lines on stdout:
    ::accelkit-step:: {"step": NAME, "state": "start"|"done"|"failed"|"skipped", "seconds": S}
a step that sets plan variables the host needs (the exact SDK version, the SDK's library
names, the triton pin) also sends {"step": NAME, "state": "resolved", "values": {...}}, and a
step that finds the environment cannot do what was asked (a version the index lacks) fails
with {"unavailable": MESSAGE}. The process exits 1 at the first failing step, 3 when the
environment cannot do it.

`python -m accelkit.incontainer.build_steps smoke SPEC_JSON` installs a wheel into a fresh
venv and imports it (accelkit build's smoke test); see `smoke`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from accelkit.incontainer.steps import (
    EnvVar,
    Step,
    UnsetVariable,
    plan_from_dict,
    references,
    substitute,
)

STEP_MARKER = "::accelkit-step::"
#: Exit codes of the builder process (the host's: 1 failed, 3 the environment cannot do it).
EXIT_FAILED = 1
EXIT_UNAVAILABLE = 3


class StepFailed(Exception):
    pass


class StepUnavailable(StepFailed):
    """The environment cannot do what the step was asked (exit 3 on the host)."""


def marker(step: str, state: str, seconds: float | None = None, **extra: Any) -> None:
    data: dict[str, Any] = {"step": step, "state": state}
    if seconds is not None:
        data["seconds"] = round(seconds, 3)
    data.update(extra)
    print(f"{STEP_MARKER} {json.dumps(data)}", flush=True)


def run(argv: Sequence[str], env: Mapping[str, str], cwd: str | None = None) -> None:
    print("+ " + " ".join(argv), flush=True)
    try:
        proc = subprocess.run(list(argv), env=dict(env), cwd=cwd, check=False)
    except OSError as exc:
        raise StepFailed(f"cannot run {argv[0]}: {exc}") from None
    if proc.returncode != 0:
        raise StepFailed(f"{argv[0]} exited with code {proc.returncode}")


def output(argv: Sequence[str], env: Mapping[str, str], cwd: str | None = None) -> str:
    try:
        proc = subprocess.run(
            list(argv), env=dict(env), cwd=cwd, capture_output=True, text=True, check=False
        )
    except OSError as exc:
        raise StepFailed(f"cannot run {argv[0]}: {exc}") from None
    if proc.returncode != 0:
        sys.stdout.write(proc.stdout + proc.stderr)
        raise StepFailed(f"{' '.join(argv)} exited with code {proc.returncode}")
    return proc.stdout.strip()


# --- SDK versions -------------------------------------------------------------------------

_VERSION = re.compile(
    r"(?P<release>\d+(?:\.\d+)*)(?:(?P<pre>a|b|rc)(?P<pre_n>\d+))?(?:\.dev(?P<dev>\d+))?"
    r"(?:\+(?P<local>[A-Za-z0-9.]+))?"
)
_PRE_RANK = {"a": 0, "b": 1, "rc": 2, None: 3}


def version_key(version: str) -> tuple[Any, ...]:
    """A sort key in PEP 440 order for the spellings package indexes use (7.14.0,
    7.14.0rc2, 7.14.0a20261128, 7.14.0.dev0+abc); an unreadable version sorts first."""
    match = _VERSION.fullmatch(version)
    if match is None:
        return (0, ())
    release = tuple(int(p) for p in match["release"].split("."))
    release += (0,) * (4 - len(release))
    pre = _PRE_RANK[match["pre"]], int(match["pre_n"] or 0)
    dev = (0, int(match["dev"])) if match["dev"] is not None else (1, 0)
    if match["dev"] is not None and match["pre"] is None:
        pre = (-1, 0)  # X.Y.Z.devN comes before X.Y.ZaN
    return (1, release, pre, dev, match["local"] or "")


def is_final(version: str) -> bool:
    match = _VERSION.fullmatch(version)
    return match is not None and match["pre"] is None and match["dev"] is None


def choose_version(requested: str, available: Sequence[str], pre: bool) -> str | None:
    """The version `requested` names among `available`: `X.Y` is the newest X.Y.* (final
    releases only unless `pre`); anything longer must be there exactly."""
    if re.fullmatch(r"\d+\.\d+", requested):
        series = [
            v
            for v in available
            if v.startswith(requested + ".")
            and _VERSION.fullmatch(v) is not None
            and (pre or is_final(v))
        ]
        return max(series, key=version_key) if series else None
    return requested if requested in available else None


def local_version(version: str, prefix: str, dev_prefix: str) -> str:
    """The local-version part a wheel built against SDK `version` gets (TheRock's rule:
    `rocm7.14.0`, and `devrocm7.14.0.dev0-<sha>` for development SDKs)."""
    base = dev_prefix if "dev" in version else prefix
    return base + version.replace("+", "-")


def available_versions(pip_output: str) -> list[str]:
    """The versions `pip index versions` lists ("Available versions: 7.14.1, 7.14.0")."""
    for line in pip_output.splitlines():
        if line.startswith("Available versions:"):
            return [v.strip() for v in line.split(":", 1)[1].split(",") if v.strip()]
    return []


def resolve_sdk_version(
    step: Step, args: Mapping[str, Any], env: Mapping[str, str], variables: dict[str, str]
) -> dict[str, str]:
    requested, index, pre = str(args["requested"]), str(args["index_url"]), bool(args["pre"])
    package = str(args["package"])
    # Always list pre-releases too: the choice below filters them, and a message can then
    # say that only pre-releases would match.
    argv = [sys.executable, "-m", "pip", "index", "versions", package]
    argv += ["--index-url", index, "--pre"]
    print("+ " + " ".join(argv), flush=True)
    proc = subprocess.run(argv, env=dict(env), capture_output=True, text=True, check=False)
    sys.stdout.write(proc.stdout + proc.stderr)
    available = available_versions(proc.stdout) if proc.returncode == 0 else []
    if proc.returncode != 0 and "No matching distribution" not in proc.stdout + proc.stderr:
        last = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1]
        raise StepUnavailable(f"cannot list the {package} versions of {index}: {last}")
    exact = choose_version(requested, available, pre)
    if exact is None:
        shown = sorted(available, key=version_key, reverse=True)
        has = ", ".join(shown[:12]) + (" ..." if len(shown) > 12 else "") if shown else "none"
        hint = ""
        if not pre and choose_version(requested, available, True) is not None:
            hint = " (only pre-releases match: add --pre)"
        raise StepUnavailable(f"{package} {requested} is not in {index}{hint}; it has: {has}")
    print(f"{package} {requested} -> {exact}", flush=True)
    return {
        str(args["variable"]): exact,
        str(args["local_variable"]): local_version(
            exact, str(args["local_prefix"]), str(args["dev_local_prefix"])
        ),
    }


# --- the SDK's libraries ------------------------------------------------------------------

#: Asks the installed rocm_sdk about each preload name through its public find_libraries.
_SDK_LIBRARIES_PROBE = """\
import json, sys
import rocm_sdk
try:
    from rocm_sdk import _dist_info
    known = sorted(_dist_info.ALL_LIBRARIES)
except Exception:
    known = None
result = {"known": known, "unknown": [], "missing": []}
for name in json.loads(sys.argv[1]):
    try:
        rocm_sdk.find_libraries(name)
    except ModuleNotFoundError as exc:
        result["unknown" if "Unknown rocm library" in str(exc) else "missing"].append(
            f"{name}: {exc}")
    except FileNotFoundError as exc:
        result["missing"].append(f"{name}: {exc}")
print(json.dumps(result))
"""


def check_sdk_libraries(args: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, str]:
    preload = [str(name) for name in args["preload"]]
    text = output([sys.executable, "-c", _SDK_LIBRARIES_PROBE, json.dumps(preload)], env, "/")
    result = json.loads(text.splitlines()[-1])
    problems = result["unknown"] + result["missing"]
    if problems:
        raise StepFailed("the installed SDK cannot preload: " + "; ".join(problems))
    known = result["known"] if result["known"] is not None else preload
    print(f"the SDK knows {len(known)} libraries; all {len(preload)} preloads resolve", flush=True)
    return {str(args["variable"]): ",".join(known)}


def rocm_init_text(version: str, preload: Sequence[str]) -> str:
    """torch/_rocm_init.py as TheRock's build_prod_wheels.py generates it: preload the ROCm
    libraries through rocm_sdk and check that the installed SDK is the one built against."""
    names = ", ".join(repr(str(name)) for name in preload)
    return (
        '"""Generated by accelkit build: preload the ROCm libraries torch depends on."""\n\n\n'
        "def initialize():\n"
        "    import rocm_sdk\n\n"
        "    rocm_sdk.initialize_process(\n"
        f"        preload_shortnames=[{names}],\n"
        f"        check_version={version!r},\n"
        "    )\n"
    )


# --- triton -------------------------------------------------------------------------------


def triton_step(args: Mapping[str, Any], env: Mapping[str, str], cwd: str | None) -> dict[str, str]:
    """One phase of TheRock's triton build: checkout at torch's pin, wheel, install."""
    source = Path(str(args["source"]))
    phase = str(args["phase"])
    if phase == "checkout":
        pin_file = Path(cwd or ".", str(args["pin_file"]))
        try:
            pin = pin_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise StepFailed(f"no triton pin: {exc}") from None
        if not re.fullmatch(r"[0-9a-f]{7,40}", pin):
            raise StepFailed(f"{pin_file}: malformed triton pin {pin!r}")
        if source.exists():
            shutil.rmtree(source)
        source.mkdir(parents=True)
        run(["git", "init", "--quiet", str(source)], env)
        run(["git", "-C", str(source), "fetch", "--depth", "1", "--", str(args["repo"]), pin], env)
        run(["git", "-C", str(source), "checkout", "--quiet", "FETCH_HEAD"], env)
        return {}
    # setup.py moved from python/ to the root of the triton tree in early 2.9.
    setup_dir = source / "python" if (source / "python" / "setup.py").is_file() else source
    if phase == "wheel":
        dist = setup_dir / "dist"
        if dist.exists():
            shutil.rmtree(dist)
        run([sys.executable, "setup.py", "bdist_wheel"], env, str(setup_dir))
        return {}
    if phase == "install":
        name = str(args["wheel_name"])
        wheels = sorted((setup_dir / "dist").glob(f"{name.replace('-', '_')}-*.whl"))
        if len(wheels) != 1:
            raise StepFailed(f"expected one {name} wheel in {setup_dir / 'dist'}, found {wheels}")
        wheel_dir = Path(str(args["wheel_dir"]))
        wheel_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy2(wheels[0], wheel_dir)
        run([sys.executable, "-m", "pip", "install", str(wheels[0])], env, "/")
        version = wheels[0].name.split("-")[1]
        return {str(args["variable"]): f"{name}=={version}"}
    raise StepFailed(f"unknown triton phase {phase!r}")


# --- the wheel ----------------------------------------------------------------------------


def build_wheel_argv(tree: Path, outdir: str, force_include: Sequence[str]) -> list[str]:
    """`python -m build --wheel --no-isolation`, and for scikit-build-core trees the
    force-includes of generated files its Git-ignore rules would drop (pytorch#191625)."""
    argv = [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", outdir]
    pyproject = tree / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8") if pyproject.is_file() else ""
    if "scikit_build_core.build" in text:
        argv += [f"-Cwheel.force-include.{path}={path}" for path in force_include]
    return argv


def do_step(
    step: Step, args: Mapping[str, Any], env: Mapping[str, str], variables: dict[str, str]
) -> dict[str, str]:
    """Run one step (its argv and args already substituted); the plan variables it sets."""
    if step.action == "run":
        run(step.argv, env, step.cwd)
    elif step.action == "copy-tree":
        target = Path(str(args["target"]))
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(str(args["source"]), target, symlinks=True)
        print(f"copied {args['source']} to {target}", flush=True)
    elif step.action == "resolve-sdk-version":
        return resolve_sdk_version(step, args, env, variables)
    elif step.action == "resolve-paths":
        found = {}
        for name, argv in dict(args["variables"]).items():
            found[str(name)] = output([str(a) for a in argv], env)
            print(f"{name} = {found[name]}", flush=True)
        return found
    elif step.action == "check-output":
        got = output([str(a) for a in args["argv"]], env, step.cwd)
        if got != str(args["expected"]):
            raise StepFailed(
                f"{' '.join(args['argv'])} says {got!r}, expected {args['expected']!r}"
            )
        print(f"{' '.join(args['argv'])}: {got}", flush=True)
    elif step.action == "check-sdk-libraries":
        return check_sdk_libraries(args, env)
    elif step.action == "write-rocm-init":
        path = Path(step.cwd or ".", str(args["path"]))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(rocm_init_text(str(args["version"]), args["preload"]), encoding="utf-8")
        print(f"wrote {path}", flush=True)
    elif step.action == "triton":
        return triton_step(args, env, step.cwd)
    elif step.action == "install-build-requirements":
        argv = [sys.executable, "-m", "pip", "install", *[str(p) for p in args["packages"]]]
        requirements = Path(step.cwd or ".", str(args["requirements"]))
        if requirements.is_file():
            argv += ["-r", str(requirements)]
        else:
            print(f"{requirements} is not there (an older tree): the packages alone", flush=True)
        run(argv, env, step.cwd)
    elif step.action == "build-wheel":
        tree = Path(step.cwd or ".")
        run(build_wheel_argv(tree, str(args["outdir"]), args["force_include"]), env, step.cwd)
    else:  # pragma: no cover - Step validates its action
        raise StepFailed(f"unknown action {step.action}")
    return {}


def environment(
    base: Mapping[str, str], variables: Sequence[EnvVar], values: Mapping[str, str]
) -> dict[str, str]:
    """The build environment once the plan variables in `values` are known: each variable
    whose references are all set, substituted (prepended ones in front of the base value)."""
    env = dict(base)
    for var in variables:
        if any(name not in values for name in references(var.value)):
            continue
        value = substitute(var.value, values)
        if var.prepend and env.get(var.name):
            value = f"{value}{os.pathsep}{env[var.name]}"
        env[var.name] = value
    return env


def execute(plan: Mapping[str, Any]) -> int:
    variables, steps = plan_from_dict(plan)
    base = dict(os.environ)
    values: dict[str, str] = {}
    shown: set[str] = set()
    for step in steps:
        marker(step.name, "start")
        started = time.monotonic()
        env = environment(base, variables, values)
        for var in variables:
            if var.name not in shown and var.dynamic and var.name in env:
                shown.add(var.name)
                print(f"{var.name}={env[var.name]}", flush=True)
        try:
            argv = tuple(substitute(list(step.argv), values))
            args = substitute(dict(step.args), values)
            env.update(substitute(dict(step.env), values))
            current = Step(
                name=step.name,
                description=step.description,
                action=step.action,
                argv=argv,
                cwd=step.cwd,
                args=args,
                may_fail=step.may_fail,
            )
            found = do_step(current, args, env, values)
        except StepUnavailable as exc:
            print(f"step {step.name} failed: {exc}", flush=True)
            marker(step.name, "failed", time.monotonic() - started, unavailable=str(exc))
            return EXIT_UNAVAILABLE
        except (StepFailed, UnsetVariable) as exc:
            print(f"step {step.name} failed: {exc}", flush=True)
            if step.may_fail:
                marker(step.name, "skipped", time.monotonic() - started)
                continue
            marker(step.name, "failed", time.monotonic() - started)
            return EXIT_FAILED
        if found:
            values.update(found)
            marker(step.name, "resolved", values=found)
        marker(step.name, "done", time.monotonic() - started)
    return 0


# --- the smoke test -----------------------------------------------------------------------

#: Runs in the smoke venv: import the module with the given modules' warnings as errors,
#: then check that every expected library is mapped into the process.
_SMOKE_IMPORT = """\
import fnmatch, importlib, json, os, re, sys, warnings
spec = json.loads(sys.argv[1])
for module in spec["warnings_as_errors"]:
    warnings.filterwarnings("error", module=re.escape(module) + r"(\\.|$)")
imported = importlib.import_module(spec["module"])
print(spec["module"], getattr(imported, "__version__", "?"), flush=True)
with open("/proc/self/maps", encoding="utf-8") as maps:
    mapped = {os.path.basename(line.split()[-1]) for line in maps if "/" in line}
missing = [f"{name} ({pattern})" for name, pattern in spec["libraries"].items()
           if not any(fnmatch.fnmatch(base, pattern) for base in mapped)]
if missing:
    sys.exit("not loaded after import: " + ", ".join(missing))
print(f"{len(spec['libraries'])} libraries loaded", flush=True)
"""


def smoke(spec: Mapping[str, Any]) -> int:
    """Install spec["wheel"] into a fresh venv (spec["index_url"] as an extra index) and
    import spec["module"] there, outside any source tree; spec["warnings_as_errors"] names the
    modules whose warnings fail it (rocm_sdk's version mismatch), spec["libraries"] maps
    names to file patterns that must be loaded afterwards."""
    venv = Path("/tmp/accelkit-smoke")  # noqa: S108 (inside a fresh throw-away container)
    run([str(spec.get("python") or sys.executable), "-m", "venv", str(venv)], os.environ)
    python = str(venv / "bin" / "python")
    argv = [python, "-m", "pip", "install"]
    if spec.get("index_url"):
        argv += ["--extra-index-url", str(spec["index_url"])]
    run([*argv, str(spec["wheel"])], os.environ)
    check = {
        "module": spec.get("module", "torch"),
        "warnings_as_errors": list(spec.get("warnings_as_errors", ())),
        "libraries": dict(spec.get("libraries", {})),
    }
    run([python, "-c", _SMOKE_IMPORT, json.dumps(check)], os.environ, "/")
    return 0


def main(argv: Sequence[str]) -> int:
    try:
        if argv and argv[0] == "smoke":
            return smoke(json.loads(argv[1]))
        plan = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
        return execute(plan)
    except StepFailed as exc:
        print(f"error: {exc}", flush=True)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
