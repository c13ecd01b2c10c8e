"""`roundings.rounding_sensitivity`: what the roundings of a graph's intermediates can do to
each gradient element, measured on float64 graphs built here."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from accelkit.suite.opinfo import roundings


def _grads(
    fn: Callable[[torch.Tensor], torch.Tensor], values: list[float]
) -> Callable[[], tuple[torch.Tensor | None, ...]]:
    def run() -> tuple[torch.Tensor | None, ...]:
        x = torch.tensor(values, dtype=torch.float64, requires_grad=True)
        y = fn(x)
        return torch.autograd.grad([y], [x], [torch.ones_like(y)], allow_unused=True)

    return run


def _names(run: Callable[[], object]) -> list[str]:
    with roundings._Intermediates() as seen:
        run()
    return seen.names


def test_products_move_the_gradient_by_their_count_times_its_magnitude() -> None:
    # exp(2x): forward 2x and exp; backward w * y (y saved) and * 2: every one of the four
    # intermediates but the first scales g in proportion (2x's rounding moves exp(2x) by
    # 2x relative), so S = 3|g| + |2x * g|.
    run = _grads(lambda t: torch.exp(2 * t), [0.5, -1.0, 2.0])
    assert _names(run) == ["aten::mul", "aten::exp", "aten::mul", "aten::mul"]
    (total,) = roundings.rounding_sensitivity(run) or (None,)
    assert total is not None
    x = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
    g = 2 * torch.exp(2 * x)
    assert total.tolist() == pytest.approx((3 * g + (2 * x * g).abs()).tolist(), rel=1e-4)


def test_terms_that_cancel_count_at_their_own_size() -> None:
    # sinc'(x) = cos(pi x)/x - sin(pi x)/(pi x**2): for small x each term is ~1/x while their
    # difference is ~x, so the roundings can move the gradient by far more than |g| eps.
    run = _grads(torch.sinc, [1e-3, 0.5])
    (total,) = roundings.rounding_sensitivity(run) or (None,)
    (g,) = run()
    assert total is not None and g is not None
    assert float(total[0]) > 1e5 * abs(float(g[0]))
    assert float(total[1]) < 20 * abs(float(g[1]))


def test_a_less_accurate_kernel_counts_its_own_error() -> None:
    # i0e'(x) = i1e(x) - sgn(x) i0e(x) cancels for large |x|; float32's i1e kernel is up to
    # 9.5 eps off there (a listed exception), so its term counts ten roundings, no others do.
    run = _grads(torch.special.i0e, [-7.7, 0.5])
    names = _names(run)
    assert "aten::special_i1e" in names
    plain = roundings.measure_graph(run).terms
    found = roundings.measure_graph(run, ulps={"aten::special_i1e": 10.0, "aten::i0": 3.5})
    assert found.weighted == ("aten::special_i1e",)  # the kernels of `ulps` that ran
    weighted = found.terms
    assert plain is not None and weighted is not None
    p, w = plain[0], weighted[0]
    assert p is not None and w is not None
    x = torch.tensor([-7.7, 0.5], dtype=torch.float64)
    i1e_term = torch.special.i1e(x).abs()  # the gradient moves by i1e's own relative error
    assert (w - p).tolist() == pytest.approx((9 * i1e_term).tolist(), rel=1e-4)


def test_a_kernel_off_by_its_condition_moves_by_its_slope() -> None:
    # lgamma's backward is w * digamma(x); near digamma's root (1.4616) its value, hence its
    # rounding, is ~0, but a kernel off by c units of its condition moves g by c |x psi'(x)|.
    run = _grads(torch.lgamma, [1.4616, 5.0])
    assert _names(run) == ["aten::lgamma", "aten::digamma", "aten::mul"]
    plain = roundings.measure_graph(run)
    found = roundings.measure_graph(run, conditions={"aten::digamma": 3.0})
    assert found.weighted == ("aten::digamma",)
    assert plain.terms is not None and found.terms is not None
    p, f = plain.terms[0], found.terms[0]
    assert p is not None and f is not None
    x = torch.tensor([1.4616, 5.0], dtype=torch.float64)
    slope = 3 * x * torch.special.polygamma(1, x)
    assert (f - p).tolist() == pytest.approx(slope.tolist(), rel=1e-4)


def test_views_copies_and_selections_round_nothing() -> None:
    def fn(t: torch.Tensor) -> torch.Tensor:
        v = t.view(2, 1).expand(2, 3).clone()  # no rounding in any of these
        return torch.where(v > 0, v * 3.0, -v).sum(1)

    names = _names(_grads(fn, [1.0, -2.0]))
    assert "aten::view" not in names and "aten::expand" not in names
    assert "aten::clone" not in names and "aten::where" not in names
    assert "aten::mul" in names


def test_an_in_place_result_is_scaled_where_it_lives() -> None:
    def fn(t: torch.Tensor) -> torch.Tensor:
        y = t * 2.0
        y.add_(1.0)  # rounds in place: its scaling must reach y
        return y * y

    run = _grads(fn, [1.0])
    assert _names(run).count("aten::add_") == 1
    (total,) = roundings.rounding_sensitivity(run) or (None,)
    # g = 2 (2x + 1) * 2 = 12 at x = 1; each of mul, add_, mul (forward) and the backward's
    # products scales it: none may be missed (the in-place add_ among them).
    assert total is not None and float(total[0]) >= 4 * 12 - 1e-6


def test_a_graph_too_large_or_without_roundings_is_not_measured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = _grads(lambda t: torch.exp(2 * t), [0.5])
    monkeypatch.setattr(roundings, "MAX_INTERMEDIATES", 3)
    assert roundings.rounding_sensitivity(run) is None
    monkeypatch.setattr(roundings, "MAX_INTERMEDIATES", 24)
    assert roundings.rounding_sensitivity(_grads(lambda t: -t, [0.5])) is None


def test_a_complex_intermediate_rounds_each_part_by_its_modulus() -> None:
    # Re(polar(t, 0.3) * c) with c = i exp(-0.3 i): the product is i t, its real part 0, and
    # the gradient w Re(exp(-0.3 i) conj(c)) = 0 exactly. The backward's complex products
    # have modulus |w| = 1, and each part rounds by up to u of that: S counts them, where a
    # rounding relative to each part (Re 0) would count nothing.
    c = 1j * torch.exp(torch.tensor(-0.3j, dtype=torch.complex128))

    def fn(t: torch.Tensor) -> torch.Tensor:
        return (torch.polar(t, torch.full_like(t, 0.3)) * c).real

    run = _grads(fn, [1.0, 2.0])
    (g,) = run()
    assert g is not None and float(g.abs().max()) < 1e-15
    names = _names(run)
    assert names.count("aten::polar") == 2  # one rounding per part
    (total,) = roundings.rounding_sensitivity(run) or (None,)
    assert total is not None and bool((total >= 1.0).all())


def test_below_the_smallest_normal_number_a_rounding_is_absolute() -> None:
    # (t s)^2 / s^2 with s = 1e-6: in float16, t s is subnormal (below 6.1e-5) and rounds by
    # half a subnormal spacing, 6% of itself, which the gradient 2 t w carries twice. Relative
    # to |t s| each rounding counts u of it (S = 12, six roundings of 2 g); in units of the
    # floor, t s counts 61 times more.
    s = 1e-6
    run = _grads(lambda t: (t * s) ** 2 / s**2, [1.0])
    tiny = torch.finfo(torch.float16).tiny
    (relative,) = roundings.rounding_sensitivity(run) or (None,)
    (floored,) = roundings.rounding_sensitivity(run, floor=tiny) or (None,)
    assert relative is not None and floored is not None
    assert float(floored) > 10 * float(relative)
    assert float(floored) >= 2 * 2 * tiny / s  # d g / d v = 2 w / s, in units of tiny


@pytest.mark.parametrize(
    ("x", "dtype", "beyond"),
    [
        (12.0, torch.float16, True),  # exp(12) = 1.6e5: past float16's 65504
        (10.0, torch.float16, False),  # 2.2e4 and its products by 1: in range
        (12.0, torch.bfloat16, False),
        (12.0, torch.float32, False),
    ],
)
def test_an_intermediate_past_the_dtypes_range_is_found(
    x: float, dtype: torch.dtype, beyond: bool
) -> None:
    # exp(x) / 4: the forward's exp overflows float16 where the quotient would not
    run = _grads(lambda t: torch.exp(t) / 4, [x, 1.0])
    largest = roundings.measure_graph(run, sensitivity=False).largest
    assert roundings.leaves_range(largest, dtype, margin=1e-3) is beyond
