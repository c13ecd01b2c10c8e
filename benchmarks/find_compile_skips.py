"""Which compiled OpInfo cases cannot compile under Inductor (candidates for COMPILE_SKIPS).

Each op's samples are compiled as its case compiles them (`compiled.compile_batch`: dynamic
shapes, then static, fullgraph=True), with Inductor's C++ kernel build stubbed out: dynamo,
AOT autograd, decompositions, lowering, scheduling and code generation run for real, and the
first kernel call of the compiled graph ends the check. That costs seconds per op instead of
the C++ compiles' tens of seconds, so the whole op_db can be surveyed on a small host.

One JSON line per case goes to OUT (appended; a rerun resumes, and a case that killed the
process is recorded as crashed): status ok, error (with each attempt's first error line,
the reason a COMPILE_SKIPS entry gives) or skip (an eager skip reason applies).

Usage: python benchmarks/find_compile_skips.py OUT [--dtypes float32] [--ops a,b]
       [--first a,b] [--limit-s 90]
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch._inductor.config as inductor_config  # noqa: E402
from torch._inductor import async_compile  # noqa: E402


class Reached(Exception):
    """The compiled graph ran its first kernel: everything before it compiled."""


class Timeout(BaseException):
    pass


def _stub(*_: Any) -> Any:
    def kernel(*_: Any, **__: Any) -> None:
        raise Reached

    return kernel


def _alarm(*_: Any) -> None:
    raise Timeout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--dtypes", default="float32")
    parser.add_argument("--ops", default="", help="only these ops (comma-separated)")
    parser.add_argument("--first", default="", help="check these ops first")
    parser.add_argument("--limit-s", type=int, default=90, help="per attempt")
    args = parser.parse_args()

    inductor_config.compile_threads = 1
    async_compile.AsyncCompile.cpp_pybinding = lambda self, argtypes, source: _stub()  # type: ignore[method-assign]
    async_compile.AsyncCompile.cpp = lambda self, source: _stub()  # type: ignore[method-assign]
    signal.signal(signal.SIGALRM, _alarm)

    from accelkit.suite.opinfo import compiled
    from accelkit.suite.opinfo.op_db import op_db_by_name

    names = op_db_by_name()
    dtypes = args.dtypes.split(",")
    only = set(args.ops.split(",")) if args.ops else None
    first = args.first.split(",") if args.first else []
    cases = [
        c
        for c in compiled.plan_compiled("cpu", "full")
        if c.dtype in dtypes and (only is None or c.op in only)
    ]
    cases.sort(key=lambda c: (c.op not in first, first.index(c.op) if c.op in first else 0, c.op))

    done: set[tuple[str, str]] = set()
    started: set[tuple[str, str]] = set()
    if args.out.exists():
        for line in args.out.read_text().splitlines():
            record = json.loads(line)
            key = (record["op"], record["dtype"])
            (started if record["status"] == "started" else done).add(key)
    with args.out.open("a") as out:

        def write(record: dict[str, Any]) -> None:
            out.write(json.dumps(record) + "\n")
            out.flush()

        for op_name, dtype in sorted(started - done):
            write({"op": op_name, "dtype": dtype, "status": "crashed", "why": "process died"})
            done.add((op_name, dtype))
        for case in cases:
            if (case.op, case.dtype) in done:
                continue
            write({"op": case.op, "dtype": case.dtype, "status": "started"})
            begun = time.time()
            record = {"op": case.op, "dtype": case.dtype, **_check(compiled, names, case, args)}
            record["s"] = round(time.time() - begun, 2)
            write(record)
            print(json.dumps(record), flush=True)
    return 0


def _check(compiled: Any, names: Any, case: Any, args: argparse.Namespace) -> dict[str, Any]:
    op = names[case.op]
    reason = compiled.compiled_skip_reason(op, case, "cpu", "full")
    if reason is not None:
        return {"status": "skip", "why": reason[:200]}
    _, samples = compiled.chosen_samples(op, case, "cpu", "full", 0)
    errors = []
    for dynamic in (True, False):
        signal.alarm(args.limit_s)
        try:
            compiled.compile_batch([(op, samples)], dynamic=dynamic)
            return {"status": "ok", "n": len(samples)}
        except Reached:
            return {"status": "ok", "n": len(samples)}
        except Timeout:
            errors.append(
                f"{'dynamic' if dynamic else 'static'}: still compiling after {args.limit_s} s"
            )
        except Exception as error:
            if isinstance(error.__cause__, Reached) or "Reached" in repr(error):
                return {"status": "ok", "n": len(samples)}
            errors.append(f"{'dynamic' if dynamic else 'static'}: {compiled._first_line(error)}")
        finally:
            signal.alarm(0)
    return {"status": "error", "why": "; ".join(errors), "n": len(samples)}


if __name__ == "__main__":
    sys.exit(main())
