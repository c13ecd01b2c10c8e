"""A local rehearsal of matrix legs: what `.github/workflows/nightly.yml`'s `leg` job runs.

`plan_rehearsal` turns expanded legs into a frozen plan per leg (the build, setup and test
steps the workflow would run, with their argv) and decides whether THIS machine can run
each one, with the precise reason when it cannot; it starts nothing. `rehearse` executes the
runnable legs by calling the same cores `accelkit setup` and `accelkit test --image` call
(`accelkit.setup.image`, `accelkit.suite.run.runner`), writing each leg's files under
`OUTPUT/<leg name>/` as the workflow's artifacts lay them out, so `accelkit report OUTPUT`
reads them.

Where the rehearsal departs from the workflow, on purpose:
- A build leg (`build: true`) compiles torch against TheRock's pip index and the torch
  source, which a rehearsal does not reach: it is not runnable unless `skip_build` is set,
  and then its setup installs the `--torch-wheel` given instead of the built wheel.
- Setup installs torch from a local wheel for the leg's Python (`torch_wheels`: the one whose
  tags fit, cp311 for a 3.11 leg), or takes the torch its base image already has
  (`torch_from_base`: the Pythons whose legs do; Debian trixie's python3-torch for 3.13
  here), or installs from `torch_index` when one is given; a setup that
  would install from the leg's own index (PyTorch's, unreachable here) is reported instead
  of attempted, and so is a leg for whose Python no wheel fits. Images (base images and
  prebuilt leg images) are never pulled: they must already be on the engine, and
  `base_images` maps a leg's Python to a local base image made for it (Debian bookworm
  for 3.11, trixie for 3.13).
- Legs without a container run the suite on this host with the installed torch; the
  workflow's setup step is not rehearsed for them (there is no image to use).
- `leg.timeout_minutes` (the job's timeout) is not enforced; per-case timeouts still are.
- A leg of `shards: N` runs its N shard jobs' tests one after the other after one setup
  (the workflow sets up each shard's runner), each into `OUTPUT/<leg>/shard-I-of-N/`, then
  merges them into `OUTPUT/<leg>/results.json` as the nightly's report job does.
- A leg of `nodes: N` is not runnable: its jobs meet over a network at its rdzv_endpoint
  (tests/unit/suite/test_multinode.py runs `accelkit test --nnodes 2` on one host instead).
- An explore leg (`explore_seeds: N`) runs its exploration as its job does
  (`accelkit.suite.run.explore`): `OUTPUT/<leg>/findings.json`, its `.md` and each seed's
  results file; with a baseline, the summary counts its findings and it is never compared.

`accelkit matrix run` is `rehearsal_options` (its flags, checked), `plan_rehearsal`,
`rehearse`, then `judge_outcome` (with `--baseline`: the nightly's verdict of the legs that
ran, `accelkit.matrix.verdict`); the command only renders.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from accelkit.backends import Availability
from accelkit.backends import get as get_backend
from accelkit.errors import AccelkitError, BadInput, ExitCode
from accelkit.events import Event
from accelkit.matrix.github import suite_option
from accelkit.matrix.jobs import shard_dir
from accelkit.matrix.model import MatrixEntry

if TYPE_CHECKING:
    from accelkit.results.nightly import NightlyVerdict
    from accelkit.setup.image import SetupPlan
    from accelkit.suite.run.request import RunRequest

#: Where the workflow's `leg` job writes a leg's files, under `leg-results/<leg name>/`.
RESULTS_FILE = "results.json"
JUNIT_FILE = "junit.xml"
SETUP_FILE = "setup.json"
#: An explore leg's (`explore_seeds: N`): its findings, and its .md, beside each seed's
#: results file (`findings.seed-<seed>.json`).
FINDINGS_FILE = "findings.json"

#: Stand-in for the tag setup produces, in argv shown before setup has run.
IMAGE_FROM_SETUP = "<image from setup>"

LegEventCallback = Callable[[str, Event], None]
"""Receives (leg name, event); the events are accelkit.events's."""


