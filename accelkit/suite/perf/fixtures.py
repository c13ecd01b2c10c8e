"""Fixtures and collection helpers of the perf suite.

Kept apart from conftest.py so that other case folders (the A/A benchmark's, under
benchmarks/) can reuse them: `from accelkit.suite.perf.fixtures import perf`.
"""

from __future__ import annotations

import pytest

from accelkit.suite.perf.harness import PerfContext, SizeTier, tier_for_backend


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The canaries (`test_canary.py`) run first in every pass, before any other perf case,
    so each pass's canaries see the conditions its cases start in."""
    items.sort(key=lambda item: 0 if item.nodeid.split("::")[0].endswith("test_canary.py") else 1)


def backend_of(config: pytest.Config) -> str:
    return str(config.getoption("--accelkit-device"))


def tier_of(config: pytest.Config) -> SizeTier:
    """The size tier of this run's device, at collection time (case ids carry sizes)."""
    return tier_for_backend(backend_of(config))


@pytest.fixture(scope="session")
def perf(pytestconfig: pytest.Config, accelkit_backend: str) -> PerfContext:
    """Per-worker perf state; with --measure-ceilings, the ceilings are measured here once
    per worker (lazily: copy bandwidth and one large GEMM per dtype a case asks about)."""
    return PerfContext(
        accelkit_backend,
        measure_ceilings=bool(pytestconfig.getoption("--accelkit-measure-ceilings")),
    )
