"""Operator breadth from PyTorch's own OpInfo database (`op_db`), checked against float64.

Every OpInfo becomes cases per dtype (`conformance/opinfo/<op>/<dtype>`, plus
`.../<dtype>/grad` for gradients). A case runs the op's sample inputs on the device and
compares each output with the same sample evaluated in float64 (complex128) on the CPU, from
the same rounded inputs. Tolerances come from `accelkit.suite.reference` (torch.testing's
defaults per dtype), widened only by the op's own `toleranceOverride` metadata that PyTorch's
maintainers recorded in `op_db`, or by a documented entry in `TOLERANCE_SCALE` below.

What cannot be compared is skipped with the reason, never left out silently:
random and uninitialised outputs (`RANDOM_OPS`, OpInfo's `has_nondeterministic_output`),
ops without a float64 CPU kernel for the reference, and ops listed in `KNOWN_SKIPS` with the
numerical reason they cannot match a float64 reference.

Imported by the case module inside each pytest worker: importing `op_db` costs several
seconds, so it happens once per process (`op_db_by_name` is cached).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils import _pytree as pytree

from accelkit.suite.reference import TOLERANCES, tolerance

BREADTHS = ("quick", "full")

# The dtypes the suite tests, by the name used in case ids.
DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
    "complex64": torch.complex64,
}
REFERENCE_DTYPE: dict[torch.dtype, torch.dtype] = {
    torch.float16: torch.float64,
    torch.bfloat16: torch.float64,
    torch.float32: torch.float64,
    torch.float64: torch.float64,
    torch.complex32: torch.complex128,
    torch.complex64: torch.complex128,
    torch.complex128: torch.complex128,
}

# Quick breadth (the default): the first samples of each op only, the low-precision and
# complex dtypes on every op but with fewer samples, and gradients (float32) on a fixed,
# deterministic subset of ops. `--breadth full` runs every sample, dtype and gradient.
QUICK_MAX_SAMPLES: dict[str, int] = {
    "float32": 3,
    "float64": 1,
    "float16": 1,
    "bfloat16": 1,
    "complex64": 1,
}
QUICK_GRAD_EVERY = 4  # every 4th autograd-capable op (sorted by name) gets a float32 grad case
QUICK_GRAD_MAX_SAMPLES = 2

# Ops whose outputs are random draws or uninitialised memory: a value comparison is
# meaningless. (`has_nondeterministic_output` in OpInfo covers the `empty*` family; the
# sampling ops do not set it.)
RANDOM_OPS: frozenset[str] = frozenset(
    {
        "bernoulli",
        "cauchy",
        "exponential",
        "geometric",
        "log_normal",
        "multinomial",
        "normal",
        "normal.number_mean",
        "normal.in_place",
        "uniform",
        "rand_like",
        "randint",
        "randint_like",
        "randn",
        "randn_like",
        "nn.functional.dropout",
        "nn.functional.dropout2d",
        "nn.functional.dropout3d",
        "nn.functional.alpha_dropout",
        "nn.functional.feature_alpha_dropout.with_train",
        "nn.functional.rrelu",
        # Pooling regions are drawn at random unless `_random_samples` is passed.
        "nn.functional.fractional_max_pool2d",
        "nn.functional.fractional_max_pool3d",
        "torch.ops.aten._flash_attention_forward",
        "torch.ops.aten._efficient_attention_forward",
    }
)

# (op, dtype or "*", "forward"|"grad"|"*") -> why the case cannot match a float64 reference.
# Each entry is a finding about the op, not a hidden failure; keep them precise.
KNOWN_SKIPS: dict[tuple[str, str, str], str] = {
    ("as_strided.partial_views", "*", "*"): (
        "the samples read storage outside the input's view (as_strided over a partial view); "
        "a float64 copy of the view has no such storage, so no reference exists"
    ),
    **{
        (op, dtype, "*"): (
            f"{dtype} grid coordinates are unnormalised ((g + 1) / 2 * (size - 1)) in "
            f"{dtype}: the rounding moves the sampling points (by up to eps * size pixels) "
            "and nearest/bicubic modes switch source pixels, so the answer is not the "
            "float64 answer rounded (measured errors up to 0.13 on values of order 1)"
        )
        for op in ("grid_sampler_2d", "grid_sampler_3d", "nn.functional.grid_sample")
        for dtype in ("float16", "bfloat16")
    },
    **{
        ("matrix_exp", dtype, "*"): (
            f"scaling and squaring overflows {dtype} for the samples' norms (entries up to 9): "
            "intermediate powers exceed the dtype's range and the result is NaN"
        )
        for dtype in ("float16", "bfloat16")
    },
    ("nn.functional.soft_margin_loss", "float16", "*"): (
        "log(1 + exp(-y * x)) is evaluated in float16: exp overflows (> 65504) for "
        "y * x < -11, which the samples reach, so the loss is inf where float64 is finite"
    ),
    **{
        (op, dtype, "*"): (
            f"{dtype} rounding puts sample inputs exactly on the poles at non-positive integers, "
            "where polygamma is undefined (the float64 reference returns a huge finite value "
            "from cancellation, the kernel 0 or inf)"
        )
        for op in (
            *(f"polygamma.polygamma_n_{n}" for n in range(5)),
            "special.polygamma.special_polygamma_n_0",
        )
        for dtype in ("float16", "bfloat16")
    },
    **{
        (op, "float32", "*"): (
            "the float32 kernel's reflection formula evaluates sin(pi * x) in float32: near the "
            "poles at non-positive integers its relative error grows like "
            "|x| * eps / dist(x, pole), without bound for samples drawn in [-9, 9] (6e-4 "
            "measured); float64 is checked"
        )
        for op in (
            *(f"polygamma.polygamma_n_{n}" for n in range(5)),
            "special.polygamma.special_polygamma_n_0",
        )
    },
    **{
        (f"nn.functional.linear_cross_entropy.{variant}", dtype, "*"): (
            "no reference: linear_cross_entropy accepts acc_dtype=float32 only with "
            "float16/bfloat16 inputs, so the sample cannot run in float64"
        )
        for variant in ("chunked", "chunked_none")
        for dtype in ("float16", "bfloat16")
    },
    ("logcumsumexp", "float32", "grad"): (
        "the float32 backward (exp of differences of running log-sum-exps, accumulated in "
        "float32) is accurate only to ~1.5e-3 relative against float64 on the samples "
        "(inputs up to +-9); a tolerance that wide would not check anything"
    ),
}

# Ops that only exist on some device types, whatever their OpInfo dtypes say.
DEVICE_ONLY: dict[str, tuple[tuple[str, ...], str]] = {
    "jiterator_": (("cuda",), "jiterator compiles CUDA/ROCm kernels at run time"),
}

# op -> (factor on the dtype's tolerance, why). For ops whose answer legitimately carries
# more rounding error than one correctly rounded result: long recurrences, iterative or
# series algorithms, condition-number amplification. Measured on the CPU (float32 vs
# float64, several seeds); the factor leaves about 3x headroom over the worst seen.
TOLERANCE_SCALE: dict[str, tuple[float, str]] = {
    "linalg.cond": (
        100.0,
        "the condition number's relative error grows with the condition "
        "number itself (kappa * eps; ~3.5e-6 measured for kappa ~ 110)",
    ),
    "matrix_exp": (
        100.0,
        "scaling and squaring multiplies the rounding error by the norm "
        "(2.3e-5 relative measured in float32)",
    ),
    **{
        op: (
            10.0,
            "the relative error of x ** y grows with |y * log(x)| (2.4e-6 measured in complex64)",
        )
        for op in ("pow", "__rpow__", "float_power")
    },
    **{
        op: (
            10.0,
            "attention: softmax over q.k logits of order 100 (samples up to +-9) and "
            "a weighted sum of values (1.9e-5 absolute measured in float32)",
        )
        for op in (
            "nn.functional.scaled_dot_product_attention",
            "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu",
            "nn.functional.multi_head_attention_forward",
        )
    },
    "nn.functional.ctc_loss/grad": (
        300.0,
        "the alpha-beta recursion runs over 50 time steps in float32 (1.0e-4 relative measured)",
    ),
    "_upsample_bilinear2d_aa": (
        5.0,
        "antialiasing weights are normalised float32 sums; "
        "outputs near zero carry ~1.8e-5 absolute error",
    ),
    "nn.functional.multi_head_attention_forward/grad": (
        1000.0,
        "softmax over logits of order 100 (samples up to +-9) amplifies float32 "
        "rounding in the backward (5.6e-4 relative measured on elements of order 10)",
    ),
    "sinc": (
        4.0,
        "sin(pi * z) / (pi * z) for large complex z: pi * z rounds in complex64 "
        "(1.7e-6 relative measured)",
    ),
    "nn.functional.kl_div": (
        4.0,
        "target * (log(target) - input) forms log(target) in the "
        "input dtype; cancellation leaves absolute errors of a few "
        "1e-5 in float16",
    ),
}

# Linear algebra: the forward error of a factorisation or solve is bounded by the condition
# number times eps; random sample matrices have condition numbers up to ~1e3.
LINALG_SCALE = 100.0
LINALG_OPS_PREFIXES = (
    "linalg.",
    "cholesky",
    "lu",
    "qr",
    "svd",
    "triangular_solve",
    "ormqr",
    "geqrf",
    "pinverse",
    "inverse",
    "det",
    "logdet",
    "slogdet",
    "lstsq",
    "matrix_exp",
    "pca_lowrank",
    "cholesky_solve",
    "cholesky_inverse",
)


@dataclass(frozen=True)
class OpinfoCase:
    op: str  # the op's name with its variant: "add", "nn.functional.relu", "max.reduction"
    dtype: str  # a key of DTYPES
    grad: bool = False

    @property
    def param_id(self) -> str:
        return f"{self.op}/{self.dtype}" + ("/grad" if self.grad else "")


def full_name(op: Any) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else str(op.name)


@functools.cache
def op_db_by_name() -> dict[str, Any]:
    """PyTorch's OpInfo database by full name (imported once per process: seconds)."""
    from torch.testing._internal.common_methods_invocations import op_db

    return {full_name(op): op for op in op_db}


