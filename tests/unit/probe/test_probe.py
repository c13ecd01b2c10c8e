"""The capability registry and the environment fingerprint."""

from __future__ import annotations

import importlib.util
import json
import os

import pytest

from accelkit.backends import Availability
from accelkit.probe import capabilities as caps
from accelkit.probe import fingerprint as fp
from accelkit.probe import registry as registry_module

BACKENDS = ["cpu", "cuda", "rocm", "xpu", "mps"]
FEATURES = [
    "switch",
    "cond",
    "while_loop",
    "dynamic_spec",
    "complex_compile",
    "inductor",
    "opinfo",
    "cuda_graph",
    "cuda_graph_while_loop",
    "xpu_graph",
    "accelerator_graph",
    "sm_107",
    "gfx_in_arch_list",
    "nvgemm",
    "gloo",
    "nccl",
    "nccl2",
    "xccl",
    "c10d_reconfigure",
    "shrink_group",
    "rma_window",
    "flight_recorder",
    "comm_overlap_default",
    "mps_linalg",
]


def _torch_installed() -> bool:
    # find_spec, not an import: collecting tests must not pay for importing torch.
    return importlib.util.find_spec("torch") is not None


def needs_torch(test):
    """Real torch: skipped without it, and `slow` (importing torch alone takes seconds)."""
    skip = pytest.mark.skipif(not _torch_installed(), reason="torch is not installed")
    return pytest.mark.slow(skip(test))


# --- the registry, with fake checks ------------------------------------------------------


@pytest.fixture
def registry():
    with caps.isolated_registry():
        yield


def test_names_are_stable_and_ordered_backends_first():
    assert caps.names() == BACKENDS + FEATURES


def test_registration_order_is_display_order(registry):
    @caps.capability_check("b", needs_torch=False)
    def _b() -> Availability:
        return Availability(True)

    @caps.capability_check("a", needs_torch=False)
    def _a() -> Availability:
        return Availability(False, "no a here")

    assert caps.names() == ["b", "a"]
    assert caps.capabilities() == {"b": Availability(True), "a": Availability(False, "no a here")}


def test_duplicate_registration_is_an_error(registry):
    caps.capability_check("x", needs_torch=False)(lambda: Availability(True))
    with pytest.raises(ValueError, match="registered twice"):
        caps.capability_check("x", needs_torch=False)(lambda: Availability(True))


def test_unknown_capability_raises_key_error(registry):
    with pytest.raises(KeyError):
        caps.capability("unknown")


def test_unknown_capability_raises_key_error_in_real_registry():
    with pytest.raises(KeyError):
        caps.capability("unknown")


def test_a_check_that_raises_becomes_unavailable(registry):
    @caps.capability_check("broken", needs_torch=False)
    def _broken() -> Availability:
        raise RuntimeError("boom")

    assert caps.capability("broken") == Availability(False, "check failed: RuntimeError: boom")
    # ... and does not stop the others.
    caps.capability_check("fine", needs_torch=False)(lambda: Availability(True))
    assert caps.capabilities()["fine"].available


def test_a_check_returning_something_else_becomes_unavailable(registry):
    caps.capability_check("odd", needs_torch=False)(lambda: True)  # type: ignore[arg-type,return-value]
    result = caps.capability("odd")
    assert not result.available
    assert result.reason == "check failed: returned bool"


def test_results_are_cached_until_reset(registry):
    calls: list[int] = []

    @caps.capability_check("counted", needs_torch=False)
    def _counted() -> Availability:
        calls.append(1)
        return Availability(True)

    for _ in range(5):
        assert caps.capability("counted").available
    caps.capabilities()
    assert len(calls) == 1
    caps.reset()
    caps.capability("counted")
    assert len(calls) == 2


def test_failures_are_cached_too(registry):
    calls: list[int] = []

    @caps.capability_check("flaky", needs_torch=False)
    def _flaky() -> Availability:
        calls.append(1)
        raise OSError("gone")

    caps.capability("flaky")
    caps.capability("flaky")
    assert len(calls) == 1


def test_override_replaces_and_restores(registry):
    caps.capability_check("thing", needs_torch=False)(lambda: Availability(False, "absent"))
    assert not caps.capability("thing").available
    with caps.override("thing", Availability(True)):
        assert caps.capability("thing").available
    assert caps.capability("thing") == Availability(False, "absent")
    with pytest.raises(KeyError), caps.override("nope", Availability(True)):
        pass


