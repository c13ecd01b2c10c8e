"""Sweep OpInfo cases over many seeds: the evidence a rule change needs (issue 45).

Before a bound rule is added, widened or removed, run the cases it touches over seeds
0-40 as the suite runs them at the full breadth (each case's seed for `--seed S` is
`caseid.case_seed_of(S, nodeid)`), twice: once as they are (every failure is a false
alarm: the CPU's kernels are correct), and once with the candidate's answer planted
`--plant` off (3%: a correct bound catches it; every pass is a miss). The change keeps the
false alarms at 0 and the misses no higher than before.

The plant scales the candidate's outputs by (1 + rel) in a forward case and its gradients
in a gradient case (an identity whose backward scales what flows through it, applied to the
op's outputs), in every call with an input outside the reference's float64 and complex128.

`--drop KEY` runs without a table entry (`sample_tables`: "cov/complex64/grad", as
`records.case_keys` spells it), a listed exception (`exceptions`: "pow/complex64/grad") or
a known skip (`skips.KNOWN_SKIPS`: "logcumsumexp/float32/grad", op[/dtype][/grad or
forward] as the entry names them), so that one command gives the before and after of
removing it.

Prints one line per case: the seeds that failed (or, planted, that passed), then the
counts; a case listed in `suite/expectations/cpu.yaml` says so (its failures are known).
`--verbose` prints each failure's whole message first (the element, the error and what the
bound allowed). Exits 0 (a measurement, not a gate).

Usage: python benchmarks/sweep_seeds.py CASE [CASE ...] [--seeds 0-40] [--plant 0.03]
       [--drop KEY ...] [--jobs N] [--verbose]
  CASE: a param id as `accelkit test` names it, without "conformance/opinfo/":
  "cov/complex64/grad", "nn.functional.prelu/float16/grad/noncontiguous"; or @FILE, one a
  line. `--jobs N` runs the cases in N processes.
"""

from __future__ import annotations

import argparse
import copy
import functools
import multiprocessing
import sys
import time
from pathlib import Path
from types import MappingProxyType
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402
from torch.utils import _pytree as pytree  # noqa: E402

from accelkit import backends  # noqa: E402
from accelkit.suite import opinfo  # noqa: E402
from accelkit.suite.expectations import load_expectations  # noqa: E402
from accelkit.suite.numerics.mode import strict_numerics  # noqa: E402
from accelkit.suite.session.caseid import case_seed_of  # noqa: E402

NODEID = "conformance/test_opinfo.py::test_opinfo[{}]"
BREADTH = "full"
REFERENCE_DTYPES = (torch.float64, torch.complex128)


class _ScaleGrad(torch.autograd.Function):
    """The identity, whose backward scales the gradient by `factor`."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, factor: float) -> torch.Tensor:
        ctx.factor = factor
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad * ctx.factor, None


def _candidate(x: Any) -> bool:
    """A floating or complex tensor outside the reference's dtypes."""
    if not isinstance(x, torch.Tensor) or x.dtype in REFERENCE_DTYPES:
        return False
    return x.is_floating_point() or x.is_complex()


def planted(info: Any, rel: float, grad: bool) -> Any:
    """A copy of the OpInfo `info` whose op answers `rel` off in the candidate's dtypes."""
    inner = info.op

    def plant(y: Any) -> Any:
        if not isinstance(y, torch.Tensor) or not (y.is_floating_point() or y.is_complex()):
            return y
        if grad:
            return _ScaleGrad.apply(y, 1.0 + rel) if y.requires_grad else y
        return y * (1.0 + rel)

    @functools.wraps(inner)  # masked ops' references read the op's name
    def op(*args: Any, **kwargs: Any) -> Any:
        out = inner(*args, **kwargs)
        # the candidate's call: an input in its dtype (its output may be another: with_dtype)
        if any(_candidate(x) for x in pytree.tree_leaves((args, kwargs))):
            return pytree.tree_map(plant, out)
        return out

    moved = copy.copy(info)
    moved.op = op
    return moved


TABLES = ("SAMPLE_TERMS", "SAMPLE_CONDITION", "BACKWARD_OVERFLOW", "SQUARED", "DISCONTINUOUS")


def drop_entries(keys: list[str]) -> None:
    """Remove the entries `keys` from `sample_tables`' tables, in every accelkit module that
    imported them; an unknown key is an error."""
    from accelkit.suite.opinfo import sample_tables

    found: set[str] = set(_DROPPED)
    for name in TABLES:
        table = getattr(sample_tables, name)
        kept = MappingProxyType({k: v for k, v in table.items() if k not in keys})
        found |= set(keys) & set(table)
        _rebind(name, table, kept)
    # the listed exceptions ("pow/complex64/grad"), which `exception_for` reads by kind
    from accelkit.suite.opinfo import exceptions

    kept_kinds = {}
    for kind, table in exceptions._TABLES.items():
        found |= set(keys) & set(table)
        kept_kinds[kind] = MappingProxyType({k: v for k, v in table.items() if k not in keys})
    exceptions._TABLES = MappingProxyType(kept_kinds)
    # the known skips ("logcumsumexp/float32/grad": op[/dtype][/grad or forward])
    from accelkit.suite.opinfo import skips

    table = skips.KNOWN_SKIPS
    kept_skips = MappingProxyType({k: v for k, v in table.items() if skip_key(v) not in keys})
    found |= set(keys) & {skip_key(v) for v in table.values()}
    _rebind("KNOWN_SKIPS", table, kept_skips)
    if set(keys) - found:
        raise SystemExit(f"error: --drop: no table entry {sorted(set(keys) - found)}")
    _DROPPED.update(keys)