def plan(device_type: str, breadth: str) -> list[OpinfoCase]:
    """The cases of a run: cheap (no sample is built), deterministic, sorted by op name.

    An op gets a case for each tested dtype that it supports on the CPU or on the device;
    a dtype it supports only on the CPU becomes a case that skips on the device with that
    reason, so that backends report the same ids.
    """
    if breadth not in BREADTHS:
        raise ValueError(f"breadth must be one of {BREADTHS}, got {breadth!r}")
    cases: list[OpinfoCase] = []
    autograd_index = 0
    for name, op in sorted(op_db_by_name().items()):
        on_device = op.supported_dtypes(device_type)
        candidates = on_device | op.supported_dtypes("cpu")
        for dtype_name, dtype in DTYPES.items():
            if dtype in candidates:
                cases.append(OpinfoCase(name, dtype_name))
        if not op.supports_autograd:
            continue
        backward = op.supported_backward_dtypes(device_type) | op.supported_backward_dtypes("cpu")
        if breadth == "quick":
            if torch.float32 in backward and autograd_index % QUICK_GRAD_EVERY == 0:
                cases.append(OpinfoCase(name, "float32", grad=True))
            autograd_index += 1
            continue
        for dtype_name, dtype in DTYPES.items():
            if dtype in backward:
                cases.append(OpinfoCase(name, dtype_name, grad=True))
    return cases


