"""Operator breadth from PyTorch's own OpInfo database (`op_db`), checked against float64.

Every OpInfo becomes cases per dtype (`conformance/opinfo/<op>/<dtype>`, plus
`.../<dtype>/grad` for gradients). A case runs the op's sample inputs on the device and
compares each output with the same sample evaluated in float64 (complex128) on the CPU, from
the same rounded inputs. Tolerances come from `accelkit.suite.reference` (torch.testing's
defaults per dtype), widened only by the op's own `toleranceOverride` metadata that PyTorch's
maintainers recorded in `op_db`, or by a documented entry in `TOLERANCE_SCALE` below.

Comparison rules beyond the tolerance (each derived from how the answer may legitimately
differ, never per case): an answer must overflow exactly where the exact one rounds to inf
(beyond max + ulp(max) / 2), and a gradient may be inf/NaN where the forward legitimately
overflowed; the tolerance is that of the least precise dtype among the case's, the output's
and the inputs'; `NORMWISE_SCALE` widens the normwise bound for errors relative to magnitudes
larger than any input or output; and `DISCONTINUOUS` step functions (histc, integer
division) accept any value the reference takes within the inputs' rounding; bounds that
each sample decides are computed from it (`SAMPLE_TERMS`: the magnitude of the terms a
kernel rounds; `SAMPLE_CONDITION`: a condition number, and samples it leaves no digits are
not compared; `BACKWARD_OVERFLOW`: a backward intermediate beyond the dtype's range;
`SQUARED`: cdist's matrix-multiplication path compared in squared distances); and the
eigen-decompositions of general matrices (`EIGEN_OPS`: linalg.eig, linalg.eigvals), whose
eigenvalues come in no defined order and eigenvectors with any phase, are compared as a
multiset of eigenvalues within condition-aware bounds and by the defining property
A v = lambda v, and their gradients after pairing the eigenvalues with the reference's.

What cannot be compared is skipped with the reason, never left out silently:
random and uninitialised outputs (`RANDOM_OPS`, OpInfo's `has_nondeterministic_output`),
ops without a float64 CPU kernel for the reference, and ops listed in `KNOWN_SKIPS` with the
numerical reason they cannot match a float64 reference.

Imported by the case module inside each pytest worker: importing `op_db` costs several
seconds, so it happens once per process (`op_db_by_name` is cached).
"""

from __future__ import annotations

import dataclasses
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
    ("__rpow__", "bfloat16", "grad"): (
        "the bfloat16 gradient with respect to the broadcast scalar base sums terms "
        "y * b ** (y - 1) of magnitudes up to ~1e3 times the result (exponents up to 9) "
        "in bfloat16: cancellation leaves errors of eps * sum|terms| (10.4 on 16.5 "
        "measured); float16, float32 and complex64 are checked"
    ),
    **{
        ("fmod", dtype, "grad"): (
            f"the gradient with respect to a broadcast divisor sums -trunc(a / b) * w over "
            f"the broadcast elements, with a / b rounded in {dtype}: quotients within "
            "rounding of an integer jump by one independently, so the sum moves by any "
            "subset of the weights (2.1 absolute measured), which no uniform perturbation "
            "of the inputs brackets; float32 and float64 are checked (with the "
            "DISCONTINUOUS rule), and the forward in every dtype"
        )
        for dtype in ("float16", "bfloat16")
    },
    ("istft", "complex64", "grad"): (
        "the gradient with respect to the sample's complex window (istft divides by the "
        "window's squared envelope |w|^2, not holomorphic in w) differs wholly between "
        "complex64 and complex128 (relative difference 1.0 on every element, measured on "
        "two seeds): not a rounding difference, so no tolerance applies; the forward and "
        "the real dtypes are checked"
    ),
    ("renorm", "complex64", "grad"): (
        "the sample renorms with p = inf: the complex64 backward of the norm max|z| returns "
        "NaN on every element where complex128 is finite (measured on two seeds); the "
        "max's subgradient is not unique, and the forward and the real dtypes are checked"
    ),
    **{
        (op, "float16", "grad"): (
            "the float16 backward of a p-norm (ord up to 6, samples up to 9) forms "
            "|x| ** (ord - 1) and norm ** (ord - 1) in float16: they exceed 65504 "
            "(9 ** 5 = 59049, the norm's power more) though the gradient is in range, "
            "giving inf or 0 (-inf measured where -0.21 is right); the forward accumulates in "
            "float32 and is checked, and bfloat16's range holds the intermediates"
        )
        for op in ("linalg.vector_norm", "linalg.norm")
    },
    **{
        ("digamma", dtype, "grad"): (
            f"digamma's derivative is polygamma(1, x): {dtype} rounding puts sample inputs on "
            "the poles at non-positive integers, where it is undefined (the float64 "
            "reference returns -4e30 from cancellation, the kernel -8e12); as polygamma"
        )
        for dtype in ("float16", "bfloat16")
    },
    ("digamma", "float32", "grad"): (
        "digamma's derivative is polygamma(1, x), whose float32 kernel evaluates the "
        "reflection formula's sin(pi * x) in float32: near the poles its relative error grows "
        "like |x| * eps / dist(x, pole) (1.97e-5 measured); as polygamma, float64 is checked"
    ),
    **{
        ("nn.functional.multi_head_attention_forward", dtype, "forward"): (
            f"softmax over q.k logits of order 100 (samples up to +-9, projected) rounded in "
            f"{dtype}: absolute logit errors of eps * 100 ({err}) become relative attention "
            "weight errors of exp(err) - 1, so the outputs carry no digits of the dtype "
            "(1208 absolute on 44 allowed measured in bfloat16); float32 and float64 are "
            "checked, and the low-precision gradients"
        )
        for dtype, err in (("float16", "0.1"), ("bfloat16", "0.8"))
    },
    **{
        (op, dtype, "grad"): (
            f"samples normalise over 1-2 elements: for nearly equal elements sigma is a "
            f"difference of {dtype} numbers, so 1 / sigma and the gradient, which scales with "
            "it, carry no digits of the dtype (47.9 absolute, relative error 7.2 measured in "
            "float16); the forward and float32/float64 gradients are checked"
        )
        for op in ("native_layer_norm", "nn.functional.layer_norm")
        for dtype in ("float16", "bfloat16")
    },
    ("nn.functional.normalize", "float16", "grad"): (
        "the p = 0.5 sample's gradient has terms |x| ** -0.5, unbounded at elements near 0, "
        "which float16's small range of normal numbers and 11-bit mantissa resolve poorly: "
        "0.125 absolute where the exact gradient is ~0 (64x the normwise bound measured); "
        "bfloat16, float32 and float64 are checked (NORMWISE_SCALE)"
    ),
    ("logcumsumexp", "float32", "grad"): (
        "the float32 backward (exp of differences of running log-sum-exps, accumulated in "
        "float32) is accurate only to ~1.5e-3 relative against float64 on the samples "
        "(inputs up to +-9); a tolerance that wide would not check anything"
    ),
}

# KNOWN_SKIPS whose reason is a property of later samples only (ill-conditioned logits): the
# quick breadth's first sample is well conditioned and stays checked, as it was before these
# entries existed.
QUICK_STILL_CHECKED: frozenset[tuple[str, str, str]] = frozenset(
    {
        ("nn.functional.multi_head_attention_forward", "float16", "forward"),
        ("nn.functional.multi_head_attention_forward", "bfloat16", "forward"),
    }
)

