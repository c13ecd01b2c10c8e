"""The size of the OpInfo verdict, before and after (issue 45, "Done means: Size").

    python benchmarks/bench_verdict_size.py [--before REV] [--after REV]

Prints, for two revisions of the checkout (default: BEFORE, the last commit before the
computed bounds, and the working tree), the lines of `accelkit/suite/opinfo/` (all of it,
and the verdict's bounds: tolerances, scales, the listed exceptions, the sample tables,
measures and rules, the rounding analyses, the backward-stable bound), the listed exceptions
(`exceptions.EXCEPTIONS`, cap 20; before that module, the entries of the constant widenings
it replaced: TOLERANCE_SCALE, NORMWISE_SCALE and KERNEL_ULPS in `scales`), the entries of
each per-op table and the functions `sample_measures` defines, and how many ops carry a rule
of their own (an entry in a bound table: SAMPLE_TERMS, SAMPLE_CONDITION, BACKWARD_OVERFLOW,
SQUARED, DISCONTINUOUS, TOLERANCE_SCALE, NORMWISE_SCALE, KERNEL_ULPS, CONDITION_SCALE,
CANCELLING_GRAD_OPS, RECURRENCE_OPS; and with KNOWN_SKIPS). A revision is read from git
(`git archive`) into a temporary folder and its tables counted by importing it there, in a
subprocess of its own.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OPINFO = "accelkit/suite/opinfo"
BEFORE = "2407894"
"""The last commit before the bounds computed from the op's graph (`opinfo/magnitudes.py`)."""

BOUND_MODULES = (
    "tolerances.py",
    "scales.py",
    "exceptions.py",
    "sample_tables.py",
    "sample_measures.py",
    "sample_rules.py",
    "roundings.py",
    "magnitudes.py",
    "stability.py",
)
"""The modules that decide a bound (the rest of opinfo/ plans, runs and compares)."""

TABLES = (
    (("sample_tables",), "SAMPLE_TERMS"),
    (("sample_tables",), "SAMPLE_CONDITION"),
    (("sample_tables",), "BACKWARD_OVERFLOW"),
    (("sample_tables",), "SQUARED"),
    (("sample_tables",), "DISCONTINUOUS"),
    (("exceptions", "scales"), "TOLERANCE_SCALE"),
    (("exceptions", "scales"), "NORMWISE_SCALE"),
    (("exceptions", "scales"), "KERNEL_ULPS"),
    (("exceptions",), "CONDITION_SCALE"),
    (("scales",), "CANCELLING_GRAD_OPS"),
    (("scales",), "RECURRENCE_OPS"),
)
"""Each table's name and the modules it may live in (the first that has it counts): the
constant widenings moved from `scales` into `exceptions` as kinds of listed exception."""
WIDENINGS = ("TOLERANCE_SCALE", "NORMWISE_SCALE", "KERNEL_ULPS", "CONDITION_SCALE")
"""The tables whose entries are listed exceptions (all of them, before `EXCEPTIONS`)."""

# Run inside a revision's folder: its tables' sizes and the ops they name, as JSON.
_COUNT = """
import importlib, json
tables = %r
found, ops = {}, set()

def table_of(module, name):
    try:
        return getattr(importlib.import_module("accelkit.suite.opinfo." + module), name)
    except (ImportError, AttributeError):
        return None

for modules, name in tables:
    table = next((t for t in (table_of(m, name) for m in modules) if t is not None), None)
    if table is None:
        continue
    found[name] = len(table)
    for key, rule in (table.items() if hasattr(table, "items") else ((k, k) for k in table)):
        op = (getattr(rule, "op", None) or str(key)).removeprefix("aten::").split("/")[0]
        ops.add(op)
listed = table_of("exceptions", "EXCEPTIONS")
if listed is not None:
    found["EXCEPTIONS"] = len(listed)
skips = importlib.import_module("accelkit.suite.opinfo.skips").KNOWN_SKIPS
print(json.dumps({"tables": found, "ops": sorted(ops),
                  "skip_ops": sorted({s.op for s in skips.values()})}))
"""


def _files(rev: str | None) -> dict[str, str]:
    """The text of opinfo/'s modules at `rev` (None: the working tree)."""
    if rev is None:
        return {p.name: p.read_text() for p in sorted((REPO / OPINFO).glob("*.py"))}
    names = subprocess.run(
        ["git", "ls-tree", "--name-only", f"{rev}:{OPINFO}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return {
        name: subprocess.run(
            ["git", "show", f"{rev}:{OPINFO}/{name}"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for name in names
        if name.endswith(".py")
    }


def _tables(rev: str | None) -> dict[str, object]:
    """The table sizes and ops of `rev`, imported in a subprocess (from a `git archive` of
    its `accelkit/` for a revision)."""
    with tempfile.TemporaryDirectory(prefix="verdict-size-") as folder:
        root = REPO
        if rev is not None:
            archive = subprocess.run(
                ["git", "archive", rev, "accelkit"], cwd=REPO, capture_output=True, check=True
            ).stdout
            with tarfile.open(fileobj=BytesIO(archive)) as tar:
                tar.extractall(folder, filter="data")
            root = Path(folder)
        done = subprocess.run(
            [sys.executable, "-c", _COUNT % (TABLES,)],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        )
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _functions(text: str) -> int:
    """Top-level functions a module defines."""
    return sum(isinstance(node, ast.FunctionDef) for node in ast.parse(text).body)


def measure(rev: str | None) -> dict[str, int]:
    """The size table's column for `rev` (None: the working tree)."""
    files = _files(rev)
    lines = {name: text.count("\n") for name, text in files.items()}
    tables = _tables(rev)
    counts = dict(tables["tables"])  # type: ignore[call-overload]
    ops = set(tables["ops"])  # type: ignore[call-overload]
    skip_ops = set(tables["skip_ops"])  # type: ignore[call-overload]
    return {
        "opinfo/ lines": sum(lines.values()),
        "bound modules' lines": sum(lines.get(name, 0) for name in BOUND_MODULES),
        **{f"  {name}": lines.get(name, 0) for name in BOUND_MODULES},
        "measure functions": _functions(files.get("sample_measures.py", "")),
        "listed exceptions (cap 20)": counts.get(
            "EXCEPTIONS", sum(counts.get(name, 0) for name in WIDENINGS)
        ),
        **{f"  {name} entries": counts.get(name, 0) for _, name in TABLES},
        "ops with a bound rule of their own": len(ops),
        "  ... or a KNOWN_SKIPS entry": len(ops | skip_ops),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default=BEFORE, help="a git revision")
    parser.add_argument("--after", default=None, help="a git revision (default: working tree)")
    args = parser.parse_args(argv)
    before, after = measure(args.before), measure(args.after)
    width = max(len(k) for k in before)
    print(f"{'':{width}}  {'before':>8}  {'after':>8}  {'change':>8}")
    print(f"{'':{width}}  {args.before[:8]:>8}  {(args.after or 'tree')[:8]:>8}")
    for key, old in before.items():
        new = after.get(key, 0)
        print(f"{key:{width}}  {old:>8}  {new:>8}  {new - old:>+8}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