def skip_reason(op: Any, case: OpinfoCase, device_type: str) -> str | None:
    """Why this case cannot run here, or None. The reason goes into the results file."""
    dtype = DTYPES[case.dtype]
    kind = "grad" if case.grad else "forward"
    for key in ((case.op, case.dtype, kind), (case.op, "*", kind), (case.op, case.dtype, "*"),
                (case.op, "*", "*")):  # fmt: skip
        if key in KNOWN_SKIPS:
            return KNOWN_SKIPS[key]
    for prefix, (device_types, why) in DEVICE_ONLY.items():
        if case.op.startswith(prefix) and device_type not in device_types:
            return f"{case.op}: {why}; not applicable to {device_type}"
    if case.op in RANDOM_OPS:
        return f"{case.op} draws random numbers: its values cannot be compared with a reference"
    if op.has_nondeterministic_output:
        return f"{case.op} has nondeterministic output (OpInfo has_nondeterministic_output)"
    supported = (
        op.supported_backward_dtypes(device_type) if case.grad else op.supported_dtypes(device_type)
    )
    if dtype not in supported:
        what = "backward" if case.grad else "forward"
        return f"OpInfo: {case.op} does not support {what} in {case.dtype} on {device_type}"
    ref_dtype = REFERENCE_DTYPE[dtype]
    ref_supported = op.supported_backward_dtypes("cpu") if case.grad else op.supported_dtypes("cpu")
    if ref_dtype not in ref_supported:
        return f"no reference: OpInfo: {case.op} does not support {ref_dtype} on the cpu"
    return None


