"""One declaration per command: the typer command, `to_argv` and `from_argv` come from the same
`Opt` records, so a request survives the round trip through its argv, and every matrix leg's
arguments parse with the real command's parser."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest
import typer

from accelkit import options
from accelkit.cli import app, register_commands
from accelkit.errors import BadInput
from accelkit.matrix import load_legs
from accelkit.setup.request import SETUP_OPTIONS, SetupRequest
from accelkit.suite.run.request import RUN_OPTIONS, RunRequest
from accelkit.wheels.request import BUILD_OPTIONS, BuildRequest
from tests.helpers import REPO

MATRICES = sorted((REPO / "matrices").glob("*.yaml"))


def _click_params(name: str) -> dict[str, tuple[str, ...]]:
    register_commands()
    command: Any = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    return {p.name: tuple(p.opts) + tuple(p.secondary_opts) for p in command.params}


@pytest.mark.parametrize(
    ("name", "declared", "presentation"),
    [
        ("test", RUN_OPTIONS, set()),
        ("setup", SETUP_OPTIONS, {"dry_run", "as_json"}),
        ("build", BUILD_OPTIONS, {"dry_run", "as_json"}),
    ],
)
def test_the_cli_command_is_built_from_the_declaration(
    name: str, declared: tuple[options.Opt, ...], presentation: set[str]
) -> None:
    params = _click_params(name)
    assert set(params) - presentation == {opt.name for opt in declared}
    for opt in declared:
        if not opt.positional:
            assert opt.flag in params[opt.name], (opt.name, params[opt.name])
            if opt.negative:
                assert opt.negative in params[opt.name]


def test_run_request_round_trip(tmp_path: Path) -> None:
    requests = [
        RunRequest(),
        RunRequest(
            device="rocm",
            suite="perf",
            keyword="gemm and not fp8",
            json_path=tmp_path / "r.json",
            junit_path=tmp_path / "r.xml",
            timeout_s=12.5,
            workers=0,
            seed=7,
            breadth="full",
            passes=3,
            threads=2,
            measure_ceilings=True,
            expectations=tmp_path / "x.yaml",
            cases_dir=tmp_path,
            log_path=tmp_path / "log",
            image="accelkit-test-rocm:0123abcd",
        ),
        RunRequest(timeout_s=0.0, workers=3),
        RunRequest(shard="2/3", durations_from=tmp_path / "last-night.json"),
        RunRequest(
            suite="distributed",
            nnodes=2,
            node_rank=1,
            rdzv_endpoint="10.0.0.5:29500",
            join_timeout_s=90.0,
        ),
        RunRequest(
            device="cuda",
            target="sm_107",
            compile_only=True,
            require="nvgemm,sm_107",
            waive="cuda_graph_while_loop",
        ),
        RunRequest(threads=0),
    ]
    for request in requests:
        argv = request.to_argv()
        back = RunRequest.from_argv(argv)
        assert back == request, argv
        assert back.argv == ("accelkit", "test", *argv)
    assert RunRequest().to_argv() == []  # defaults are left out
    assert RunRequest().to_argv(always=("device",)) == ["--device", "cpu"]


def test_setup_request_round_trip(tmp_path: Path) -> None:
    requests = [
        SetupRequest(backend="cpu"),
        SetupRequest(
            backend="cuda",
            arch="sm_107",
            torch_index="https://download.pytorch.org/whl/nightly/cu130",
            torch_spec="torch==2.15.0.dev20261130",
            base_image="nvidia/cuda:13.4.0-devel-ubuntu24.04",
            accelkit_source=tmp_path,
        ),
        SetupRequest(backend="rocm", arch="gfx942", torch_wheel=tmp_path / "torch.whl"),
        SetupRequest(
            backend="cuda", torch_from_base=True, base_image="nvcr.io/nvidia/pytorch:26.11-py3"
        ),
    ]
    for request in requests:
        assert SetupRequest.from_argv(request.to_argv()) == request


def test_build_request_round_trip(tmp_path: Path) -> None:
    requests = [
        BuildRequest.from_params({"backend": "cpu", "output": tmp_path}),
        BuildRequest.from_params(
            {
                "backend": "rocm",
                "rocm_version": "7.14.0a20261128",
                "gfx": "gfx942,gfx950",
                "family": "gfx94X-dcgpu",
                "python": "3.13t",
                "torch_ref": "release/2.14",
                "source": tmp_path,
                "output": tmp_path / "out",
                "triton": False,
                "pre": True,
                "smoke": False,
                "builder_base_image": "accelkit-base:bookworm",
            }
        ),
    ]
    for request in requests:
        assert BuildRequest.from_argv(request.to_argv()) == request, request.to_argv()
    assert "--no-triton" in requests[1].to_argv()
    assert "--pre" in requests[1].to_argv() and "--no-smoke" in requests[1].to_argv()
    # The smoke test is on unless turned off.
    assert requests[0].smoke is True and "--no-smoke" not in requests[0].to_argv()


def test_parse_errors_are_one_line_bad_input() -> None:
    with pytest.raises(BadInput, match=r"^accelkit test: No such option: --nope"):
        RunRequest.from_argv(["--nope"])
    with pytest.raises(BadInput, match=r"Invalid value for '--seed'"):
        RunRequest.from_argv(["--seed", "x"])
    with pytest.raises(BadInput, match=r"--suite: unknown suite 'everything'"):
        RunRequest.from_argv(["--suite", "everything"])
    with pytest.raises(BadInput, match=r"Invalid value for '--nnodes'"):
        RunRequest.from_argv(["--nnodes", "two"])
    with pytest.raises(BadInput, match=r"Missing argument 'BACKEND'"):
        SetupRequest.from_argv([])


@pytest.mark.parametrize("matrix", MATRICES, ids=lambda p: p.name)
def test_every_shipped_leg_parses_with_the_real_commands(matrix: Path, tmp_path: Path) -> None:
    """Each leg's build, setup and test arguments, as the workflow passes them, are accepted
    by `accelkit build`, `setup` and `test` (parsed in process; nothing runs)."""
    legs = load_legs(str(matrix))
    assert legs
    for leg in legs:
        if leg.build:
            argv = [leg.backend, *leg.build_args, "--output", str(tmp_path / "wheelhouse")]
            build = BuildRequest.from_argv(argv)
            from accelkit.wheels.recipes import plan

            plan(build)  # the recipe accepts the flags and their values too
        if leg.container and leg.image is None:
            setup = SetupRequest.from_argv([leg.backend, *leg.setup_args])
            assert setup.backend == leg.backend
        test = RunRequest.from_argv(["--device", leg.device, *leg.test_args])
        assert test.device == leg.device
        assert dataclasses.replace(test, argv=()) == RunRequest.from_argv(test.to_argv())


def test_perf_threads_default_per_device_and_option() -> None:
    """--threads: 1 on the CPU by default (stated in --help), torch's choice on an
    accelerator, 0 for torch's choice anywhere."""
    from accelkit.suite.run.request import DEFAULT_CPU_THREADS, RUN_OPTIONS

    assert RunRequest().perf_threads == DEFAULT_CPU_THREADS == 1
    assert RunRequest(device="cuda").perf_threads is None
    assert RunRequest(threads=4).perf_threads == 4
    assert RunRequest(threads=0).perf_threads is None
    help_text = next(o.help for o in RUN_OPTIONS if o.name == "threads")
    assert f"default {DEFAULT_CPU_THREADS} when the device is the CPU" in help_text