@dataclass(frozen=True)
class RehearsalOptions:
    """What a rehearsal overrides or adds to the legs, for this machine."""

    output: Path
    base_image: str | None = None
    """Base image for every setup step (upstream images are never pulled here)."""
    base_images: tuple[tuple[str, str], ...] = ()
    """(python, image): the base image for the legs of that Python; wins over base_image."""
    torch_wheels: tuple[Path, ...] = ()
    """Torch wheels; each setup installs the one built for its leg's Python (replacing the
    leg's channel or built wheel)."""
    torch_index: str | None = None
    """An index to install torch from where no wheel fits the leg's Python (it must be
    reachable from here), with `torch_spec`."""
    torch_spec: str | None = None
    torch_from_base: tuple[str, ...] = ()
    """Pythons whose legs test the torch their base image already has (`setup
    --torch-from-base`) instead of a wheel or an index."""
    skip_build: bool = False
    """Rehearse build legs without their build step (their setup installs `torch_wheel`)."""
    test_args: tuple[str, ...] = ()
    """Rehearsal-only `accelkit test` options appended to each leg's test_args (`-k EXPR`)."""


class Host(Protocol):
    """What the rehearsal asks about this machine; tests pass a fake."""

    def docker(self) -> Availability:
        """Whether a Docker engine answers."""
        ...

    def has_image(self, name: str) -> bool:
        """Whether the engine holds image `name` (it is never pulled)."""
        ...


@dataclass(frozen=True)
class BuildStep:
    backend: str
    args: tuple[str, ...]
    skipped: str | None = None
    """Why the step is left out (`--skip-build`), or None when it would run."""

    @property
    def argv(self) -> tuple[str, ...]:
        return ("accelkit", "build", self.backend, *self.args, "--output", "wheelhouse", "--json")


@dataclass(frozen=True)
class SetupStep:
    argv: tuple[str, ...]
    plan: SetupPlan | None = field(default=None, compare=False)
    """The checked setup plan; None when the leg's setup cannot be planned here."""


@dataclass(frozen=True)
class TestStep:
    argv: tuple[str, ...]
    request: RunRequest | None = field(default=None, compare=False)
    """The run request (its `image` is filled in after setup); None when not plannable."""


@dataclass(frozen=True)
class LegPlan:
    """One leg: the steps the workflow would run, and whether this machine can run them."""

    leg: MatrixEntry
    output_dir: Path
    build: BuildStep | None
    setup: SetupStep | None
    image: str | None
    """A prebuilt image the leg names (then there is no setup step)."""
    test: TestStep
    """The leg's test as one run, writing the leg's results file."""
    runnable: bool
    reason: str = ""
    """Why the leg cannot run here (empty when it can)."""
    shards: tuple[TestStep, ...] = ()
    """A sharded leg's shard jobs' tests (`--shard I/N`, each into its own folder), which run
    in place of `test`; their results are merged into `test`'s --json by `merge`."""

    @property
    def merge(self) -> tuple[str, ...] | None:
        """`accelkit merge` of the shards into the leg's results file, as the nightly does."""
        if not self.shards:
            return None
        files = [str(step.request.json_path) for step in self.shards if step.request]
        return ("accelkit", "merge", *files, "-o", str(self.output_dir / RESULTS_FILE))

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.leg.name,
            "backend": self.leg.backend,
            "device": self.leg.device,
            "container": self.leg.container,
            "runnable": self.runnable,
            "reason": self.reason,
            "output": str(self.output_dir),
            "steps": {
                "build": None
                if self.build is None
                else {"argv": list(self.build.argv), "skipped": self.build.skipped},
                "setup": None if self.setup is None else {"argv": list(self.setup.argv)},
                "image": self.image,
                "test": {"argv": list(self.test.argv)},
                "shards": [{"argv": list(step.argv)} for step in self.shards],
                "merge": None if self.merge is None else {"argv": list(self.merge)},
            },
        }


@dataclass(frozen=True)
class RehearsalPlan:
    legs: tuple[LegPlan, ...]

    @property
    def runnable(self) -> tuple[LegPlan, ...]:
        return tuple(leg for leg in self.legs if leg.runnable)

    def to_dict(self) -> dict[str, Any]:
        return {
            "legs": [leg.to_dict() for leg in self.legs],
            "runnable": len(self.runnable),
            "total": len(self.legs),
        }


@dataclass(frozen=True)
class LegOutcome:
    name: str
    status: str
    """passed, failed, error (setup or the runner gave up), or skipped (not runnable)."""
    exit_code: int
    counts: dict[str, int] = field(default_factory=dict, hash=False)
    message: str = ""
    results: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "exit_code": self.exit_code,
            "counts": dict(self.counts),
            "message": self.message,
            "results": str(self.results) if self.results is not None else None,
        }


