"""Detection power: which conformance case catches which wrong kernel (issue 13, item 4).

Every fault of the matrix {mm, addmm, bmm, sum, softmax, layer_norm, cumsum, conv2d, exp} x
{float32, bfloat16, float16} x {scale, element, tail} (tests/fixtures/faults/faults.py:
relative 1e-3 for float32, 1e-2 for the 16-bit types; one element off; the last partial tile
of the reduction dropped) is injected into the CPU's kernels, and the cases that cover the
op run against it in this process, exactly as the suite runs them (their seeds, the quick
breadth's samples): `conformance/ops/<op>/<dtype>` and `conformance/opinfo/<op>/<dtype>`.
Then the path faults (issue 44): wrong kernels that only a non-contiguous or expanded input,
or only a 16-bit backward, reaches (a reduction, a GEMM operand, an elementwise op with an
expanded input; a norm's, a GEMM's and an activation's backward), against the op's contiguous
case (which never takes that path), its `noncontiguous` twin and its 16-bit gradient case.
Then the reach faults (issue 44): wrong kernels that only the boundary sizes and the special
values reach (subnormals flushed to zero in mul, a sum that stops at 2 ** 16 elements, a
softmax whose rows of -inf give 0), against the cases that must catch them
(`conformance/special_values/<op>/<dtype>`, `conformance/ops/boundary/<op>/<dtype>`) and the
op's other cases, which never reach them and stay green under the fault.
Then the compiled-only faults: a wrong Inductor decomposition of ops outside the compile zoo
(hardswish, logsumexp), against `conformance/opinfo_compiled/<op>/float32`, with the eager
case as a witness that must still pass. Every case also runs without a fault (the control),
which must pass.

Prints the table fault x dtype x kind -> the cases that caught it; exits 1 when a fault is
missed or a control fails.

Usage: python benchmarks/bench_detection.py [--ops mm,sum] [--dtypes float32]
       [--kinds scale,tail] [--no-reach] [--no-paths] [--no-compiled]
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests" / "fixtures" / "faults"), str(REPO)]
# A fresh Inductor cache: a kernel cached without the fault would hide it.
os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="accelkit-detect-")

import pytest  # noqa: E402
import torch  # noqa: E402
from faults import KINDS, TAIL_OPS, Fault, injected  # noqa: E402

from accelkit import backends  # noqa: E402
from accelkit.suite import opinfo  # noqa: E402
from accelkit.suite.conformance import test_ops, test_special_values  # noqa: E402
from accelkit.suite.numerics.mode import strict_numerics  # noqa: E402
from accelkit.suite.opinfo import compiled  # noqa: E402

DTYPES = ("float32", "bfloat16", "float16")
# The fault matrix's op -> (its test_ops name, its op_db name).
CASES = {
    "mm": ("matmul", "mm"),
    "addmm": ("addmm", "addmm"),
    "bmm": ("bmm", "bmm"),
    "sum": ("sum", "sum"),
    "softmax": ("softmax", "softmax"),
    "layer_norm": ("layer_norm", "nn.functional.layer_norm"),
    "cumsum": ("cumsum", "cumsum"),
    "conv2d": ("conv2d", "nn.functional.conv2d"),
    "exp": ("exp", "exp"),
}
COMPILED_FAULTS = {"hardswish": "nn.functional.hardswish", "logsumexp": "logsumexp"}
OPS_NODEID = "conformance/test_ops.py::test_ops[{}]"
OPINFO_NODEID = "conformance/test_opinfo.py::test_opinfo[{}]"

Outcome = str  # "passed", "failed: <message>", "skipped: <reason>"


def _seed(nodeid: str) -> None:
    """The seed the suite's plugin gives the case (accelkit.suite.session.plugin, base seed 0)."""
    torch.manual_seed(zlib.crc32(nodeid.encode()) % (2**31))


def _outcome(run: Callable[[], object]) -> Outcome:
    try:
        run()
    except AssertionError as error:
        return "failed: " + str(error).splitlines()[0][:160]
    except pytest.skip.Exception as skip:
        return f"skipped: {skip.msg}"
    return "passed"


def ops_case(op: str, dtype: str) -> tuple[str, Callable[[], Outcome]]:
    name = CASES[op][0]
    backend = backends.get("cpu")

    def run() -> Outcome:
        _seed(OPS_NODEID.format(f"{name}/{dtype}"))
        with strict_numerics(backend.tf32):
            return _outcome(lambda: test_ops.test_ops(name, dtype, "cpu", backend))

    return f"conformance/ops/{name}/{dtype}", run


