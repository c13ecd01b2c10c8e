"""Bounds that each sample decides, and step functions: the per-sample rule tables.

- `SAMPLE_TERMS`: the normwise bound at the magnitude of the terms a kernel rounds;
- `SAMPLE_CONDITION`: a bound of eps times the sample's condition number (samples it leaves
  no digits are not compared);
- `BACKWARD_OVERFLOW`: a backward intermediate beyond the dtype's range;
- `SQUARED`: cdist's matrix-multiplication path compared in squared distances;
- `DISCONTINUOUS`: step functions, compared with the reference's range over the inputs'
  rounding.

The functions they name (`sample_measures`) compute each bound from the float64 reference
sample, so only the samples that need it are widened; `sample_rules` and `running` apply
them. Entries are keyed like `scales`' (see `records.case_keys`); factors were measured on
the CPU over 8 seeds and leave about 3x headroom over the worst error seen.

Longer than 600 lines because each rule carries its reason and what was measured, and the
tables read best side by side.
"""

from __future__ import annotations

import functools

from accelkit.suite.opinfo import sample_measures as measure
from accelkit.suite.opinfo.records import (
    BackwardOverflow,
    Discontinuity,
    SampleCondition,
    SampleTerms,
    Squared,
    by_key,
)

_GRID_SAMPLER_OPS = ("grid_sampler_2d", "grid_sampler_3d", "nn.functional.grid_sample")

# The normwise bound is taken at the largest magnitude among the terms that the kernel rounds,
# computed from the sample, where those exceed every input and output:
# atol >= factor * NORMWISE_EPS * eps * terms (a list: per input that needs a gradient).
SAMPLE_TERMS = by_key(
    SampleTerms(
        op="sparse.mm.reduce",
        grad=True,
        factor=1.0,
        terms=measure.absolute_grad_terms,
        reason=(
            "the sparse input's gradient sums w * B over a row's K columns (K = 11), each "
            "product rounded in the dtype with the weights rounded to it: terms up to 61 by a "
            "gradient of -3.05 (bfloat16 at seed 33, 'amax': 0.169 absolute where the "
            "normwise bound at the largest input, 9, allowed 0.141; 0.17 of this bound at "
            "worst over seeds 0-40, float16 and float32 under 0.01)"
        ),
    ),
    *(
        SampleTerms(
            op=op,
            dtype=dtype,
            factor=1.0,
            terms=measure.triplet_terms,
            reason=(
                f"the loss max(d(a, p) - d(a, n) + margin, 0) is a difference of two "
                f"distances (norms of up to ~33 over 10 features in [-9, 9]), each formed in "
                f"{dtype} to about eps of itself, larger than any input (float16 needed 0.19 "
                f"of this bound at worst over seeds 0-40, bfloat16 under 0.01; in place of a "
                f"measured 6-fold normwise scale). Kept: the graph's bound, twice every "
                f"rounding of both distances, is looser than these terms: alone it passed "
                f"float16 errors of 2% at 7 and 12 of seeds 0-40, bfloat16's of 20% at 3 "
                f"(this bound: none)"
            ),
        )
        for op in (
            "nn.functional.triplet_margin_loss",
            "nn.functional.triplet_margin_with_distance_loss",
        )
        for dtype in ("float16", "bfloat16")
    ),
    SampleTerms(
        op="mvlgamma",  # its variants' generic name: p = 1, 3 and 5
        factor=1.5,
        terms=measure.mvlgamma_terms,
        reason=(
            "mvlgamma is the composite lgamma(x.unsqueeze(-1) - arange(p) / 2).sum(-1) + "
            "C: each lgamma term rounds to the dtype before the sum, and the sum and C "
            "round again (bfloat16: 0.162 absolute measured on 20.46, 0.79% relative "
            "where 0.78% was allowed, seed 1 sample 1: 0.34 of this bound, the most "
            "over seeds 0-11). Kept: an elementwise op, which the graph does not re-check"
        ),
    ),
    SampleTerms(
        op="nn.functional.nll_loss",
        factor=1.5,
        terms=measure.nll_loss_terms,
        reason=(
            "as cross_entropy, on the log-probabilities it is given: -w[t] * x rounds per "
            "element before the reduction, and a mean divides by sum(w[t]), which signed "
            "weights cancel (seed 18: float32 264.4 off by 1.7e-3, 27x the answer's own "
            "bound; bfloat16 -848 where -422 is exact); up to 0.50 of NORMWISE_EPS * eps * "
            "terms over seeds 0-18 (float16; 0.39 bfloat16, 0.38 float32). This replaced "
            "normwise scales of 4 (float16) and 8 (bfloat16). Kept: the CPU's nll_loss "
            "kernels keep the partial sums of the weights in the dtype (bfloat16: a total "
            "weight of 0.1875 where 0.25 is exact, for targets 0, 0, 0, 0, 1, 1, 1, 1 weighted "
            "8.5 and -8.4375), which the graph's decomposition sums in the accumulation "
            "precision; bfloat16 at seed 18 fails without this"
        ),
    ),
    SampleTerms(
        op="nn.functional.cosine_similarity",
        grad=True,
        factor=1.0,
        terms=measure.cosine_terms,
        own_units=True,
        reason=(
            "the gradient w * (x2 / (|x1| |x2|) - cos * x1 / |x1| ** 2) cancels where the "
            "vectors are parallel, and sums over a broadcast input's elements (float16 at "
            "seed 12: 0.031 absolute where the exact gradient is 0); the cosine is "
            "invariant under scaling its inputs, so the gradient is in units of 1 / x and "
            "the inputs' magnitudes say nothing of its error (under them a 10% error of "
            "the float16 gradient passed). Kept: the graph re-checks only what the plain "
            "bound fails, and the plain bound at the inputs' magnitudes passes a 2% float16 "
            "error (seed 12)"
        ),
    ),
    SampleTerms(
        op="masked.normalize",
        grad=True,
        factor=1.5,
        terms=measure.masked_normalize_terms,
        reason=(
            "as nn.functional.normalize: over one element x / |x| is sign(x), and the "
            "gradient's two terms w / |x| cancel to 0 (bfloat16 at seed 5, a 0-d input: "
            "-0.031 where 0 is exact). Kept: the graph runs the norm kernel's decomposition, "
            "so the normwise atol adds to its bound, which passed 5% bfloat16 errors at 33 of "
            "seeds 0-40 (this bound: none)"
        ),
    ),
    SampleTerms(
        op="corrcoef",
        grad=True,
        factor=2.0,
        terms=measure.corrcoef_grad_terms,
        own_units=True,
        reason=(
            "correlations are invariant under scaling a variable, so the gradient is in units "
            "of 1 / x and the inputs' magnitudes (up to 9) say nothing of its error: terms "
            "of order 1 / (sqrt(n - 1) sigma) each carry the variance's relative error eps "
            "* kappa (at most 0.75 of NORMWISE_EPS * eps * terms measured over 500 draws in "
            "float16, 0.58 in bfloat16, 0.26 in float32; a bound at the inputs' magnitude "
            "let a 10% error of the float16 gradient pass). Kept: the graph re-checks only "
            "what that bound fails, and a 10% float16 error passes it at seed 2"
        ),
    ),
)

