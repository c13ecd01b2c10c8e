"""The CPU: always there when torch imports."""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from accelkit.backends._containers import (
    GPU_RUNTIME_REQUIREMENTS,
    UBUNTU_BASE_IMAGE,
    capability_problem,
    section,
    torch_problems,
)
from accelkit.backends._defaults import BackendDefaults
from accelkit.backends.base import Availability, DeviceInfo, TestImageSpec
from accelkit.containers.run import RunOptions
from accelkit.torch_import import torch_import_error, torch_or_none

#: The first release with the multi-branch `switch` the suite tests; older torch lacks it.
SWITCH_SINCE = (2, 14)


class CpuBackend(BackendDefaults):
    name = "cpu"
    torch_device_type = "cpu"
    description = "the host CPU"
    collective_backends = ("gloo",)
    host_memory = True
    torch_wheel_variant = "cpu"

    def availability(self) -> Availability:
        if torch_or_none() is None:
            return Availability(False, torch_import_error())
        import torch

        return Availability(True, f"torch {torch.__version__} imports; the CPU is always there")

    def devices(self) -> list[DeviceInfo]:
        return [DeviceInfo(index=0, name=cpu_model(), extra={"logical_cpus": os.cpu_count()})]

    def versions(self) -> dict[str, str | None]:
        torch = torch_or_none()
        if torch is None:
            return {}
        config = getattr(torch.backends, "cpu", None)
        isa = None
        if config is not None and hasattr(config, "get_cpu_capability"):
            try:
                isa = str(config.get_cpu_capability())
            except Exception:
                isa = None
        return {"cpu_capability": isa}

    def host_has_device(self, host_root: Path = Path("/")) -> bool:
        return True  # every container has the host's CPU

    passthrough_env: tuple[str, ...] = ("OMP_NUM_THREADS",)

    def container_options(
        self, env: Mapping[str, str] | None = None, *, host_root: Path = Path("/")
    ) -> RunOptions:
        values = {name: env[name] for name in self.passthrough_env if env and name in env}
        return RunOptions(env=values)

    def suite_environment(self) -> dict[str, str]:
        return {}

    def rank_device(self, rank: int) -> str:
        # Every rank shares the host's one CPU device.
        return "cpu"

    def test_image(self, arch: str | None = None) -> TestImageSpec:
        if arch is not None:
            self.check_target(arch, flag="--arch")
        return TestImageSpec(
            dockerfile="cpu.Dockerfile",
            default_base_image=UBUNTU_BASE_IMAGE,
            skip_requirements=GPU_RUNTIME_REQUIREMENTS,
        )

    def verify_test_image(
        self, doctor: Mapping[str, Any], probes: Mapping[str, str], spec: TestImageSpec
    ) -> list[str]:
        problems = torch_problems(doctor)
        if problems:
            return problems
        # Inductor needs a C++ compiler in the image: the suite's compiled cases use it.
        for name in ("cpu", "inductor"):
            problem = capability_problem(doctor, name)
            if problem is not None:
                problems.append(problem)
        if _release(str(section(doctor, "env", "torch").get("version"))) >= SWITCH_SINCE:
            switch = capability_problem(doctor, "switch")
            if switch is not None:
                problems.append(switch)
        return problems


def _release(version: str) -> tuple[int, int]:
    """(major, minor) of a torch version string; (0, 0) when unreadable."""
    parts = version.split("+")[0].split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return 0, 0


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


BACKEND = CpuBackend()
