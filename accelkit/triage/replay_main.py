"""What a standalone reproducer runs (embedded in it by `accelkit repro`; torch only).

`main(CASE)` rebuilds a case from its record (`Case.repro`: kind, seed, device, ...),
runs it once on the recorded device with the suite's own code, and prints what it found:
the inputs, the failing comparison with the float64 reference, the worst element and the
tolerance, and whether that is the failure the run recorded. Exit status: 0 the case
passes here, 1 it fails, 2 it cannot run here (no such device, the case skips, ...).

- "opinfo": sample `sample` of the op's OpInfo, made as the suite makes it (torch seeded
  with `sample_seed(seed, sample)` right before), checked by `check_forward_sample` or
  `check_grad_sample`, the functions the case runs; a sample in a layout is checked by
  `check_layout_sample` after torch is seeded with `layout_seed(seed, sample, layout)`, as
  the case seeds it, so that the check draws what the case drew (a gradient's weights).
- "function": the case function called with its recorded parameters after the seeding the
  suite does. When it compiled graphs with Inductor, it runs a second time with the same
  graphs executed eagerly (TorchDynamo still captures them; Inductor is bypassed), so the
  output says whether the compiler is at fault.
- "perf": the perf case timed alone with the suite's timer (`accelkit.triage.perf_replay`);
  it prints the measured metrics beside the recorded ones and exits 0 once it measured.
"""

from __future__ import annotations

import importlib
import inspect
import math
import random
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

EXIT_PASSES = 0
EXIT_FAILS = 1
EXIT_CANNOT_RUN = 2

FIXTURES_FROM_RECORD = ("device", "backend", "case_seed", "_accelkit_seed")
"""The suite's fixtures a reproducer can supply from the record; a case asking for any other
cannot be reproduced standalone."""


class CannotRun(Exception):
    """The case cannot run here; the message says why."""


def main(case: dict[str, Any]) -> int:
    import torch

    _header(case, torch)
    try:
        _check_device(case["device"], torch)
        kind = case["kind"]
        if kind == "opinfo":
            return _opinfo(case)
        if kind == "function":
            return _function(case)
        if kind == "perf":
            from accelkit.triage.perf_replay import run_perf

            seed_everything(int(case["seed"]))  # as the suite seeds a case as it starts
            return run_perf(case)
        raise CannotRun(f"no reproducer for cases of kind {kind!r}")
    except CannotRun as why:
        print(f"\nCANNOT RUN: {why}")
        return EXIT_CANNOT_RUN


def _header(case: dict[str, Any], torch: Any) -> None:
    recorded = case.get("recorded", {})
    git = getattr(torch.version, "git_version", "?")
    print(f"accelkit reproducer: {case.get('case', '?')}")
    print(f"  torch here:     {torch.__version__} (git {git[:12]})")
    if recorded:
        print(
            f"  recorded with:  torch {recorded.get('torch', '?')} "
            f"(git {str(recorded.get('git', '?'))[:12]}) on {recorded.get('device_name', '?')}"
        )
    print(f"  device: {case['device']}, case seed: {case['seed']}")


