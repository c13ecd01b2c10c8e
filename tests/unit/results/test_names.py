"""The results vocabulary loads without pydantic, so the suite's workers do not pay for it."""

from __future__ import annotations

import subprocess
import sys

from accelkit.results import model, names


def test_the_model_re_exports_the_vocabulary() -> None:
    assert model.SUITES is names.SUITES and model.STATUSES is names.STATUSES
    assert model.BAD_STATUSES is names.BAD_STATUSES


def test_what_every_pytest_worker_loads_needs_no_pydantic() -> None:
    """The plugin, the case ids and the repro records run in every worker of every pytest
    session and perf pass; pydantic's models cost 0.3 s a process there."""
    code = (
        "import sys\n"
        "import accelkit.suite.session.plugin, accelkit.suite.session.caseid\n"
        "import accelkit.suite.session.replay\n"
        "print('pydantic' in sys.modules)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert proc.stdout.strip() == "False"
