"""Every leg's commands, parsed and checked by the commands themselves, without running them.

`check_leg_commands(leg)` turns a leg's build, setup and test arguments into the requests of
`accelkit build`, `accelkit setup` and `accelkit test` with their own parsers
(`from_argv`), then runs each command's own checks that need no files and no engine: the
build recipe's plan (toolkit version spelling, targets, the toolkit a target needs), the
setup plan (Python spelling, channel, index, base image, target), the test request's
validation, for each of the leg's jobs (each shard's `--shard`, each node's `--nnodes`). A
leg the commands would refuse fails `accelkit matrix validate` with the leg's
file:line, e.g.

    matrices/nightly.yaml:37: leg 'cuda13.4-sm_107-py3.12': accelkit build: --arch: target
    sm_107 needs CUDA version >= 13.4, got 13.3
"""

from __future__ import annotations

import dataclasses

from accelkit.errors import BadInput, ConfigError
from accelkit.matrix import rules
from accelkit.matrix.github import suite_option
from accelkit.matrix.jobs import leg_jobs
from accelkit.matrix.model import MatrixEntry


def build_argv(leg: MatrixEntry) -> list[str]:
    """`accelkit build`'s arguments for the leg, as the workflow passes them."""
    return [leg.backend, *leg.build_args, "--output", rules.WHEELHOUSE]


def check_leg_commands(leg: MatrixEntry) -> None:
    """ConfigError (the leg's file:line) when build, setup or test would refuse the leg."""
    from accelkit.setup.image import plan_setup
    from accelkit.setup.request import SetupRequest
    from accelkit.suite.run.request import RunRequest, validate
    from accelkit.wheels.recipes import plan
    from accelkit.wheels.request import BuildRequest

    def fail(command: str, exc: BadInput) -> ConfigError:
        return ConfigError(
            f"leg {leg.name!r}: {command}: {exc}", path=leg.location.path, line=leg.location.line
        )

    if leg.build:
        try:
            plan(BuildRequest.from_argv(build_argv(leg)))
        except BadInput as exc:
            raise fail("accelkit build", exc) from None
    if leg.container and leg.image is None:
        try:
            plan_setup(SetupRequest.from_argv([leg.backend, *leg.setup_args]), check_files=False)
        except BadInput as exc:
            raise fail("accelkit setup", exc) from None
    for job in leg_jobs(leg):
        argv = ["--device", leg.device, "--suite", suite_option(leg.suites), *job.test_args]
        try:
            request = RunRequest.from_argv(argv)
            validate(dataclasses.replace(request, image=leg.image))
        except BadInput as exc:
            command = "accelkit test" if job.name == leg.name else f"job {job.name}: accelkit test"
            raise fail(command, exc) from None