# --------------------------------------------------------------------------------------
# Converting a sample to the reference


def _to_reference(value: Any, device: str, *, grad: bool = False) -> Any:
    """Tensors to the CPU in float64/complex128 (exactly: the same rounded values), dtype
    arguments likewise, and the device's name (factory kwargs) to the CPU."""

    def convert(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            ref = x.detach().to("cpu")
            if ref.dtype in REFERENCE_DTYPE:
                ref = ref.to(REFERENCE_DTYPE[ref.dtype])
            else:
                ref = ref.clone()
            if grad and x.requires_grad:
                ref.requires_grad_(True)
            return ref
        if isinstance(x, torch.dtype) and x in REFERENCE_DTYPE:
            return REFERENCE_DTYPE[x]
        if isinstance(x, torch.device) and x.type == torch.device(device).type:
            return torch.device("cpu")
        if isinstance(x, str) and x.partition(":")[0] == device:
            return "cpu"
        return x

    return pytree.tree_map(convert, value)


def _least_precise(*dtypes: torch.dtype) -> torch.dtype:
    """The dtype whose tolerance bounds the answer: the one with the largest epsilon."""
    known = [d for d in dtypes if d in TOLERANCES]
    return max(known, key=lambda d: torch.finfo(d).eps)


@functools.cache
def opinfo_tolerance(op_name: str, dtype: torch.dtype) -> tuple[float, float]:
    """The largest (atol, rtol) that the op's own `toleranceOverride` metadata allows."""
    from torch.testing._internal.common_device_type import toleranceOverride

    atol = rtol = 0.0
    op = op_db_by_name()[op_name]
    for info in op.decorators:
        for decorator in getattr(info, "decorators", [info]):
            if isinstance(decorator, toleranceOverride) and dtype in decorator.d:
                atol = max(atol, decorator.d[dtype].atol)
                rtol = max(rtol, decorator.d[dtype].rtol)
    return atol, rtol


def _reference_sample(sample: Any, device: str, *, grad: bool = False) -> Any:
    from torch.testing._internal.opinfo.core import SampleInput

    return SampleInput(  # type: ignore[no-untyped-call]
        _to_reference(sample.input, device, grad=grad),
        args=_to_reference(sample.args, device, grad=grad),
        kwargs=_to_reference(sample.kwargs, device, grad=grad),
        output_process_fn_grad=sample.output_process_fn_grad,
        broadcasts_input=sample.broadcasts_input,
        name=sample.name,
    )


# --------------------------------------------------------------------------------------
# Comparing outputs


class Mismatch(AssertionError):
    pass


# Rounding error of a sum (matmul, conv, reductions, intermediate products) is relative
# to the magnitude of the summands, not of the result: an element where terms cancel
# carries an absolute error of order eps times the magnitudes that cancelled, however small
# the element. The largest magnitude in the reference stands for those:
# atol >= NORMWISE_EPS * eps(dtype) * max(|reference|, |inputs|): two roundings at the
# largest magnitude involved. A 0.1% error stays visible in float32 for every element above
# 0.1% of that magnitude.
NORMWISE_EPS = 2.0


def tolerances(op_name: str, case_dtype: torch.dtype, out_dtype: torch.dtype,
               reference: torch.Tensor, magnitude: float = 0.0) -> tuple[float, float]:  # fmt: skip
    """(rtol, atol) for one output: the reference module's per-dtype tolerance for the least
    precise dtype involved (the case's or the output's), scaled by TOLERANCE_SCALE, at
    least the op's own toleranceOverride in op_db, and normwise (NORMWISE_EPS)."""
    bound = _least_precise(case_dtype, out_dtype)
    base, _, kind = op_name.partition("/")
    generic = op_db_by_name()[base].name + (f"/{kind}" if kind else "")
    default = LINALG_SCALE if base.startswith(LINALG_OPS_PREFIXES) else 1.0
    scale = TOLERANCE_SCALE.get(op_name, TOLERANCE_SCALE.get(generic, (default, "")))[0]
    rtol, atol = tolerance(bound, scale)
    op_atol, op_rtol = opinfo_tolerance(op_name.removesuffix("/grad"), case_dtype)
    rtol, atol = max(rtol, op_rtol), max(atol, op_atol)
    magnitude = max(magnitude, max_magnitude(reference))
    atol = max(atol, NORMWISE_EPS * torch.finfo(bound).eps * magnitude)
    return rtol, atol


def max_magnitude(value: Any) -> float:
    """The largest finite magnitude among the floating tensors in `value` (0 if none)."""
    largest = 0.0
    for x in pytree.tree_leaves(value):
        if isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex()):
            x = x.detach()
            if x.layout != torch.strided:
                x = x.to_dense()
            finite = x[torch.isfinite(x)]
            if finite.numel():
                largest = max(largest, float(finite.abs().max()))
    return largest


