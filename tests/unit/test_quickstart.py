"""README's quickstart, the first thing a new user runs (issue 48).

What runs where:
- its `accelkit test` line is the session's one whole-suite CPU run, as written
  (tests/conftest.py `cpu_suite_run`, checked by
  tests/integration/test_test_runner.py::test_the_builtin_suite_passes_on_cpu);
- its install lines are checked here for what a fresh Debian/Ubuntu machine needs, and run,
  every line in a fresh venv, by tests/integration/test_quickstart_verbatim.py (with the
  CPU index's torch taken from the CPU wheel on disk, and a few cases: its docstring).
"""

from __future__ import annotations

import shlex

from tests.helpers import REPO, readme_main_job, readme_quickstart


def test_the_quickstart_fits_a_fresh_debian_machine() -> None:
    lines = readme_quickstart()
    # Debian's python3-venv, then a venv before any pip (the system Python is externally
    # managed), and `python3`: stock Debian has no `python`.
    assert lines[0] == "sudo apt-get install -y python3-venv"
    assert lines[1] == "python3 -m venv .venv && . .venv/bin/activate"
    assert not any(shlex.split(line)[0] == "python" for line in lines)
    pips = [line for line in lines if line.startswith("pip install")]
    # The CPU build of torch first, so '.[torch]' does not pull PyPI's 5.5 GB CUDA build.
    assert pips[0] == "pip install torch --index-url https://download.pytorch.org/whl/cpu"
    extras = shlex.split(pips[1])[2]
    assert extras == ".[torch,report]"
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert '\ntorch = ["torch>=' in pyproject and '\nreport = ["matplotlib>=' in pyproject


def test_the_main_job_is_what_the_shared_suite_run_runs() -> None:
    assert readme_main_job() == ["test", "--device", "cpu", "--json", "r.json", "--junit", "r.xml"]


def test_readme_keeps_the_test_command_ci_runs() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    command = "python -m pytest -n 2 --dist loadgroup --durations=25"
    assert command in ci and command in readme
    assert "## Developing accelkit" in readme and "bash .ci/run" in readme
    assert "](docs/reading-output.md)" in readme