# Step functions of their inputs: where the exact answer jumps (a bin edge, an integer
# quotient), the kernel's own rounding of an intermediate in the case dtype (the quotient
# a / b, the bin position (x - min) * bins / (max - min)) legitimately lands on either side,
# which the reference from the same rounded inputs cannot reproduce. For these, a mismatch is
# re-checked against the reference's range over the inputs perturbed by PERTURB_EPS units of
# the case dtype's rounding: "relative" perturbs each input by x * eps (the intermediate
# rounds relative to the result: a quotient), "normwise" by eps times the largest input
# magnitude (the intermediate is a difference of inputs: x - min), "exponent" replaces a
# power's exponent e by fl(e - 1) + 1, the exponent that the backward's e - 1, rounded in the
# case dtype, stands for, and "clamp" evaluates logit at its bounds eps and 1 - eps rounded to
# the case dtype, as the kernel compares with them. A wrong answer still fails: only elements
# within rounding of a jump can move.
# op name or "op/grad" -> (mode, compare cumulative sums of the output, why).
DISCONTINUOUS: dict[str, tuple[str, bool, str]] = {
    **{
        op: (
            "normwise",
            True,
            "the bin position (x - min) * bins / (max - min) is computed in the case dtype: "
            "an element within rounding of a bin edge lands in either bin (counts compared "
            "as cumulative sums, which are monotone in every element; for histogram a "
            "single value's range is [x - 0.5, x + 0.5] and x lies exactly on the middle "
            "edge of an even number of bins: 4.0 (density) in bin 1 where float64 has bin 2, "
            "measured on two seeds)",
        )
        for op in ("histc", "histogram")
    },
    "logit/grad": (
        "clamp",
        False,
        "logit(x, eps) clamps x to [eps, 1 - eps] and its gradient is 0 outside: the "
        "kernel compares x with the bounds rounded to the case dtype (1 - 0.2 is "
        "0.80078125 in bfloat16), so an input on a rounded bound is inside where float64 has "
        "it outside (w / (x (1 - x)) = 3.7 where float64 has 0, measured in bfloat16); "
        "compared with the reference at those bounds",
    ),
    **{
        f"{op}/grad": (
            "normwise",
            False,
            "the loss max(d(a, p) - d(a, n) + margin, 0) is a hinge on a difference of "
            "distances (of order 20) rounded in the case dtype: where it is within rounding "
            "of 0 the gradient is either 0 or the active one (a hinge argument of 0.0157 in "
            "float64 is 0 in float16: 0.024 absolute where float64 is active, measured)",
        )
        for op in (
            "nn.functional.triplet_margin_loss",
            "nn.functional.triplet_margin_with_distance_loss",
        )
    },
    **{
        f"{op}/grad": (
            "exponent",
            False,
            "the gradient with respect to the base, e * b ** (e - 1), forms e - 1 in the "
            "case dtype: for a negative base b an exponent e one ulp from an integer makes "
            "e - 1 round to an integer, and the gradient is finite where the exact one (b to "
            "a non-integer power) is NaN (e = -1.999 in float16 measured); compared with the "
            "reference at the rounded exponent",
        )
        for op in ("pow", "__rpow__")
    },
    **{
        op: (
            "relative",
            False,
            "the quotient a / b rounds in the case dtype before it is "
            "truncated or floored: quotients within rounding of an integer go either way",
        )
        for op in ("div.trunc_rounding", "div.floor_rounding", "floor_divide")
    },
    **{
        f"{op}/grad": (
            "relative",
            False,
            "the gradient with respect to the divisor is "
            "-trunc(a / b) (fmod) or -floor(a / b) (remainder): it jumps where the "
            "quotient, rounded in the case dtype, crosses an integer",
        )
        for op in ("fmod", "remainder")
    },
    **{
        f"{op}/grad": (
            "normwise",
            False,
            "the gradient with respect to the grid is piecewise in the unnormalised "
            "coordinate (g + 1) / 2 * (size - 1), computed in the case dtype: a sampling point "
            "within rounding of a pixel boundary takes either piece (2.2e-4 absolute "
            "measured in float32)",
        )
        for op in ("grid_sampler_2d", "grid_sampler_3d", "nn.functional.grid_sample")
    },
}
PERTURB_EPS = 2.0

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
    **{
        f"{op}/grad": (
            30.0,
            "the gradient y * x ** (y - 1) or x ** y * log(x) carries the relative error of "
            "x ** y, which grows with |y * log(x)| (2.0e-5 relative measured in complex64, "
            "5.6e-6 in float32 for a broadcast scalar base summing terms of mixed sign)",
        )
        for op in ("pow", "__rpow__", "float_power")
    },
    **{
        f"{op}/float16/grad": (
            32.0,
            "float16 gradients of x ** y with respect to a broadcast (scalar) base or "
            "exponent sum terms y * x ** (y - 1) of mixed sign in float16: cancellation "
            "leaves 1.06e-2 relative measured",
        )
        for op in ("pow", "__rpow__")
    },
    "logaddexp/complex64/grad": (
        60.0,
        "complex logaddexp is singular where exp(a) + exp(b) = 0 (a - b = i pi (2k + 1)): "
        "near it the derivative 1 / (1 + exp(b - a)) amplifies complex64 rounding "
        "(2.6e-5 relative measured)",
    ),
    **{
        f"{op}/float32/grad": (
            4.0,
            "normalisation over few elements: the gradient scales with 1 / sigma of nearly "
            "equal elements (1.7e-5 absolute, 3.9e-5 relative measured for native_group_norm)",
        )
        for op in (
            "native_layer_norm",
            "nn.functional.layer_norm",
            "native_group_norm",
            "nn.functional.group_norm",
        )
    },
    "sinc/grad": (
        4.0,
        "the derivative (cos(pi z) pi z - sin(pi z)) / (pi z ** 2) for large complex z: "
        "pi * z rounds in complex64 (1.6e-6 relative measured)",
    ),
    **{
        f"{op}/float16/grad": (
            24.0,
            "1 - x * x is formed in float16 near |x| = 1: cancellation gives the derivative "
            "1 / (1 - x ** 2) (atanh) or 1 / sqrt(1 - x ** 2) (asin) a relative error of "
            "eps * x ** 2 / (1 - x ** 2) (7.8e-3 relative measured)",
        )
        for op in ("asin", "atanh")
    },
    "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu/grad": (
        4.0,
        "attention backward: softmax over logits of order 100 (samples up to +-9) "
        "(1.3e-5 absolute measured in float32)",
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

# "op[/dtype][/grad]" -> (factor on the normwise atol (NORMWISE_EPS), why). For answers whose
# rounding error is relative to magnitudes larger than any input or output: sums of products
# of inputs, terms like |x| ** (p - 1) for p < 1. Measured on the CPU; ~3x headroom.
NORMWISE_SCALE: dict[str, tuple[float, str]] = {
    "nn.functional.normalize/grad": (
        48.0,
        "p < 1 norms (samples use p = 0.5): the gradient has terms |x| ** (p - 1) that exceed "
        "every input and output magnitude (8x the normwise bound measured in bfloat16, "
        "8.3x in float32)",
    ),
    "cdist/grad": (
        32.0,
        "the gradient (x - y) / ||x - y|| normalises differences that cancelled in float32 "
        "(4.6e-5 absolute measured: 10.3x the normwise bound)",
    ),
    "cov/grad": (
        3000.0,
        "the gradient with respect to float32 aweights divides by sum(w) - correction * "
        "sum(w ** 2) / sum(w), which cancels when one weight dominates (samples draw weights "
        "down to ~0.01): terms ~100x the largest input or output cancel to an exact 0 in "
        "2-observation samples, leaving 9.8e-3 absolute in float32 (960x the normwise "
        "bound; for input 0's gradient and float64 this is still below 1e-3 * max|x|)",
    ),
    **{
        f"{op}/grad": (
            8.0,
            "the gradient with respect to the grid is scaled by (size - 1) / 2 (up to 9.5) "
            "over pixel differences: after the pixel-boundary bracket (DISCONTINUOUS) 1.8x "
            "the normwise bound measured in float32",
        )
        for op in ("grid_sampler_2d", "grid_sampler_3d", "nn.functional.grid_sample")
    },
    **{
        f"nn.functional.gaussian_nll_loss/{dtype}/grad": (
            12.0,
            "var is clamped at eps (samples down to 7e-5): the gradient "
            "(1 / var - (x - t) ** 2 / var ** 2) / 2 exceeds every input and output "
            "magnitude (3.6x the normwise bound measured in bfloat16)",
        )
        for dtype in ("float16", "bfloat16")
    },
    **{
        f"{op}/{dtype}": (
            6.0,
            f"the loss is a difference of two distances (norms of order 10-20) formed in "
            f"{dtype}: cancellation (1.7x the normwise bound measured in float16)",
        )
        for op in (
            "nn.functional.triplet_margin_loss",
            "nn.functional.triplet_margin_with_distance_loss",
        )
        for dtype in ("float16", "bfloat16")
    },
    **{
        f"sinc/{dtype}/grad": (
            5.0,
            f"the derivative (cos(pi x) pi x - sin(pi x)) / (pi x ** 2) cancels for small x "
            f"(both terms ~ pi x, the difference ~ (pi x) ** 3 / 3): in {dtype} it comes out 0 "
            "near x = 0 (0.023 absolute measured in float16, 1.55x the normwise bound)",
        )
        for dtype in ("float16", "bfloat16")
    },
    "logcumsumexp/complex64/grad": (
        4.0,
        "complex log-sum-exp cancels where exp(a) + exp(b) ~ 0 (opposite phases): the "
        "running sums lose digits relative to their terms (1.06x the normwise bound measured)",
    ),
    **{
        f"{op}/{dtype}/grad": (
            24.0,
            f"normalisation over few elements (samples normalise over 2-3): the gradient "
            f"scales with 1 / sigma, and sigma formed in {dtype} from nearly equal elements "
            "has relative error eps * |x| / sigma (up to 7x the normwise bound measured)",
        )
        for op in (
            "native_group_norm",
            "nn.functional.group_norm",
            "nn.functional.instance_norm",
            "nn.functional.batch_norm",
            "native_batch_norm",
            "_native_batch_norm_legit",
            "_batch_norm_with_update",
        )
        for dtype in ("float16", "bfloat16")
    },
    "nn.functional.nll_loss/bfloat16": (
        8.0,
        "reduction='sum' with class weights accumulates -w[t] * x in bfloat16 over the "
        "batch: the error grows with the number of terms (2.8x the normwise bound measured)",
    ),
    "nn.functional.nll_loss/float16": (
        4.0,
        "with class weights the terms -w[t] * x (up to 81: nine times the largest input) are "
        "rounded in float16 before the reduction, where they cancel (73.0 - 70.9: 1.2x the "
        "normwise bound measured on 8 seeds)",
    ),
    **{
        f"{op}/{dtype}/grad": (
            4.0,
            f"attention backward in {dtype}: softmax over logits of order 100 and its "
            "product with dO (1.4x the normwise bound measured in bfloat16, 1.13x in float16)",
        )
        for op in (
            "nn.functional.scaled_dot_product_attention",
            "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu",
        )
        for dtype in ("float16", "bfloat16")
    },
    "nn.functional.multi_head_attention_forward/float32": (
        20.0,
        "in/out projections of values of order 1e4 and softmax over logits of order 100 "
        "(samples up to +-9): outputs near zero carry 9.9e-3 absolute error in float32 "
        "(4.2x the normwise bound measured)",
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

# Eigen-decompositions of general (non-Hermitian) matrices. The eigenvalues are a multiset:
# LAPACK's geev (and the GPU solvers) return them in no defined order, and complex64 and
# complex128 runs of the same matrix return them permuted (measured), as can float32 and
# float64. An eigenvector is unique only up to a complex phase (and, for a multiple
# eigenvalue, not at all). So these ops are compared by what defines the answer, not
# element by element (`check_eigen`):
# - eigenvalues: the device's and the reference's are paired by the assignment that minimises
#   the largest error relative to each reference eigenvalue's bound (a bottleneck matching),
#   and every pair must lie within the bound;
# - eigenvectors (linalg.eig): each device pair (lambda_i, v_i) satisfies the definition,
#   ||A v_i - lambda_i v_i|| <= EIG_BACKWARD_EPS * eps * ||A||_F, and ||v_i|| = 1 within
#   EIG_NORM_EPS * n * eps;
# - gradients: the device's eigenvalues (and the columns of |V|, eig's phase-free output)
#   are put in the reference's order by the same pairing before the usual weighted-sum
#   gradient, so each random weight multiplies the same eigenpair on both sides: the gradient
#   of sum_j Re(conj(w_j) lambda_j) (+ sum w'_kj |V_kj|), a function of the decomposition that
#   depends on neither order nor phase. Its tolerance is the LINALG_SCALE one (the largest
#   error measured on 200 seeds is 0.14 of it, complex64 eig; 0.13 float32).
# The bound on eigenvalue i is condition-aware: geev is backward stable (its eigenpairs are
# exact for A + E, ||E||_2 <= EIG_BACKWARD_EPS * eps * ||A||_F), and by Gershgorin's theorem
# applied to V^-1 (A + E) V the eigenvalues of A + E lie in disks around the reference's
# lambda_i of radius r_i = n * kappa_i * ||E||_2, where kappa_i = ||x_i|| ||y_i|| / |y_i^H x_i|
# (right and left eigenvectors) is lambda_i's condition number. No first-order assumption:
# where disks overlap (close eigenvalues: an ill-conditioned eigenproblem), the union of a
# cluster of k overlapping disks holds exactly k eigenvalues, so every eigenvalue of the
# cluster is allowed up to 2 * sum(r) of the cluster from each of its centres. A defective
# reference (no basis of eigenvectors, kappa infinite) bounds nothing: its eigenvalues are
# then checked only through eig's residual (and not at all by eigvals); random samples are
# never defective. eps is that of the least precise dtype of the case and the output.
EIGEN_OPS: frozenset[str] = frozenset({"linalg.eig", "linalg.eigvals"})
# Backward error of geev in units of eps * ||A||_F, including the rounding of the stored
# answer and of the residual's own float64 evaluation: residuals ||A v - lambda v|| up to
# 6.5 eps ||A||_F measured in float32/complex64 and 7.1 in float64 (the samples: n = 5,
# 200 seeds), so ~3x headroom; eigenvalue errors reach 0.06 of their bound with it (1.2 of
# the Gershgorin radius with a factor of 1).
EIG_BACKWARD_EPS = 20.0
# | ||v|| - 1 | <= EIG_NORM_EPS * n * eps: normalising sums n squares (2.0 eps measured,
# 0.2 of the bound).
EIG_NORM_EPS = 2.0


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


def skip_reason(op: Any, case: OpinfoCase, device_type: str, breadth: str = "full") -> str | None:
    """Why this case cannot run here, or None. The reason goes into the results file."""
    dtype = DTYPES[case.dtype]
    kind = "grad" if case.grad else "forward"
    for key in ((case.op, case.dtype, kind), (case.op, "*", kind), (case.op, case.dtype, "*"),
                (case.op, "*", "*")):  # fmt: skip
        if key in KNOWN_SKIPS and not (breadth == "quick" and key in QUICK_STILL_CHECKED):
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


def _keys(op_name: str, case_dtype: torch.dtype) -> tuple[str, ...]:
    """The table keys that apply to a case, most specific first: "op/dtype[/grad]",
    "op[/grad]", then the same for the op's generic name (its variants share it)."""
    base, _, kind = op_name.partition("/")
    generic = op_db_by_name()[base].name + (f"/{kind}" if kind else "")
    dtype_name = next((n for n, d in DTYPES.items() if d == case_dtype), "")
    suffix = f"/{dtype_name}" + (f"/{kind}" if kind else "")
    return (base + suffix, op_name, generic.partition("/")[0] + suffix, generic)


def _entry(table: dict[str, Any], op_name: str, case_dtype: torch.dtype) -> Any:
    """The most specific entry of a per-op table for a case, or None."""
    return next((table[k] for k in _keys(op_name, case_dtype) if k in table), None)


def tolerances(op_name: str, case_dtype: torch.dtype, out_dtype: torch.dtype,
               reference: torch.Tensor, magnitude: float = 0.0,
               inputs_dtype: torch.dtype | None = None,
               rules: Rules | None = None) -> tuple[float, float]:  # fmt: skip
    """(rtol, atol) for one output: the reference module's per-dtype tolerance for the least
    precise dtype involved (the case's, the output's or an input's), scaled by
    TOLERANCE_SCALE, at least the op's own toleranceOverride in op_db, normwise
    (NORMWISE_EPS), and at least the sample's own bounds (`rules`: SAMPLE_TERMS,
    SAMPLE_CONDITION)."""
    bound = _least_precise(case_dtype, out_dtype, *([inputs_dtype] if inputs_dtype else []))
    base = op_name.partition("/")[0]
    default = LINALG_SCALE if base.startswith(LINALG_OPS_PREFIXES) else 1.0
    keys = _keys(op_name, case_dtype)
    scale = next((TOLERANCE_SCALE[k][0] for k in keys if k in TOLERANCE_SCALE), default)
    normwise = next((NORMWISE_SCALE[k][0] for k in keys if k in NORMWISE_SCALE), 1.0)
    rtol, atol = tolerance(bound, scale)
    op_atol, op_rtol = opinfo_tolerance(op_name.removesuffix("/grad"), case_dtype)
    rtol, atol = max(rtol, op_rtol), max(atol, op_atol)
    magnitude = max(magnitude, max_magnitude(reference))
    eps = torch.finfo(bound).eps
    atol = max(atol, normwise * NORMWISE_EPS * eps * magnitude)
    if rules is not None:
        rtol = max(rtol, rules.relative_condition * eps)
        atol = max(atol, NORMWISE_EPS * eps * rules.terms,
                   rules.normwise_condition * eps * magnitude)  # fmt: skip
    return rtol, atol


def overflow_threshold(dtype: torch.dtype) -> float:
    """The smallest magnitude that rounds to inf in `dtype` (round to nearest, ties to even):
    max + ulp(max) / 2, where ulp(max) = eps * 2 ** floor(log2(max)) (inf for float64)."""
    info = torch.finfo(dtype)
    exponent = math.frexp(info.max)[1] - 1  # max = 1.xxx * 2 ** exponent
    return info.max + math.ldexp(info.eps / 2, exponent)


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


@dataclass(frozen=True)
class Rules:
    """How one sample's outputs are compared, beyond the per-dtype tolerance.

    inputs_dtype: the least precise floating dtype among the sample's inputs (a float64 case
    whose sample passes float32 weights is accurate to float32 only).
    may_overflow: the reference's forward outputs exceed the case dtype's range, so the
    device's forward legitimately overflowed; gradients computed from those inf values may
    be inf/NaN (finite elements are still compared).
    bracket: (low, high) elementwise bounds of the reference over inputs perturbed by their
    rounding (DISCONTINUOUS ops): an answer anywhere in [low, high] is right.
    terms: the magnitude of the terms the kernel rounds (SAMPLE_TERMS, times the entry's
    factor): atol >= NORMWISE_EPS * eps * terms; input_terms: the same per input that needs a
    gradient (run_grad uses the entry of each input's gradient as its terms).
    relative_condition, normwise_condition: factor * kappa of a SAMPLE_CONDITION entry:
    rtol >= relative_condition * eps, atol >= normwise_condition * eps * magnitude.
    """

    inputs_dtype: torch.dtype | None = None
    may_overflow: bool = False
    bracket: tuple[Any, Any] | None = None
    terms: float = 0.0
    input_terms: tuple[float, ...] = ()
    relative_condition: float = 0.0
    normwise_condition: float = 0.0


NO_RULES = Rules()


def compare(
    actual: Any,
    expected: Any,
    case_dtype: torch.dtype,
    op_name: str,
    what: str,
    magnitude: float = 0.0,
    rules: Rules = NO_RULES,
) -> None:
    """Compare an answer with the float64 reference: floating values within tolerance,
    integers, booleans and shapes exactly, NaN and inf where the reference has them."""
    if isinstance(actual, torch.Tensor):
        if not isinstance(expected, torch.Tensor):
            raise Mismatch(f"{what}: a tensor where the reference has {type(expected).__name__}")
        _compare_tensors(actual, expected, case_dtype, op_name, what, magnitude, rules)
        return
    if isinstance(actual, (list, tuple)):
        if not isinstance(expected, (list, tuple)) or len(actual) != len(expected):
            raise Mismatch(f"{what}: {_describe(actual)} where the reference has "
                           f"{_describe(expected)}")  # fmt: skip
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            sub = rules
            if rules.bracket is not None:
                low, high = rules.bracket
                sub = dataclasses.replace(rules, bracket=(low[i], high[i]))
            compare(a, e, case_dtype, op_name, f"{what}[{i}]", magnitude, sub)
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
    what: str, magnitude: float, rules: Rules = NO_RULES,
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
    # (inf or NaN); the remaining elements are compared. Round to nearest overflows only at
    # max + ulp(max) / 2 (65520 in float16): below that the answer rounds to max, finite.
    # Low-precision kernels round a float32 result (double rounding): within one float32
    # rounding of the threshold either answer is right.
    threshold = overflow_threshold(actual.dtype)
    slack = torch.finfo(torch.float32).eps if actual.dtype.itemsize < 4 else 0.0
    overflow = want.abs() >= threshold * (1 + slack)
    if bool(overflow.any()):
        finite_there = torch.isfinite(got) & overflow
        if bool(finite_there.any()):
            raise Mismatch(f"{what}: finite values where the reference overflows "
                           f"{actual.dtype}")  # fmt: skip
    overflow |= (want.abs() >= threshold * (1 - slack)) & ~torch.isfinite(got)
    if rules.may_overflow:  # an intermediate legitimately overflowed: inf/NaN here is right
        overflow |= ~torch.isfinite(got)
    if bool(overflow.any()):
        got, want = got.masked_fill(overflow, 0), want.masked_fill(overflow, 0)
    rtol, atol = tolerances(op_name, case_dtype, actual.dtype, want, magnitude,
                            rules.inputs_dtype, rules)  # fmt: skip
    if rules.bracket is not None and isinstance(rules.bracket[0], torch.Tensor):
        # Where the reference jumps within the inputs' rounding, the answer is compared
        # with the nearest value that the reference takes there.
        low, high = (b.detach().to(target) for b in rules.bracket)
        if low.shape == want.shape and not want.is_complex():
            low, high = low.masked_fill(overflow, 0), high.masked_fill(overflow, 0)
            want = torch.where(torch.isfinite(got), torch.minimum(torch.maximum(got, low), high),
                               want)  # fmt: skip
    torch.testing.assert_close(
        got, want, rtol=rtol, atol=atol, equal_nan=True,
        check_device=False, check_dtype=False, check_stride=False,
        msg=lambda m: f"{what} ({actual.dtype}, rtol={rtol:g}, atol={atol:g}): {m}",
    )  # fmt: skip


# --------------------------------------------------------------------------------------
# Sample-level rules: bounds computed from each sample's own magnitudes and condition
#
# A constant factor in TOLERANCE_SCALE or NORMWISE_SCALE is right where the error grows with
# something the samples fix (their range, their shapes). Where it grows with something each
# draw decides (how close a reflector is to singular, how far logits spread, how nearly
# equal the elements of a group are), a constant that covers the worst draw would blind the
# check on the others; these rules compute the bound per sample, from the float64 reference
# sample, so they widen only where that sample needs it. Entries are keyed like the tables
# above ("op[/dtype][/grad]", most specific first).


def _value(ref: Any, position: int, name: str, default: Any) -> Any:
    """An argument given positionally (after the input) or by keyword."""
    if len(ref.args) > position:
        return ref.args[position]
    return ref.kwargs.get(name, default)


def _real64(x: torch.Tensor) -> torch.Tensor:
    return x.detach().to("cpu", torch.complex128 if x.is_complex() else torch.float64)


def _absolute_terms(op: Any, ref: Any, weights: list[torch.Tensor] | None) -> float:
    """The op evaluated on the magnitudes of its floating inputs, a complex x taken as
    |Re x| + |Im x|: for a multilinear op (a convolution) the sum of the magnitudes of each
    output element's terms, including those of Gauss's trick for complex operands, which
    forms (Re x + Im x)(Re w + Im w) and subtracts the other two products."""

    def absolute(x: Any) -> Any:
        if isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex()):
            x = x.detach()
            return x.real.abs() + x.imag.abs() if x.is_complex() else x.abs()
        return x

    inp, args, kwargs = pytree.tree_map(absolute, (ref.input, ref.args, ref.kwargs))
    with torch.no_grad():
        return max_magnitude(op(inp, *args, **kwargs))


def _broadcast_terms(op: Any, ref: Any, weights: list[torch.Tensor] | None) -> list[float]:
    """The magnitudes of the terms that the gradient of a broadcast input sums: the reference
    gradient with every input expanded to the broadcast shape, in magnitude, summed back over
    the broadcast dimensions (the largest such sum), per input that needs a gradient."""
    if weights is None:
        return []
    leaves, spec = pytree.tree_flatten((ref.input, ref.args, ref.kwargs))
    tensors = [x for x in leaves if isinstance(x, torch.Tensor)]
    shape = torch.broadcast_shapes(*(x.shape for x in tensors))  # type: ignore[no-untyped-call]
    originals, expanded = [], list(leaves)
    for i, x in enumerate(leaves):
        if isinstance(x, torch.Tensor) and x.requires_grad:
            expanded[i] = x.detach().expand(shape).clone().requires_grad_(True)
            originals.append((x, expanded[i]))
    inp, args, kwargs = pytree.tree_unflatten(expanded, spec)
    outputs = _differentiable(ref.output_process_fn_grad(
        op.gradcheck_wrapper(op.op, inp, *args, **kwargs)))  # fmt: skip
    grads = torch.autograd.grad(
        outputs, [e for _, e in originals],
        [w.to(o.dtype) for w, o in zip(weights, outputs, strict=True)], allow_unused=True,
    )  # fmt: skip
    return [
        0.0 if g is None else max_magnitude(g.abs().sum_to_size(x.shape))
        for g, (x, _) in zip(grads, originals, strict=True)
    ]


def _normalize_terms(op: Any, ref: Any, weights: list[torch.Tensor] | None) -> float:
    """normalize's gradient w / n - (w . x) / n ** 2 * sgn(x) (|x| / n) ** (p - 1) (n the
    p-norm, clamped at eps): the larger of its two terms' magnitudes, which exceed every
    input and output for p < 1 and elements near 0 (and cancel to 0 over one element)."""
    if weights is None or not isinstance(ref.input, torch.Tensor) or ref.input.numel() == 0:
        return 0.0
    x, w = _real64(ref.input), weights[0].detach().to(torch.float64)
    p = float(_value(ref, 0, "p", 2.0))
    dim = _value(ref, 1, "dim", 1)
    eps = float(_value(ref, 2, "eps", 1e-12))
    if x.dim() == 0:
        x, w, dim = x.reshape(1), w.reshape(1), 0
    n = torch.linalg.vector_norm(x, p, dim=dim, keepdim=True).clamp_min(eps)
    first = w.abs() / n
    ratio = torch.where(x == 0, 0.0, (x.abs() / n).pow(p - 1))
    second = (w * x).abs().sum(dim, keepdim=True) / n**2 * ratio
    return max_magnitude((first, second))


def _trapezoid_terms(op: Any, ref: Any, weights: list[torch.Tensor] | None) -> float:
    """sum_i (|x_i| + |x_i+1|) (|y_i| + |y_i+1|) / 2 along the integration dimension (the
    largest such sum): the trapezoids' magnitudes, with their widths x_i+1 - x_i rounded
    relative to |x| (the spacing dx where no x is given)."""
    y = _real64(ref.input)
    if y.numel() == 0:
        return 0.0
    dim = ref.kwargs.get("dim", -1)
    heights = y.movedim(dim, -1).abs()
    heights = (heights[..., 1:] + heights[..., :-1]) / 2
    x = ref.args[0] if ref.args else ref.kwargs.get("x")
    if isinstance(x, torch.Tensor):
        x = _real64(x).abs()
        x = x if x.dim() == 1 else x.movedim(dim, -1)
        widths = x[..., 1:] + x[..., :-1]
    else:
        widths = torch.tensor(abs(float(ref.kwargs.get("dx", 1.0 if x is None else x))))
    return max_magnitude((widths * heights).sum(-1))


def _householder_condition(op: Any, ref: Any) -> float:
    """prod_i cond_2(H_i) of the reflectors H_i = I - tau_i v_i v_i^H (the largest over the
    batch): householder_product's backward applies each H_i and its inverse to the running
    product in turn, and each step amplifies the error by the condition of the two."""
    a, tau = _real64(ref.input), _real64(ref.args[0])
    if a.numel() == 0 or tau.numel() == 0:
        return 1.0
    a, tau = a.to(torch.complex128), tau.to(torch.complex128)
    m = a.shape[-2]
    v = a.tril(-1)
    v.diagonal(0, -2, -1).fill_(1)
    kappa = torch.ones(tau.shape[:-1], dtype=torch.float64)
    eye = torch.eye(m, dtype=torch.complex128)
    for i in range(tau.shape[-1]):
        column = v[..., :, i : i + 1]
        reflector = eye - tau[..., i, None, None] * (column @ column.mH)
        kappa = kappa * torch.linalg.cond(reflector)
    return float(kappa.max())


def _hermitian_condition(op: Any, ref: Any) -> float:
    """cond_2 of the Hermitian matrix A + A^H that OpInfo's gradcheck wrapper passes."""
    a = _real64(ref.input)
    if a.numel() == 0:
        return 1.0
    values = torch.linalg.eigvalsh(a + a.mH).abs()
    return float((values.amax(-1) / values.amin(-1)).max())


def _exp_square_condition(op: Any, ref: Any) -> float:
    """1 + max(x ** 2) / 2: the relative condition of exp(-x ** 2 / 2) (and of ndtr's tail,
    which the same x ** 2 decides), whose argument rounds relative to x ** 2 / 2."""
    return 1.0 + max_magnitude(ref.input) ** 2 / 2


def _cov_condition(op: Any, ref: Any) -> float:
    """The relative condition of cov's normaliser with aweights a and weights w = a * f:
    sum(w) - correction * sum(w * a) / sum(w), formed in the weights' dtype, cancels when
    one weight dominates (1 without aweights: the normaliser is an exact integer)."""
    aweights = ref.kwargs.get("aweights")
    if not isinstance(aweights, torch.Tensor) or aweights.numel() == 0:
        return 1.0
    a = _real64(aweights)
    fweights = ref.kwargs.get("fweights")
    w = a * _real64(fweights) if isinstance(fweights, torch.Tensor) else a
    total = float(w.sum())
    correction = float(ref.kwargs.get("correction", 1))
    subtracted = correction * float((w * a).sum()) / total if total else 0.0
    normaliser = abs(total - subtracted)
    return (abs(total) + abs(subtracted)) / normaliser if normaliser else math.inf


def _variance_condition(x: torch.Tensor, dims: tuple[int, ...], eps: float = 0.0) -> float:
    """max over the groups of mean(x ** 2) / (var(x) + eps) (biased variance over `dims`):
    the relative condition of a variance formed as a difference of the case dtype's numbers,
    and of 1 / sigma, which normalised outputs and their gradients scale with."""
    x = _real64(x)
    if x.numel() == 0 or not dims:
        return 1.0
    mean = x.mean(dims, keepdim=True)
    variance = (x - mean).pow(2).mean(dims) + eps
    square = x.pow(2).mean(dims) + eps
    kappa = torch.where(variance > 0, square / variance, math.inf)
    return max(1.0, float(kappa.max()))


def _batch_norm_condition(op: Any, ref: Any) -> float:
    """_variance_condition of each channel (dimension 1) over the batch and spatial dimensions,
    with the op's eps, for samples that normalise by batch statistics (training)."""
    x = ref.input
    if not isinstance(x, torch.Tensor) or x.dim() < 2:
        return 1.0
    flags = [a for a in ref.args if isinstance(a, bool)]
    default = flags[0] if flags else op.name == "_batch_norm_with_update"
    training = ref.kwargs.get("training", default)
    if not training:
        return 1.0
    floats = [a for a in ref.args if isinstance(a, float) and not isinstance(a, bool)]
    eps = float(ref.kwargs.get("eps", floats[-1] if floats else 1e-5))
    return _variance_condition(x, tuple(d for d in range(x.dim()) if d != 1), eps)


def _corrcoef_condition(op: Any, ref: Any) -> float:
    """_variance_condition of each variable (row) over its observations."""
    return _variance_condition(ref.input, (-1,))


def _rows_norm(x: torch.Tensor) -> float:
    return float(_real64(x).norm(dim=-1).max()) if x.numel() else 0.0


def _sdpa_condition(op: Any, ref: Any) -> float:
    """The largest attention logit possible, scale * max||q_i|| * max||k_j|| (plus a float
    mask's largest magnitude): softmax turns the logits' absolute rounding errors, eps times
    their magnitude, into relative errors of the weights."""
    q, k = ref.input, ref.args[0]
    scale = ref.kwargs.get("scale") or 1 / math.sqrt(q.shape[-1])
    mask = ref.kwargs.get("attn_mask")
    extra = max_magnitude(mask) if isinstance(mask, torch.Tensor) else 0.0
    return max(1.0, scale * _rows_norm(q) * _rows_norm(k) + extra)


def _mha_condition(op: Any, ref: Any) -> float:
    """_sdpa_condition of multi_head_attention_forward's projected queries and keys (per head,
    queries scaled by 1 / sqrt(head_dim); bias_k is a key of its own)."""
    query, key = _real64(ref.input), _real64(ref.args[0])
    embed, heads = int(ref.args[2]), int(ref.args[3])
    in_weight, in_bias, bias_k = ref.args[4], ref.args[5], ref.args[6]
    if ref.kwargs.get("use_separate_proj_weight"):
        w_q, w_k = _real64(ref.kwargs["q_proj_weight"]), _real64(ref.kwargs["k_proj_weight"])
    else:
        w_q, w_k = _real64(in_weight[:embed]), _real64(in_weight[embed : 2 * embed])
    q, k = query @ w_q.mT, key @ w_k.mT
    if isinstance(in_bias, torch.Tensor):
        q, k = q + _real64(in_bias[:embed]), k + _real64(in_bias[embed : 2 * embed])
    head_dim = embed // heads
    q = q.reshape(*q.shape[:-1], heads, head_dim) / math.sqrt(head_dim)
    k = k.reshape(*k.shape[:-1], heads, head_dim)
    largest_k = _rows_norm(k)
    if isinstance(bias_k, torch.Tensor):
        largest_k = max(largest_k, _rows_norm(_real64(bias_k).reshape(heads, head_dim)))
    mask = ref.kwargs.get("attn_mask")
    extra = max_magnitude(mask) if isinstance(mask, torch.Tensor) else 0.0
    return max(1.0, _rows_norm(q) * largest_k + extra)


def _euclid_mm_terms(ref: Any) -> float | None:
    """max||x_i|| ** 2 + max||y_j|| ** 2 where cdist takes its matrix-multiplication path
    (p = 2 with compute_mode use_mm_for_euclid_dist, or by default beyond 25 rows), else
    None."""
    x, y = ref.input, ref.args[0]
    p = float(_value(ref, 1, "p", 2.0))
    mode = _value(ref, 2, "compute_mode", None)
    necessary = mode in (None, "use_mm_for_euclid_dist_if_necessary") and (
        x.shape[-2] > 25 or y.shape[-2] > 25
    )
    if p != 2.0 or not (mode == "use_mm_for_euclid_dist" or necessary):
        return None
    return _rows_norm(x) ** 2 + _rows_norm(y) ** 2


Intermediates = tuple[list[torch.Tensor], list[torch.Tensor]]


def _quotient_intermediates(op: Any, ref: Any, weights: list[torch.Tensor],
                            divisor_is_input: bool = False) -> Intermediates:  # fmt: skip
    """(a / b) / b, which div's backward forms before scaling by the incoming gradient."""
    a, b = (ref.args[0], ref.input) if divisor_is_input else (ref.input, ref.args[0])
    a = _real64(a) if isinstance(a, torch.Tensor) else torch.tensor(a, dtype=torch.float64)
    b = _real64(b) if isinstance(b, torch.Tensor) else torch.tensor(b, dtype=torch.float64)
    return [a / b / b], []


def _pnorm_powers(x: torch.Tensor, p: Any, dim: Any) -> Intermediates:
    """The powers norm_backward forms in the case dtype for a p-norm (p not 0, 1, 2, inf):
    factors |x| ** (p - 1) and norm ** (1 - p) for p < 1; above, the factor |x| ** (p - 1)
    (p < 2) or |x| ** (p - 2) and the divisor norm ** (p - 1)."""
    if isinstance(p, bool) or not isinstance(p, (int, float)) or p in (0, 1, 2) or math.isinf(p):
        return [], []
    x = _real64(x)
    norm = torch.linalg.vector_norm(x, p, dim=dim, keepdim=True)
    if p < 1:
        return [torch.where(x == 0, 0.0, x.abs().pow(p - 1)), norm.pow(1 - p)], []
    return [x.abs().pow(p - 1 if p < 2 else p - 2)], [norm.pow(p - 1)]


def _norm_intermediates(op: Any, ref: Any, weights: list[torch.Tensor]) -> Intermediates:
    """_pnorm_powers of torch.norm(input, p, dim)."""
    return _pnorm_powers(ref.input, _value(ref, 0, "p", "fro"), _value(ref, 1, "dim", None))


def _dist_intermediates(op: Any, ref: Any, weights: list[torch.Tensor]) -> Intermediates:
    """_pnorm_powers of dist(input, other, p): the p-norm of input - other."""
    difference = _real64(ref.input) - _real64(ref.args[0])
    return _pnorm_powers(difference, _value(ref, 1, "p", 2), None)


def _pairwise_intermediates(op: Any, ref: Any, weights: list[torch.Tensor]) -> Intermediates:
    """_pnorm_powers of pairwise_distance(x1, x2, p, eps): the p-norm of x1 - x2 + eps over
    the last dimension."""
    difference = _real64(ref.input) - _real64(ref.args[0]) + float(_value(ref, 2, "eps", 1e-6))
    return _pnorm_powers(difference, _value(ref, 1, "p", 2.0), -1)


def _tan_intermediates(op: Any, ref: Any, weights: list[torch.Tensor]) -> Intermediates:
    """tan(x) ** 2, which tan's backward w * (1 + tan(x) ** 2) forms in the case dtype."""
    return [torch.tan(_real64(ref.input)) ** 2], []


def _masked_normalize_intermediates(op: Any, ref: Any,
                                    weights: list[torch.Tensor]) -> Intermediates:  # fmt: skip
    """x / n / n and its weighted sum over the normalised dimension, sum |w x| / n ** 2: the
    backward of x / n with respect to the norm n (masked-out elements left out of n)."""
    x = _real64(ref.input)
    order, dim = float(_value(ref, 0, "ord", 2.0)), _value(ref, 1, "dim", None)
    mask = ref.kwargs.get("mask")
    if isinstance(mask, torch.Tensor):
        x = torch.where(mask, x, math.inf if order < 0 else 0.0)
    if x.dim() == 0:
        x = x.reshape(1)
        dim = 0
    norm = torch.linalg.vector_norm(x, order, dim=dim, keepdim=True).clamp_min(
        float(ref.kwargs.get("eps", 1e-12))
    )
    quotient = torch.where(torch.isfinite(x), x / norm / norm, 0.0)
    w = weights[0].detach().to(torch.float64).reshape(quotient.shape)
    return [quotient, (w * quotient).abs().sum(dim)], []


def _segment_prod_intermediates(op: Any, ref: Any,
                                weights: list[torch.Tensor]) -> Intermediates:  # fmt: skip
    """w * output, which _segment_reduce's backward for 'prod' forms in the case dtype before
    dividing by each element."""
    if _value(ref, 0, "reduce", None) != "prod":
        return [], []
    with torch.no_grad():
        output = op(ref.input, *ref.args, **ref.kwargs)
    return [weights[0].detach().to(torch.float64) * _real64(output)], []


def _matrix_norm_tie(op: Any, ref: Any) -> float:
    """max / gap between the largest two (smallest two for negative ord) column sums (ord +-1)
    or row sums (ord +-inf) of |A|, the largest over the batch: the matrix norm's gradient is
    sign(A) on the extreme column or row, so sums within rounding of each other leave it
    undetermined (1 for other norms and for vector norms)."""
    order = _value(ref, 0, "ord", None)
    dim = _value(ref, 1, "dim", None)
    x = _real64(ref.input)
    if op.name == "linalg.matrix_norm" and dim is None:
        dim = (-2, -1)
    matrix = isinstance(dim, (tuple, list)) and len(dim) == 2
    if dim is None and x.dim() == 2 and op.name == "linalg.norm":
        matrix, dim = True, (-2, -1)
    if not matrix or order not in (1, -1, math.inf, -math.inf) or x.numel() == 0:
        return 1.0
    x = x.abs().movedim(tuple(dim), (-2, -1))
    sums = x.sum(-2) if order in (1, -1) else x.sum(-1)
    if sums.shape[-1] < 2:
        return 1.0
    ordered = sums.sort(-1, descending=order > 0).values
    extreme = ordered[..., 0].abs()
    gap = (ordered[..., 0] - ordered[..., 1]).abs()
    return float(torch.where(gap > 0, extreme / gap, math.inf).max())


def _instance_norm_condition(op: Any, ref: Any) -> float:
    """_variance_condition of each (sample, channel) over the spatial dimensions, with the
    op's eps, where instance_norm uses the input's statistics (its default)."""
    x = ref.input
    if not isinstance(x, torch.Tensor) or x.dim() < 3:
        return 1.0
    if not ref.kwargs.get("use_input_stats", True):
        return 1.0
    eps = float(ref.kwargs.get("eps", 1e-5))
    return _variance_condition(x, tuple(range(2, x.dim())), eps)


# "op[/dtype][/grad]" -> (factor, terms(op, reference sample, weights or None), why): the
# normwise bound is taken at the largest magnitude among the terms that the kernel rounds,
# computed from the sample, where those exceed every input and output:
# atol >= factor * NORMWISE_EPS * eps * terms (a list: per input that needs a gradient).
SAMPLE_TERMS: dict[str, tuple[float, Callable[..., float | list[float]], str]] = {
    **{
        f"{op}/complex64": (
            1.0,
            _absolute_terms,
            "complex convolution is three real convolutions (Gauss's trick): the "
            "imaginary part (Re x + Im x) * (Re w + Im w) - Re x Re w - Im x Im w cancels "
            "terms up to twice |x| |w| (1.46e-4 absolute measured where the output's largest "
            "magnitude is 336 and the terms' 2066: 0.30 of this bound)",
        )
        for op in (
            "nn.functional.conv1d",
            "nn.functional.conv2d",
            "nn.functional.conv3d",
            "nn.functional.conv_transpose1d",
            "nn.functional.conv_transpose2d",
            "nn.functional.conv_transpose3d",
        )
    },
    "addcdiv/float16/grad": (
        1.0,
        _broadcast_terms,
        "the gradient with respect to a broadcast divisor sums terms -w * t1 / t2 ** 2, each "
        "rounded in float16, over the broadcast elements: a small divisor makes them larger "
        "than every input and output (0.19 absolute measured on a sum of terms of 1.7e3)",
    ),
    **{
        f"{op}/grad": (
            1.0,
            _broadcast_terms,
            "the gradient with respect to a broadcast divisor sums -trunc(a / b) * w (fmod) "
            "or -floor(a / b) * w (remainder) over the broadcast elements: quotients of up "
            "to 1e3 for small divisors make the terms larger than every input and output, "
            "and they cancel (2.6e-5 absolute on a gradient of 2.5 measured in float32)",
        )
        for op in ("fmod", "remainder")
    },
    **{
        op: (
            1.0,
            _trapezoid_terms,
            "the trapezoids (x_i+1 - x_i) (y_i + y_i+1) / 2 of inputs up to 9 reach 160 and "
            "cancel in the sum, and the widths round relative to |x| (1.06e-5 absolute "
            "measured in float32 on an integral of -0.18)",
        )
        for op in ("trapz", "trapezoid", "cumulative_trapezoid")
    },
    "nn.functional.gaussian_nll_loss/grad": (
        1.0,
        _broadcast_terms,
        "the gradient with respect to a broadcast var sums w * (1 / var - (x - t) ** 2 / "
        "var ** 2) / 2 over the broadcast elements: (x - t) ** 2 / var ** 2 reaches 50 and "
        "more where inputs are up to 9, and the terms cancel (1.7e-4 absolute measured in "
        "float32, 2.3x the normwise bound)",
    ),
    "nn.functional.normalize/grad": (
        1.5,
        _normalize_terms,
        "the gradient w / n - (w . x) / n ** 2 * (|x| / n) ** (p - 1) cancels terms of order "
        "|w| / n, unbounded for p < 1 and elements near 0 (3.05e-5 absolute where the exact "
        "gradient is 0 measured in float32: normalising over one element of 0.004; up to "
        "0.67 NORMWISE_EPS * eps * terms in float32 and bfloat16)",
    ),
}

# "op[/dtype][/grad]" -> (kind, factor, kappa(op, reference sample), why): the answer's error
# is eps times a condition number kappa that each sample decides. "relative": rtol >=
# factor * eps * kappa (an elementwise function); "normwise": atol >= factor * eps * kappa *
# magnitude (the largest input, output or reference magnitude); "tie": no wider bound, but
# as for the others, where factor * eps * kappa reaches 1 the sample carries no digits of the
# dtype (for "tie": the answer depends on a choice that rounding decides) and is not compared
# (NoDigits).
# Factors: measured on the CPU over 8 seeds, about 3x headroom over the worst seen.
SAMPLE_CONDITION: dict[str, tuple[str, float, Callable[[Any, Any], float], str]] = {
    "linalg.householder_product/complex64/grad": (
        "normwise",
        0.3,
        _householder_condition,
        "the backward applies each reflector H_i = I - tau_i v_i v_i^H and its inverse "
        "in turn; the samples' taus are not LAPACK's (|tau|^2 ||v||^2 != 2 Re(tau)), so H_i is "
        "far from unitary (cond up to 140) and the errors grow with prod_i cond(H_i): "
        "up to 0.10 eps * prod cond(H_i) * max|grad| measured (1.4e-3 relative)",
    ),
    "linalg.pinv.hermitian/grad": (
        "normwise",
        16.0,
        _hermitian_condition,
        "the gradient -A^+ G A^+ (+ terms of the projectors) carries the condition "
        "number of A + A^H (eigh-based): normwise errors up to 4.6 eps * kappa * max|grad| "
        "measured in float32 (kappa 291)",
    ),
    "special.log_ndtr/float32/grad": (
        "relative",
        4.0,
        _exp_square_condition,
        "the derivative exp(-x ** 2 / 2) / (sqrt(2 pi) ndtr(x)) rounds x ** 2 / 2 in float32: "
        "relative error eps * x ** 2 / 2 (3.9e-6 at x = -7.6 measured, 1.1 eps * kappa)",
    ),
    "cov": (
        "relative",
        4.0,
        _cov_condition,
        "float32 aweights make cov form its normaliser sum(w) - correction * sum(w * a) / "
        "sum(w) in float32 (whatever the input's dtype): cancellation amplifies its rounding "
        "by kappa (1.24e-5 relative measured in a float64 case: 1.1 eps * kappa)",
    ),
    **{
        f"{op}{part}": (
            "normwise",
            1.0,
            _batch_norm_condition,
            "normalising by batch statistics over few elements: the variance is a difference "
            "of the case dtype's numbers with relative error eps * mean(x ** 2) / var, and the "
            "output and the gradient scale with 1 / sigma (relative error 4.9 measured for a "
            "bfloat16 gradient over a channel of two elements, 5.2e-3 in float32, 0.1 for a "
            "float16 output; up to 0.14 eps * kappa * magnitude where kappa > 3)",
        )
        for op in (
            "nn.functional.batch_norm",
            "native_batch_norm",
            "_native_batch_norm_legit",
            "_batch_norm_with_update",
        )
        for part in ("", "/grad")
    },
    "nn.functional.scaled_dot_product_attention/float32/grad": (
        "normwise",
        0.75,
        _sdpa_condition,
        "softmax over logits up to scale * max||q|| * max||k|| (about 125 for the samples' "
        "head_dim 8 and values up to 9): their absolute rounding errors, eps times that, are "
        "relative errors of the weights, which the backward carries into every gradient "
        "(up to 0.24 eps * kappa * magnitude measured, 6.4e-5 absolute)",
    ),
    "nn.functional.multi_head_attention_forward/float32": (
        "normwise",
        0.5,
        _mha_condition,
        "softmax over the logits of projected queries and keys, up to ||q'|| ||k'|| / "
        "sqrt(head_dim) (1e3-1e4 for the samples: values up to 9 projected by weights up to "
        "9): eps times that is the weights' relative error in the worst case (errors up to "
        "0.18 eps * kappa * magnitude measured, 0.017 absolute on outputs of 875)",
    ),
    **{
        f"{op}/grad": (
            "tie",
            2.0,
            _matrix_norm_tie,
            "the 1- and inf-norms of a matrix are its largest column or row sum of |A|; the "
            "gradient is sign(A) on that column or row, and sums within rounding of each "
            "other (26.609 and 26.656: both 26.625 in bfloat16, measured) leave the choice to "
            "the rounding",
        )
        for op in ("linalg.norm", "linalg.matrix_norm")
    },
    **{
        f"nn.functional.instance_norm/{dtype}": (
            "normwise",
            1.0,
            _instance_norm_condition,
            f"instance_norm normalises each channel of each sample over its few spatial "
            f"elements (4 in the samples): the variance is a difference of {dtype} numbers "
            "with relative error eps * mean(x ** 2) / var (0.32 absolute measured on outputs "
            "of 1.6 in bfloat16)",
        )
        for dtype in ("float16", "bfloat16")
    },
    "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu/float32/grad": (
        "normwise",
        0.75,
        _sdpa_condition,
        "as scaled_dot_product_attention's backward: logits up to scale * max||q|| * "
        "max||k|| (4.7e-5 absolute measured)",
    ),
    **{
        f"corrcoef/{dtype}/grad": (
            "normwise",
            1.0,
            _corrcoef_condition,
            f"correlations divide by the standard deviations, formed in {dtype} as differences "
            "of nearly equal observations: for two observations 0.005 apart the variance "
            "(1.2e-5) lies below float16's normal range and the backward overflows to NaN "
            "where the exact gradient is 0",
        )
        for dtype in ("float16", "bfloat16")
    },
}

# "op/grad" -> (intermediates(op, reference sample, weights), why): values that the backward
# forms in the case dtype before it scales them by the incoming gradient ("factors") or divides
# by them ("divisors"). Where a factor reaches the dtype's overflow threshold the gradient may
# be inf/NaN though the exact one is in range (as where the forward overflows:
# Rules.may_overflow; finite elements are still compared); where a divisor does, the
# gradient comes out 0 whatever the exact one, and the sample is not compared (NoDigits).
BACKWARD_OVERFLOW: dict[
    str, tuple[Callable[[Any, Any, list[torch.Tensor]], Intermediates], str]
] = {
    **{
        f"{op}/grad": (
            _quotient_intermediates,
            "the gradient with respect to the divisor is -w * ((a / b) / b): (a / b) / b "
            "overflows float16 (9.0e4 measured) where w * a / b ** 2 is in range (6.4e4)",
        )
        for op in ("div.no_rounding_mode", "true_divide")
    },
    "__rdiv__/grad": (
        functools.partial(_quotient_intermediates, divisor_is_input=True),
        "as div: the gradient with respect to the divisor (the input) is -w * ((a / b) / b)",
    ),
    "norm/grad": (
        _norm_intermediates,
        "norm_backward forms |x| ** (p - 1) in the case dtype: for p = -1 that is 1 / x ** 2, "
        "which overflows float16 for |x| < 0.004 though the gradient (|x| / norm) ** (p - 1) "
        "is at most 1 (inf measured where float64 is finite)",
    ),
    "dist/grad": (
        _dist_intermediates,
        "dist's backward is norm_backward of input - other: for p = 4 it divides by "
        "norm ** 3, which overflows float16 for a norm above 40 (the gradient came out 0 "
        "where float64 has -0.55, measured)",
    ),
    "nn.functional.pairwise_distance/grad": (
        _pairwise_intermediates,
        "as dist: for p = 5 the backward divides by norm ** 4, which overflows float16 for a "
        "norm above 16 (the gradient came out 0 where float64 has 1.9, measured)",
    ),
    "tan/grad": (
        _tan_intermediates,
        "tan's backward is w * (1 + tan(x) ** 2): tan(x) ** 2 overflows float16 within "
        "0.004 of a pole though w * (1 + tan(x) ** 2) is in range (inf measured where "
        "float64 has -1.4e4)",
    ),
    "masked.normalize/grad": (
        _masked_normalize_intermediates,
        "the backward of x / n with respect to the norm sums -w * x / n / n over the "
        "normalised dimension: for ord = -inf the norm is the smallest |x| (0.011 measured) "
        "and the sum overflows float16, giving inf and, through the norm's backward, NaN "
        "(0 * inf) where float64 is finite",
    ),
    "_segment_reduce/grad": (
        _segment_prod_intermediates,
        "for 'prod' the backward forms w * output in the case dtype before dividing by each "
        "element: it overflows float16 for outputs near 6.5e4 (inf measured where float64 "
        "is finite)",
    ),
}

# op -> (factor, terms(reference sample) or None, why): samples (terms not None) whose outputs
# are compared as squares, with the normwise bound at factor * terms.
SQUARED: dict[str, tuple[float, Callable[[Any], float | None], str]] = {
    "cdist": (
        2.0,
        _euclid_mm_terms,
        "the matrix-multiplication path computes ||x||^2 + ||y||^2 - 2 x . y and its square "
        "root: the error is eps * (||x||^2 + ||y||^2) in the squared distance, so "
        "eps * (||x||^2 + ||y||^2) / (2 d) in d, unbounded for near points (1.86e-5 at "
        "d = 0.65 measured in float32; 1.2 eps * terms in d ** 2)",
    ),
}


class NoDigits(Exception):
    """A sample whose condition leaves the dtype no digits of the answer (SAMPLE_CONDITION)."""


def sample_rules(op: Any, op_name: str, dtype: torch.dtype, ref: Any, rules: Rules,
                 weights: list[torch.Tensor] | None = None) -> Rules:  # fmt: skip
    """`rules` with this sample's SAMPLE_TERMS, SAMPLE_CONDITION and BACKWARD_OVERFLOW
    bounds; NoDigits if its condition leaves no digits to compare."""
    eps = torch.finfo(_least_precise(dtype, *([rules.inputs_dtype] if rules.inputs_dtype
                                              else []))).eps  # fmt: skip
    terms = _entry(SAMPLE_TERMS, op_name, dtype)
    if terms is not None:
        found = terms[1](op, ref, weights)
        if isinstance(found, list):
            rules = dataclasses.replace(rules, input_terms=tuple(terms[0] * t for t in found))
        else:
            rules = dataclasses.replace(rules, terms=terms[0] * found)
    condition = _entry(SAMPLE_CONDITION, op_name, dtype)
    if condition is not None:
        kind, factor, kappa_of, _ = condition
        bound = factor * kappa_of(op, ref)
        if not bound * eps < 1:
            raise NoDigits(f"{kind} condition {bound / factor:.3g}")
        if kind != "tie":
            field = "relative_condition" if kind == "relative" else "normwise_condition"
            rules = dataclasses.replace(rules, **{field: bound})
    overflow = _entry(BACKWARD_OVERFLOW, op_name, dtype)
    if overflow is not None and weights is not None:
        # The intermediates themselves round in the dtype: within a few roundings of the
        # threshold either outcome is right.
        threshold = overflow_threshold(dtype) * (1 - 4 * torch.finfo(dtype).eps)
        factors, divisors = overflow[0](op, ref, weights)
        if any(_reaches(x, threshold) for x in divisors):
            raise NoDigits("a divisor of the backward overflows")
        if any(_reaches(x, threshold) for x in factors):
            rules = dataclasses.replace(rules, may_overflow=True)
    return rules


# --------------------------------------------------------------------------------------
# Eigen-decompositions of general matrices (EIGEN_OPS)


def bottleneck_assignment(cost: list[list[float]]) -> tuple[list[int], float]:
    """The pairing of the rows of a square cost matrix with its columns that minimises the
    largest cost of a pair (NaN counts as inf): (`row_of[j]`, the row paired with column j;
    that largest cost). Kuhn's augmenting paths under a bisected cost limit: O(n^3 log n),
    for the small matrices of the samples."""
    n = len(cost)
    if n == 0:
        return [], 0.0
    cost = [[math.inf if math.isnan(c) else c for c in row] for row in cost]

    def pairing(limit: float) -> list[int] | None:
        row_of = [-1] * n

        def augment(i: int, seen: list[bool]) -> bool:
            for j in range(n):
                if not seen[j] and cost[i][j] <= limit:
                    seen[j] = True
                    if row_of[j] < 0 or augment(row_of[j], seen):
                        row_of[j] = i
                        return True
            return False

        return row_of if all(augment(i, [False] * n) for i in range(n)) else None

    levels = sorted({c for row in cost for c in row})
    low, high = 0, len(levels) - 1  # the largest level admits every pair: always a pairing
    while low < high:
        mid = (low + high) // 2
        if pairing(levels[mid]) is None:
            low = mid + 1
        else:
            high = mid
    row_of = pairing(levels[low])
    assert row_of is not None
    return row_of, levels[low]


@dataclass(frozen=True)
class EigenBounds:
    """Per reference eigenvalue (batch flattened: shape (matrices, n)), how far the device's
    paired eigenvalue may be (`allowed`), and what that follows from (see EIGEN_OPS)."""

    allowed: torch.Tensor
    kappa: torch.Tensor
    cluster: torch.Tensor  # how many reference eigenvalues share the disk cluster
    norm: torch.Tensor  # ||A||_F per matrix
    eps: float


def eigen_bounds(a_ref: torch.Tensor, ref_values: torch.Tensor, eps: float) -> EigenBounds:
    """The Gershgorin bounds of the reference eigenvalues `ref_values` (the op's float64
    answer for the float64 matrices `a_ref`): radius EIG_BACKWARD_EPS * n * eps * ||A||_F *
    kappa_i, widened to 2 * sum(radius) over a cluster of overlapping disks."""
    n = a_ref.shape[-1]
    a = a_ref.detach().to("cpu", torch.complex128).reshape(-1, n, n)
    ref = ref_values.detach().to("cpu", torch.complex128).reshape(-1, n)
    values, vectors = torch.linalg.eig(a)
    inverse, info = torch.linalg.inv_ex(vectors)
    # kappa_i = ||x_i|| ||y_i|| / |y_i^H x_i| with y_i^H the rows of V^-1 (y_i^H x_i = 1).
    kappa = inverse.abs().pow(2).sum(-1).sqrt() * vectors.abs().pow(2).sum(-2).sqrt()
    kappa = torch.where((info == 0).unsqueeze(-1) & torch.isfinite(kappa), kappa, math.inf)
    norm = torch.linalg.matrix_norm(a)
    radius = EIG_BACKWARD_EPS * n * eps * norm.unsqueeze(-1) * kappa
    allowed = torch.empty_like(radius)
    cluster = torch.ones(radius.shape, dtype=torch.int64)
    for b in range(a.shape[0]):
        # Put kappa in the order of `ref` (eigvals may order its answer differently from
        # eig's): both are float64 answers for the same matrix, paired by distance.
        distance = (values[b].unsqueeze(1) - ref[b].unsqueeze(0)).abs().tolist()
        row_of, _ = bottleneck_assignment(distance)
        r = radius[b][row_of]
        kappa[b] = kappa[b][row_of].clone()
        for members in _disk_clusters(ref[b], r):
            cluster[b, members] = len(members)
            allowed[b, members] = r[members] if len(members) == 1 else 2 * r[members].sum()
    return EigenBounds(allowed=allowed, kappa=kappa, cluster=cluster, norm=norm, eps=eps)


def _disk_clusters(centres: torch.Tensor, radius: torch.Tensor) -> list[list[int]]:
    """The connected components of the disks (centre, radius) that overlap (or touch, or have
    an infinite radius), each as a sorted list of indices."""
    n = centres.shape[0]
    gaps = (centres.unsqueeze(1) - centres.unsqueeze(0)).abs()
    apart = (gaps > radius.unsqueeze(1) + radius.unsqueeze(0)).tolist()
    unseen, clusters = set(range(n)), []
    while unseen:
        todo = [min(unseen)]
        unseen.discard(todo[0])
        members = []
        while todo:
            i = todo.pop()
            members.append(i)
            near = [j for j in unseen if not apart[i][j]]
            unseen.difference_update(near)
            todo.extend(near)
        clusters.append(sorted(members))
    return clusters


def pair_eigenvalues(values: torch.Tensor, ref_values: torch.Tensor, a_ref: torch.Tensor,
                     case_dtype: torch.dtype, what: str) -> torch.Tensor:  # fmt: skip
    """An index that puts the device's eigenvalues in the reference's order
    (`values.gather(-1, index)[..., j]` is paired with `ref_values[..., j]`), by the pairing
    that minimises the largest error relative to each reference eigenvalue's bound; Mismatch
    if in that pairing (so in every one) an eigenvalue lies beyond its bound."""
    if values.shape != ref_values.shape:
        raise Mismatch(f"{what}: eigenvalues of shape {tuple(values.shape)}, reference "
                       f"{tuple(ref_values.shape)}")  # fmt: skip
    if not values.is_complex():
        raise Mismatch(f"{what}: eigenvalues of dtype {values.dtype}, reference "
                       f"{ref_values.dtype}")  # fmt: skip
    n = values.shape[-1] if values.dim() else 0
    index = torch.arange(n).expand(values.shape).clone()
    if values.numel() == 0:
        return index
    eps = torch.finfo(_least_precise(case_dtype, values.dtype)).eps
    bounds = eigen_bounds(a_ref, ref_values, eps)
    got = values.detach().to("cpu", torch.complex128).reshape(-1, n)
    ref = ref_values.detach().to("cpu", torch.complex128).reshape(-1, n)
    flat = index.reshape(-1, n)
    for b in range(got.shape[0]):
        distance = (got[b].unsqueeze(1) - ref[b].unsqueeze(0)).abs()
        # Relative to the bound; an exact match is 0 even where the bound is 0 (A = 0).
        cost = torch.where(distance == 0, 0.0, distance / bounds.allowed[b].unsqueeze(0))
        row_of, worst = bottleneck_assignment(cost.tolist())
        flat[b] = torch.tensor(row_of)
        if worst <= 1.0:
            continue
        j = max(range(n), key=lambda j: _nan_last(float(cost[row_of[j], j])))
        i = row_of[j]
        where = f"matrix {b} (batch flattened), " if got.shape[0] > 1 else ""
        close = (f", in a cluster of {int(bounds.cluster[b, j])} overlapping disks"
                 if int(bounds.cluster[b, j]) > 1 else "")  # fmt: skip
        raise Mismatch(
            f"{what}: the eigenvalues match the reference's in no order: in the best "
            f"pairing, {where}eigenvalue {complex(got[b, i])} is {float(distance[i, j]):.3g} "
            f"from the reference's {complex(ref[b, j])}, beyond its bound "
            f"{float(bounds.allowed[b, j]):.3g} (EIG_BACKWARD_EPS * n * eps * ||A||_F * kappa "
            f"= {EIG_BACKWARD_EPS:g} * {n} * {eps:.3g} * {float(bounds.norm[b]):.4g} * "
            f"{float(bounds.kappa[b, j]):.4g}{close})"
        )
    return index


def _nan_last(x: float) -> float:
    return math.inf if math.isnan(x) else x


def check_eigen(actual: Any, expected: Any, a_ref: torch.Tensor, case_dtype: torch.dtype,
                what: str) -> None:  # fmt: skip
    """A linalg.eig (eigenvalues, eigenvectors) or linalg.eigvals answer against the float64
    answer `expected` for the matrices `a_ref`, by the rules of EIGEN_OPS."""
    values, vectors = actual if isinstance(actual, (tuple, list)) else (actual, None)
    ref_values = expected[0] if isinstance(expected, (tuple, list)) else expected
    pair_eigenvalues(values, ref_values, a_ref, case_dtype, f"{what}: eigenvalues")
    if vectors is None:
        return
    what = f"{what}: eigenvectors"
    if vectors.shape != a_ref.shape or not vectors.is_complex():
        raise Mismatch(f"{what}: {vectors.dtype} of shape {tuple(vectors.shape)} for "
                       f"matrices of shape {tuple(a_ref.shape)}")  # fmt: skip
    if vectors.numel() == 0:
        return
    n = a_ref.shape[-1]
    eps = torch.finfo(_least_precise(case_dtype, values.dtype)).eps
    a = a_ref.detach().to("cpu", torch.complex128).reshape(-1, n, n)
    v = vectors.detach().to("cpu", torch.complex128).reshape(-1, n, n)
    lam = values.detach().to("cpu", torch.complex128).reshape(-1, 1, n)
    norm = torch.linalg.matrix_norm(a).unsqueeze(-1)
    residual = (a @ v - v * lam).norm(dim=-2)  # per eigenpair (column)
    length = v.norm(dim=-2)
    checks = (
        ("||A v - lambda v||", residual, EIG_BACKWARD_EPS * eps * norm.expand_as(residual),
         f"EIG_BACKWARD_EPS * eps * ||A||_F = {EIG_BACKWARD_EPS:g} * {eps:.3g} * ||A||_F"),
        ("| ||v|| - 1 |", (length - 1).abs(),
         torch.full_like(length, EIG_NORM_EPS * n * eps),
         f"EIG_NORM_EPS * n * eps = {EIG_NORM_EPS:g} * {n} * {eps:.3g}"),
    )  # fmt: skip
    for name, error, bound, formula in checks:
        bad = ~(error <= bound)  # NaN is bad
        if not bool(bad.any()):
            continue
        ratio = torch.where(bad, (error / bound).nan_to_num(math.inf, math.inf), 0)
        b, i = divmod(int(ratio.argmax()), n)
        where = f"matrix {b} (batch flattened), " if a.shape[0] > 1 else ""
        raise Mismatch(
            f"{what}: {where}eigenpair {i} (eigenvalue {complex(lam[b, 0, i])}): {name} = "
            f"{float(error[b, i]):.3g}, beyond {float(bound[b, i]):.3g} ({formula}); "
            f"{int(bad.sum())} of {bad.numel()} eigenpairs"
        )


def align_eigen(outputs: list[torch.Tensor], ref_outputs: list[torch.Tensor],
                a_ref: torch.Tensor, case_dtype: torch.dtype,
                what: str) -> list[torch.Tensor]:  # fmt: skip
    """The device's differentiable outputs of eig (eigenvalues, |eigenvectors|) or eigvals
    (eigenvalues), differentiably reordered (gather) into the reference's eigenpair order."""
    index = pair_eigenvalues(outputs[0], ref_outputs[0], a_ref, case_dtype,
                             f"{what}: eigenvalues").to(outputs[0].device)  # fmt: skip
    aligned = [outputs[0].gather(-1, index)]
    for extra in outputs[1:]:  # eig's |V|: one column per eigenvalue
        aligned.append(extra.gather(-1, index.unsqueeze(-2).expand(extra.shape)))
    return aligned


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
            expected_raw = _call(op, ref)
        if op_name in EIGEN_OPS:  # no in-place variant
            check_eigen(raw, expected_raw, ref.input, dtype, f"{op_name} {label}")
            count += 1
            continue
        with torch.no_grad():
            actual = process(raw)
            expected = process(expected_raw)
        magnitude = max_magnitude((ref.input, ref.args, ref.kwargs))
        what = f"{op_name} {label}"
        try:
            rules = sample_rules(op, op_name, dtype, ref, Rules(inputs_dtype=_inputs_dtype(sample)))
        except NoDigits:
            continue
        squared = SQUARED.get(op_name)
        terms = squared[1](ref) if squared is not None else None
        if squared is not None and terms is not None:
            actual, expected = _squared(actual), _squared(expected)
            rules = dataclasses.replace(rules, terms=max(rules.terms, squared[0] * terms))
            what += " (compared as squares)"
        try:
            compare(actual, expected, dtype, op_name, what, magnitude, rules)
        except AssertionError:
            if op_name not in DISCONTINUOUS:
                raise
            mode, cumulative, _ = DISCONTINUOUS[op_name]
            with torch.no_grad():
                perturbed = _perturbed(ref, dtype, mode, pin_range=cumulative, op_name=op_name)
                variants = [process(_call(op, p)) for p in perturbed]
            if cumulative:
                actual, expected = _cumsum(actual), _cumsum(expected)
                variants = [_cumsum(v) for v in variants]
                what += " (cumulative)"
            bracket = _bracket(expected, variants)
            compare(actual, expected, dtype, op_name, what, magnitude,
                    dataclasses.replace(rules, bracket=bracket))  # fmt: skip
        inplace = op.inplace_variant
        if inplace is not None and _fits_in_place(raw, sample.input):
            _check_inplace(inplace, op_name, sample, ref, dtype, label, magnitude, rules)
        count += 1
    return count


def _squared(value: Any) -> Any:
    """Floating tensors squared in float64 (on the CPU): exact for the float32 answer."""
    return pytree.tree_map(
        lambda x: x.detach().to("cpu", torch.float64) ** 2
        if isinstance(x, torch.Tensor) and x.is_floating_point() else x, value,
    )  # fmt: skip


def _inputs_dtype(sample: Any) -> torch.dtype | None:
    """The least precise floating dtype among the sample's tensors (None if none)."""
    leaves = pytree.tree_leaves((sample.input, sample.args, sample.kwargs))
    dtypes = {x.dtype for x in leaves if isinstance(x, torch.Tensor)
              and (x.is_floating_point() or x.is_complex()) and x.dtype in TOLERANCES}  # fmt: skip
    return _least_precise(*dtypes) if dtypes else None


def _perturbed(ref: Any, dtype: torch.dtype, mode: str, pin_range: bool = False,
               op_name: str = "") -> list[Any]:  # fmt: skip
    """Copies of the reference sample with every floating input moved by PERTURB_EPS units of
    `dtype`'s rounding, in every combination of directions (the two uniform ones beyond three
    inputs), or for mode "exponent" the one copy whose exponent is fl(e - 1) + 1. Inputs that
    need a gradient stay leaves that need one."""
    if mode == "exponent":
        return _rounded_exponent(ref, dtype, op_name)
    if mode == "clamp":
        return _rounded_clamp(ref, dtype)
    pinned = _pinned_range(ref, op_name) if pin_range else None
    parts = (ref.input, ref.args, ref.kwargs if pinned is None else pinned[0])
    leaves, spec = pytree.tree_flatten(parts)
    floating = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)
                and (x.is_floating_point() or x.is_complex())]  # fmt: skip
    numbers = [abs(x) for x in leaves if isinstance(x, (int, float)) and not isinstance(x, bool)]
    largest = max([max_magnitude(parts), *numbers])
    delta = PERTURB_EPS * torch.finfo(dtype).eps
    if len(floating) <= 3:
        signs = list(itertools.product((-1.0, 1.0), repeat=len(floating)))
    else:
        signs = [(-1.0,) * len(floating), (1.0,) * len(floating)]
    samples = []
    for pattern in signs:
        moved = list(leaves)
        for i, sign in zip(floating, pattern, strict=True):
            x = leaves[i].detach()
            step = x.abs() if mode == "relative" else largest
            y = x + sign * delta * step
            if pinned is not None:  # elements in the range stay in it: each is counted
                low, high = pinned[1], pinned[2]
                y = torch.where((x >= low) & (x <= high), y.clamp(low, high), x)
            moved[i] = y.requires_grad_(leaves[i].requires_grad)
        inp, args, kwargs = pytree.tree_unflatten(moved, spec)
        samples.append(_with_parts(ref, inp, args, kwargs))
    return samples