# The answer's error is eps times a condition number kappa that each sample decides
# (`SampleCondition` says how each kind bounds it).
SAMPLE_CONDITION = by_key(
    SampleCondition(
        op="linalg.householder_product",
        grad=True,
        kind="normwise",
        factor=1.0,
        kappa=measure.householder_condition,
        reason=(
            "the backward applies each reflector H_i = I - tau_i v_i v_i^H and its inverse in "
            "turn; the samples' taus are not LAPACK's (|tau|^2 ||v||^2 != 2 Re(tau)), so H_i "
            "is far from unitary (cond up to 140) and the errors grow with prod_i cond(H_i): "
            "up to 0.10 eps * prod cond(H_i) * max|grad| measured over seeds 0-40 (1.4e-3 "
            "relative in complex64; 0.06 in float32, 2.5e-5 absolute where prod cond(H_i) is "
            "287), then 0.33 at seed 42 (float32, tau's gradient 0.108 off 78.7), past the "
            "0.3 fitted to those seeds: the derived 1"
        ),
    ),
    *(
        SampleCondition(
            op=op,
            kind="normwise",
            factor=1.5,
            kappa=measure.lowrank_condition,
            reason=(
                "a randomized low-rank SVD factorises a b^T (minus M, or centred), not a or b: "
                "its rank-q factors move by eps * sigma_1 / (sigma_q - sigma_q+1) of that "
                "product (pca_lowrank at seed 3: sigma_1 / sigma_2 = 696 of the centred "
                "product where a and b have kappa 2.7; 1.2e-5 absolute measured on U V^H, "
                "which the linear algebra rule of a and b bounded at 1.1e-5); up to 0.52 of "
                "n * sigma_1 / gap * eps * magnitude measured over seeds 0-9 in float32 and "
                "complex64"
            ),
        )
        for op in ("svd_lowrank", "pca_lowrank")
    ),
    *(
        SampleCondition(
            op=op,
            grad=True,
            kind="normwise",
            factor=1.0,
            kappa=measure.lowrank_gradient_condition,
            reason=(
                "the SVD's backward (as svd's) of the rank-q factors of a b^T (minus M, or "
                "centred): n * max(kappa ** 2, sigma_1 / gap) of those q singular values, not "
                "of a and b apart (up to 0.39 of the bound measured in float32 over seeds "
                "0-9)"
            ),
        )
        for op in ("svd_lowrank", "pca_lowrank")
    ),
    SampleCondition(
        op="_upsample_bilinear2d_aa",
        dtype="float32",
        kind="normwise",
        factor=2.0,
        kappa=functools.partial(measure.interpolation_condition, slope=2.0),
        reason=(
            "the source centre (dst + 0.5) * scale rounds in float32 and the "
            "triangle filter's normalised weights move with it, up to 2 max|x| per unit of "
            "the coordinate per dimension (2.1e-5 absolute at seed 0 on a border column, "
            "where the float32 atol is 1e-5; up to 0.27 of this bound over seeds 0-40), in "
            "place of a measured 5-fold rtol on every dtype (the others pass without it). "
            "Kept: the op has no decomposition for the graph (interpolate.bicubic's, which "
            "has one, is judged by it)"
        ),
    ),
    SampleCondition(
        op="linalg.lstsq",  # and its variant grad_oriented, by their generic name
        grad=True,
        kind="normwise",
        factor=6.0,
        kappa=measure.linalg_condition_squared,
        reason=(
            "least squares' gradient goes through A^+ twice and, for a wide or tall A, "
            "through the projectors I - A A^+ and I - A^+ A: the linear algebra rule's "
            "n * kappa ** 2 with a constant of 1 was exceeded 3.0-fold (complex64 "
            "grad_oriented at seed 10, sample 3: 4.5e-5 absolute on a gradient of 23, "
            "gelsy on a 2 x 3 matrix); up to 3.05 times measured over seeds 0-29 in "
            "complex64 and float32"
        ),
    ),
    SampleCondition(
        op="linalg.pinv.hermitian",
        grad=True,
        kind="normwise",
        factor=16.0,
        kappa=measure.hermitian_condition,
        reason=(
            "the gradient -A^+ G A^+ (+ terms of the projectors) carries the condition "
            "number of A + A^H (eigh-based): normwise errors up to 4.6 eps * kappa * "
            "max|grad| measured in float32 (kappa 291). Kept: judged as backward stable "
            "alone (`stability`), the gradient failed at 5 of seeds 0-40 (float32 at 23, 28 "
            "and 29, complex64 at 16 and 21), its cause not yet written down"
        ),
    ),
    SampleCondition(
        op="nn.functional.scaled_dot_product_attention",
        dtype="float32",
        grad=True,
        kind="normwise",
        factor=0.75,
        kappa=measure.sdpa_condition,
        reason=(
            "softmax over logits up to scale * max||q|| * max||k|| (about 125 for the "
            "samples' head_dim 8 and values up to 9): their absolute rounding errors, eps "
            "times that, are relative errors of the weights, which the backward carries into "
            "every gradient (up to 0.24 eps * kappa * magnitude measured, 6.4e-5 absolute). "
            "Kept: without it the graph, which runs the math attention in the flash "
            "kernel's place, judged seeds 0-40 but two: the key's gradient under is_causal "
            "was 5.0e-5 off where 1e-5 was allowed (seed 1; 2.6e-5 at seed 25), a cause not "
            "yet written down (the flash kernel's blocked softmax is the suspect)"
        ),
    ),
    *(
        SampleCondition(
            op=op,
            grad=True,
            kind="tie",
            factor=2.0,
            kappa=measure.norm_tie,
            reason=(
                "a norm that selects: the inf-norm of a vector is its largest |x|, the 1- and "
                "inf-norms of a matrix its largest column or row sum of |A|; the gradient is "
                "sign on that element, column or row, and candidates within rounding of each "
                "other (26.609 and 26.656: both 26.625 in bfloat16, measured) leave the choice "
                "to the rounding. Equal ones leave it to the kernel, the float64 reference's "
                "too: ATen's CPU complex abs rounds otherwise in its vectorised loop than in "
                "its scalar tail, so an expanded column of three equal elements split the "
                "reference's gradient over two of them, where the complex64 answer split it "
                "evenly (vector_norm, ord inf, fresh seed 606060's sweep at seed 6)"
            ),
        )
        for op in ("linalg.norm", "linalg.matrix_norm", "linalg.vector_norm")
    ),
    *(
        SampleCondition(
            op="corrcoef",
            dtype=dtype,
            grad=True,
            kind="normwise",
            factor=1.0,
            kappa=measure.corrcoef_condition,
            reason=(
                f"correlations divide by the standard deviations, formed in {dtype} as "
                "differences of nearly equal observations: for two observations 0.005 apart "
                "the variance (1.2e-5) lies below float16's normal range and the backward "
                "overflows to NaN where the exact gradient is 0"
            ),
        )
        for dtype in ("float16", "bfloat16")
    ),
)