def test_one_case_gets_one_worker_unless_told_otherwise() -> None:
    """--case runs one case: a second xdist worker would only import torch and collect."""
    from accelkit.suite.run.request import default_workers

    assert RunRequest(case="conformance/ops/exp/float32").worker_count == 1
    assert RunRequest(case="conformance/ops/exp/float32", workers=0).worker_count == 0
    assert RunRequest(case="conformance/ops/exp/float32", workers=3).worker_count == 3
    assert RunRequest().worker_count == default_workers()


def test_negative_threads_are_refused() -> None:
    from accelkit.errors import BadInput
    from accelkit.suite.run.request import validate

    with pytest.raises(BadInput, match="--threads"):
        validate(RunRequest(threads=-1))


def test_perf_env_always_states_the_threads() -> None:
    from accelkit.suite.run.environment import PERF_THREADS_ENV, perf_env

    assert perf_env(1) == {PERF_THREADS_ENV: "1", "OPENBLAS_NUM_THREADS": "1"}
    assert perf_env(None) == {PERF_THREADS_ENV: "0"}


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        ({"case": " / "}, "--case: empty case id"),
        ({"case": "nope/x"}, "--case nope/x: a case id starts with the suite it runs in"),
        ({"case": "perf/gemm", "suite": "conformance"}, "(conformance/)"),
        ({"record_outputs": Path("/nope/x")}, "directory /nope does not exist"),
    ],
)
def test_case_and_record_outputs_are_checked_before_the_run(
    fields: dict[str, Any], needle: str
) -> None:
    from accelkit.suite.run.request import validate

    with pytest.raises(BadInput, match=re.escape(needle)):
        validate(RunRequest(**fields))
    validate(RunRequest(case="conformance/linalg/lstsq"))  # a prefix of case ids