def _with_parts(ref: Any, inp: Any, args: Any, kwargs: Any) -> Any:
    from torch.testing._internal.opinfo.core import SampleInput

    return SampleInput(  # type: ignore[no-untyped-call]
        inp, args=args, kwargs=kwargs, output_process_fn_grad=ref.output_process_fn_grad,
        broadcasts_input=ref.broadcasts_input, name=ref.name)  # fmt: skip


def _rounded_exponent(ref: Any, dtype: torch.dtype, op_name: str) -> list[Any]:
    """The reference sample with the exponent e of a power (`pow`: the first argument,
    `__rpow__`: the input) replaced by fl(e - 1) + 1, e - 1 rounded to `dtype` as the
    backward forms it (none if the exponent is no floating tensor)."""
    on_input = op_name.split("/")[0] == "__rpow__"
    exponent = ref.input if on_input else (ref.args[0] if ref.args else None)
    if not (isinstance(exponent, torch.Tensor) and exponent.is_floating_point()):
        return []
    e = exponent.detach()
    rounded = ((e - 1).to(dtype).to(e.dtype) + 1).requires_grad_(exponent.requires_grad)
    if on_input:
        return [_with_parts(ref, rounded, ref.args, ref.kwargs)]
    return [_with_parts(ref, ref.input, (rounded, *ref.args[1:]), ref.kwargs)]