def opinfo_case(op: str, dtype: str) -> tuple[str, Callable[[], Outcome]]:
    return opinfo_named_case(CASES[op][1], dtype)


def opinfo_named_case(name: str, dtype: str) -> tuple[str, Callable[[], Outcome]]:
    """The op_db case of `name` in `dtype`, as the suite runs it at quick breadth."""
    case = opinfo.OpinfoCase(name, dtype)

    def run() -> Outcome:
        info = opinfo.op_db_by_name()[name]
        reason = opinfo.skip_reason(info, case, "cpu", "quick")
        if reason is not None:
            return f"skipped: {reason}"
        _seed(OPINFO_NODEID.format(case.param_id))
        limit = opinfo.sample_limit(case, "quick")
        return _outcome(lambda: opinfo.run_case(info, case, "cpu", limit))

    return f"conformance/opinfo/{case.param_id}", run


# (fault op, dtype, kind) -> the op_db cases (param ids) that cover the path.
PATH_FAULTS: dict[tuple[str, str, str], tuple[str, ...]] = {
    ("sum", "float32", "noncontiguous"): ("sum/float32", "sum/float32/noncontiguous"),
    ("mm", "float32", "noncontiguous"): ("mm/float32", "mm/float32/noncontiguous"),
    ("mul", "float32", "expanded"): ("mul/float32", "mul/float32/noncontiguous"),
    ("layer_norm_backward", "float16", "backward"): (
        "nn.functional.layer_norm/float16",
        "nn.functional.layer_norm/float16/grad",
    ),
    ("mm", "float16", "backward"): ("mm/float16", "mm/float16/grad"),
    ("silu_backward", "bfloat16", "backward"): (
        "nn.functional.silu/bfloat16",
        "nn.functional.silu/bfloat16/grad",
    ),
}
# "A few percent off": 3% in a 16-bit backward (4-8 units of bfloat16's rounding, 30 of
# float16's); the layout faults take the matrix's default (1e-3 in float32).
PATH_REL = {"backward": 3e-2}


def opinfo_param_case(param_id: str) -> tuple[str, Callable[[], Outcome]]:
    """The op_db case of `param_id` ("mm/float16/grad", "sum/float32/noncontiguous"), run as
    the suite runs it at quick breadth."""
    parts = param_id.split("/")
    case = opinfo.OpinfoCase(
        parts[0], parts[1], grad="grad" in parts[2:], noncontiguous="noncontiguous" in parts[2:]
    )

    def run() -> Outcome:
        info = opinfo.op_db_by_name()[case.op]
        reason = opinfo.skip_reason(info, case, "cpu", "quick")
        if reason is not None:
            return f"skipped: {reason}"
        _seed(OPINFO_NODEID.format(case.param_id))
        limit = opinfo.sample_limit(case, "quick")
        elements = opinfo.max_elements(case, "quick")
        return _outcome(lambda: opinfo.run_case(info, case, "cpu", limit, None, elements))

    return f"conformance/opinfo/{case.param_id}", run


def path_matrix() -> list[list[str]]:
    """Rows of the path faults: each caught by the case that takes the path, controls clean."""
    rows = []
    for (op, dtype, kind), params in PATH_FAULTS.items():
        cases = [opinfo_param_case(param) for param in params]
        controls = {cid: run() for cid, run in cases}
        bad = [f"{cid}: {o}" for cid, o in controls.items() if not o.startswith("passed")]
        control = "clean" if not bad else "FAILED " + "; ".join(bad)
        with injected(Fault(op, (dtype,), kind, PATH_REL.get(kind))) as mode:
            outcomes = {cid: run() for cid, run in cases}
        caught = [
            c.removeprefix("conformance/") for c, o in outcomes.items() if o.startswith("failed")
        ]
        if mode is None or mode.hits == 0:
            text = "NOT INJECTED (the path never ran)"
        else:
            text = ", ".join(caught) if caught else "MISSED"
        rows.append([op, dtype, kind, text, control])
    return rows


def case_function(test: Callable[..., None], nodeid: str, *params: str) -> Callable[[], Outcome]:
    """A case function of the suite (its params, then the device), seeded as the suite seeds
    the case `nodeid`."""
    backend = backends.get("cpu")

    def run() -> Outcome:
        _seed(nodeid)
        with strict_numerics(backend.tf32):
            return _outcome(lambda: test(*params, "cpu"))

    return run


def special_case(op: str, dtype: str) -> tuple[str, Callable[[], Outcome]]:
    nodeid = f"conformance/test_special_values.py::test_special_values[{op}/{dtype}]"
    run = case_function(test_special_values.test_special_values, nodeid, op, dtype)
    return f"conformance/special_values/{op}/{dtype}", run


