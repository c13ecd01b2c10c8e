"""Wall time of `accelkit test --device cpu --suite conformance`, cold and warm.

Cold: TORCHINDUCTOR_CACHE_DIR points at a fresh, empty directory (nothing compiled yet).
Warm: a second run with the same directory. Targets (issue 3): quick conformance under
120 s cold and under 60 s warm on the development machine's CPU. Each run's own counts
(passed, failed, skipped, opinfo cases, and the compiled OpInfo cases with the seconds they
took, mostly Inductor compile time) are printed next to its time.

Usage: python benchmarks/bench_conformance.py [--workers N] [--breadth quick|full]
       [-k EXPR] [--shard I/N] [--cold-only] [--keep DIR]
`--breadth` is passed to `accelkit test` only when given (older CLIs lack it). A part of the
full compiled breadth (some 2849 cases on CPU, hours on 2 cores) is measured with `--breadth
full -k opinfo_compiled --shard I/N --workers 1 --cold-only`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def _run(args: argparse.Namespace, cache_dir: Path, results: Path) -> dict[str, Any]:
    argv = [sys.executable, "-m", "accelkit", "test", "--device", "cpu"]
    argv += ["--suite", "conformance", "--json", str(results)]
    if args.workers is not None:
        argv += ["--workers", str(args.workers)]
    if args.breadth:
        argv += ["--breadth", args.breadth]
    if args.keyword:
        argv += ["-k", args.keyword]
    if args.shard:
        argv += ["--shard", args.shard]
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache_dir)}
    started = time.monotonic()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    summary: dict[str, Any] = {}
    opinfo = 0
    compiled: list[float] = []
    if results.exists():
        data = json.loads(results.read_text())
        summary = data.get("summary", {})
        cases = data.get("cases", [])
        opinfo = sum(1 for c in cases if c["id"].startswith("conformance/opinfo/"))
        compiled = [
            float(c.get("duration_s") or 0.0)
            for c in cases
            if c["id"].startswith("conformance/opinfo_compiled/")
        ]
    return {
        "wall_s": wall,
        "exit": proc.returncode,
        "summary": summary,
        "opinfo": opinfo,
        # compiled OpInfo: how many cases, and the case seconds they took together (the
        # first case of a worker compiles the quick batch, so this is mostly compile time)
        "compiled": len(compiled),
        "compiled_s": sum(compiled),
        "tail": (proc.stdout + proc.stderr)[-1500:],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--workers", type=int, default=None, help="passed on when given (default: the CLI's)"
    )
    parser.add_argument("--breadth", choices=("quick", "full"), default=None)
    parser.add_argument("-k", dest="keyword", default=None)
    parser.add_argument("--shard", default=None, help="run this shard of the cases (I/N)")
    parser.add_argument("--cold-only", action="store_true", help="skip the warm run")
    parser.add_argument("--keep", type=Path, default=None, help="keep results files here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="accelkit-bench-") as tmp:
        out = args.keep or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        cache = Path(tmp) / "inductor-cache"  # fresh: the first run is cold
        rows = []
        for label in ("cold",) if args.cold_only else ("cold", "warm"):
            row = _run(args, cache, out / f"{label}.json")
            rows.append((label, row))
            s = row["summary"]
            counts = " ".join(f"{k} {s.get(k, '?')}" for k in ("passed", "failed", "skipped"))
            print(
                f"{label:5} {row['wall_s']:7.1f} s  exit {row['exit']}  {counts} "
                f"error {s.get('error', '?')}  (opinfo cases {row['opinfo']}; compiled "
                f"opinfo cases {row['compiled']} in {row['compiled_s']:.1f} case-s)",
                flush=True,
            )
            if row["exit"] != 0:
                print(row["tail"], file=sys.stderr)
    worst = max(row["exit"] for _, row in rows)
    return 0 if worst == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