# Where a factor reaches the dtype's overflow threshold the gradient may be inf/NaN though
# the exact one is in range (as where the forward overflows: Rules.may_overflow; finite
# elements are still compared); where a divisor does, the sample is not compared (NoDigits).
BACKWARD_OVERFLOW = by_key(
    BackwardOverflow(
        op="dist",
        grad=True,
        intermediates=measure.dist_intermediates,
        reason=(
            "dist's backward is norm_backward of input - other: for p = 4 it divides by "
            "norm ** 3, which overflows float16 for a norm above 40 (the gradient came out 0 "
            "where float64 has -0.55, measured)"
        ),
    ),
    BackwardOverflow(
        op="nn.functional.pairwise_distance",
        grad=True,
        intermediates=measure.pairwise_intermediates,
        reason=(
            "as dist: for p = 5 the backward divides by norm ** 4, which overflows float16 "
            "for a norm above 16 (the gradient came out 0 where float64 has 1.9, measured)"
        ),
    ),
    BackwardOverflow(
        op="_segment_reduce",
        grad=True,
        intermediates=measure.segment_prod_intermediates,
        reason=(
            "for 'prod' the backward forms w * output in the case dtype before dividing by "
            "each element: it overflows float16 for outputs near 6.5e4 (inf measured where "
            "float64 is finite)"
        ),
    ),
)