def compare(
    actual: Any,
    expected: Any,
    case_dtype: torch.dtype,
    op_name: str,
    what: str,
    magnitude: float = 0.0,
) -> None:
    """Compare an answer with the float64 reference: floating values within tolerance,
    integers, booleans and shapes exactly, NaN and inf where the reference has them."""
    if isinstance(actual, torch.Tensor):
        if not isinstance(expected, torch.Tensor):
            raise Mismatch(f"{what}: a tensor where the reference has {type(expected).__name__}")
        _compare_tensors(actual, expected, case_dtype, op_name, what, magnitude)
        return
    if isinstance(actual, (list, tuple)):
        if not isinstance(expected, (list, tuple)) or len(actual) != len(expected):
            raise Mismatch(f"{what}: {_describe(actual)} where the reference has "
                           f"{_describe(expected)}")  # fmt: skip
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            compare(a, e, case_dtype, op_name, f"{what}[{i}]", magnitude)
        return
    if isinstance(actual, float) and isinstance(expected, (float, int)):
        rtol, atol = tolerance(_least_precise(case_dtype, torch.float64))
        if not (math.isclose(actual, expected, rel_tol=rtol, abs_tol=atol) or
                (math.isnan(actual) and math.isnan(expected))):  # fmt: skip
            raise Mismatch(f"{what}: {actual!r} != reference {expected!r}")
        return
    if isinstance(actual, complex):
        rtol, atol = tolerance(_least_precise(case_dtype, torch.float64))
        if not math.isclose(abs(actual - expected), 0.0, abs_tol=atol + rtol * abs(expected)):
            raise Mismatch(f"{what}: {actual!r} != reference {expected!r}")
        return
    if actual != expected:
        raise Mismatch(f"{what}: {actual!r} != reference {expected!r}")


