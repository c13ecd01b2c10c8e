"""The tests wait for .ci/run's background base-image jobs (tests/conftest.py
`_wait_for_base_image`): ready, still coming, all ended, failed."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.conftest import BASE_IMAGES_ENV, _wait_for_base_image

TAG = "accelkit-base:bookworm"


@pytest.fixture
def images(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "base-images"
    folder.mkdir()
    (folder / "jobs").write_text("base-bookworm\nbase-trixie\n", encoding="utf-8")
    monkeypatch.setenv(BASE_IMAGES_ENV, str(folder))
    return folder


def test_no_wait_outside_ci_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BASE_IMAGES_ENV, raising=False)
    _wait_for_base_image(TAG)


def test_an_image_made_meanwhile_ends_the_wait(images: Path) -> None:
    timer = threading.Timer(0.2, (images / "ready-accelkit-base_bookworm").touch)
    timer.start()
    _wait_for_base_image(TAG, poll_s=0.05)
    timer.join()


def test_jobs_that_all_ended_leave_the_answer_to_the_engine(images: Path) -> None:
    for job in ("base-bookworm", "base-trixie"):
        (images / f"ended-{job}").write_text("0\n", encoding="utf-8")
    _wait_for_base_image("accelkit-base:other", poll_s=0.05)  # the engine says it is missing


def test_a_failed_job_fails_the_test_that_waits_with_its_log(images: Path) -> None:
    (images / "ended-base-bookworm").write_text("1\n", encoding="utf-8")
    (images / "ended-base-trixie").write_text("0\n", encoding="utf-8")
    with pytest.raises(pytest.fail.Exception, match=r"base-bookworm\.log"):
        _wait_for_base_image(TAG, poll_s=0.05)


def test_a_ready_image_needs_no_job_to_end(images: Path) -> None:
    (images / "ready-accelkit-base_bookworm").touch()
    _wait_for_base_image(TAG, poll_s=0.05)