def test_isolated_registry_restores_the_real_one():
    before = caps.names()
    with caps.isolated_registry():
        assert caps.names() == []
        caps.capability_check("temporary", needs_torch=False)(lambda: Availability(True))
    assert caps.names() == before


def test_checks_that_need_torch_say_torch_is_missing(registry, monkeypatch):
    called: list[int] = []

    @caps.capability_check("feature")
    def _feature() -> Availability:
        called.append(1)
        return Availability(True)

    monkeypatch.setattr(registry_module, "torch_or_none", lambda: None)
    monkeypatch.setattr(
        registry_module, "torch_import_error", lambda: "torch is not installed (test)"
    )
    assert caps.capability("feature") == Availability(False, "torch is not installed (test)")
    assert called == []


def test_warnings_inside_a_check_are_swallowed(registry, recwarn):
    import warnings

    @caps.capability_check("noisy", needs_torch=False)
    def _noisy() -> Availability:
        warnings.warn("CUDA initialization: something", UserWarning, stacklevel=1)
        return Availability(False, "no device")

    assert caps.capability("noisy") == Availability(False, "no device")
    assert len(recwarn) == 0


# --- the real checks, against the installed torch ----------------------------------------


@pytest.fixture
def fresh():
    caps.reset()
    yield
    caps.reset()


@needs_torch
def test_every_real_capability_answers_with_a_reason_when_unavailable(fresh):
    import torch

    results = caps.capabilities()
    assert list(results) == BACKENDS + FEATURES
    for name, result in results.items():
        assert isinstance(result, Availability), name
        assert isinstance(result.reason, str), name
        if not result.available:
            assert result.reason, f"{name} is unavailable without a reason"
        assert not result.reason.startswith("check failed"), f"{name}: {result.reason}"
    json.dumps({name: vars(result) for name, result in results.items()})
    # Probing never creates a CUDA context (it may only ask the driver for a device count).
    assert not torch.cuda.is_initialized()


@needs_torch
def test_cpu_only_features_are_available_here(fresh):
    # These run on any CPU with torch 2.14 (../shared/notes/torch-2.14-api.md).
    import torch

    for name in ("cpu", "switch", "cond", "while_loop", "dynamic_spec", "complex_compile"):
        found = caps.capability(name)
        assert found.available, name
        # A ✓ says what was checked, with what version of torch.
        assert f"torch {torch.__version__}" in found.reason, (name, found.reason)


@needs_torch
@needs_torch
def test_inductor_needs_torchs_headers_where_its_compiler_finds_them(tmp_path):
    """Debian's python3-torch without libtorch-dev: a compiler, but no ATen headers, so every
    compiled case would fail to build its kernel; the capability says so first."""
    import shutil
    import types

    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("no C++ compiler on this machine")
    import torch

    assert caps._inductor_headers(compiler, torch) == Availability(
        True, f"torch {torch.__version__} has torch.compile; {compiler} finds <ATen/NumericUtils.h>"
    )
    headerless = types.ModuleType("torch")
    headerless.__file__ = str(tmp_path / "torch" / "__init__.py")
    found = caps._inductor_headers(compiler, headerless)
    assert not found.available
    assert "ATen/NumericUtils.h: No such file" in found.reason
    assert found.reason.endswith("install them (Debian: libtorch-dev)")


def test_xpu_graph_without_xpu_says_why(fresh):
    import torch

    if torch.xpu.is_available():
        pytest.skip("this machine has an XPU")
    result = caps.capability("xpu_graph")
    assert not result.available
    if not torch.xpu._is_compiled():
        assert result.reason == "torch built without XPU support"


@needs_torch
def test_device_counting_features_report_what_they_found(fresh):
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count >= 2:
        pytest.skip("this machine has 2 or more GPUs")
    for name in ("shrink_group", "rma_window"):
        result = caps.capability(name)
        assert not result.available
        if "CUDA devices" in result.reason:
            assert result.reason == f"needs 2 CUDA devices, found {count}"


@needs_torch
@pytest.mark.parametrize("previous", [None, "8.0;9.0"])
def test_sm_107_restores_the_arch_list(fresh, monkeypatch, previous):
    if previous is None:
        monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    else:
        monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", previous)
    result = caps.capability("sm_107")
    assert os.environ.get("TORCH_CUDA_ARCH_LIST") == previous
    import torch

    if torch.__version__.startswith("2.14"):
        assert result.available, result.reason
        assert "TORCH_CUDA_ARCH_LIST=Rubin gives compute_107; ptxas 13." in result.reason


