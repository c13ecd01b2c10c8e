"""The command reference (docs/cli.md) is generated from the app."""

from __future__ import annotations

from accelkit.cli.reference import reference
from tests.helpers import REPO


def test_docs_cli_md_is_what_the_app_generates() -> None:
    written = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    assert written == reference(), (
        "docs/cli.md is stale: python -m accelkit.cli.reference > docs/cli.md"
    )