@dataclass(frozen=True)
class RehearsalOutcome:
    legs: tuple[LegOutcome, ...]

    @property
    def exit_code(self) -> ExitCode:
        ran = [leg for leg in self.legs if leg.status != "skipped"]
        if not ran:
            return ExitCode.UNAVAILABLE
        if any(leg.status != "passed" for leg in ran):
            return ExitCode.FAILED
        return ExitCode.OK

    def to_dict(self) -> dict[str, Any]:
        return {"legs": [leg.to_dict() for leg in self.legs], "exit_code": int(self.exit_code)}


class DockerHost:
    """The real machine: the Docker engine of the environment, asked lazily, once."""

    def __init__(self) -> None:
        self._client: Any = None
        self._docker: Availability | None = None

    def docker(self) -> Availability:
        if self._docker is None:
            from accelkit.containers.engine import connect

            try:
                self._client = connect()
                self._docker = Availability(True, "")
            except AccelkitError as exc:
                self._docker = Availability(False, str(exc))
        return self._docker

    def has_image(self, name: str) -> bool:
        if not self.docker().available:
            return False
        from accelkit.containers.images import image_exists

        return image_exists(self._client, name)

    @property
    def client(self) -> Any:
        """The docker-py client (Unavailable when no engine answers)."""
        if not self.docker().available:
            from accelkit.errors import Unavailable

            raise Unavailable(f"no Docker engine: {self.docker().reason}")
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
            self._docker = None


# --- planning -------------------------------------------------------------------------


def plan_rehearsal(
    legs: Sequence[MatrixEntry], options: RehearsalOptions, host: Host
) -> RehearsalPlan:
    """The plan for `legs` on this machine; BadInput for args a leg cannot be run with."""
    for wheel in options.torch_wheels:
        if not wheel.is_file():
            raise BadInput(f"--torch-wheel {wheel}: no such file")
    for python in options.torch_from_base:
        if options.base_image is None and python not in dict(options.base_images):
            raise BadInput(
                f"--torch-from-base {python} needs --base-image {python}=IMAGE: an image "
                "whose python3 has torch"
            )
    return RehearsalPlan(tuple(_plan_leg(leg, options, host) for leg in legs))


def _plan_leg(leg: MatrixEntry, options: RehearsalOptions, host: Host) -> LegPlan:
    backend = get_backend(leg.backend, flag="backend")
    out = options.output / leg.name
    reasons: list[str] = []

    build: BuildStep | None = None
    if leg.build:
        skipped = (
            "--skip-build: the setup installs --torch-wheel instead" if options.skip_build else None
        )
        build = BuildStep(leg.backend, leg.build_args, skipped)
        if not options.skip_build:
            reasons.append(
                f"its build step (`accelkit build {leg.backend}`) builds torch "
                f"({leg.torch.label()}) from indexes and sources a rehearsal does not reach; "
                "--skip-build with --torch-wheel tests a given wheel instead"
            )

    setup: SetupStep | None = None
    image = leg.image if leg.container else None
    if leg.container:
        # Containers take the device from this host; the torch under test is the image's,
        # so the host's own torch does not matter, only whether the device is here.
        if not backend.devices():
            why = backend.availability().reason or "no device found"
            reasons.append(f"{leg.backend}: no device on this host ({why})")
        docker = host.docker()
        if not docker.available:
            reasons.append(f"no Docker engine: {docker.reason}")
        if image is not None:
            if docker.available and not host.has_image(image):
                reasons.append(f"image {image} is not on the Docker engine (never pulled)")
        else:
            setup, setup_reasons = _plan_setup(leg, options, host, docker.available)
            reasons += setup_reasons
    else:
        availability = backend.availability()
        if not availability.available:
            reasons.append(f"{leg.backend} on this host: {availability.reason}")

    if leg.nodes > 1:
        reasons.append(
            f"a leg of nodes: {leg.nodes} runs one job per node, meeting at "
            f"{leg.rdzv_endpoint}; a rehearsal runs no multi-node leg (`accelkit test "
            "--nnodes` runs one on one host)"
        )
    test = _plan_test(leg, options, out, image)
    shards = tuple(
        _plan_test(leg, options, out / shard_dir(index, leg.shards), image, (index, leg.shards))
        for index in range(1, leg.shards + 1)
        if leg.shards > 1
    )
    return LegPlan(
        leg=leg,
        output_dir=out,
        build=build,
        setup=setup,
        image=image,
        test=test,
        runnable=not reasons,
        reason="; ".join(reasons),
        shards=shards,
    )


