"""Headless Chromium for the tests that check an HTML page in a real browser.

The browser tests skip with a reason where no Chromium is installed; CI sets
ACCELKIT_REQUIRE_BROWSER=1 to turn that skip into a failure."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REQUIRE_BROWSER_ENV = "ACCELKIT_REQUIRE_BROWSER"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "chrome")


def find_chromium() -> str:
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    reason = f"no Chromium found (looked for {', '.join(CHROMIUM_NAMES)})"
    if os.environ.get(REQUIRE_BROWSER_ENV) == "1":
        pytest.fail(f"{reason} ({REQUIRE_BROWSER_ENV}=1: failing, not skipping)", pytrace=False)
    pytest.skip(reason)


def browse(
    chromium: str, page: Path, profile: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    argv = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        *extra,
        page.resolve().as_uri(),
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def console_lines(stderr: str) -> list[str]:
    # Chromium logs every console message and uncaught error as ":CONSOLE" lines.
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]
