"""What every conformance case runs under (accelkit.suite.numerics.mode): the backend's
unsupported dtypes are skips with the backend's reason, and every case runs with TF32 and
reduced-precision reductions off."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from accelkit.suite.numerics.mode import strict_numerics, unsupported_dtype
from accelkit.suite.session.caseid import case_id

if TYPE_CHECKING:
    from accelkit.backends.base import Backend


@pytest.fixture(autouse=True)
def _conformance_numerics(request: pytest.FixtureRequest, backend: Backend) -> Iterator[None]:
    reason = unsupported_dtype(case_id(request.node.nodeid), backend.unsupported_dtypes)
    if reason is not None:
        pytest.skip(reason)
    with strict_numerics(backend.tf32):
        yield
