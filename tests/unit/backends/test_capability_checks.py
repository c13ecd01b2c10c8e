"""The capabilities only one backend's devices have are checked in its module
(`Backend.capability_checks`) and registered by the probe in their section."""

from __future__ import annotations

import pytest

from accelkit import backends
from accelkit.backends.base import CapabilityCheck
from accelkit.probe import capabilities as caps


def test_every_backend_check_and_collective_is_registered() -> None:
    registered = caps.names()
    for backend in backends.all_backends():
        for declared in backend.capability_checks:
            assert declared.name in registered, (backend.name, declared.name)
        for collective in backend.collective_backends:
            assert collective in registered, (backend.name, collective)
        # What a leg on the backend must have is a capability someone checks.
        for target in (None, *backend.targets):
            assert set(backend.required_capabilities(target)) <= set(registered)


def test_a_check_has_a_known_section() -> None:
    with pytest.raises(ValueError, match="unknown section 'gpu'"):
        CapabilityCheck("thing", "gpu", lambda: backends.Availability(True))