def _plan_setup(
    leg: MatrixEntry, options: RehearsalOptions, host: Host, docker: bool
) -> tuple[SetupStep, list[str]]:
    from accelkit.setup.image import plan_setup
    from accelkit.setup.request import SetupRequest

    where = f"{leg.location}: leg {leg.name}: setup_args"
    try:
        parsed = SetupRequest.from_argv([leg.backend, *leg.setup_args])
    except BadInput as exc:
        raise BadInput(f"{where}: {exc}") from None
    request = parsed
    reasons: list[str] = []
    wheel, misfits = wheel_for_python(leg.python, options.torch_wheels)
    if leg.python in options.torch_from_base:
        request = dataclasses.replace(
            request,
            torch_from_base=True,
            torch_wheel=None,
            torch_index=None,
            torch_channel=None,
            torch_spec="torch",
        )
    elif wheel is not None:
        request = dataclasses.replace(
            request, torch_wheel=wheel, torch_index=None, torch_channel=None
        )
    elif options.torch_index is not None:
        request = dataclasses.replace(
            request,
            torch_wheel=None,
            torch_index=options.torch_index,
            torch_channel=None,
            torch_spec=options.torch_spec or request.torch_spec,
        )
    elif options.torch_wheels:
        reasons.append(
            f"no --torch-wheel fits Python {leg.python} ({'; '.join(misfits)}): pass a torch "
            "wheel built for it, --torch-index, or --torch-from-base with a base image that "
            "has torch"
        )
    base = dict(options.base_images).get(leg.python) or options.base_image
    if base is not None:
        request = dataclasses.replace(request, base_image=base)
    argv = ["accelkit", "setup", *request.to_argv(), "--json"]
    if reasons:
        return SetupStep(tuple(argv)), reasons
    try:
        plan = plan_setup(request)
    except BadInput as exc:
        return SetupStep(tuple(argv)), [f"setup: {exc}"]
    if plan.torch_wheel is None and options.torch_index is None and not plan.torch_from_base:
        reasons.append(
            f"setup would install torch from {plan.torch_index}, which a rehearsal does not "
            "reach: pass --torch-wheel (or --torch-index)"
        )
    if docker and not host.has_image(plan.base_image):
        reasons.append(
            f"base image {plan.base_image} is not on the Docker engine (never pulled): "
            "pass --base-image"
        )
    return SetupStep(tuple(argv), plan), reasons


def wheel_for_python(python: str, wheels: Sequence[Path]) -> tuple[Path | None, list[str]]:
    """The first of `wheels` that installs into Python `python`, and why each other does not."""
    from accelkit.setup.image import wheel_python_problem
    from accelkit.wheels.wheel import parse_wheel_name

    misfits: list[str] = []
    for wheel in wheels:
        name = parse_wheel_name(wheel)
        problem = wheel_python_problem(name.python, name.abi, python)
        if problem is None:
            return wheel, misfits
        misfits.append(f"{wheel.name}: {problem}")
    return None, misfits


def _plan_test(
    leg: MatrixEntry,
    options: RehearsalOptions,
    out: Path,
    image: str | None,
    shard: tuple[int, int] | None = None,
) -> TestStep:
    from accelkit.suite.run.request import RunRequest, suite_choice

    args = (*leg.test_args, *options.test_args)
    where = f"{leg.location}: leg {leg.name}: test_args"
    try:
        parsed = RunRequest.from_argv(list(args))
    except BadInput as exc:
        raise BadInput(f"{where}: {exc}") from None
    if leg.shards > 1 and parsed.shard is not None:
        raise BadInput(f"{where}: --shard is set from the leg's shards ({leg.shards})")
    set_by_leg = {
        flag: name
        for name, flag in (
            ("device", "--device"),
            ("suite", "--suite"),
            ("image", "--image"),
            ("json_path", "--json"),
            ("junit_path", "--junit"),
        )
    }
    defaults = RunRequest()
    for flag, name in set_by_leg.items():
        if getattr(parsed, name) != getattr(defaults, name):
            raise BadInput(f"{where}: {flag} is set from the leg itself")
    explore = leg.explore_seeds > 0  # its test writes findings (and no junit: one per seed)
    request = dataclasses.replace(
        parsed,
        device=leg.device,
        suite=suite_choice(suite_option(leg.suites)),
        json_path=out / (FINDINGS_FILE if explore else RESULTS_FILE),
        junit_path=None if explore else out / JUNIT_FILE,
        image=image if leg.container else None,
        shard=None if shard is None else f"{shard[0]}/{shard[1]}",
    )
    shown = request
    if leg.container:
        shown = dataclasses.replace(request, image=image or IMAGE_FROM_SETUP)
    argv = ("accelkit", "test", *shown.to_argv(always=("device", "suite")))
    return TestStep(argv, request.with_argv(argv))