def _rounded_clamp(ref: Any, dtype: torch.dtype) -> list[Any]:
    """logit's reference sample at each of its clamp bounds as the kernel rounds them to
    `dtype`: eps -> fl(eps) (the lower bound) and eps -> 1 - fl(1 - eps) (the upper one);
    none without an eps."""
    eps = _value(ref, 0, "eps", None)
    if not isinstance(eps, (int, float)) or isinstance(eps, bool):
        return []
    low = float(torch.tensor(eps, dtype=torch.float64).to(dtype))
    high = float(torch.tensor(1 - eps, dtype=torch.float64).to(dtype))
    samples = []
    for bound in (low, 1 - high):
        args = (bound, *ref.args[1:]) if ref.args else ref.args
        kwargs = ref.kwargs if ref.args else {**ref.kwargs, "eps": bound}
        samples.append(_with_parts(ref, ref.input, args, kwargs))
    return samples


def _pinned_range(ref: Any, op_name: str) -> tuple[dict[str, Any], float, float] | None:
    """A data-dependent bin range made explicit: histc's keyword arguments with min == max
    (the data's own extremes, widened by 1 when equal) or histogram's with no `range` and a
    bin count (the extremes, widened by 0.5 when equal) replaced by that range, with its
    bounds: perturbing the data must move the elements relative to the bin edges, not the
    edges with them. None where the range is given or the bins are edges."""
    if not isinstance(ref.input, torch.Tensor) or ref.input.numel() == 0:
        return None
    if op_name == "histogram":  # histogram(input, bins, *, range=None, weight=None, ...)
        if not (ref.args and isinstance(ref.args[0], int)) or ref.kwargs.get("range"):
            return None
        low, high = float(ref.input.min()), float(ref.input.max())
        if low == high:
            low, high = low - 0.5, high + 0.5
        return {**ref.kwargs, "range": (low, high)}, low, high
    kwargs = {"min": 0, "max": 0, **ref.kwargs}
    if ref.args:
        return None  # a positional range: left as it is
    if kwargs["min"] != kwargs["max"]:
        return kwargs, float(kwargs["min"]), float(kwargs["max"])
    low, high = float(ref.input.min()), float(ref.input.max())
    if low == high:
        low, high = low - 1, high + 1
    kwargs["min"], kwargs["max"] = low, high
    return kwargs, low, high