def _describe(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return f"{type(value).__name__} of {len(value)}"
    return type(value).__name__


def _compare_tensors(
    actual: torch.Tensor, expected: torch.Tensor, case_dtype: torch.dtype, op_name: str,
    what: str, magnitude: float,
) -> None:  # fmt: skip
    got = actual.detach().to("cpu")
    want = expected.detach()
    if got.is_sparse or got.layout != torch.strided:
        got = got.to_dense()
    if want.is_sparse or want.layout != torch.strided:
        want = want.to_dense()
    if got.shape != want.shape:
        raise Mismatch(f"{what}: shape {tuple(got.shape)}, reference {tuple(want.shape)}")
    floating = got.is_floating_point() or got.is_complex()
    if floating != (want.is_floating_point() or want.is_complex()):
        raise Mismatch(f"{what}: dtype {got.dtype}, reference {want.dtype}")
    if not floating:  # integers and booleans: exactly
        if got.dtype != want.dtype:
            raise Mismatch(f"{what}: dtype {got.dtype}, reference {want.dtype}")
        torch.testing.assert_close(got, want, rtol=0, atol=0,
                                   msg=lambda m: f"{what} (exact {got.dtype}): {m}")  # fmt: skip
        return
    if got.is_complex() != want.is_complex():
        raise Mismatch(f"{what}: dtype {got.dtype}, reference {want.dtype}")
    target = torch.complex128 if got.is_complex() else torch.float64
    got, want = got.to(target), want.to(target)
    # Where the exact answer lies beyond the output dtype's range, the answer must overflow
    # (inf or NaN); the remaining elements are compared.
    overflow = want.abs() > torch.finfo(actual.dtype).max
    if bool(overflow.any()):
        finite_there = torch.isfinite(got) & overflow
        if bool(finite_there.any()):
            raise Mismatch(f"{what}: finite values where the reference overflows "
                           f"{actual.dtype}")  # fmt: skip
        got, want = got.masked_fill(overflow, 0), want.masked_fill(overflow, 0)
    rtol, atol = tolerances(op_name, case_dtype, actual.dtype, want, magnitude)
    torch.testing.assert_close(
        got, want, rtol=rtol, atol=atol, equal_nan=True,
        check_device=False, check_dtype=False, check_stride=False,
        msg=lambda m: f"{what} ({actual.dtype}, rtol={rtol:g}, atol={atol:g}): {m}",
    )  # fmt: skip


# --------------------------------------------------------------------------------------
# Running a case


def _samples(op: Any, device: str, dtype: torch.dtype, limit: int | None,
             requires_grad: bool = False) -> Iterator[Any]:  # fmt: skip
    # The op's own sample generator, without OpInfo.sample_inputs' wrapper: that wrapper
    # reseeds with a fixed seed before each sample (the suite's per-case `--seed` must decide
    # the inputs, so that runs differ and replay) and calls inspect.stack() to find the test
    # function (~0.1 s per call under pytest's deep stacks: 95% of the suite's time).
    samples: Iterable[Any] = op.sample_inputs_func(op, device, dtype, requires_grad)
    return iter(itertools.islice(samples, limit) if limit is not None else samples)


def _call(fn: Callable[..., Any], sample: Any) -> Any:
    return fn(sample.input, *sample.args, **sample.kwargs)


def _clone(value: Any) -> Any:
    return pytree.tree_map(
        lambda x: x.detach().clone() if isinstance(x, torch.Tensor) else x, value
    )


def _sample_label(index: int, sample: Any) -> str:
    summary = sample.summary() if hasattr(sample, "summary") else repr(sample)
    summary = " ".join(str(summary).split())
    return f"sample {index} ({summary[:300]})"


def run_forward(op: Any, op_name: str, device: str, dtype: torch.dtype,
                limit: int | None) -> int:  # fmt: skip
    """Every sample on the device against the float64 CPU reference; returns samples run."""
    count = 0
    for index, sample in enumerate(_samples(op, device, dtype, limit)):
        label = _sample_label(index, sample)
        ref = _reference_sample(sample, device)
        process = sample.output_process_fn_grad
        with torch.no_grad():
            raw = _call(op, sample)
            actual = process(raw)
            expected = process(_call(op, ref))
        magnitude = max_magnitude((ref.input, ref.args, ref.kwargs))
        compare(actual, expected, dtype, op_name, f"{op_name} {label}", magnitude)
        inplace = op.inplace_variant
        if inplace is not None and _fits_in_place(raw, sample.input):
            _check_inplace(inplace, op_name, sample, ref, dtype, label, magnitude)
        count += 1
    return count


def _fits_in_place(result: Any, target: Any) -> bool:
    """In place is defined when the result has the input's shape and dtype (no broadcast
    of the input, no type promotion beyond it, e.g. float_power_ needs a float64 input)."""
    return (
        isinstance(result, torch.Tensor) and isinstance(target, torch.Tensor)
        and result.shape == target.shape and result.dtype == target.dtype
    )  # fmt: skip


def _check_inplace(inplace: Callable[..., Any], op_name: str, sample: Any, ref: Any,
                   dtype: torch.dtype, label: str, magnitude: float) -> None:  # fmt: skip
    """The in-place variant mutates its input into the reference's in-place answer."""
    target = _clone(sample.input)
    ref_target = _clone(ref.input)
    with torch.no_grad():
        try:
            ref_result = inplace(ref_target, *ref.args, **ref.kwargs)
        except RuntimeError:
            return  # not valid in place for this sample (e.g. the result type does not fit)
        result = inplace(target, *sample.args, **sample.kwargs)
    del ref_result, result
    compare(target, ref_target, dtype, op_name, f"{op_name} (in place) {label}", magnitude)


def _differentiable(value: Any) -> list[torch.Tensor]:
    leaves = pytree.tree_leaves(value)
    return [x for x in leaves if isinstance(x, torch.Tensor) and x.requires_grad]


def run_grad(op: Any, op_name: str, device: str, dtype: torch.dtype, limit: int | None) -> int:
    """Backward on the device against backward in float64 on the CPU: the gradient of a
    random weighted sum of the outputs (a plain sum would miss errors that cancel, such as
    softmax's gradient, which sums to zero), with respect to every input that needs one."""
    count = 0
    for index, sample in enumerate(_samples(op, device, dtype, limit, requires_grad=True)):
        label = _sample_label(index, sample)
        ref = _reference_sample(sample, device, grad=True)
        inputs = _differentiable((sample.input, sample.args, sample.kwargs))
        ref_inputs = _differentiable((ref.input, ref.args, ref.kwargs))
        if not inputs:
            continue
        process = sample.output_process_fn_grad
        # OpInfo's gradcheck_wrapper makes the function well defined for gradients
        # (e.g. symmetrises the input of eigh); output_process_fn_grad does the same for
        # outputs that are unique only up to sign or phase (svd, eig).
        wrap = op.gradcheck_wrapper
        outputs = _differentiable(process(wrap(op.op, sample.input, *sample.args,
                                               **sample.kwargs)))  # fmt: skip
        ref_outputs = _differentiable(process(wrap(op.op, ref.input, *ref.args,
                                                   **ref.kwargs)))  # fmt: skip
        if len(outputs) != len(ref_outputs):
            raise Mismatch(f"{op_name} {label}: {len(outputs)} differentiable outputs, "
                           f"reference has {len(ref_outputs)}")  # fmt: skip
        if not outputs:
            continue
        magnitude = max_magnitude((ref_inputs, ref_outputs))
        weights = [torch.randn(o.shape, dtype=o.dtype, device="cpu") for o in outputs]
        grads = torch.autograd.grad(
            outputs, inputs, [w.to(o.device) for w, o in zip(weights, outputs, strict=True)],
            allow_unused=True,
        )  # fmt: skip
        ref_grads = torch.autograd.grad(
            ref_outputs, ref_inputs,
            [w.to(REFERENCE_DTYPE.get(w.dtype, w.dtype)) for w in weights], allow_unused=True,
        )  # fmt: skip
        for i, (g, rg) in enumerate(zip(grads, ref_grads, strict=True)):
            if (g is None) != (rg is None):
                # An unused input has no gradient; the reference must agree.
                g = torch.zeros_like(inputs[i]) if g is None else g
                rg = torch.zeros_like(ref_inputs[i]) if rg is None else rg
            if g is None:
                continue
            compare(
                g, rg, dtype, f"{op_name}/grad", f"{op_name} grad of input {i}, {label}", magnitude
            )
        count += 1
    return count
