"""`accelkit bisect` of a perf case: each step measured interleaved against the good build.

Unit tests: the decision (`perf_verdict`, and `CaseJudge` with fake interleaved runs whose
measurements are made to order: a 3x slowdown is bad, the same speed good, a noisy step is
measured again with twice the passes and then skipped, never guessed), prepared
environments (`--envs`), the side launcher, and the planted slowdown itself (the fault
plugin's "slow" kind). The command end to end: tests/integration/test_bisect_perf.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from accelkit.triage.bisect import Build, BuildUnusable, Environment, builds_in_envs
from accelkit.triage.builds import CaseJudge, EnvInstaller, launcher, perf_verdict
from tests.factories import case, metric, results
from tests.helpers import FAULTS, SMALL_GEMM

# --------------------------------------------------------------------------------------
# The decision


def _m(verdict: str, ratio: float | None = 1.0, name: str = "latency") -> Any:
    return SimpleNamespace(metric=name, verdict=verdict, ratio=ratio, ci=(0.9, 1.1))


@pytest.mark.parametrize(
    ("verdicts", "expected"),
    [
        (["regressed", "regressed"], "bad"),
        (["regressed", "noisy"], "bad"),
        (["unchanged", "unchanged"], "good"),
        (["improved", "unchanged"], "good"),
        (["noisy", "unchanged"], None),
        (["environment-shifted"], None),
        (["missing", "unchanged"], "unusable"),
        ([], "unusable"),
    ],
)
def test_a_step_is_bad_only_when_a_metric_regressed(
    verdicts: list[str], expected: str | None
) -> None:
    found = [_m(v, name=f"m{i}") for i, v in enumerate(verdicts)]
    verdict, text = perf_verdict(found)
    assert verdict == expected
    for v in verdicts:
        assert v in text


def _side(side: str, medians: list[float], per_pass: int = 20) -> Any:
    """One side of an interleaved run: pass g's samples around medians[g] (0.5% apart)."""
    samples: list[float] = []
    groups: list[int] = []
    for g, median in enumerate(medians):
        samples += [median * (1 + 0.005 * ((i % 5) - 2)) for i in range(per_pass)]
        groups += [g] * per_pass
    latency = metric(samples=samples, groups=groups, unit="s")
    return results(
        [case(SMALL_GEMM, metrics={"latency": latency})],
        suites=["perf"],
        ab={"side": side, "python": f"/{side}/python", "order": "ABBA"},
        passes=len(medians),
    )


class FakeAb:
    """Interleaved runs made to order: the step's pass g takes `step(g)` times the good
    build's time (good: 1.0 plus a little drift). Checks it is asked for the good build's
    environment as side A."""

    def __init__(self, good: Environment, step: Any) -> None:
        self.good = good
        self.step = step
        self.passes: list[int] = []

    def __call__(
        self, good: Environment, step: Environment, build: Build, passes: int
    ) -> tuple[Any, Any]:
        assert good == self.good, "side A must be the good build"
        assert step != good
        self.passes.append(passes)
        base = [1e-4 * (1 + 0.01 * (g % 3)) for g in range(passes)]
        new = [b * self.step(g) for g, b in enumerate(base)]
        return _side("A", base), _side("B", new)


def _env(name: str) -> Environment:
    return Environment(("python",), (f"/site/{name}",), "2.15.0", f"g{name}")


def _judge(tmp_path: Path, fake: FakeAb, passes: int = 2, **kwargs: Any) -> CaseJudge:
    return CaseJudge(
        SMALL_GEMM, device="cpu", work=tmp_path, passes=passes, run_ab=fake, max_passes=8, **kwargs
    )


@pytest.mark.parametrize(
    ("slowdown", "passes", "expected"),
    [(3.0, 2, "bad"), (3.0, 5, "bad"), (1.0, 2, "good"), (1.0, 5, "good"), (0.5, 5, "good")],
)
def test_the_step_against_the_good_build_decides(
    tmp_path: Path, slowdown: float, passes: int, expected: str
) -> None:
    good = _env("good")
    fake = FakeAb(good, lambda g: slowdown)
    judge = _judge(tmp_path, fake, passes)
    assert judge(good, Build("2.15.0.dev1"))[0] == "good"
    assert fake.passes == [], "the good build is the reference: no run of its own"
    verdict, detail = judge(_env("step"), Build("2.15.0.dev2"))
    assert verdict == expected, detail
    assert fake.passes == [passes]
    assert f"A/B {passes} passes" in detail
    if expected == "bad":
        assert "latency regressed (3.000x" in detail


def test_a_threshold_keeps_a_small_change_from_deciding(tmp_path: Path) -> None:
    good = _env("good")
    small = FakeAb(good, lambda g: 1.10)
    default = _judge(tmp_path, small, 5)
    default(good, Build("a"))
    assert default(_env("s"), Build("b"))[0] == "bad"  # 10% > the default 3%
    wide = _judge(tmp_path, FakeAb(good, lambda g: 1.10), 5, threshold=0.5)
    wide(good, Build("a"))
    assert wide(_env("s"), Build("b"))[0] == "good"  # within 50%: not the change sought


