"""What the builder container runs, as pure functions: the SDK version a request names among
what the index lists, the wheel's local version, plan variables in the environment and the
steps, and the wheel command of scikit-build-core trees."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelkit.incontainer.build_steps import (
    available_versions,
    build_wheel_argv,
    choose_version,
    environment,
    local_version,
    version_key,
)
from accelkit.incontainer.steps import EnvVar, UnsetVariable, substitute

INDEX = ["7.15.0a20270105", "7.14.1rc1", "7.14.0", "7.14.0a20261128", "7.13.2", "7.13.10"]


@pytest.mark.parametrize(
    ("requested", "pre", "chosen"),
    [
        ("7.14", False, "7.14.0"),  # the newest final 7.14.*
        ("7.14", True, "7.14.1rc1"),  # with --pre: the release candidate
        ("7.13", False, "7.13.10"),  # numeric, not string, order
        ("7.15", False, None),  # only a nightly: nothing without --pre
        ("7.15", True, "7.15.0a20270105"),
        ("7.14.0", False, "7.14.0"),  # exact
        ("7.14.0a20261128", False, "7.14.0a20261128"),  # a nightly named exactly
        ("7.14.2", True, None),
        ("7.1", True, None),  # 7.1 is not a prefix of 7.14.0
    ],
)
def test_choose_version(requested: str, pre: bool, chosen: str | None) -> None:
    assert choose_version(requested, INDEX, pre) == chosen


def test_version_order_is_pep_440() -> None:
    spelled = ["7.14.0", "7.14.0rc1", "7.14.0a20261128", "7.14.0.dev0+abc1234", "7.14.1", "7.13.9"]
    assert sorted(spelled, key=version_key) == [
        "7.13.9",
        "7.14.0.dev0+abc1234",
        "7.14.0a20261128",
        "7.14.0rc1",
        "7.14.0",
        "7.14.1",
    ]


def test_local_version_follows_therock() -> None:
    assert local_version("7.14.0", "rocm", "devrocm") == "rocm7.14.0"
    assert local_version("7.14.0a20261128", "rocm", "devrocm") == "rocm7.14.0a20261128"
    assert local_version("7.14.0.dev0+abc1234", "rocm", "devrocm") == "devrocm7.14.0.dev0-abc1234"


def test_available_versions_of_pip_index() -> None:
    text = "rocm (7.14.0)\nAvailable versions: 7.14.0, 7.13.2\n  INSTALLED: 7.13.2\n"
    assert available_versions(text) == ["7.14.0", "7.13.2"]
    assert available_versions("WARNING: nothing\n") == []


def test_plan_variables_fill_the_environment_as_they_become_known() -> None:
    variables = (
        EnvVar("USE_ROCM", "ON"),
        EnvVar("ROCM_PATH", "@{rocm_root}"),
        EnvVar("PATH", "@{rocm_bin}", prepend=True),
        EnvVar("CXXFLAGS", " -I@{rocm_root}/include/roctracer "),
    )
    base = {"PATH": "/usr/bin"}
    early = environment(base, variables, {})
    assert early == {"PATH": "/usr/bin", "USE_ROCM": "ON"}
    later = environment(base, variables, {"rocm_root": "/sdk", "rocm_bin": "/sdk/bin"})
    assert later["ROCM_PATH"] == "/sdk" and later["PATH"] == "/sdk/bin:/usr/bin"
    assert later["CXXFLAGS"] == " -I/sdk/include/roctracer "
    assert substitute(
        ["rocm==@{rocm_version}", {"v": "@{rocm_version}"}], {"rocm_version": "7"}
    ) == [
        "rocm==7",
        {"v": "7"},
    ]
    with pytest.raises(UnsetVariable, match="'rocm_version' is not set yet"):
        substitute("rocm==@{rocm_version}", {})


def test_scikit_build_core_trees_force_include_the_init_module(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('build-backend = "scikit_build_core.build"\n')
    argv = build_wheel_argv(tmp_path, "/work/dist", ["torch/_rocm_init.py"])
    assert argv[1:] == [
        "-m",
        "build",
        "--wheel",
        "--no-isolation",
        "--outdir",
        "/work/dist",
        "-Cwheel.force-include.torch/_rocm_init.py=torch/_rocm_init.py",
    ]
    (tmp_path / "pyproject.toml").write_text('build-backend = "setuptools.build_meta"\n')
    assert "-Cwheel" not in " ".join(build_wheel_argv(tmp_path, "/d", ["torch/_rocm_init.py"]))