# --- execution ------------------------------------------------------------------------


def rehearse(
    plan: RehearsalPlan,
    host: DockerHost,
    on_event: LegEventCallback | None = None,
) -> RehearsalOutcome:
    """Run every runnable leg of `plan`, one after the other; one outcome per leg.

    A leg that fails (a case failed, setup or the runner raised) does not stop the others,
    like `fail-fast: false` in the workflow. Legs that cannot run here are `skipped` with
    their reason.
    """
    emit = on_event or (lambda name, event: None)
    outcomes: list[LegOutcome] = []
    for leg in plan.legs:
        if not leg.runnable:
            outcomes.append(LegOutcome(leg.leg.name, "skipped", 0, message=leg.reason))
            continue
        emit(leg.leg.name, {"event": "leg-start"})
        try:
            outcome = _run_leg(leg, host, emit)
        except AccelkitError as exc:
            outcome = LegOutcome(leg.leg.name, "error", int(exc.exit_code), message=str(exc))
        emit(leg.leg.name, {"event": "leg-done", "outcome": outcome.to_dict()})
        outcomes.append(outcome)
    return RehearsalOutcome(tuple(outcomes))


def parse_base_images(values: Sequence[str]) -> tuple[str | None, tuple[tuple[str, str], ...]]:
    """--base-image values: (the image for every leg, (python, image) pairs)."""
    from accelkit.inputs import check_image, check_python

    every: str | None = None
    per_python: dict[str, str] = {}
    for value in values:
        python, sep, image = value.partition("=")
        if not sep:
            if every is not None:
                raise BadInput("--base-image: one IMAGE for every leg; PYTHON=IMAGE for more")
            every = check_image("--base-image", value)
            continue
        check_python(python, flag="--base-image")
        if python in per_python:
            raise BadInput(f"--base-image: Python {python} given twice")
        per_python[python] = check_image("--base-image", image)
    return every, tuple(per_python.items())


def rehearsal_options(
    *,
    output: Path,
    base_images: Sequence[str] = (),
    torch_wheels: Sequence[Path] = (),
    torch_index: str | None = None,
    torch_spec: str | None = None,
    torch_from_base: Sequence[str] = (),
    skip_build: bool = False,
    keyword: str | None = None,
    test_args: Sequence[str] = (),
    baseline: Path | None = None,
) -> RehearsalOptions:
    """`matrix run`'s flags checked (BadInput, one line) and made into options: `keyword`
    (-k) goes before the other test arguments; `baseline`, judged after the run, must be a
    folder."""
    from accelkit.inputs import check_python

    extra = [*(["-k", keyword] if keyword is not None else []), *test_args]
    every, per_python = parse_base_images(base_images)
    if baseline is not None and not baseline.is_dir():
        raise BadInput(f"--baseline {baseline}: not a directory")
    return RehearsalOptions(
        output=output,
        base_image=every,
        base_images=per_python,
        torch_wheels=tuple(torch_wheels),
        torch_index=torch_index,
        torch_spec=torch_spec,
        torch_from_base=tuple(
            check_python(python, flag="--torch-from-base") for python in torch_from_base
        ),
        skip_build=skip_build,
        test_args=tuple(extra),
    )


@dataclass(frozen=True)
class RehearsalRun:
    """A rehearsal's plan and outcome and, with a baseline, its verdict (`accelkit matrix
    run --json` prints `to_dict()`)."""

    plan: RehearsalPlan
    outcome: RehearsalOutcome
    verdict: NightlyVerdict | None = None

    @property
    def exit_code(self) -> int:
        """The outcome's (0 passed, 1 a leg failed, 3 none could run), 1 when a leg is red."""
        code = int(self.outcome.exit_code)
        if self.verdict is not None and self.verdict.red:
            code = max(code, int(ExitCode.FAILED))
        return code

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"plan": self.plan.to_dict(), "outcome": self.outcome.to_dict()}
        if self.verdict is not None:
            data["verdict"] = self.verdict.to_json_dict()
        return data