def boundary_case(op: str, dtype: str) -> tuple[str, Callable[[], Outcome]]:
    nodeid = f"conformance/test_ops.py::test_boundary[{op}/{dtype}]"
    run = case_function(test_ops.test_boundary, nodeid, op, dtype)
    return f"conformance/ops/boundary/{op}/{dtype}", run


def ops_named_case(op: str, dtype: str) -> tuple[str, Callable[[], Outcome]]:
    backend = backends.get("cpu")
    run = case_function(
        lambda o, d, dev: test_ops.test_ops(o, d, dev, backend),
        OPS_NODEID.format(f"{op}/{dtype}"),
        op,
        dtype,
    )
    return f"conformance/ops/{op}/{dtype}", run


CaseMaker = Callable[[str, str], tuple[str, Callable[[], Outcome]]]
# Faults that only the boundary sizes and special values reach: (op, kind) -> (the cases that
# must catch it, the op's other cases, which never reach it: they pass under the fault),
# each case maker called with the dtype.
REACH_FAULTS: dict[tuple[str, str], tuple[tuple[CaseMaker, ...], tuple[CaseMaker, ...]]] = {
    ("aten.mul.Tensor", "ftz"): (
        (lambda _op, dt: special_case("mul", dt),),
        (lambda _op, dt: ops_named_case("mul", dt), lambda _op, dt: opinfo_named_case("mul", dt)),
    ),
    ("sum", "long"): (
        (lambda _op, dt: boundary_case("sum", dt),),
        (lambda _op, dt: ops_named_case("sum", dt), lambda _op, dt: opinfo_named_case("sum", dt)),
    ),
    ("softmax", "neginf_rows"): (
        (lambda _op, dt: special_case("softmax", dt),),
        (
            lambda _op, dt: ops_named_case("softmax", dt),
            lambda _op, dt: boundary_case("softmax", dt),
            lambda _op, dt: opinfo_named_case("softmax", dt),
        ),
    ),
}


def reach_matrix(dtypes: list[str]) -> list[list[str]]:
    """Rows of the reach faults: caught by the cases that reach them, the op's other cases
    green under the fault (they never reach it), every case green without it (the control)."""
    rows = []
    for (op, kind), (reaching, blind) in REACH_FAULTS.items():
        for dtype in dtypes:
            cases = [make(op, dtype) for make in (*reaching, *blind)]
            must_catch = {cid for cid, _ in cases[: len(reaching)]}
            controls = {cid: run() for cid, run in cases}
            bad = [f"{cid}: {o}" for cid, o in controls.items() if o.startswith("failed")]
            control = "clean" if not bad else "FAILED " + "; ".join(bad)
            with injected(Fault(op, (dtype,), kind)) as mode:
                outcomes = {cid: run() for cid, run in cases}
            caught = [c for c, o in outcomes.items() if o.startswith("failed")]
            if mode is None or mode.hits == 0:
                text = "NOT INJECTED (the op never ran)"
            elif not must_catch <= set(caught):
                text = "MISSED by " + ", ".join(sorted(must_catch - set(caught)))
            else:
                text = ", ".join(c.removeprefix("conformance/") for c in caught)
                passed = [c for c, o in outcomes.items() if o == "passed"]
                if passed:
                    names = ", ".join(c.removeprefix("conformance/") for c in passed)
                    text += f" (not reached by {names})"
            rows.append([op.removeprefix("aten."), dtype, kind, text, control])
    return rows


def eager_matrix(ops: list[str], dtypes: list[str], kinds: list[str]) -> list[list[str]]:
    """Rows (op, dtype, kind, caught by, control) of the eager fault matrix."""
    rows = []
    for op in ops:
        for dtype in dtypes:
            cases = [ops_case(op, dtype), opinfo_case(op, dtype)]
            controls = {cid: run() for cid, run in cases}
            bad = [f"{cid}: {o}" for cid, o in controls.items() if o.startswith("failed")]
            control = "clean" if not bad else "FAILED " + "; ".join(bad)
            for kind in kinds:
                if kind == "tail" and op not in TAIL_OPS:
                    rows.append([op, dtype, kind, "n/a (no reduction)", control])
                    continue
                caught = []
                with injected(Fault(op, (dtype,), kind)) as mode:
                    outcomes = {cid: run() for cid, run in cases}
                hits = mode.hits if mode is not None else 0
                for cid, o in outcomes.items():
                    if o.startswith("failed"):
                        caught.append(cid.removeprefix("conformance/"))
                if hits == 0:
                    text = "NOT INJECTED (the op never ran)"
                else:
                    text = ", ".join(caught) if caught else "MISSED"
                rows.append([op, dtype, kind, text, control])
    return rows


