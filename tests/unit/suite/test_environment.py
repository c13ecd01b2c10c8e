"""`Backend.suite_environment`: the variables the suite's pytest child needs per backend.

PYTORCH_TEST_WITH_ROCM is read when torch.testing._internal.common_utils is imported, so it
must be in the child's environment from the start (OpInfo's dtypesIfROCM tables depend on
it). The runner and the in-container path add it without naming a backend, and a value the
user set wins.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from accelkit import backends
from accelkit.suite.run import container, runner
from accelkit.suite.run.environment import child_env, container_env, suite_environment
from accelkit.suite.run.request import RunRequest
from tests.helpers import REPO

ROCM_VAR = "PYTORCH_TEST_WITH_ROCM"


def test_rocm_asks_for_pytorch_test_with_rocm() -> None:
    rocm = backends.get("rocm")
    assert rocm.suite_environment() == {ROCM_VAR: "1"}
    rocm.suite_environment()[ROCM_VAR] = "changed"  # a fresh dict each time
    assert rocm.suite_environment() == {ROCM_VAR: "1"}


@pytest.mark.parametrize("name", ["cpu", "cuda", "xpu", "mps"])
def test_other_backends_need_nothing(name: str) -> None:
    assert backends.get(name).suite_environment() == {}


def test_every_backend_returns_string_variables() -> None:
    for backend in backends.all_backends():
        env = backend.suite_environment()
        assert isinstance(env, dict), backend.name
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()), env


def test_the_child_env_has_the_variable_on_rocm_only() -> None:
    env = child_env("rocm", {"PATH": "/usr/bin"})
    assert env[ROCM_VAR] == "1"
    assert env["PATH"] == "/usr/bin"
    assert env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] == "1"
    for name in ("cpu", "cuda", "xpu", "mps"):
        assert ROCM_VAR not in child_env(name, {"PATH": "/usr/bin"}), name


def test_the_callers_pytest_options_do_not_reach_the_suite() -> None:
    env = child_env("cpu", {"PATH": "/usr/bin", "PYTEST_ADDOPTS": "-p some_plugin -x"})
    assert "PYTEST_ADDOPTS" not in env and env["PATH"] == "/usr/bin"


def test_a_value_the_user_set_wins() -> None:
    assert child_env("rocm", {ROCM_VAR: "0"})[ROCM_VAR] == "0"
    assert suite_environment("rocm", {ROCM_VAR: "0"}) == {ROCM_VAR: "0"}
    assert suite_environment("rocm", {}) == {ROCM_VAR: "1"}
    # On another backend a user's value passes through untouched, and nothing is added.
    assert child_env("cpu", {ROCM_VAR: "1"})[ROCM_VAR] == "1"
    assert suite_environment("cpu", {ROCM_VAR: "1"}) == {}


def test_the_child_env_defaults_to_this_process_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ROCM_VAR, raising=False)
    monkeypatch.setenv("ACCELKIT_TEST_MARKER", "x")
    env = child_env("rocm")
    assert env[ROCM_VAR] == "1" and env["ACCELKIT_TEST_MARKER"] == "x"
    monkeypatch.setenv(ROCM_VAR, "0")
    assert child_env("rocm")[ROCM_VAR] == "0"
    assert os.environ[ROCM_VAR] == "0"  # the parent's own environment is not changed


class _FakeProcess:
    def wait(self, timeout: float | None = None) -> int:
        return 5  # "no tests collected"


def test_the_pytest_child_is_started_with_that_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner's Popen gets `child_env(request.device)` (no pytest actually starts)."""
    monkeypatch.delenv(ROCM_VAR, raising=False)
    seen: dict[str, Any] = {}

    def popen(argv: list[str], **kwargs: Any) -> _FakeProcess:
        seen.update(kwargs)
        return _FakeProcess()

    monkeypatch.setattr(subprocess, "Popen", popen)  # the module runner starts pytest with
    for device, expected in (("rocm", "1"), ("cpu", None)):
        seen.clear()
        request = RunRequest(device=device, suite="conformance")
        code = runner.run_pytest(request, tmp_path / "r.json", tmp_path / "log", lambda e: None)
        assert code == 5
        assert seen["env"].get(ROCM_VAR) == expected, device


def test_the_container_env_carries_the_variable() -> None:
    env = container_env("rocm", {"HIP_VISIBLE_DEVICES": "1"}, {})
    expected = {"HIP_VISIBLE_DEVICES": "1", ROCM_VAR: "1", "HOME": "/tmp"}
    assert env == {**expected, "PYTHONUNBUFFERED": "1"}
    assert container_env("rocm", {}, {ROCM_VAR: "0"})[ROCM_VAR] == "0"
    assert ROCM_VAR not in container_env("cpu", {}, {ROCM_VAR: "1"})


class _Stop(Exception):
    pass


class _FakeClient:
    def close(self) -> None:
        pass


def test_in_container_run_passes_it_to_the_container(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`accelkit test --image` with --device rocm: the container's env has the variable (the
    engine is faked; the run stops where the container would start)."""
    import accelkit.containers.engine as engine
    import accelkit.containers.run as container_run

    monkeypatch.delenv(ROCM_VAR, raising=False)
    seen: dict[str, Any] = {}

    def run_container(client: Any, image: str, argv: list[str], options: Any) -> Any:
        seen["env"] = dict(options.env)
        raise _Stop

    monkeypatch.setattr(engine, "connect", lambda: _FakeClient())
    monkeypatch.setattr(container_run, "run_container", run_container)
    request = RunRequest(
        device="rocm",
        suite="conformance",
        image="accelkit-test-rocm:x",
        json_path=tmp_path / "r.json",
    )
    with pytest.raises(_Stop):
        container.run(request)
    assert seen["env"][ROCM_VAR] == "1"


def test_only_backends_name_the_variable() -> None:
    """The design rule: nothing outside accelkit/backends/ knows which backend needs what."""
    mentions = [
        path.relative_to(REPO).as_posix()
        for path in (REPO / "accelkit").rglob("*.py")
        if ROCM_VAR in path.read_text(encoding="utf-8")
    ]
    assert mentions and all(m.startswith("accelkit/backends/") for m in mentions), mentions