@needs_torch
def test_opinfo_check_does_not_import_op_db():
    """In a fresh interpreter: any other test of this worker may have imported op_db."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from accelkit.probe import capabilities as caps\n"
        "caps.capability('opinfo')\n"
        "print('torch.testing._internal.common_methods_invocations' in sys.modules)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=240, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "False"


# --- the fingerprint ---------------------------------------------------------------------


@needs_torch
def test_fingerprint_is_json_and_structured(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.setenv("HF_TOKEN", "secret-value")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret-value")
    env = fp.fingerprint(include_docker=False)
    text = json.dumps(env)
    assert "secret-value" not in text
    assert env["accelkit"]
    for key in ("python", "os", "cpu", "host", "torch", "backends", "env", "docker"):
        assert key in env, key
    assert env["env"] == {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert env["docker"] == {"engine": None, "skipped": True}
    python = env["python"]
    assert isinstance(python, dict) and set(python) == {
        "version",
        "implementation",
        "executable",
        "free_threaded",
        "gil_enabled",
    }
    cpu = env["cpu"]
    assert isinstance(cpu, dict) and cpu["logical_cpus"] == os.cpu_count()
    torch = env["torch"]
    assert isinstance(torch, dict) and torch["installed"] is True and torch["version"]
    backends = env["backends"]
    assert isinstance(backends, dict) and list(backends) == BACKENDS
    for info in backends.values():
        assert set(info) == {"available", "reason", "devices", "versions"}
    assert backends["cpu"]["available"] is True
    assert len(backends["cpu"]["devices"]) == 1


@pytest.fixture
def torchless_sections(monkeypatch):
    """Unit tests of the fingerprint's shape: keep torch (seconds to import) out of them."""
    monkeypatch.setattr(fp, "_torch", lambda: {"installed": False, "error": "stub"})
    monkeypatch.setattr(fp, "_backends", lambda: {})


def test_env_vars_are_an_allow_list(torchless_sections, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "10.7")
    monkeypatch.setenv("HF_TOKEN", "secret-value")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret-value")
    monkeypatch.delenv("ROCR_VISIBLE_DEVICES", raising=False)
    env = fp.fingerprint(include_docker=False)
    assert "secret-value" not in json.dumps(env)
    assert env["env"]["CUDA_VISIBLE_DEVICES"] == "0,1"  # type: ignore[index]
    assert env["env"]["TORCH_CUDA_ARCH_LIST"] == "10.7"  # type: ignore[index]
    assert "ROCR_VISIBLE_DEVICES" not in env["env"]  # type: ignore[operator]


def test_torch_section_without_torch(monkeypatch):
    monkeypatch.setattr(fp, "torch_or_none", lambda: None)
    monkeypatch.setattr(fp, "torch_import_error", lambda: "torch is not installed (test)")
    torch = fp._torch()
    assert torch["error"] == "torch is not installed (test)"
    assert "version" not in torch


def test_a_failing_section_becomes_an_error_entry(torchless_sections, monkeypatch):
    def broken() -> dict[str, object]:
        raise PermissionError("no /proc here")

    monkeypatch.setattr(fp, "_cpu", broken)
    env = fp.fingerprint(include_docker=False)
    json.dumps(env)
    assert env["cpu"] == {"error": "PermissionError: no /proc here"}
    assert "version" in env["python"]  # type: ignore[operator]


def test_docker_section_uses_the_engine_with_a_short_timeout(torchless_sections, monkeypatch):
    import accelkit.containers.engine as engine

    seen: list[float] = []

    def fake_engine_version(*, timeout: float = 3.0) -> str | None:
        seen.append(timeout)
        return "99.0"

    monkeypatch.setattr(engine, "engine_version", fake_engine_version)
    env = fp.fingerprint()
    assert env["docker"] == {"engine": "99.0"}
    assert seen == [2.0]


def test_a_failing_docker_probe_does_not_raise(torchless_sections, monkeypatch):
    import accelkit.containers.engine as engine

    def exploding(*, timeout: float = 3.0) -> str | None:
        raise ImportError("no docker package")

    monkeypatch.setattr(engine, "engine_version", exploding)
    assert fp.fingerprint()["docker"] == {"error": "ImportError: no docker package"}


def test_jsonable_turns_odd_values_into_strings():
    from pathlib import Path

    value = fp._jsonable({"p": Path("/x"), 1: (1, 2), "s": {3}})
    assert value == {"p": "/x", "1": [1, 2], "s": [3]}
