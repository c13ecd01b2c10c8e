"""torch_import: torch loaded once and lazily; what was loaded leaves the garbage collector."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_FREEZE_THEN_WORK = """
import gc
from accelkit.torch_import import freeze_loaded
loaded = object()
freeze_loaded()
later = [1]
later.append(later)
print(gc.get_freeze_count() > 0, gc.is_tracked(later))
f = open({path!r}, "w")
f.write("written")
cycle = [f]
cycle.append(cycle)
"""


def test_what_was_loaded_is_frozen_and_what_comes_later_is_still_collected(
    tmp_path: Path,
) -> None:
    """Objects made after the freeze stay tracked, so an unclosed file in a cycle is still
    flushed at exit (its last collection runs; freezing at exit would lose it)."""
    out = tmp_path / "out.txt"
    proc = subprocess.run(
        [sys.executable, "-c", _FREEZE_THEN_WORK.format(path=str(out))],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert proc.stdout.split() == ["True", "True"]
    assert out.read_text(encoding="utf-8") == "written"