def _cumsum(value: Any) -> Any:
    """The cumulative sum of the first output (the counts; histogram's edges stay as they are)."""
    leaves, spec = pytree.tree_flatten(value)
    first = next((i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)), None)
    if first is not None and leaves[first].dim():
        leaves[first] = leaves[first].cumsum(-1)
    return pytree.tree_unflatten(leaves, spec)


def _bracket(expected: Any, variants: list[Any]) -> tuple[Any, Any]:
    """Elementwise (low, high) of the reference and its perturbed evaluations (NaN ignored)."""
    leaves, spec = pytree.tree_flatten(expected)
    lows, highs = list(leaves), list(leaves)
    for variant in variants:
        other = pytree.tree_leaves(variant)
        for i, (x, y) in enumerate(zip(leaves, other, strict=False)):
            if (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)
                    and x.shape == y.shape and x.is_floating_point()):  # fmt: skip
                y = y.detach().to(x.dtype)
                lows[i], highs[i] = torch.fmin(lows[i], y), torch.fmax(highs[i], y)
    return pytree.tree_unflatten(lows, spec), pytree.tree_unflatten(highs, spec)


def _fits_in_place(result: Any, target: Any) -> bool:
    """In place is defined when the result has the input's shape and dtype (no broadcast
    of the input, no type promotion beyond it, e.g. float_power_ needs a float64 input)."""
    return (
        isinstance(result, torch.Tensor) and isinstance(target, torch.Tensor)
        and result.shape == target.shape and result.dtype == target.dtype
    )  # fmt: skip


