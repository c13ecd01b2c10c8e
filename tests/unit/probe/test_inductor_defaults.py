"""Inductor's config defaults as the capability probes read them, without importing it."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from accelkit.probe import inductor_defaults as defaults


def needs_torch(test):
    """Real torch, in a fresh interpreter: skipped without it, and `slow`."""
    skip = pytest.mark.skipif(
        importlib.util.find_spec("torch") is None, reason="torch is not installed"
    )
    return pytest.mark.slow(skip(test))


_PROBE_WITHOUT_INDUCTOR = """
import json, sys
import torch
from accelkit.probe import capabilities as caps
from accelkit.probe.inductor_defaults import inductor_cxx_search
table = caps.capabilities()
loaded = "torch._inductor.config" in sys.modules
before = (inductor_cxx_search(), table["comm_overlap_default"].available)
import torch._inductor.config as config
after = (list(config.cpp.cxx), config.aten_distributed_optimizations.enable_simple_overlap)
print(json.dumps({"loaded": loaded, "before": before, "after": after}))
"""


@needs_torch
@pytest.mark.parametrize("cxx", [None, "c++"])
def test_header_probes_read_inductor_defaults_without_importing_it(cxx, monkeypatch):
    """Every `accelkit test` writes the capability table before its first case; importing
    Inductor's config for it costs seconds (it loads Dynamo). The probes read the same
    values from its defaults, with and without $CXX, as the imported config then says."""
    env = {k: v for k, v in os.environ.items() if k != "CXX"}
    if cxx is not None:
        env["CXX"] = cxx
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE_WITHOUT_INDUCTOR],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["loaded"] is False
    assert seen["before"] == seen["after"]


def test_literal_class_defaults_are_read_from_source(tmp_path):
    source = tmp_path / "config.py"
    source.write_text(
        "import os\n"
        "class section:\n"
        "    flag: bool = True\n"
        "    count = 3\n"
        "    from_env = os.environ.get('X', '1')\n"
        "    declared: int\n",
        encoding="utf-8",
    )
    read = defaults.literal_class_default
    assert read(source, "section", "flag") is True
    assert read(source, "section", "count") == 3
    assert read(source, "section", "from_env") is defaults.NOT_LITERAL
    assert read(source, "section", "declared") is defaults.NOT_LITERAL
    assert read(source, "section", "absent") is defaults.MISSING
    assert read(source, "other", "flag") is defaults.MISSING
    assert read(tmp_path / "missing.py", "section", "flag") is defaults.NOT_LITERAL
