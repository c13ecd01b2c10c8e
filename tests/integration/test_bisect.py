"""`accelkit bisect` through the CLI: bad input as one line, and a bisect across two real
torch releases that names the build and its commits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import assert_one_line_error, run_cli
from tests.wheels import host_release_wheel

CASE = ["--case", "conformance/x"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ([*CASE, "--good", "1", "--bad", "2"], "--wheels DIR, --index URL or --envs DIR"),
        (["--case", "x/y", "--good", "1", "--bad", "2", "--index", "i"], "conformance/ or perf/"),
        ([*CASE, "--good", "2.13.0", "--bad", "2.99", "--wheels", "{w}"], "--bad 2.99: no such"),
        ([*CASE, "--good", "1", "--bad", "2", "--wheels", "{w}", "--passes", "0"], "--passes"),
        ([*CASE, "--good", "1", "--bad", "2", "--index", "notaurl"], "--index: malformed value"),
        (
            [*CASE, "--good", "2.13.0", "--bad", "2.13.0", "--wheels", "{w}", "--cache", "{f}"],
            "--cache {f}: not a directory",
        ),
    ],
)
def test_bad_input_is_one_line(tmp_path: Path, args: list[str], needle: str) -> None:
    from packaging.tags import sys_tags

    tag = next(iter(sys_tags()))
    wheel = tmp_path / f"torch-2.13.0-{tag.interpreter}-{tag.abi}-{tag.platform}.whl"
    wheel.write_bytes(b"")
    proc = run_cli("bisect", *(a.format(w=tmp_path, f=wheel) for a in args))
    assert_one_line_error(proc, 2, needle.format(f=wheel))


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_bisect_across_two_real_releases_names_the_build_and_its_commits(
    tmp_path: Path, old_torch: object
) -> None:
    """`switch` exists in 2.14 only: its case passes on the installed 2.14.1 and is skipped
    on 2.13.0. Searching from the good 2.14.1 down to the bad 2.13.0 names both builds with
    their real git hashes (read from the installed torch)."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for source in (old_torch.wheel, host_release_wheel()):  # type: ignore[attr-defined]
        (wheels / source.name).symlink_to(source)
    args = ["--case", "conformance/control_flow/switch/eager", "--good", "2.14.1"]
    args += ["--bad", "2.13.0+cpu", "--wheels", str(wheels), "--json"]
    args += ["--cache", str(old_torch.cache)]  # type: ignore[attr-defined]
    proc = run_cli("bisect", *args, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    answer = json.loads(proc.stdout)
    import torch

    assert answer["reversed_order"] is True
    assert answer["first_bad"]["version"] == "2.13.0+cpu"
    assert answer["first_bad"]["verdict"] == "bad"
    assert answer["first_bad"]["detail"].startswith("skipped: switch: torch 2.13.0+cpu has no")
    assert answer["first_bad"]["git_version"] == "cf30153c4c131c8164ee7798e5022d810682e2cb"
    assert answer["last_good"]["detail"] == "passed"
    assert answer["last_good"]["git_version"] == torch.version.git_version
    assert answer["compare_url"] == (
        "https://github.com/pytorch/pytorch/compare/cf30153c4c131c8164ee7798e5022d810682e2cb"
        f"...{torch.version.git_version}"
    )
    assert "2.13.0+cpu (git cf30153c4c13): BAD" in proc.stderr
