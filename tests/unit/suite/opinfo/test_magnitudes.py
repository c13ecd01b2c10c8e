"""`magnitudes.propagate`: what the roundings of an op's graph can leave in each output
element, from one rule per primitive (issue 45: bounds computed, not written per op)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from accelkit.suite.opinfo import magnitudes

U16 = torch.finfo(torch.bfloat16).eps / 2
U32 = torch.finfo(torch.float32).eps / 2


def _slack(run: Callable[[], Any], dtype: torch.dtype, *inputs: torch.Tensor) -> Any:
    graph = magnitudes.propagate(run, dtype, list(inputs))
    return None if graph is None else graph.slack


def test_one_kernel_leaves_only_its_own_rounding_which_rtol_covers() -> None:
    x = torch.linspace(-3, 3, 7, dtype=torch.float64)
    (slack,) = _slack(lambda: (torch.exp(x),), torch.bfloat16, x)
    assert torch.equal(slack, torch.zeros_like(x))


def test_products_rounded_before_their_sum_leave_their_magnitudes() -> None:
    # vecdot's composite (x * y).sum(): each product rounds to the dtype first, so the
    # answer keeps u * sum |x y| (the products cancel: their sum is 0, their terms are 8).
    x = torch.tensor([1.0, 2.0, -1.0, -2.0], dtype=torch.float64)
    y = torch.tensor([1.0, 1.5, 1.0, 1.5], dtype=torch.float64)
    (slack,) = _slack(lambda: ((x * y).sum(),), torch.bfloat16, x, y)
    terms = float((x * y).abs().sum())
    assert math.isclose(float(slack), U16 * terms + 2 * U32 * terms, rel_tol=1e-6)


def test_a_difference_carries_its_parts_roundings() -> None:
    # tanhshrink's x - tanh(x): tanh's rounding stays in a difference that cancels.
    x = torch.tensor([1e-2, 0.5, 3.0], dtype=torch.float64)
    (slack,) = _slack(lambda: (x - torch.tanh(x),), torch.float16, x)
    u = torch.finfo(torch.float16).eps / 2
    assert torch.allclose(slack, u * torch.tanh(x).abs(), rtol=1e-6)


def test_a_slope_carries_an_operands_error_through_a_pointwise_op() -> None:
    # log(1 + x) with 1 + x rounded: the error u * |1 + x| divided by |1 + x|.
    x = torch.tensor([1e-3, 1.0], dtype=torch.float64)
    (slack,) = _slack(lambda: (torch.log(1 + x),), torch.float32, x)
    assert torch.allclose(slack, torch.full_like(x, U32), rtol=1e-4)


def test_views_and_moves_keep_the_error_of_what_they_move() -> None:
    x = torch.tensor([[1.0, -1.0], [2.0, 3.0]], dtype=torch.float64)
    y = torch.tensor([[1.0, 1.0], [1.0, 1.0]], dtype=torch.float64)

    def run() -> tuple[torch.Tensor, ...]:
        s = x + y  # rounds: u * |x + y|
        return (s.t().reshape(-1), torch.cat([s, s]).flip(0), s * 2)

    moved, catted, doubled = _slack(run, torch.bfloat16, x, y)
    own = U16 * (x + y).abs()
    assert torch.equal(moved, torch.zeros_like(moved))  # the same values: their own rounding
    assert torch.equal(catted, torch.zeros_like(catted))
    assert torch.allclose(doubled, 2 * own)  # the product reads the rounded sum


def test_a_backward_that_sums_copies_is_measured() -> None:
    # repeat's backward sums the weights of an element's copies a dimension at a time, each
    # partial sum rounded: signed weights cancel, the slack is of their magnitudes.
    x = torch.tensor([0.5], dtype=torch.float64, requires_grad=True)
    w = torch.tensor([[1.0, -1.0, 0.25], [2.0, -2.0, 0.5]], dtype=torch.float64)

    def run() -> tuple[torch.Tensor, ...]:
        return torch.autograd.grad(x.repeat(2, 3), [x], [w])

    (slack,) = _slack(run, torch.bfloat16, x)
    assert 0 < float(slack) <= 4 * U16 * float(w.abs().sum())


def test_a_fused_kernel_rounds_inside_in_the_accumulation_precision() -> None:
    # softmax decomposes (torch._decomp); a 16-bit kernel keeps its exp and sum in float32.
    x = torch.tensor([[0.5, 1.0, -2.0, 3.0]], dtype=torch.float64)
    (sixteen,) = _slack(lambda: (torch.softmax(x, -1),), torch.bfloat16, x)
    (single,) = _slack(lambda: (torch.softmax(x, -1),), torch.float32, x)
    assert torch.allclose(sixteen, single)
    assert float(single.max()) < 8 * U32


def test_a_variance_counts_its_mean_rounded_to_the_dtype() -> None:
    # Two elements two bfloat16 roundings apart: a kernel that rounds the mean to bfloat16
    # before it centres (the CPU's 16-bit batch norms) leaves no digit of the variance.
    x = torch.tensor([3.0, 3.03125], dtype=torch.float64)
    var = float(torch.var(x, correction=0))
    (sixteen,) = _slack(lambda: (torch.var(x, correction=0),), torch.bfloat16, x)
    (single,) = _slack(lambda: (torch.var(x, correction=0),), torch.float32, x)
    assert float(sixteen) > var
    assert float(single) < 1e-3 * var


def test_a_reduced_loss_rounds_its_losses_to_the_dtype_before_it_sums() -> None:
    # mse_loss's kernel computes each loss in float32 but reduces the bfloat16 losses: their
    # roundings (u(d) * (1 + 4 + 9) / 3 for the mean) stay in the answer.
    x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    y = torch.zeros(3, dtype=torch.float64)
    (mean,) = _slack(lambda: (torch.nn.functional.mse_loss(x, y),), torch.bfloat16, x, y)
    (none,) = _slack(
        lambda: (torch.nn.functional.mse_loss(x, y, reduction="none"),), torch.bfloat16, x, y
    )
    assert float(mean) >= U16 * 14 / 3
    assert float(none.max()) < U16  # one kernel: its own last rounding is rtol's
    (single,) = _slack(lambda: (torch.nn.functional.mse_loss(x, y),), torch.float32, x, y)
    assert float(single) < 8 * U32 * 14 / 3


def test_a_graph_with_an_op_without_a_rule_is_not_measured() -> None:
    a = torch.tensor([[2.0, 1.0], [1.0, 3.0]], dtype=torch.float64)
    assert _slack(lambda: (torch.linalg.inv(a),), torch.float32, a) is None


def test_a_complex_graph_bounds_the_modulus_of_its_error() -> None:
    # (z * z) * z: the square rounds by u |z|^2, which the product carries times |z|.
    z = torch.tensor([1.0 + 1.0j], dtype=torch.complex128)
    (slack,) = _slack(lambda: ((z * z) * z,), torch.complex64, z)
    assert slack.dtype == torch.float64
    assert math.isclose(float(slack), math.sqrt(2) * U32 * 2, rel_tol=1e-6)
    # A complex product sums real ones: |Re| + |Im| of each factor, and twice the roundings
    # (Gauss's trick cancels (Re a + Im a)(Re b + Im b)): here 2 sqrt(2) u (2 * 1 + 2 * 1).
    a = torch.tensor([[1.0 + 1.0j, 1.0 - 1.0j]], dtype=torch.complex128)
    b = torch.tensor([[1.0j], [1.0]], dtype=torch.complex128)
    (slack,) = _slack(lambda: (a @ b,), torch.complex64, a, b)
    assert math.isclose(float(slack), 2 * math.sqrt(2) * U32 * 4, rel_tol=1e-6)


def test_a_real_part_read_through_a_view_keeps_the_complex_values_error() -> None:
    # autograd takes Re(w * conj(z)) as view_as_real(...)[..., 0]: a float64 view of the
    # complex storage. Its parts err by the product's modulus bound, not by 0 (cov's
    # aweights gradient, whose terms cancel, failed 31 of seeds 0-40 while they read 0).
    w = torch.tensor([3.0 + 4.0j, 1.0 - 1.0j], dtype=torch.complex128)
    z = torch.tensor([2.0 - 1.0j, 0.5 + 0.5j], dtype=torch.complex128)

    def run() -> tuple[torch.Tensor, ...]:
        y = (w * z) * z  # the product's rounding u |w z| carried times |z|
        parts = torch.view_as_real(y)
        return (parts[..., 0], y.real, y)

    found = _slack(run, torch.complex64, w, z)
    assert found is not None
    re_view, real, modulus = found
    expected = U32 * (w * z).abs() * z.abs()
    assert torch.allclose(modulus, expected, rtol=1e-6)
    assert torch.allclose(re_view, expected, rtol=1e-6)
    assert torch.allclose(real, expected, rtol=1e-6)
    # ... and a complex view of real pairs errs by the parts' errors combined.
    x = torch.tensor([[3.0, 4.0]], dtype=torch.float64)
    (pair,) = _slack(lambda: (torch.view_as_complex(x * 2.5 + 0.0),), torch.float32, x)
    parts = U32 * (x * 2.5).abs()
    assert torch.allclose(pair, parts.square().sum(-1).sqrt(), rtol=1e-6)


def test_a_complex_sum_is_measured() -> None:
    # Its count of terms comes from real ones (a complex `max` does not exist).
    z = torch.tensor([[1.0 + 2.0j, -1.0 - 2.0j, 0.5j]], dtype=torch.complex128)
    (slack,) = _slack(lambda: ((z * z).sum(1),), torch.complex64, z)
    terms = float((z * z).abs().sum())
    assert math.isclose(float(slack), U32 * terms + math.sqrt(3) * U32 * terms, rel_tol=1e-6)


def test_a_graph_names_the_backend_kernels_it_stood_in_for() -> None:
    x = torch.randn(3, 4, dtype=torch.float64)
    graph = magnitudes.propagate(lambda: (torch.softmax(x, -1),), torch.float32, [x])
    assert graph is not None and graph.kernels == {"_softmax"}
    graph = magnitudes.propagate(lambda: ((x * x).sum(-1),), torch.float32, [x])
    assert graph is not None and graph.kernels == frozenset()


def test_the_largest_intermediate_says_where_the_dtype_may_overflow() -> None:
    # x * x / x in float16: the product leaves float16's range though the answer is x.
    x = torch.tensor([300.0, 2.0], dtype=torch.float64)
    graph = magnitudes.propagate(lambda: (x * x / x,), torch.float16, [x])
    assert graph is not None and graph.largest == 9e4


def test_cdists_matrix_multiplication_path_carries_the_squared_distances_cancellation() -> None:
    # Near points far from the origin: the path's |x|^2 + |y|^2 - 2 x . y cancels, and the
    # gradient (x - y) / d carries that error far past the normwise bound at its magnitude.
    torch.manual_seed(0)
    x = (torch.randn(1, 4, 3) + 20).float()
    y = (x[:, :3] + 0.01 * torch.randn(1, 3, 3)).float()
    w = torch.randn(1, 4, 3, dtype=torch.float64)

    def grads(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        a, b = a.detach().requires_grad_(True), b.detach().requires_grad_(True)
        out = torch.cdist(a, b, compute_mode="use_mm_for_euclid_dist")
        return torch.autograd.grad(out, (a, b), w.to(out.dtype))

    x64, y64 = x.double(), y.double()
    slacks = _slack(lambda: grads(x64, y64), torch.float32, x64, y64)
    assert slacks is not None
    for got, exact, slack in zip(grads(x, y), grads(x64, y64), slacks, strict=True):
        error = (got.double() - exact).abs()
        magnitude = max(float(x.abs().max()), float(got.abs().max()))
        assert float(error.max()) > 4 * U32 * magnitude  # past the plain bound
        assert bool((error <= 2 * slack + 2 * U32 * exact.abs()).all())  # GRAPH_FACTOR 2


def test_an_integer_fill_value_carries_no_error() -> None:
    # binary_cross_entropy's decomposition clamps its logs at new_full(x, (), -100): the
    # fill value is exact, not an error of 100.
    x = torch.tensor([0.3, 0.9], dtype=torch.float64)
    (slack,) = _slack(
        lambda: (torch.maximum(torch.log(x), x.new_full((), -100)).sum(),), torch.float16, x
    )
    assert 0 < float(slack) < 1e-2


def test_an_elementwise_selection_keeps_each_elements_error() -> None:
    # clamp_min picks each element (or the bound) on its own: the mean averages the errors
    # (the triplet losses' hinge), where the largest e everywhere would reach the largest.
    x = torch.tensor([1.0, 1.0, 1.0, 1000.0], dtype=torch.float64)
    (slack,) = _slack(lambda: ((x * 1.5).clamp_min(0.0).mean(),), torch.float32, x)
    assert float(slack) < U32 * 1500  # the largest everywhere: 1500 u, and the mean's


def test_a_copy_by_an_op_that_may_alias_keeps_the_error_it_moves() -> None:
    # The CPU flash attention's decomposition ends in permute(...).contiguous(), a copy by
    # an op whose schema may alias: the copy keeps the attention's error (it was lost: 0).
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 2, 3, 4, dtype=torch.float64) for _ in range(3))
    flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
    slack = _slack(lambda: flash(q, k, v), torch.float32, q, k, v)
    assert slack is not None and float(slack[0].min()) > 0


def test_masks_and_random_draws_are_exact_operands() -> None:
    # a boolean mask times a tensor (masked.normalize), dropout's Bernoulli draws
    # (multi_head_attention_forward in training): measured, exact.
    x = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64)
    mask = torch.tensor([True, False, True])
    (masked,) = _slack(lambda: ((x * mask).sum(),), torch.float32, x)
    assert 0 < float(masked) <= 4 * U32 * 4  # the products' roundings and the sum's
    torch.manual_seed(0)
    graph = magnitudes.propagate(
        lambda: (torch.nn.functional.dropout(x, 0.5, training=True).sum(),), torch.float32, [x]
    )
    assert graph is not None


def test_a_count_made_floating_is_exact() -> None:
    # a masked reduction divides by the mask's count, converted to the dtype: the count is
    # exact, not an error as large as itself (seed 7001's review: masked.std's slack 0.13
    # on gradients of 0.003).
    x = torch.tensor([1.0, 2.0, 4.0, 8.0], dtype=torch.float64)
    mask = torch.tensor([True, True, False, True])
    (slack,) = _slack(lambda: (x.sum() / mask.sum().to(x.dtype),), torch.float32, x)
    assert float(slack) <= 4 * U32 * float(x.abs().sum()) / 3


def test_logcumsumexps_scan_carries_its_softmax_weighted_errors() -> None:
    # The 16-bit backward exp(x + reverse logcumsumexp(log w - y)) of positive and negative
    # weights cancels, each half off by its exponents' rounding: the graph bounds it.
    torch.manual_seed(3)
    x = (torch.rand(5, 6, dtype=torch.float64) * 18 - 9).bfloat16()
    w = torch.randn(5, 6, dtype=torch.float64).bfloat16().double()  # exact in both

    def grad(a: torch.Tensor) -> tuple[torch.Tensor, ...]:
        a = a.detach().requires_grad_(True)
        return torch.autograd.grad(torch.logcumsumexp(a, 1), a, w.to(a.dtype))

    x64 = x.double()
    (slack,) = _slack(lambda: grad(x64), torch.bfloat16, x64)
    ((got,), (exact,)) = grad(x), grad(x64)
    error = (got.double() - exact).abs()
    assert float(error.max()) > 0
    assert bool((error <= 2 * slack + 2 * U16 * exact.abs()).all())  # GRAPH_FACTOR 2


def test_a_product_rounds_once_a_factor_and_carries_each_factors_error() -> None:
    # prod over a row of three: two multiplies, each u(d) of the running product (the CPU
    # keeps a 16-bit product in the dtype; seed 606060's masked.prod came out 5.1 u off).
    x = torch.tensor([[2.0, -3.0, 0.5], [0.0, 2.0, 3.0]], dtype=torch.float64)
    (slack,) = _slack(lambda: (x.prod(1),), torch.bfloat16, x)
    assert torch.allclose(slack, 2 * U16 * x.prod(1).abs())
    # a scan rounds j times by its j-th element
    (scan,) = _slack(lambda: (x.cumprod(1),), torch.bfloat16, x)
    assert torch.allclose(scan, torch.tensor([0.0, 1.0, 2.0]) * U16 * x.cumprod(1).abs())
    # a factor's error reaches the product times the others; past a zero factor, only that
    # factor's does (the others' product, 6, times its error u(d) * 0 ... from 2 * x: 0),
    # and the exact factors of x * 1.5 carry 1.5's rounding: none (exact in bfloat16).
    y = torch.tensor([[1.1, 2.0, 4.0]], dtype=torch.float64)
    (carried,) = _slack(lambda: ((y * 1.1).prod(1),), torch.bfloat16, y)
    product = float((y * 1.1).prod())
    assert math.isclose(float(carried), 2 * U16 * product + 3 * U16 * product, rel_tol=1e-9)


def test_a_products_backward_reaches_where_the_dtype_overflows() -> None:
    # masked.prod's gradient w * result / partial, seed 38's float16 sample: 6.6e4 over a
    # partial product of 0.185 is past float16's range, though no element's gradient is.
    x = torch.tensor(
        [
            [[[-2.9336, -1.7871]], [[-7.1094, 0.79883]]],
            [[[-5.082, 6.5195]], [[-1.6768, 4.3477]]],
            [[[0.31299, 0.59033]], [[-1.6992, 4.1875]]],
        ],
        dtype=torch.float64,
    ).requires_grad_(True)
    w = torch.tensor(1.289, dtype=torch.float64)

    def backward() -> Any:
        return torch.autograd.grad(torch.masked.prod(x, dim=(0, 1, 2, 3)), x, w)

    graph = magnitudes.propagate(backward, torch.float16, [x])
    assert graph is not None and graph.largest > torch.finfo(torch.float16).max


def test_a_factory_that_reads_a_tensors_shape_is_exact() -> None:
    # ones_like(x) is 1, whatever x's error: the implicit gradient of a sum.
    x = torch.tensor([1.5, -2.0], dtype=torch.float64).requires_grad_(True)
    (slack,) = _slack(lambda: torch.autograd.grad((x * 1.1).sum(), x), torch.bfloat16, x)
    assert torch.equal(slack, torch.zeros_like(slack))


def test_a_backward_kernel_without_a_decomposition_runs_the_forwards_decomposition() -> None:
    """The CPU flash attention's backward kernel has no rule and no decomposition: below
    autograd the gradient's graph cannot be measured, so it runs again with the op
    decomposed above autograd (scaled_dot_product_attention's math backend; the aten op's
    torch._decomp entry), a stand-in for the kernel that the graph names."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 3, 8, dtype=torch.float64) for _ in range(3))
    weight = torch.randn(1, 2, 3, 8, dtype=torch.float64)

    def grads(attention: Callable[..., Any]) -> Callable[[], Any]:
        def run() -> Any:
            leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
            out = attention(*leaves)
            out = out[0] if isinstance(out, tuple) else out
            return torch.autograd.grad(out, leaves, weight)

        return run

    flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    for attention, stand_in in (
        (torch.nn.functional.scaled_dot_product_attention, "scaled_dot_product_attention"),
        (flash, "_scaled_dot_product_flash_attention_for_cpu"),
    ):
        run = grads(attention)
        assert magnitudes.propagate(run, torch.float16, [q, k, v]) is None  # a forward's view
        graph = magnitudes.propagate(run, torch.float16, [q, k, v], backward=True)
        assert graph is not None and stand_in in graph.kernels
        assert all(float(s.max()) > 0 for s in graph.slack)  # every gradient's roundings