def test_a_noisy_step_is_measured_again_then_skipped_never_guessed(tmp_path: Path) -> None:
    good = _env("good")
    fake = FakeAb(good, lambda g: 0.3 if g % 2 else 3.0)  # passes disagree wildly
    judge = _judge(tmp_path, fake, 2)
    judge(good, Build("a"))
    verdict, detail = judge(_env("noisy"), Build("b"))
    assert verdict == "unusable"
    assert detail.startswith("too noisy to decide: latency noisy")
    assert fake.passes == [2, 4, 8]  # doubled up to max_passes


def test_noise_that_settles_with_more_passes_decides(tmp_path: Path) -> None:
    good = _env("good")

    def step(g: int) -> float:
        return 3.0 if len(fake.passes) > 1 else (0.3 if g % 2 else 3.0)

    fake = FakeAb(good, step)
    judge = _judge(tmp_path, fake, 2)
    judge(good, Build("a"))
    assert judge(_env("b"), Build("b"))[0] == "bad"
    assert fake.passes == [2, 4]


# --------------------------------------------------------------------------------------
# Prepared environments and the launcher


def test_prepared_environments_are_builds_in_version_order(tmp_path: Path) -> None:
    for name in ("2.15.0.dev20260110", "2.15.0.dev20260102", "2.14.1", "notes", ".hidden"):
        (tmp_path / name).mkdir()
    (tmp_path / "2.16.0").write_text("a file, not an environment")
    found = builds_in_envs(tmp_path)
    assert [b.version for b in found] == ["2.14.1", "2.15.0.dev20260102", "2.15.0.dev20260110"]
    assert found[1].date == "20260102"
    assert found[0].source == str((tmp_path / "2.14.1").resolve())


def test_an_environment_whose_torch_does_not_import_is_unusable(tmp_path: Path) -> None:
    broken = tmp_path / "2.15.0"
    (broken / "torch").mkdir(parents=True)
    (broken / "torch" / "__init__.py").write_text("raise ImportError('planted: broken')\n")
    with (
        pytest.raises(BuildUnusable, match="import torch fails: ImportError: planted: broken"),
        EnvInstaller().install(builds_in_envs(tmp_path)[0]),
    ):
        pass


def test_a_venv_runs_with_its_own_python(tmp_path: Path) -> None:
    venv = tmp_path / "2.15.0"
    (venv / "bin").mkdir(parents=True)
    fake_python = venv / "bin" / "python"
    fake_python.write_text(
        '#!/bin/sh\necho \'["2.15.0+fake", "abc"]\'\n'  # what the torch probe prints
    )
    fake_python.chmod(0o755)
    with EnvInstaller().install(builds_in_envs(tmp_path)[0]) as env:
        assert env.python == (str(fake_python),)
        assert (env.torch_version, env.git_version) == ("2.15.0+fake", "abc")
        assert str(venv) not in env.path
        # accelkit from a folder that holds it alone: the folder of an installed accelkit
        # is site-packages, whose torch would shadow the venv's own.
        (alone,) = env.path
        assert [p.name for p in Path(alone).iterdir()] == ["accelkit"]


def test_the_launcher_leaves_accelkit_to_the_ab_run(tmp_path: Path) -> None:
    """An --ab side imports the run's copy of accelkit; the launcher adds no other."""
    from accelkit.triage.builds import ACCELKIT_PARENT, accelkit_alone

    env = Environment(
        (sys.executable,), ("/site", str(ACCELKIT_PARENT), accelkit_alone()), "2.15.0", "g"
    )
    text = launcher(env, tmp_path / "python-a").read_text(encoding="utf-8")
    assert '["/site"]' in text and str(ACCELKIT_PARENT) not in text


def test_the_launcher_puts_the_environment_first_and_passes_arguments(tmp_path: Path) -> None:
    odd = tmp_path / "it's a site; $(touch pwned)"
    odd.mkdir()
    env = Environment((sys.executable,), (str(odd), "/other"), "2.15.0", "g", note="x\ny")
    script = launcher(env, tmp_path / "python-b")
    proc = subprocess.run(
        [str(script), "-c", "import os, sys; print(os.environ['PYTHONPATH']); print(sys.argv)"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": "/outer"},
        check=True,
        cwd=tmp_path,
    )
    path, argv = proc.stdout.splitlines()
    assert path.split(os.pathsep) == [str(odd), "/other", "/outer"]
    assert argv == "['-c']"
    assert not (tmp_path / "pwned").exists()


# --------------------------------------------------------------------------------------
# The planted slowdown


def test_the_slow_fault_repeats_the_kernel_and_keeps_the_answer() -> None:
    import torch

    sys.path.insert(0, str(FAULTS))
    try:
        from faults import Fault, injected, parse
    finally:
        sys.path.remove(str(FAULTS))

    calls: list[str] = []

    class Count(torch.utils._python_dispatch.TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None):  # type: ignore[no-untyped-def]
            calls.append(str(func))
            return func(*args, **(kwargs or {}))

    a, b = torch.randn(8, 8), torch.randn(8, 8)
    expected = torch.mm(a, b)
    assert parse("mm:float32:slow:2") == Fault("mm", ("float32",), "slow", 2.0)
    with Count(), injected(Fault("mm", ("float32",), "slow")) as mode:
        out = torch.mm(a, b)
        torch.mm(a.double(), b.double())  # another dtype: not slowed
    assert torch.equal(out, expected)
    assert mode is not None and mode.hits == 1
    assert calls.count("aten.mm.default") == 3 + 1
