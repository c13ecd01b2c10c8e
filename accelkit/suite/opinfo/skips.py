"""What cannot be compared with a float64 reference, and why: the rule tables of skipped cases.

- `RANDOM_OPS`: ops whose outputs are random draws (their values have no reference);
- `KNOWN_SKIPS`: cases with the numerical reason they cannot match a float64 reference (the
  reason is the skip message);
- `DEVICE_ONLY`: ops that exist only on some device types;
- `LAYOUT_SKIPS`: ops whose definition reads the strides or the storage, so that their
  `noncontiguous` cases (`layouts`) have no layout-independent answer;
- `COMPILE_SKIPS`: compiled cases whose op cannot compile (the compile error is the reason);
  `COMPILE_SAMPLE_SKIPS`: samples that cannot compile, left out of a compiled case that
  checks the others (`accelkit.suite.opinfo.compiled` applies both).

`planning.skip_reason` applies the first four (with OpInfo's own `has_nondeterministic_output` and
supported dtypes). Each skip is a finding about the op, not a hidden failure.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils import _pytree as pytree

from accelkit.suite.opinfo.records import DeviceOnly, KnownSkip, SampleSkip, by_key, skips_by_key

# Ops whose outputs are random draws or uninitialised memory: a value comparison is
# meaningless. (`has_nondeterministic_output` in OpInfo covers the `empty*` family; the
# sampling ops do not set it.)
#: The ops OpInfo marks `has_nondeterministic_output` (torch 2.14's op_db): what a torch whose
#: OpInfo predates that attribute (Debian trixie's 2.6) gets instead.
NONDETERMINISTIC_OUTPUT_OPS: frozenset[str] = frozenset(
    {
        "empty",
        "empty_like",
        "empty_permuted",
        "empty_strided",
        "new_empty",
        "new_empty_strided",
        "torch.ops.aten._efficient_attention_forward",
        "torch.ops.aten._flash_attention_forward",
    }
)
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

KNOWN_SKIPS = skips_by_key(
    KnownSkip(
        op="as_strided.partial_views",
        reason=(
            "the samples read storage outside the input's view (as_strided over a partial "
            "view); a float64 copy of the view has no such storage, so no reference exists"
        ),
    ),
    *(
        KnownSkip(
            op=op,
            dtype=dtype,
            reason=(
                f"{dtype} grid coordinates are unnormalised ((g + 1) / 2 * (size - 1)) in "
                f"{dtype}: the rounding moves the sampling points (by up to eps * size pixels) "
                "and nearest/bicubic modes switch source pixels, so the answer is not the "
                "float64 answer rounded (measured errors up to 0.13 on values of order 1)"
            ),
        )
        for op in ("grid_sampler_2d", "grid_sampler_3d", "nn.functional.grid_sample")
        for dtype in ("float16", "bfloat16")
    ),
    *(
        KnownSkip(
            op="matrix_exp",
            dtype=dtype,
            reason=(
                f"scaling and squaring overflows {dtype} for the samples' norms (entries up to "
                "9): intermediate powers exceed the dtype's range and the result is NaN"
            ),
        )
        for dtype in ("float16", "bfloat16")
    ),
    KnownSkip(
        op="nn.functional.soft_margin_loss",
        dtype="float16",
        kind="grad",
        reason=(
            "the CPU kernel forms -y w exp(-y x) in float16 before it divides by "
            "1 + exp(-y x): for -y x above 11.1 exp overflows (NaN, which the graph's range "
            "allows), and above log(65504 / |y w|) the product does, though the gradient, "
            "about -y w, is in range (seed 16, 'none': inf where 6.96 is right; 4 of seeds "
            "0-40). The graph's decomposition does not form that product, so its range does "
            "not see it; the forward is checked"
        ),
    ),
    *(
        KnownSkip(
            op=f"nn.functional.linear_cross_entropy.{variant}",
            dtype=dtype,
            reason=(
                "no reference: linear_cross_entropy accepts acc_dtype=float32 only with "
                "float16/bfloat16 inputs, so the sample cannot run in float64"
            ),
        )
        for variant in ("chunked", "chunked_none")
        for dtype in ("float16", "bfloat16")
    ),
    KnownSkip(
        op="__rpow__",
        dtype="bfloat16",
        kind="grad",
        reason=(
            "the bfloat16 gradient with respect to the broadcast scalar base sums terms "
            "y * b ** (y - 1) of magnitudes up to ~1e3 times the result (exponents up to 9) "
            "in bfloat16: cancellation leaves errors of eps * sum|terms| (10.4 on 16.5 "
            "measured); float16, float32 and complex64 are checked"
        ),
    ),
    *(
        KnownSkip(
            op="fmod",
            dtype=dtype,
            kind="grad",
            reason=(
                f"the gradient with respect to a broadcast divisor sums -trunc(a / b) * w over "
                f"the broadcast elements, with a / b rounded in {dtype}: quotients within "
                "rounding of an integer jump by one independently, so the sum moves by any "
                "subset of the weights (2.1 absolute measured), which no uniform perturbation "
                "of the inputs brackets; float32 and float64 are checked (with the "
                "DISCONTINUOUS rule), and the forward in every dtype"
            ),
        )
        for dtype in ("float16", "bfloat16")
    ),
    KnownSkip(
        op="istft",
        dtype="complex64",
        kind="grad",
        reason=(
            "the gradient with respect to the sample's complex window (istft divides by the "
            "window's squared envelope |w|^2, not holomorphic in w) differs wholly between "
            "complex64 and complex128 (relative difference 1.0 on every element, measured on "
            "two seeds): not a rounding difference, so no tolerance applies; the forward and "
            "the real dtypes are checked"
        ),
    ),
    KnownSkip(
        op="renorm",
        dtype="complex64",
        kind="grad",
        reason=(
            "the sample renorms with p = inf: the complex64 backward of the norm max|z| "
            "returns NaN on every element where complex128 is finite (measured on two seeds); "
            "the max's subgradient is not unique, and the forward and the real dtypes are "
            "checked"
        ),
    ),
    KnownSkip(
        op="linalg.vector_norm",
        dtype="float16",
        kind="grad",
        reason=(
            "the float16 backward of a p-norm (ord up to 6, samples up to 9) forms "
            "|x| ** (ord - 1) and norm ** (ord - 1) in float16: they exceed 65504 "
            "(9 ** 5 = 59049, the norm's power more) though the gradient is in range, "
            "giving inf or 0 (-inf measured where -0.21 is right); the forward "
            "accumulates in float32 and is checked, and bfloat16's range holds the "
            "intermediates (linalg.norm's samples stay in range: checked)"
        ),
    ),
    KnownSkip(
        op="nn.functional.multi_head_attention_forward",
        dtype="bfloat16",
        kind="forward",
        # Ill-conditioned logits come with later samples: the quick breadth's first
        # sample is well conditioned and stays checked, as it was before this entry.
        quick_still_checked=True,
        reason=(
            "softmax over q.k logits of order 100 (samples up to +-9, projected) rounded in "
            "bfloat16: absolute logit errors of eps * 100 (0.8) become relative attention "
            "weight errors of exp(0.8) - 1, so the outputs carry no digits of the dtype "
            "(1208 absolute on 44 allowed measured); the other dtypes are checked (float16's "
            "errors of 0.1 stay within the graph's bound: none of seeds 0-40 fails)"
        ),
    ),
    *(
        KnownSkip(
            op="nn.functional.multi_head_attention_forward",
            dtype=dtype,
            kind="grad",
            reason=(
                f"the backward of softmax over q.k logits of order 100 rounded in {dtype}: the "
                "attention weights' relative error is up to eps * kappa, kappa = max|q'| "
                "max|k'| / sqrt(head_dim) of 1e3-1e4 for the samples (eps * kappa reaches 1: "
                f"no digits). Measured: {measured}; a 1000-fold rtol (0.98 in float16) hid "
                "this before. float32 and float64 are checked"
            ),
        )
        for dtype, measured in (
            ("float16", "69 absolute on gradients of 686 at seed 23 (kappa 2600)"),
            ("bfloat16", "153 on 238 at seed 25 (kappa 4239)"),
        )
    ),
)

DEVICE_ONLY: tuple[DeviceOnly, ...] = (
    DeviceOnly(
        prefix="jiterator_",
        device_types=("cuda",),
        reason="jiterator compiles CUDA/ROCm kernels at run time",
    ),
)

_STORAGE = (
    "reads its input's storage at the offsets and strides it is given, so another layout of "
    "the same values is another answer by definition"
)
_VIEW = (
    "is defined only where the result can view the input's memory: another layout of the "
    "same values raises by definition"
)
# The noncontiguous twins of these cases skip: the op's answer is defined by the layout.
LAYOUT_SKIPS = skips_by_key(
    KnownSkip(op="as_strided", reason=f"as_strided {_STORAGE}"),
    KnownSkip(op="as_strided_copy", reason=f"as_strided_copy {_STORAGE}"),
    KnownSkip(op="as_strided_scatter", reason=f"as_strided_scatter {_STORAGE}"),
    KnownSkip(
        op="resize_",
        reason="resize_ keeps the storage's elements in storage order: another layout of "
        "the same values gives another answer by definition",
    ),
    KnownSkip(op="view", reason=f"view {_VIEW}"),
    KnownSkip(op="view_as", reason=f"view_as {_VIEW}"),
    KnownSkip(
        op="view_as_complex",
        reason=f"view_as_complex {_VIEW} (its last dimension must have stride 1)",
    ),
)

# Ops whose samples torch.compile(backend="inductor", fullgraph=True) cannot compile (the
# compiled cases, `compiled.py`): the reason is the skip message, prefixed "cannot compile".
# Found on the CPU (torch 2.14.1) by compiling each op's float32 samples as its compiled case
# does (dynamic shapes, then static), with fullgraph=True: each reason is the error's first
# line, for both attempts. Keyed like KNOWN_SKIPS; dtype None: dynamo refuses the op itself,
# whatever the dtype. Not yet every op: which ops were checked, and how, is in docs/design.md
# ("Compiled OpInfo").
COMPILE_SKIPS = skips_by_key(
    KnownSkip(
        op="item",
        reason=(
            "Unsupported: Unsupported method call (dynamo: Tensor.item() returns a Python "
            "number, a graph break without capture_scalar_outputs; fullgraph=True refuses it)"
        ),
    ),
    *(
        KnownSkip(
            op=op,
            reason=(
                "Unsupported: Data dependent operator (dynamo: the op returns a Python bool "
                "computed from the tensors' values, a graph break; fullgraph=True refuses it)"
            ),
        )
        for op in ("equal", "allclose")
    ),
    *(
        KnownSkip(
            op=op,
            reason=(
                "Unsupported: Data dependent operator (dynamo: cov, which corrcoef calls, "
                "branches on values of its input tensors; fullgraph=True refuses the break)"
            ),
        )
        for op in ("cov", "corrcoef")
    ),
    *(
        KnownSkip(
            op=op,
            reason=(
                "Unsupported: Attempted to wrap sparse Tensor (dynamo does not trace sparse "
                "tensors: the samples pass sparse inputs)"
            ),
        )
        for op in ("sparse.sampled_addmm", "sparse.mm.reduce")
    ),
    KnownSkip(
        op="nn.functional.ctc_loss",
        reason=(
            "Unsupported: Dynamic shape operator (the CTC forward's intermediate, log_alpha, "
            "is sized by the largest target length, a value of the input tensors)"
        ),
    ),
    *(
        KnownSkip(
            op=op,
            reason=(
                "Unsupported: Dynamic shape operator (lstsq's residuals are empty or not "
                "depending on the rank the driver finds, a value of the input tensors)"
            ),
        )
        for op in ("linalg.lstsq", "linalg.lstsq.grad_oriented")
    ),
    *(
        KnownSkip(
            op=op,
            reason=(
                "Unsupported: Unsupported method call (dynamo refuses a Tensor method that "
                "torch's randomized low-rank SVD calls; fullgraph=True allows no graph break)"
            ),
        )
        for op in ("svd_lowrank", "pca_lowrank")
    ),
    KnownSkip(
        op="to_sparse",
        reason=(
            "Unsupported: Operator does not support running with fake tensors (dynamic); "
            "Unsupported: Attempted to wrap sparse Tensor with VariableTracker (static): the "
            "output is a sparse tensor, which dynamo does not trace"
        ),
    ),
    # Found when full breadth stopped compiling every sample in one graph
    # (compiled.FULL_COMPILED_SAMPLES): these ops' graphs had never finished compiling.
    KnownSkip(
        op="nn.functional.gaussian_nll_loss",
        reason=(
            "UserError: Could not guard on data-dependent expression Eq(u0, 1) (the loss "
            "raises ValueError where torch.any(var < 0), a branch on a value of the input "
            "tensors; fullgraph=True allows no graph break). Every dtype, dynamic and static"
        ),
    ),
    KnownSkip(
        op="lerp",
        dtype="complex64",
        reason=(
            "BackendCompilerFailed: TypeError: '>=' not supported between instances of "
            "'complex' and 'float' (Inductor's decomposition of aten.lerp.Scalar compares the "
            "weight with 0.5 to choose its formula; a sample's weight is the Python complex "
            "0.4j, which eager accepts). Dynamic and static"
        ),
    ),
    *(
        KnownSkip(
            op=op,
            reason=(
                "Unsupported: Attempted to call function marked as skipped (_warnings.warn: "
                "linear_cross_entropy warns that its chunking `options` are ignored where a "
                "sample falls back to the reference path, as 53 of chunked_none's 77 float32 "
                "samples and 57 of chunked's 133 do, with integer and probability targets "
                "alike; fullgraph=True allows no graph break). Every dtype, dynamic and static"
            ),
        )
        for op in (
            "nn.functional.linear_cross_entropy.chunked",
            "nn.functional.linear_cross_entropy.chunked_none",
        )
    ),
    KnownSkip(
        op="resize_",
        reason=(
            "Unsupported: Unsupported Tensor.resize_() call (dynamo does not trace resizing a "
            "graph input's storage in place; fullgraph=True allows no graph break)"
        ),
    ),
    KnownSkip(
        op="resize_as_",
        reason=(
            "Unsupported: Attempted to call function marked as skipped (dynamo skips "
            "torch.resize_as_, which resizes a graph input's storage in place; fullgraph=True "
            "allows no graph break)"
        ),
    ),
    KnownSkip(
        op="unique",
        reason=(
            "AssertionError: expected size 5==5, stride 1==4 at dim=0 (Inductor's check of the "
            "eager fallback's output: with dim other than 0, unique returns strides that its "
            "fake kernel does not predict, so the compiled graph stops at its first call; 5 "
            "of the 32 float32 samples at seed 0). Every dtype, dynamic and static"
        ),
    ),
    KnownSkip(
        op="unique_consecutive",
        reason=(
            "AssertionError: wrong number of dimensions2 for op: "
            "torch.ops.aten.unique_consecutive.default (Inductor's check of the eager "
            "fallback's output: its number of dimensions is not the fake kernel's, so the "
            "compiled graph stops at its first call). Every dtype, dynamic and static"
        ),
    ),
)


def _empty_broadcast(sample: Any) -> bool:
    """An operand broadcast to an empty result (its expanded view has stride 0)."""
    leaves = pytree.tree_leaves((sample.input, sample.args, sample.kwargs))
    shapes = [x.shape for x in leaves if isinstance(x, torch.Tensor)]
    if not shapes:
        return False
    shape = torch.broadcast_shapes(*shapes)  # type: ignore[no-untyped-call]
    return 0 in shape and any(s != shape for s in shapes)


def _addr_of_a_0d_input(sample: Any) -> bool:
    """addr of a 0-d input with the default beta and alpha (input + outer(vec1, vec2))."""
    defaults = all(sample.kwargs.get(name, 1) == 1 for name in ("beta", "alpha"))
    return bool(sample.input.dim() == 0 and defaults)


def _empty_broadcast_reason(op: str) -> str:
    return (
        "InductorError: LoweringException: RuntimeError: self.stride(-1) must be 1 to view "
        "Float as ComplexFloat (different element sizes), but got 0 (an operand broadcast to "
        f"an empty result, {op}'s sample 8: (0, 1, 3) and (0, 10, 3); the complex lowering "
        "views the expanded float buffer as complex). Dynamic and static; alone, each of the "
        "other samples compiles"
    )


#: Samples of a compiled case that cannot compile: the case compiles its other samples, and
#: its message names the samples left out. (`applies` selects them from the sample alone:
#: op_db draws these samples' shapes the same way at every seed.)
COMPILE_SAMPLE_SKIPS = by_key(
    *(
        SampleSkip(
            op=op, dtype="complex64", applies=_empty_broadcast, reason=_empty_broadcast_reason(op)
        )
        for op in ("add", "__radd__", "logaddexp")
    ),
    SampleSkip(
        op="addr",
        dtype="complex64",
        applies=_addr_of_a_0d_input,
        reason=(
            "InductorError: RuntimeError: self.stride(-1) must be 1 to view ComplexFloat as "
            "Float (different element sizes), but got 0 (a 0-d complex input broadcast to the "
            "(5, 10) outer product with the default beta and alpha, sample 1 of 4; the complex "
            "lowering views the expanded tensor as float; with beta and alpha, sample 3 "
            "compiles). Dynamic and static"
        ),
    ),
)