def _check_inplace(inplace: Callable[..., Any], op_name: str, sample: Any, ref: Any,
                   dtype: torch.dtype, label: str, magnitude: float,
                   rules: Rules = NO_RULES) -> None:  # fmt: skip
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
    what = f"{op_name} (in place) {label}"
    try:
        compare(target, ref_target, dtype, op_name, what, magnitude, rules)
    except AssertionError:
        if op_name not in DISCONTINUOUS or DISCONTINUOUS[op_name][1]:
            raise
        with torch.no_grad():  # the in-place answer is the out-of-place one
            variants = [
                _call(inplace, p)
                for p in _perturbed(ref, dtype, DISCONTINUOUS[op_name][0], op_name=op_name)
            ]
        bracket = _bracket(ref_target, variants)
        compare(target, ref_target, dtype, op_name, what, magnitude,
                dataclasses.replace(rules, bracket=bracket))  # fmt: skip


def _differentiable(value: Any) -> list[torch.Tensor]:
    leaves = pytree.tree_leaves(value)
    return [x for x in leaves if isinstance(x, torch.Tensor) and x.requires_grad]


def run_grad(op: Any, op_name: str, device: str, dtype: torch.dtype, limit: int | None) -> int:
    """Backward on the device against backward in float64 on the CPU: the gradient of a
    random weighted sum of the outputs (a plain sum would miss errors that cancel, such as
    softmax's gradient, which sums to zero), with respect to every input that needs one.
    EIGEN_OPS' outputs are first put in the reference's eigenpair order (`align_eigen`)."""
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
        if op_name in EIGEN_OPS:  # each weight must multiply the same eigenpair on both sides
            outputs = align_eigen(outputs, ref_outputs, ref.input, dtype, f"{op_name} {label}")
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
        threshold = overflow_threshold(dtype)
        rules = Rules(
            inputs_dtype=_inputs_dtype(sample),
            may_overflow=any(_reaches(o, threshold) for o in ref_outputs),
        )  # fmt: skip
        variants: list[tuple[Any, ...]] | None = None
        grad_name = f"{op_name}/grad"
        try:
            rules = sample_rules(op, grad_name, dtype, ref, rules, weights)
        except NoDigits:
            continue
        for i, (g, rg) in enumerate(zip(grads, ref_grads, strict=True)):
            if (g is None) != (rg is None):
                # An unused input has no gradient; the reference must agree.
                g = torch.zeros_like(inputs[i]) if g is None else g
                rg = torch.zeros_like(ref_inputs[i]) if rg is None else rg
            if g is None:
                continue
            what = f"{op_name} grad of input {i}, {label}"
            if rules.input_terms:
                rules = dataclasses.replace(rules, terms=rules.input_terms[i])
            try:
                compare(g, rg, dtype, grad_name, what, magnitude, rules)
            except AssertionError:
                if grad_name not in DISCONTINUOUS:
                    raise
                if variants is None:
                    mode = DISCONTINUOUS[grad_name][0]
                    variants = [
                        _reference_grads(op, p, weights)
                        for p in _perturbed(ref, dtype, mode, op_name=op_name)
                    ]
                bracket = _bracket(rg, [v[i] for v in variants if v[i] is not None])
                compare(g, rg, dtype, grad_name, what, magnitude,
                        dataclasses.replace(rules, bracket=bracket))  # fmt: skip
        count += 1
    return count


def _reaches(x: torch.Tensor, threshold: float) -> bool:
    """Whether a floating tensor (any layout) has an element of magnitude >= threshold."""
    if not (x.is_floating_point() or x.is_complex()):
        return False
    x = x.detach()
    if x.layout != torch.strided:
        x = x.to_dense()
    return bool((x.abs() >= threshold).any())


def _reference_grads(op: Any, ref: Any, weights: list[torch.Tensor]) -> tuple[Any, ...]:
    """The reference's gradients (as in run_grad) for another reference sample."""
    inputs = _differentiable((ref.input, ref.args, ref.kwargs))
    outputs = _differentiable(ref.output_process_fn_grad(
        op.gradcheck_wrapper(op.op, ref.input, *ref.args, **ref.kwargs)))  # fmt: skip
    return torch.autograd.grad(
        outputs, inputs, [w.to(REFERENCE_DTYPE.get(w.dtype, w.dtype)) for w in weights],
        allow_unused=True,
    )  # fmt: skip
