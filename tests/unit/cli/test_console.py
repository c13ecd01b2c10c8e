"""The CLI's one decision about where output goes: a terminal gets live views, a log lines."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from accelkit.cli.console import activity, is_plain, make_console


def test_activity_in_a_log_is_one_line_and_no_spinner() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=120)
    assert is_plain(console)
    with activity(console, "setting up the rocm test image"):
        console.print("| step 1/3", markup=False)
    assert out.getvalue() == "setting up the rocm test image\n| step 1/3\n"


def test_activity_on_a_terminal_is_a_spinner() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120)
    with activity(console, "setting up"):
        pass
    assert "setting up" in out.getvalue()
    assert any("\u2800" <= ch <= "\u28ff" for ch in out.getvalue())


@pytest.mark.parametrize(
    ("env", "plain"),
    [
        ({}, False),
        ({"GITHUB_ACTIONS": "true"}, True),
        ({"CI": "true"}, True),
        ({"CI": "false"}, False),
    ],
)
def test_a_ci_jobs_pseudo_terminal_is_a_log(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], plain: bool
) -> None:
    """act's host runner gives a step a pseudo-terminal (FORCE_COLOR plays one here): in a
    CI job it is still a log, so no live view, no spinner, no colour."""
    for name in ("GITHUB_ACTIONS", "CI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FORCE_COLOR", "1")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert is_plain(make_console()) is plain
    assert is_plain(make_console(stderr=True)) is plain