def compiled_matrix() -> list[list[str]]:
    """Rows of the compiled-only faults: a wrong Inductor decomposition of an op outside the
    compile zoo fails its compiled case; its eager case (and the clean compile) pass."""
    sys.path.insert(0, str(REPO / "tests" / "fixtures" / "faults"))
    import from_env
    import torch._functorch.config
    from torch._inductor import config as inductor_config
    from torch._inductor import decomposition

    # No compile caches: the control's cached graph would hide the wrong decomposition.
    inductor_config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    wrong = from_env.wrong_decompositions()
    rows = []
    for decomp, name in COMPILED_FAULTS.items():
        info = opinfo.op_db_by_name()[name]
        case = opinfo.OpinfoCase(name, "float32")

        def run_compiled(info: object = info, case: opinfo.OpinfoCase = case) -> Outcome:
            torch._dynamo.reset()
            return _outcome(lambda: compiled.run_compiled_case(info, case, "cpu", "full", 0))

        control = run_compiled()
        target, fn = wrong[decomp]
        saved = decomposition.decompositions.get(target)
        decomposition.decompositions[target] = fn
        _clear_decomposition_caches(decomposition)
        try:
            faulty = run_compiled()
            _seed(OPINFO_NODEID.format(case.param_id))
            eager = _outcome(functools.partial(opinfo.run_case, info, case, "cpu", None))
        finally:
            if saved is None:
                decomposition.decompositions.pop(target, None)
            else:
                decomposition.decompositions[target] = saved
            _clear_decomposition_caches(decomposition)
            torch._dynamo.reset()
        caught = f"opinfo_compiled/{case.param_id}" if faulty.startswith("failed") else "MISSED"
        if not eager.startswith("passed"):
            caught += f" (eager case {eager[:40]}, should pass)"
        control_text = "clean" if control == "passed" else f"FAILED {control}"
        rows.append([f"{decomp} decomposition", "float32", "compiled", caught, control_text])
    return rows


def _clear_decomposition_caches(module: object) -> None:
    """Inductor memoises the decomposition table it selects (a compile before the swap
    would keep the right decomposition)."""
    for name in ("fast_random_decomps", "select_decomp_table"):
        cached = getattr(module, name, None)
        if cached is not None and hasattr(cached, "cache_clear"):
            cached.cache_clear()


def _print(rows: list[list[str]]) -> None:
    header = ["fault op", "dtype", "kind", "caught by", "control"]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


def ok(row: list[str]) -> bool:
    return row[4] == "clean" and (
        row[3].startswith("n/a") or not any(w in row[3] for w in ("MISSED", "NOT", "should"))
    )


def summary(rows: list[list[str]], missed: list[list[str]]) -> str:
    """The last line: faults caught of those injected; a tail row of an op without a
    reduction injects nothing, so it is counted apart, not as caught."""
    injected = [r for r in rows if not r[3].startswith("n/a")]
    caught = sum(1 for r in injected if r not in missed)
    line = f"{caught}/{len(injected)} faults caught with clean controls"
    na = len(rows) - len(injected)
    return line + (f" ({na} not applicable: no reduction to cut short)" if na else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", default=",".join(CASES))
    parser.add_argument("--dtypes", default=",".join(DTYPES))
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--no-compiled", action="store_true")
    parser.add_argument(
        "--no-reach", action="store_true", help="leave out the boundary and special-value faults"
    )
    parser.add_argument("--no-paths", action="store_true", help="leave out the path faults")
    args = parser.parse_args()
    ops, dtypes, kinds = (v.split(",") for v in (args.ops, args.dtypes, args.kinds))
    unknown = [o for o in ops if o not in CASES] + [d for d in dtypes if d not in DTYPES]
    unknown += [k for k in kinds if k not in KINDS]
    if unknown:
        print(f"error: unknown {', '.join(unknown)}", file=sys.stderr)
        return 2
    started = time.monotonic()
    rows = eager_matrix(ops, dtypes, kinds)
    if not args.no_paths:
        rows += path_matrix()
    if not args.no_reach:
        rows += reach_matrix(dtypes)
    if not args.no_compiled:
        rows += compiled_matrix()
    _print(rows)
    missed = [r for r in rows if not ok(r)]
    elapsed = time.monotonic() - started
    print(f"\n{summary(rows, missed)} in {elapsed:.0f} s")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