def judge_outcome(
    plan: RehearsalPlan, outcome: RehearsalOutcome, output: Path, baseline: Path | None
) -> RehearsalRun:
    """The rehearsal with, when a baseline is given and a leg ran, the legs that ran judged
    against it as the nightly does (`OUTPUT/summary.md`, `OUTPUT/verdict.json`)."""
    from accelkit.matrix.verdict import judge_rehearsal

    if baseline is None or outcome.exit_code == ExitCode.UNAVAILABLE:
        return RehearsalRun(plan, outcome)
    ran = {leg.name for leg in outcome.legs if leg.status != "skipped"}
    legs = [leg.leg for leg in plan.legs if leg.leg.name in ran]
    gating = [leg.name for leg in legs if not leg.explore_seeds]
    explore = [leg.name for leg in legs if leg.explore_seeds]
    return RehearsalRun(plan, outcome, judge_rehearsal(gating, output, baseline, explore))


def _run_leg(leg: LegPlan, host: DockerHost, emit: LegEventCallback) -> LegOutcome:
    from accelkit.suite.run import container, runner

    name = leg.leg.name
    leg.output_dir.mkdir(parents=True, exist_ok=True)
    image = leg.image
    if leg.setup is not None:
        from accelkit.setup.image import setup

        assert leg.setup.plan is not None  # a runnable leg's setup was planned
        result = setup(
            leg.setup.plan,
            host.client,
            on_line=lambda line: emit(name, {"event": "setup-line", "line": line}),
        )
        (leg.output_dir / SETUP_FILE).write_text(json.dumps(result.to_dict()) + "\n")
        image = result.image
        emit(name, {"event": "setup-done", "image": image, "cached": result.cached})
    if leg.leg.explore_seeds:
        return _explore_leg(leg, image, emit)
    codes: list[int] = []
    results = []
    for step in leg.shards or (leg.test,):
        assert step.request is not None
        request = step.request
        if leg.leg.container:
            argv = tuple(image or "" if a == IMAGE_FROM_SETUP else a for a in request.argv)
            request = dataclasses.replace(request, image=image, argv=argv)
        if request.shard is not None:
            assert request.json_path is not None
            request.json_path.parent.mkdir(parents=True, exist_ok=True)
            emit(name, {"event": "shard-start", "shard": request.shard})
        execute = container.run if request.image is not None else runner.run
        outcome = execute(request, lambda event: emit(name, event))
        codes.append(int(outcome.exit_code))
        results.append((str(request.json_path), outcome.results))
    summary = results[0][1].summary
    if leg.shards:
        from accelkit.results.io import write_results
        from accelkit.results.shards import merge_shards

        merged = merge_shards(results)
        write_results(merged, leg.output_dir / RESULTS_FILE)
        summary = merged.summary
    counts = {
        status: int(getattr(summary, status))
        for status in ("passed", "failed", "skipped", "error", "crashed", "timeout")
    }
    code = next((c for c in codes if c != 0), 0)
    return LegOutcome(
        name,
        "passed" if code == 0 else "failed",
        code,
        counts=counts,
        results=leg.output_dir / RESULTS_FILE,
    )


def _explore_leg(leg: LegPlan, image: str | None, emit: LegEventCallback) -> LegOutcome:
    """An explore leg's test: its seeds, then its findings (`OUTPUT/<leg>/findings.json`);
    passed whatever it found, an error when a seed's run could not finish."""
    from accelkit.suite.run.explore import run_exploration

    name = leg.leg.name
    request = leg.test.request
    assert request is not None
    if leg.leg.container:
        argv = tuple(image or "" if a == IMAGE_FROM_SETUP else a for a in request.argv)
        request = dataclasses.replace(request, image=image, argv=argv)
    explored = run_exploration(request, lambda event: emit(name, event))
    result = explored.exploration
    if result is None:
        return LegOutcome(
            name,
            "error",
            explored.exit_code,
            message=f"seed {explored.stopped_at}: the run could not finish "
            f"(exit {explored.exit_code}); its results: {explored.stopped_results}",
        )
    counts = {
        "passed": sum(run.passed for run in result.runs),
        "findings": len(result.findings),
        "seeds": len(result.runs),
    }
    return LegOutcome(
        name,
        "passed",
        0,
        counts=counts,
        message=f"{len(result.findings)} finding(s) over {len(result.runs)} seed(s): "
        f"{explored.findings_md}",
        results=explored.findings_json,
    )
