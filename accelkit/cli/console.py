"""Where the CLI's output goes, and how wide it is laid out: one decision for every command.

On a terminal, rich lays tables out at the terminal's width and a column too narrow for a
cell wraps it (`fold`): a case id is never cut to `perf/gemm/fl…`, so float32, float16 and
float8 stay apart. Where there is no terminal (a pipe, a file, a CI log, GitHub Actions; a
CI job's pseudo-terminal counts as none: `in_ci_log`), rich would fall back to 80 columns
and squeeze every cell; there the output keeps its content and changes its layout: tables
are drawn at their natural width (`PLAIN_WIDTH` is only a ceiling), each row on one line,
without colour, and no live progress view is shown
(`accelkit test` prints one line per finished case instead; `accelkit build` one line per
step and state; `accelkit setup` its one line of what it is doing, then the log):

    with activity(console, "setting up the rocm test image"):  # a spinner only on a terminal
        ...

    make_console()                  # stdout: the terminal's width, or plain when piped
    make_console(stderr=True)       # the same decision for stderr

The tables themselves (cells that fold, a narrow layout where a table does not fit) are
the results views' (`accelkit.results.render.terminal`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from accelkit.results.render.terminal import PLAIN_WIDTH

if TYPE_CHECKING:
    from rich.console import Console


def make_console(*, stderr: bool = False, soft_wrap: bool = False) -> Console:
    """A rich Console for stdout (or stderr): the terminal's own width on a terminal, else
    plain (`PLAIN_WIDTH`, no colour, no markup highlighting)."""
    from rich.console import Console

    probe = Console(stderr=stderr)
    if probe.is_terminal and not in_ci_log():
        return Console(stderr=stderr, highlight=False, soft_wrap=soft_wrap)
    return Console(
        stderr=stderr,
        highlight=False,
        soft_wrap=soft_wrap,
        width=PLAIN_WIDTH,
        no_color=True,
        force_terminal=False,
    )


def in_ci_log() -> bool:
    """Whether output goes to a CI job's log even where it looks like a terminal: act's host
    runner gives each step a pseudo-terminal, and a log keeps every spinner frame. GitHub
    Actions and act set GITHUB_ACTIONS=true; most CI systems set CI=true."""
    return os.environ.get("GITHUB_ACTIONS") == "true" or os.environ.get("CI") == "true"


def is_plain(console: Console) -> bool:
    """Whether `console` writes to something other than a terminal (see `make_console`)."""
    return not console.is_terminal


@contextlib.contextmanager
def activity(console: Console, text: str) -> Iterator[None]:
    """`text` as a spinner line while the block runs, on a terminal; elsewhere (a CI log) the
    line once, as the block starts: a log has no place for a spinner's frames."""
    if is_plain(console):
        console.print(text, markup=False)
        yield
        return
    with console.status(text, spinner="dots"):
        yield