def _rebind(name: str, table: Any, kept: Any) -> None:
    """Every accelkit module's `name` that is `table` made `kept` (each module that imported
    the table holds its own reference)."""
    for module in list(sys.modules.values()):
        if (module.__name__ or "").startswith("accelkit") and getattr(module, name, None) is table:
            setattr(module, name, kept)


def skip_key(skip: Any) -> str:
    """A known skip as `--drop` names it: op[/dtype][/grad or forward]."""
    return "/".join(p for p in (skip.op, skip.dtype, skip.kind) if p)


_DROPPED: set[str] = set()
"""The entries this process has dropped (a worker drops them once per case)."""


def parse_case(param_id: str) -> opinfo.OpinfoCase:
    parts = param_id.split("/")
    if len(parts) < 2:
        raise SystemExit(f"error: {param_id!r} is not OP/DTYPE[/grad][/noncontiguous]")
    extra = set(parts[2:])
    if extra - {"grad", "noncontiguous"}:
        raise SystemExit(f"error: {param_id!r}: unknown parts {sorted(extra)}")
    return opinfo.OpinfoCase(
        parts[0], parts[1], grad="grad" in extra, noncontiguous="noncontiguous" in extra
    )


def parse_seeds(text: str) -> list[int]:
    seeds: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        try:
            seeds.extend(range(int(low), int(high or low) + 1))
        except ValueError:
            raise SystemExit(f"error: --seeds {text!r}: expected ranges like 0-40,50") from None
    return seeds


def run(case: opinfo.OpinfoCase, seed: int, rel: float, whole: bool = False) -> str:
    """'pass', 'fail: <first line>' or 'skip: <reason>' for the case at base seed `seed`
    (`whole`: the failure's whole message, whose later lines hold the numbers)."""
    info = opinfo.op_db_by_name()[case.op]
    reason = opinfo.skip_reason(info, case, "cpu", BREADTH)
    if reason is not None:
        return f"skip: {reason}"
    if rel:
        info = planted(info, rel, case.grad)
    case_seed = case_seed_of(seed, NODEID.format(case.param_id))
    torch.manual_seed(case_seed)
    limit = opinfo.sample_limit(case, BREADTH)
    elements = opinfo.max_elements(case, BREADTH)
    try:
        with strict_numerics(backends.get("cpu").tf32):
            opinfo.run_case(info, case, "cpu", limit, case_seed, elements)
    except AssertionError as error:
        return "fail: " + (str(error).strip() if whole else str(error).splitlines()[0][:200])
    except Exception as error:  # an error is a failure the line names, not the end of the sweep
        return f"fail: {type(error).__name__}: {str(error).splitlines()[0][:200]}"
    return "pass"


def sweep(case: opinfo.OpinfoCase, seeds: list[int], rel: float, verbose: bool) -> str:
    """The line `main` prints for one case."""
    started = time.perf_counter()
    hits: list[int] = []
    skipped = 0
    for seed in seeds:
        outcome = run(case, seed, rel, whole=verbose)
        if outcome.startswith("skip"):
            skipped += 1
            continue
        if (outcome == "pass") == bool(rel):
            hits.append(seed)
        if verbose and outcome != "pass":
            print(f"  {case.param_id} seed {seed}: {outcome}", flush=True)
    counted = "passed (missed)" if rel else "failed"
    ran = len(seeds) - skipped
    elapsed = time.perf_counter() - started
    # the suite's known failures on the CPU (suite/expectations/cpu.yaml) are not the verdict's
    known = f"conformance/opinfo/{case.param_id}" in load_expectations("cpu", breadth=BREADTH)
    return (
        f"{case.param_id}: {counted} {len(hits)}/{ran} seeds {hits} "
        f"({elapsed:.0f}s{', skipped ' + str(skipped) if skipped else ''})"
        + (" [a known failure on cpu]" if known else "")
    )


def _sweep_one(job: tuple[str, list[int], float, bool, list[str]]) -> str:
    """`sweep` in a worker process (the tables' entries dropped there too)."""
    param_id, seeds, rel, verbose, drop = job
    drop_entries(drop)
    return sweep(parse_case(param_id), seeds, rel, verbose)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="+", help="param ids, or @FILE: one per line")
    parser.add_argument("--seeds", default="0-40")
    parser.add_argument("--plant", type=float, default=0.0)
    parser.add_argument("--drop", action="append", default=[], metavar="KEY")
    parser.add_argument("--jobs", type=int, default=1, help="cases run in this many processes")
    parser.add_argument("--verbose", action="store_true", help="print each failure's whole message")
    args = parser.parse_args(argv)
    ids = [
        line.strip()
        for c in args.cases
        for line in (Path(c[1:]).read_text().splitlines() if c.startswith("@") else [c])
        if line.strip()
    ]
    cases = [parse_case(c) for c in ids]
    seeds = parse_seeds(args.seeds)
    names = opinfo.op_db_by_name()
    for case in cases:
        if case.op not in names:
            raise SystemExit(f"error: no OpInfo named {case.op!r}")
    drop_entries(args.drop)
    if args.jobs > 1:
        jobs = [(c.param_id, seeds, args.plant, args.verbose, args.drop) for c in cases]
        with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
            for line in pool.imap_unordered(_sweep_one, jobs):
                print(line, flush=True)
        return 0
    for case in cases:
        print(sweep(case, seeds, args.plant, args.verbose), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