# Looked up by the case's op name exactly (forward cases).
SQUARED = by_key(
    Squared(
        op="cdist",
        factor=2.0,
        terms=measure.euclid_mm_terms,
        reason=(
            "the matrix-multiplication path computes ||x||^2 + ||y||^2 - 2 x . y and its "
            "square root: the error is eps * (||x||^2 + ||y||^2) in the squared distance, so "
            "eps * (||x||^2 + ||y||^2) / (2 d) in d, unbounded for near points (1.86e-5 at "
            "d = 0.65 measured in float32; 1.2 eps * terms in d ** 2)"
        ),
    ),
)

# Step functions of their inputs: where the exact answer jumps (a bin edge, an integer
# quotient), the kernel's own rounding of an intermediate in the case dtype (the quotient
# a / b, the bin position (x - min) * bins / (max - min)) legitimately lands on either side,
# which the reference from the same rounded inputs cannot reproduce. For these, a mismatch is
# re-checked against the reference's range over the inputs perturbed by PERTURB_EPS units of
# the case dtype's rounding (`discontinuity.perturbed`): "relative" perturbs each input by
# x * eps (the intermediate rounds relative to the result: a quotient), "normwise" by eps
# times the largest input magnitude (the intermediate is a difference of inputs: x - min),
# "coordinates" moves a sampling grid's coordinates by as much, each apart, to every corner
# of that box (`discontinuity.moved_coordinates`), "exponent" replaces a power's exponent e
# by fl(e - 1) + 1, the exponent that the backward's e - 1, rounded in the case dtype, stands
# for, and "clamp" evaluates logit at its bounds eps and 1 - eps rounded to the case dtype,
# as the kernel compares with them. A wrong answer
# still fails: only elements within rounding of a jump can move. Looked up by the case's op
# name exactly ("op" or "op/grad").
DISCONTINUOUS = by_key(
    *(
        Discontinuity(
            op=op,
            mode="normwise",
            cumulative=True,
            # The position's four roundings (x - min, the product, max - min, the quotient)
            # move it by up to 4 u = 2 eps of itself: by 2 eps (x - min) <= 4 eps max|x| in
            # x (float16 at seed 29: 7.332 at 91.88 of 100 bins, counted in bin 92; the
            # default 2 eps max|x| reaches 0.1 bins there).
            factor=4.0,
            reason=(
                "the bin position (x - min) * bins / (max - min) is computed in the case "
                "dtype, up to 2 eps of it off: an element within 4 eps max|x| of a bin edge "
                "lands in either bin (counts "
                "compared as cumulative sums, which are monotone in every element; for "
                "histogram a single value's range is [x - 0.5, x + 0.5] and x lies exactly on "
                "the middle edge of an even number of bins: 4.0 (density) in bin 1 where "
                "float64 has bin 2, measured on two seeds)"
            ),
        )
        for op in ("histc", "histogram")
    ),
    Discontinuity(
        op="logit",
        grad=True,
        mode="clamp",
        reason=(
            "logit(x, eps) clamps x to [eps, 1 - eps] and its gradient is 0 outside: the "
            "kernel compares x with the bounds rounded to the case dtype (1 - 0.2 is "
            "0.80078125 in bfloat16), so an input on a rounded bound is inside where float64 "
            "has it outside (w / (x (1 - x)) = 3.7 where float64 has 0, measured in "
            "bfloat16); compared with the reference at those bounds"
        ),
    ),
    Discontinuity(
        op="nn.functional.hinge_embedding_loss",
        grad=True,
        mode="normwise",
        reason=(
            "where the target is -1 the loss is max(0, margin - x), with margin - x formed in "
            "the case dtype: within rounding of 0 the gradient is either 0 or -w (float16 at "
            "seed 5: margin 5.3208 rounds to x = 5.3203, so the kernel's hinge is inactive "
            "where float64's is active by 5e-4: 1.50 absolute, the whole weight)"
        ),
    ),
    *(
        Discontinuity(
            op=op,
            grad=True,
            mode="normwise",
            reason=(
                "the loss max(d(a, p) - d(a, n) + margin, 0) is a hinge on a difference of "
                "distances (of order 20) rounded in the case dtype: where it is within "
                "rounding of 0 the gradient is either 0 or the active one (a hinge argument of "
                "0.0157 in float64 is 0 in float16: 0.024 absolute where float64 is active, "
                "measured)"
            ),
        )
        for op in (
            "nn.functional.triplet_margin_loss",
            "nn.functional.triplet_margin_with_distance_loss",
        )
    ),
    *(
        Discontinuity(
            op=op,
            grad=True,
            mode="exponent",
            reason=(
                "the gradient with respect to the base, e * b ** (e - 1), forms e - 1 in the "
                "case dtype: for a negative base b an exponent e one ulp from an integer makes "
                "e - 1 round to an integer, and the gradient is finite where the exact one (b "
                "to a non-integer power) is NaN (e = -1.999 in float16 measured); compared "
                "with the reference at the rounded exponent and with w * e * b ** fl(e - 1) "
                "(`rounded_exponent_grads`: at e = 6.8e-5 in bfloat16 the rounded exponent "
                "is 0, and only the unrounded factor e gives the kernel's e / b)"
            ),
        )
        for op in ("pow", "__rpow__")
    ),
    *(
        Discontinuity(
            op=op,
            mode="relative",
            reason=(
                "the quotient a / b rounds in the case dtype before it is "
                "truncated or floored: quotients within rounding of an integer go either way"
            ),
        )
        for op in ("div.trunc_rounding", "div.floor_rounding", "floor_divide")
    ),
    *(
        Discontinuity(
            op=op,
            grad=True,
            mode="relative",
            reason=(
                "the gradient with respect to the divisor is "
                "-trunc(a / b) (fmod) or -floor(a / b) (remainder): it jumps where the "
                "quotient, rounded in the case dtype, crosses an integer"
            ),
        )
        for op in ("fmod", "remainder")
    ),
    *(
        Discontinuity(
            op=op,
            grad=True,
            mode="coordinates",
            reason=(
                "the gradient with respect to the grid is piecewise in the unnormalised "
                "coordinates (g + 1) / 2 * (size - 1), each rounded apart in the case dtype: a "
                "sampling point within rounding of a pixel boundary takes either piece (2.2e-4 "
                "absolute measured in float32), and within a cell one coordinate's gradient "
                "moves with the others' rounding times the pixels' mixed difference "
                "(grid_sampler_3d at seed 14: 2.3e-3 on a gradient of 44, outside the "
                "uniform moves' range, inside the corners')"
            ),
        )
        for op in _GRID_SAMPLER_OPS
    ),
)
