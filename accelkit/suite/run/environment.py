"""The environment of the suite's pytest process, on this host and inside a test image."""

from __future__ import annotations

import os
from collections.abc import Mapping


def suite_environment(device: str, environ: Mapping[str, str]) -> dict[str, str]:
    """The variables the device's backend needs in the suite's pytest process
    (`Backend.suite_environment`), each with the value `environ` gives it where `environ` sets
    it: a value the user set explicitly wins over the backend's."""
    from accelkit import backends

    wanted = backends.get(device).suite_environment()
    return {name: environ.get(name, value) for name, value in wanted.items()}


def child_env(device: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The pytest child's environment: `environ` (default: this process's) with the
    backend's `suite_environment` added where unset, plugin autoload off and no
    PYTEST_ADDOPTS."""
    env = dict(os.environ if environ is None else environ)
    env.update(suite_environment(device, env))
    # Only the plugins accelkit names run: a plugin installed for other work must not
    # change how the suite runs (or slow it down).
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    # Nor options from the caller's shell (`-p plugin`, `-x`, `--lf`): accelkit's own
    # options say how the suite runs, and its argv is the whole of it.
    env.pop("PYTEST_ADDOPTS", None)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


PERF_THREADS_ENV = "ACCELKIT_PERF_THREADS"
"""Read by the perf harness (`accelkit.suite.perf.harness.configure_threads`)."""


def perf_env(threads: int | None) -> dict[str, str]:
    """The variables that give the perf cases `threads` intra-op threads (None: torch's
    own choice): accelkit's own, and OpenBLAS's for numpy's host canaries, which must be
    set before numpy loads. Always set, so a value in the caller's environment cannot
    silently change what `run.threads` in the results file says."""
    if threads is None:
        return {PERF_THREADS_ENV: "0"}
    return {PERF_THREADS_ENV: str(threads), "OPENBLAS_NUM_THREADS": str(threads)}


def container_env(
    device: str, device_env: Mapping[str, str], environ: Mapping[str, str]
) -> dict[str, str]:
    """A test container's environment: the backend's device-selection variables
    (`device_env`, from `container_options`), the variables its suite needs (with the value
    the user set in `environ`, the host's environment, where they set one: the run inside
    keeps a value it finds set), and what the run inside needs."""
    return {
        **device_env,
        **suite_environment(device, environ),
        "HOME": "/tmp",
        "PYTHONUNBUFFERED": "1",
    }
