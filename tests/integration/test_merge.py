"""`accelkit merge`: shards written as results files merge into one leg result, and a refusal
is one line that writes nothing."""

from __future__ import annotations

import json
from pathlib import Path

from accelkit.results.io import load_results
from tests.factories import three_shards
from tests.helpers import assert_one_line_error, run_cli


def test_merge_cli_writes_the_leg_and_refuses_in_one_line(tmp_path: Path) -> None:
    paths = []
    for name, made in three_shards():
        path = tmp_path / name
        path.write_text(json.dumps(made.to_json_dict()))
        paths.append(str(path))
    out = tmp_path / "leg.json"
    proc = run_cli("merge", *paths, "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "merged 3 shards: 5 cases (5 passed)" in proc.stdout
    assert load_results(out).run.shards == 3
    refused = tmp_path / "refused.json"
    proc = run_cli("merge", *paths[:2], "-o", str(refused))
    assert_one_line_error(proc, 2, "missing shard 3/3")
    assert not refused.exists()