def _check_device(device: str, torch: Any) -> None:
    try:
        torch.empty(1, device=device)
    except (RuntimeError, AssertionError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CannotRun(
            f"torch here cannot use the {device} device the case ran on: {first}"
        ) from None


def seed_everything(seed: int) -> None:
    """The seeding the suite does as a case starts (accelkit.suite.session.plugin)."""
    import torch

    random.seed(seed)
    try:
        import numpy

        numpy.random.seed(seed)
    except ImportError:
        pass
    torch.manual_seed(seed)


# --------------------------------------------------------------------------------------
# Reporting a failure


def _report_failure(error: BaseException, case: dict[str, Any], indent: str = "  ") -> None:
    from accelkit.suite.session.failures import failure_info

    text = f"{type(error).__name__}: {error}".strip()
    print(indent + text.replace("\n", "\n" + indent))
    check = failure_info(error).get("check")
    if isinstance(check, dict):
        _print_check(check, indent)
        _compare_with_recorded(check, case.get("check"), indent)


def _print_check(check: dict[str, Any], indent: str) -> None:
    rtol, atol = check.get("rtol"), check.get("atol")
    if check.get("index") is None:
        return
    expected = check.get("expected")
    print(f"{indent}worst element: index {tuple(check['index'])}")
    print(f"{indent}  device answer:       {check.get('actual')!r}")
    print(f"{indent}  float64 reference:   {expected!r}")
    print(f"{indent}  absolute difference: {check.get('abs_diff')!r}")
    if rtol is not None and atol is not None and isinstance(expected, float):
        allowed = atol + rtol * abs(expected)
        print(f"{indent}  tolerance: atol {atol!r} + rtol {rtol!r} * |reference| = {allowed!r}")


def same_failure(now: dict[str, Any], recorded: dict[str, Any]) -> bool:
    """Whether two failed checks are the same failure: the same element is the worst, with
    the same difference (to a relative 1e-6: a device may not be bitwise reproducible)."""
    if now.get("index") != recorded.get("index"):
        return False
    a, b = now.get("abs_diff"), recorded.get("abs_diff")
    if not isinstance(a, float) or not isinstance(b, float):
        return a == b
    return a == b or math.isclose(a, b, rel_tol=1e-6)


def _compare_with_recorded(now: dict[str, Any], recorded: Any, indent: str) -> None:
    if not isinstance(recorded, dict):
        return
    if same_failure(now, recorded):
        print(f"{indent}=> the same failure as recorded (same worst element and difference)")
    else:
        print(
            f"{indent}=> differs from the recorded failure: worst element "
            f"{tuple(recorded.get('index') or ())}, absolute difference "
            f"{recorded.get('abs_diff')!r}"
        )


# --------------------------------------------------------------------------------------
# OpInfo samples


def _describe_value(value: Any, torch: Any, indent: str) -> Iterator[str]:
    if isinstance(value, torch.Tensor):
        head = f"tensor {tuple(value.shape)} {value.dtype} on {value.device}"
        if value.numel() <= 64 and value.layout == torch.strided:
            with torch.no_grad():
                body = repr(value.detach().cpu())
            yield f"{indent}{head}:"
            yield from (f"{indent}  {line}" for line in body.splitlines())
        else:
            yield f"{indent}{head}"
    elif isinstance(value, (list, tuple)):
        yield f"{indent}{type(value).__name__} of {len(value)}:"
        for item in value:
            yield from _describe_value(item, torch, indent + "  ")
    else:
        yield f"{indent}{value!r}"


def _opinfo(case: dict[str, Any]) -> int:
    import torch

    from accelkit.suite.opinfo.layouts import LAYOUTS, variant
    from accelkit.suite.opinfo.op_db import DTYPES, op_db_by_name
    from accelkit.suite.opinfo.running import (
        check_forward_sample,
        check_grad_sample,
        check_layout_sample,
        layout_seed,
        seeded_samples,
    )

    try:
        op = op_db_by_name()[case["op"]]
    except ImportError as exc:
        raise CannotRun(f"torch's OpInfo database does not import here: {exc}") from None
    except KeyError:
        raise CannotRun(f"torch here has no OpInfo named {case['op']!r}") from None
    dtype, index, grad = DTYPES[case["dtype"]], int(case["sample"]), bool(case.get("grad"))
    seed_everything(int(case["seed"]))
    made = list(seeded_samples(op, case["device"], dtype, index + 1, int(case["seed"]), grad))
    if len(made) <= index:
        raise CannotRun(f"{case['op']} has only {len(made)} {case['dtype']} samples here")
    sample = made[index][1]
    layout = case.get("layout")
    if layout is not None:
        if layout not in LAYOUTS:
            raise CannotRun(f"this accelkit has no layout {layout!r} (it has {', '.join(LAYOUTS)})")
        sample = variant(sample, layout)
        if sample is None:
            raise CannotRun(f"no tensor of sample {index} changes in layout {layout} here")
    call = f"{getattr(op.op, '__module__', '') or ''}.{getattr(op.op, '__name__', op.name)}"
    what = "gradient of " if grad else ""
    where = f" in layout {layout}" if layout else ""
    print(f"\n{what}{call.lstrip('.')}(input, *args, **kwargs), sample {index}{where}:")
    torch.set_printoptions(precision=8)  # type: ignore[no-untyped-call]
    for name, value in (("input", sample.input), ("args", sample.args), ("kwargs", sample.kwargs)):
        if name != "input" and not value:
            continue
        print(f"  {name}:")
        for line in _describe_value(value, torch, "    "):
            print(line)
    print("\ncompared with the same sample in float64 on the CPU:")
    try:
        with _numerics(case):
            if layout is not None:
                torch.manual_seed(layout_seed(int(case["seed"]), index, layout))
                compared = check_layout_sample(
                    op, case["op"], case["device"], dtype, index, sample, layout, grad
                )
            else:
                check = check_grad_sample if grad else check_forward_sample
                compared = check(op, case["op"], case["device"], dtype, index, sample)
    except AssertionError as error:
        print("FAILED")
        _report_failure(error, case)
        return EXIT_FAILS
    if not compared:
        raise CannotRun("the sample has no digits to compare in this dtype (not compared)")
    print("PASSED: within the tolerance the case allows")
    return EXIT_PASSES


# --------------------------------------------------------------------------------------
# Case functions (compiled ones also with Inductor bypassed)


def _arguments(fn: Callable[..., Any], case: dict[str, Any]) -> dict[str, Any]:
    from accelkit.suite.session.params import decode_param

    kwargs = {name: decode_param(value) for name, value in case.get("params", {}).items()}
    for name in inspect.signature(fn).parameters:
        if name in kwargs:
            continue
        if name == "device":
            kwargs[name] = case["device"]
        elif name == "backend" and isinstance(case.get("backend"), dict):
            kwargs[name] = SimpleNamespace(**case["backend"])
        elif name in ("case_seed", "_accelkit_seed"):
            kwargs[name] = int(case["seed"])
        else:
            raise CannotRun(f"the case needs the pytest fixture {name!r}")
    return kwargs


def _numerics(case: dict[str, Any]) -> Any:
    """The numerics every conformance case runs under (TF32 off where the backend has it)."""
    from accelkit.suite.numerics.mode import strict_numerics

    backend = case.get("backend")
    return strict_numerics(bool(backend.get("tf32")) if isinstance(backend, dict) else False)


@contextmanager
def _inductor_bypassed() -> Iterator[None]:
    """TorchDynamo still captures graphs, but they run eagerly instead of being compiled by
    Inductor (torch.compile's default backend reaches Inductor through compile_fx)."""
    import torch._inductor.compile_fx as compile_fx_module

    original = compile_fx_module.compile_fx

    def eager(graph: Any, example_inputs: Any, *args: Any, **kwargs: Any) -> Any:
        return graph.forward

    compile_fx_module.compile_fx = eager  # type: ignore[assignment]
    try:
        yield
    finally:
        compile_fx_module.compile_fx = original


def _inductor_compiled_something() -> bool:
    """Whether Inductor compiled (or took from its cache) a graph in this process: it counts
    every graph in dynamo's `counters["inductor"]`."""
    dynamo = sys.modules.get("torch._dynamo.utils")
    return dynamo is not None and bool(sum(dynamo.counters["inductor"].values()))


def _run_once(fn: Callable[..., Any], case: dict[str, Any], label: str) -> bool:
    """Run the case function; print PASSED or FAILED with the failure; True if it passed."""
    import pytest  # in a reproducer: accelkit.triage.pytest_shim

    skipped: type[BaseException] = pytest.skip.Exception
    seed_everything(int(case["seed"]))
    try:
        with _numerics(case):
            fn(**_arguments(fn, case))
    except skipped as why:
        raise CannotRun(f"the case skipped itself: {why}") from None
    except AssertionError as error:
        print(f"{label}: FAILED")
        _report_failure(error, case, "  ")
        return False
    except Exception as error:
        print(f"{label}: ERROR")
        print("  " + "".join(traceback.format_exception_only(type(error), error)).strip())
        return False
    print(f"{label}: PASSED")
    return True


def _function(case: dict[str, Any]) -> int:
    module = importlib.import_module(case["module"])
    fn = getattr(module, case["function"])
    params = ", ".join(f"{k}={v!r}" for k, v in case.get("params", {}).items())
    print(f"\n{case['module']}.{case['function']}({params})\n")
    passed = _run_once(fn, case, "as recorded")
    if _inductor_compiled_something():
        import torch

        torch._dynamo.reset()
        with _inductor_bypassed():
            eager_passed = _run_once(fn, case, "eager (same graphs, Inductor bypassed)")
        if not passed and eager_passed:
            print("=> the compiler is at fault: eager execution is right, Inductor's code is wrong")
        elif not passed:
            print("=> not the compiler: eager execution of the same graphs fails too")
    return EXIT_PASSES if passed else EXIT_FAILS
