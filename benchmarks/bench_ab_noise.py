"""A/A and a planted 10% GEMM slowdown, quiet and under load, in both comparison modes.

    python benchmarks/bench_ab_noise.py [--passes 4] [-k EXPR] [--slowdown 0.10]
        [--load-s 900] [--modes separate,interleaved] [--keep DIR] [--table-only DIR]
        [--image IMAGE]

Cases: the perf suite's plus the planted GEMM of `benchmarks/fixtures_perf` (its work grows
by ACCELKIT_PLANT_SLOWDOWN), by default a small selection (-k) so a row takes minutes.

- separate: two `accelkit test` runs compared with `accelkit compare`, as a nightly does.
  Runs: A1 quiet, A2 quiet, B quiet (planted), then with `stress-ng` load (one CPU worker
  and one 256 MiB memory worker, started between the runs, bounded by --load-s) A2L and BL.
  Rows: A/A quiet = A1 vs A2, A/A loaded = A1 vs A2L, planted quiet = A1 vs B, planted
  loaded = A1 vs BL (the canaries should turn the machine's shift into
  `environment-shifted`, never `regressed`).
- interleaved: `accelkit test --ab A B` (passes A B A B ...). A/A: the same interpreter
  twice; planted: B is a wrapper that sets ACCELKIT_PLANT_SLOWDOWN and execs the same
  interpreter. Loaded: stress-ng starts once the first pass pair has ended (between passes).
  With --image IMAGE, the A/A rows' two sides are that test image (`--ab image:IMAGE
  image:IMAGE`: each pass in a fresh container), to compare with this interpreter's rows.

Printed per row: metrics compared, flagged (regressed or improved, the planted case's
excluded), environment-shifted, noisy, whether the planted metrics are `regressed`
(caught), and the confidence intervals' half-widths (median, and the share of metrics at
most 5%). Each interleaved row is followed by the same two files compared unpaired
(`run.ab` dropped: the grouped mode), to show what the pairing changes. Targets (issue
17): at most 1% flagged in either A/A; the planted 10% caught in both conditions by the
interleaved mode; half-width <= 5% on at least 80% of CPU metrics. On a shared machine the
numbers move with the other jobs: read them as that machine's. No timing is asserted
anywhere (tests/unit/suite/test_ab.py::test_bench_ab_noise_smoke runs a smoke variant).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

CASES_DIR = Path(__file__).resolve().parent / "fixtures_perf"
PLANT_ENV = "ACCELKIT_PLANT_SLOWDOWN"
PLANTED_CASE = "perf/planted"
DEFAULT_KEYWORD = "canary or planted or stream or gemm/float32 or softmax"
HALF_WIDTH_TARGET = 0.05


def _accelkit_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "accelkit", *args]


@contextmanager
def _load(enabled: bool, seconds: float) -> Iterator[None]:
    """stress-ng (CPU + memory) for at most `seconds`, stopped when the block ends."""
    if not enabled:
        yield
        return
    if shutil.which("stress-ng") is None:
        raise SystemExit("stress-ng is not installed (apt-get install stress-ng)")
    argv = ["stress-ng", "--cpu", "1", "--vm", "1", "--vm-bytes", "256M"]
    argv += ["--timeout", f"{int(seconds)}s", "--quiet"]
    proc = subprocess.Popen(argv, start_new_session=True, stdout=subprocess.DEVNULL)
    try:
        yield
    finally:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _test_args(out: Path, passes: int, keyword: str) -> list[str]:
    args = ["test", "--device", "cpu", "--suite", "perf", "--cases", str(CASES_DIR)]
    return [*args, "--json", str(out), "--passes", str(passes), "-k", keyword]


def _separate_run(out: Path, passes: int, keyword: str, slowdown: float) -> None:
    env = {**os.environ, PLANT_ENV: str(slowdown) if slowdown else ""}
    proc = subprocess.run(
        _accelkit_argv(*_test_args(out, passes, keyword)),
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"accelkit test failed ({proc.returncode}):\n{proc.stdout[-3000:]}")


def _compare(base: Path, new: Path, out: Path) -> None:
    proc = subprocess.run(
        _accelkit_argv("compare", str(base), str(new), "--json"),
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode not in (0, 1):
        raise SystemExit(f"accelkit compare failed ({proc.returncode}): {proc.stderr}")
    out.write_text(proc.stdout, encoding="utf-8")


def _planted_python(work: Path, slowdown: float) -> Path:
    wrapper = work / "python-planted"
    wrapper.write_text(
        f'#!/bin/sh\n{PLANT_ENV}={slowdown} exec {shlex.quote(sys.executable)} "$@"\n',
        encoding="utf-8",
    )
    wrapper.chmod(0o755)
    return wrapper


def _interleaved_run(
    out: Path, sides: tuple[str, str], passes: int, keyword: str, loaded: bool, load_s: float
) -> None:
    """`accelkit test --ab A B`; with `loaded`, stress-ng from the start of pass 2 on."""
    argv = _accelkit_argv(*_test_args(out, passes, keyword), "--ab", *sides)
    env = {**os.environ, PLANT_ENV: ""}
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    assert proc.stdout is not None
    tail: list[str] = []
    load: Any = None
    try:
        for line in proc.stdout:
            tail = ([*tail, line])[-60:]
            if loaded and load is None and line.startswith("perf pass 2/"):
                load = _load(True, load_s)
                load.__enter__()
                print("    load started (stress-ng)", flush=True)
        code = proc.wait()
    finally:
        if load is not None:
            load.__exit__(None, None, None)
    if code not in (0, 1):
        raise SystemExit(f"accelkit test --ab failed ({code}):\n{''.join(tail)}")


def _row(title: str, comparison_path: Path) -> dict[str, Any]:
    data = json.loads(comparison_path.read_text(encoding="utf-8"))
    metrics = [m for m in data["metrics"] if m["verdict"] != "missing"]
    others = [m for m in metrics if not m["case"].startswith(PLANTED_CASE)]
    planted = [m for m in metrics if m["case"].startswith(PLANTED_CASE)]
    if "planted" not in title:  # an A/A row: the planted case is unplanted on both sides
        others, planted = metrics, []
    flagged = [m for m in others if m["verdict"] in ("regressed", "improved")]
    widths = [(m["ci"][1] - m["ci"][0]) / 2 for m in metrics if m["ci"] is not None]
    return {
        "row": title,
        "metrics": len(others),
        "flagged": len(flagged),
        "flagged_pct": 100.0 * len(flagged) / len(others) if others else 0.0,
        "shifted": sum(m["verdict"] == "environment-shifted" for m in others),
        "noisy": sum(m["verdict"] == "noisy" for m in others),
        "planted": ",".join(sorted({m["verdict"] for m in planted})) or "-",
        "caught": bool(planted) and all(m["verdict"] == "regressed" for m in planted),
        "half_width_median": statistics.median(widths) if widths else float("nan"),
        "within_target": (
            sum(w <= HALF_WIDTH_TARGET for w in widths) / len(widths) if widths else 0.0
        ),
        "flagged_list": [f"{m['verdict']} {m['case']} {m['metric']}" for m in flagged],
    }


def _print_table(rows: list[dict[str, Any]]) -> None:
    head = (
        f"{'row':40} {'metrics':>7} {'flagged':>12} {'env-shift':>9} {'noisy':>5} "
        f"{'planted':>20} {'caught':>6} {'CI half-width med':>17} {'<=5%':>6}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        planted = r["planted"] if r["planted"] != "-" else "(none)"
        caught = ("yes" if r["caught"] else "NO") if r["planted"] != "-" else "-"
        print(
            f"{r['row']:40} {r['metrics']:>7} {r['flagged']:>4} ({r['flagged_pct']:4.1f}%) "
            f"{r['shifted']:>9} {r['noisy']:>5} {planted:>20} {caught:>6} "
            f"{100 * r['half_width_median']:>16.1f}% {100 * r['within_target']:>5.0f}%"
        )
        for line in r["flagged_list"][:6]:
            print(f"      {line}")


SEPARATE_ROWS = (
    ("separate  A/A quiet", "A1", "A2"),
    ("separate  A/A loaded", "A1", "A2L"),
    ("separate  planted quiet", "A1", "B"),
    ("separate  planted loaded", "A1", "BL"),
)
INTERLEAVED_ROWS = (
    ("interleaved A/A quiet", "ab-aa"),
    ("interleaved A/A loaded", "ab-aa-loaded"),
    ("interleaved planted quiet", "ab-planted"),
    ("interleaved planted loaded", "ab-planted-loaded"),
)


def _without_ab(path: Path, out: Path) -> Path:
    data = json.loads(path.read_text(encoding="utf-8"))
    data["run"].pop("ab", None)
    out.write_text(json.dumps(data), encoding="utf-8")
    return out


def _table(work: Path, modes: list[str]) -> list[dict[str, Any]]:
    rows = []
    if "separate" in modes:
        for title, base, new in SEPARATE_ROWS:
            out = work / f"compare-{base}-{new}.json"
            if (work / f"{base}.json").exists() and (work / f"{new}.json").exists():
                _compare(work / f"{base}.json", work / f"{new}.json", out)
                rows.append(_row(title, out))
    if "interleaved" in modes:
        for title, name in INTERLEAVED_ROWS:
            a, b = work / f"{name}.a.json", work / f"{name}.b.json"
            if a.exists() and b.exists():
                out = work / f"compare-{name}.json"
                _compare(a, b, out)
                rows.append(_row(title, out))
                # The same files compared unpaired (run.ab dropped): what pairing changes.
                plain = [_without_ab(path, work / f"unpaired-{path.name}") for path in (a, b)]
                out = work / f"compare-unpaired-{name}.json"
                _compare(plain[0], plain[1], out)
                rows.append(_row(f"{title} (unpaired)", out))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=4)
    parser.add_argument("-k", dest="keyword", default=DEFAULT_KEYWORD)
    parser.add_argument("--slowdown", type=float, default=0.10)
    parser.add_argument("--load-s", type=float, default=900.0, help="bound of each load")
    parser.add_argument("--modes", default="separate,interleaved")
    parser.add_argument(
        "--rows", default="aa,aa-loaded,planted,planted-loaded", help="which rows to measure"
    )
    parser.add_argument("--keep", type=Path, default=None, help="keep every file here")
    parser.add_argument(
        "--image",
        default=None,
        help="interleaved A/A rows with this test image as both sides (--ab image:IMAGE "
        "image:IMAGE) instead of this interpreter; no planted rows",
    )
    parser.add_argument(
        "--table-only", type=Path, default=None, help="only recompute the table from a --keep DIR"
    )
    options = parser.parse_args()
    modes = [m.strip() for m in options.modes.split(",") if m.strip()]
    wanted = {r.strip() for r in options.rows.split(",")}
    if options.image and (modes != ["interleaved"] or wanted - {"aa", "aa-loaded"}):
        parser.error("--image: only --modes interleaved with --rows aa and aa-loaded")
    side = f"image:{options.image}" if options.image else sys.executable
    if options.table_only is not None:
        _print_table(_table(options.table_only, modes))
        return
    with tempfile.TemporaryDirectory(prefix="accelkit-bench-ab-") as tmp:
        work = options.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        common = (options.passes, options.keyword)
        if "separate" in modes:
            plan = [("A1", 0.0, False)]
            plan += [("A2", 0.0, False)] if "aa" in wanted else []
            plan += [("B", options.slowdown, False)] if "planted" in wanted else []
            plan += [("A2L", 0.0, True)] if "aa-loaded" in wanted else []
            plan += [("BL", options.slowdown, True)] if "planted-loaded" in wanted else []
            for name, slowdown, loaded in plan:
                with _load(loaded, options.load_s):
                    t0 = time.monotonic()
                    _separate_run(work / f"{name}.json", *common, slowdown)
                print(f"separate {name}: {time.monotonic() - t0:.0f} s", flush=True)
        if "interleaved" in modes:
            planted = "" if options.image else str(_planted_python(work, options.slowdown))
            plan2 = [
                ("ab-aa", side, False, "aa"),
                ("ab-aa-loaded", side, True, "aa-loaded"),
                ("ab-planted", planted, False, "planted"),
                ("ab-planted-loaded", planted, True, "planted-loaded"),
            ]
            for name, b_side, loaded, key in plan2:
                if key not in wanted:
                    continue
                t0 = time.monotonic()
                sides = (side, b_side)
                _interleaved_run(work / f"{name}.json", sides, *common, loaded, options.load_s)
                print(f"interleaved {name}: {time.monotonic() - t0:.0f} s", flush=True)
        print(
            f"all runs: {time.monotonic() - started:.0f} s; passes={options.passes}, "
            f"-k {options.keyword!r}, slowdown={options.slowdown:g}"
        )
        _print_table(_table(work, modes))


if __name__ == "__main__":
    main()
