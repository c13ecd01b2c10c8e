"""The rules of GitHub's step summary (`$GITHUB_STEP_SUMMARY`) that every Markdown view
(`accelkit.results.render.markdown`) writes through: table cells, tables and the size cap.

A cell is one line of at most `limit` characters with the characters that would break a
table or open a code span escaped, so any case id or failure message fits in a row:

    cell("mismatch | 3 of\\n10 elements", 20)   ->  mismatch \\| 3 of 10 …
    table(["case", "now"], [["c/x", "failed"]]) ->  | case | now |
                                                    |---|---|
                                                    | c/x | failed |

`cap` keeps a summary under GitHub's 1 MiB limit: whole lines are kept while they fit, and
a note says how many were left out and where to find everything.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

MARKDOWN_LIMIT_BYTES: Final = 1 << 20
"""GitHub rejects a step summary of more than 1 MiB."""
DEFAULT_MAX_BYTES: Final = MARKDOWN_LIMIT_BYTES - 1024
"""What one summary may use: under the limit, with room to spare."""
_NOTE_BYTES: Final = 300
"""Kept free for the truncation note (its text is under 250 bytes)."""


def cell(text: str, limit: int) -> str:
    """`text` as one table cell: one line of at most `limit` characters, with backslashes,
    pipes and backticks escaped."""
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("`", "\\`")


def row(cells: Iterable[str]) -> str:
    """One table row of cells that are already escaped (see `cell`)."""
    return "| " + " | ".join(cells) + " |"


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """The lines of a table: the header row, the separator, then one line per row."""
    return [row(header), "|" + "---|" * len(header), *(row(cells) for cells in rows)]


def cap(text: str, max_bytes: int, *, see: str) -> str:
    """`text` if it fits in `max_bytes` (UTF-8); else its first lines and a note that names
    what was left out and points to `see` for everything."""
    if len(text.encode("utf-8")) <= max_bytes:
        return text
    lines = text.split("\n")
    kept: list[str] = []
    size = 0
    for line in lines:
        size += len(line.encode("utf-8")) + 1
        if size > max_bytes - _NOTE_BYTES:
            break
        kept.append(line)
    dropped = len(lines) - len(kept)
    return "\n".join(kept) + (
        f"\n\n_Truncated: {dropped} more lines (the summary is limited to {max_bytes} "
        f"bytes); see {see}._\n"
    )
