"""Kernels calling @adjit.func functions that run loops (issue 10.2): reverse mode inlines
those calls into the kernel first (passes/autodiff/inline_array_calls.py), so the loop's
values get per-item tape slots or are recomputed as if the loop were written in the kernel.
Checked against analytic derivatives and finite differences, in reverse and forward mode."""
import numpy as np
import pytest

import adjit
from adjit import Const, Duplicated, Forward, Reverse
from adjit.core.errors import CompilationError


@adjit.func
def horner(c, x):
    s = 0.0 * x
    for k in range(c.shape[0]):        # trip count: an argument's size
        s = s * x + c[k]
    return s


@adjit.kernel
def poly(c, x, out):
    i = adjit.index()
    out[i] = horner(c, x[i])


@adjit.func
def cube_root(a):
    y = 1.0 + 0.0 * a
    for _ in range(30):                # Newton, a fixed number of steps
        y = y - (y * y * y - a) / (3.0 * y * y)
    return y


@adjit.func
def two_roots(a):                      # calls of a function with a loop, nested
    return cube_root(a) + cube_root(2.0 * a)


@adjit.kernel
def roots(x, out):
    i = adjit.index()
    out[i] = two_roots(x[i])


@adjit.func
def decay(y0, k, dt, steps: int):
    y = y0
    for _ in range(steps):             # trip count: a scalar argument
        y = y - dt * k * y * y
    return y


@adjit.kernel
def decay2d(y0, k, out, dt: float, steps: int):
    i, j = adjit.index_nd()
    out[i, j] = decay(y0[i, j], k[i, j], dt, steps)


@adjit.func
def sqrt_bisect(a):
    lo = 0.0 * a
    hi = a + 1.0
    while hi - lo > 1e-12:             # data-dependent: differs between items
        mid = 0.5 * (lo + hi)
        if mid * mid > a:
            hi = mid
        else:
            lo = mid
    return lo


@adjit.kernel
def bisected(x, out):
    i = adjit.index()
    out[i] = sqrt_bisect(x[i])


def test_horner_reverse_and_forward():
    c = np.array([1.0, -2.0, 0.5, 3.0, -0.25])
    x = np.linspace(-1.5, 1.5, 11)
    out, dx, seed = np.zeros_like(x), np.zeros_like(x), np.linspace(0.5, 2, 11)
    adjit.autodiff(Reverse, poly, Const(c), Duplicated(x, dx), Duplicated(out, seed.copy()),
                   ndrange=x.size)
    want = np.polyval(np.polyder(c), x)
    np.testing.assert_allclose(dx, seed * want, rtol=1e-13)
    np.testing.assert_allclose(out, np.polyval(c, x), rtol=1e-13)
    tout = np.zeros_like(x)
    adjit.autodiff(Forward, poly, Const(c), Duplicated(x, np.ones_like(x)),
                   Duplicated(np.zeros_like(x), tout), ndrange=x.size)
    np.testing.assert_allclose(tout, want, rtol=1e-13)


def test_horner_coefficients_reverse_against_finite_differences():
    c = np.array([0.3, -1.0, 2.0])
    x = np.linspace(0.2, 1.2, 6)
    dc = np.zeros_like(c)
    adjit.autodiff(Reverse, poly, Duplicated(c, dc), Const(x),
                   Duplicated(np.zeros_like(x), np.ones_like(x)), ndrange=x.size)
    h = 1e-6
    fd = [(np.sum(np.polyval(c + h * e, x)) - np.sum(np.polyval(c - h * e, x))) / (2 * h)
          for e in np.eye(3)]
    np.testing.assert_allclose(dc, fd, rtol=1e-8)


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-12), (np.float32, 2e-5)])
def test_newton_in_nested_calls(dtype, rtol):
    x = np.linspace(0.5, 3.0, 4097).astype(dtype)
    out, dx = np.zeros_like(x), np.zeros_like(x)
    adjit.autodiff(Reverse, roots, Duplicated(x, dx), Duplicated(out, np.ones_like(x)),
                   ndrange=x.size)
    x64 = x.astype(np.float64)
    want = x64 ** (-2 / 3) / 3 + (2 / 3) * (2 * x64) ** (-2 / 3)
    np.testing.assert_allclose(dx, want, rtol=rtol)
    np.testing.assert_allclose(out, np.cbrt(x64) + np.cbrt(2 * x64), rtol=rtol)
    tout = np.zeros_like(x)
    adjit.autodiff(Forward, roots, Duplicated(x, np.ones_like(x)),
                   Duplicated(np.zeros_like(x), tout), ndrange=x.size)
    np.testing.assert_allclose(tout, want, rtol=rtol)


@pytest.mark.parametrize("steps", [0, 1, 7])
def test_loop_over_a_scalar_argument_2d(steps):
    rng = np.random.default_rng(steps)
    y0, k = rng.random((5, 3)) + 0.5, rng.random((5, 3))
    dy0, dk = np.zeros_like(y0), np.zeros_like(k)
    dt = 0.05

    def run(y0_, k_):
        y = y0_.copy()
        for _ in range(steps):
            y = y - dt * k_ * y * y
        return y
    adjit.autodiff(Reverse, decay2d, Duplicated(y0, dy0), Duplicated(k, dk),
                   Duplicated(np.zeros_like(y0), np.ones_like(y0)), Const(dt), Const(steps),
                   ndrange=y0.shape)
    h = 1e-6
    np.testing.assert_allclose(dy0, (run(y0 + h, k) - run(y0 - h, k)) / (2 * h), rtol=1e-7)
    np.testing.assert_allclose(dk, (run(y0, k + h) - run(y0, k - h)) / (2 * h), rtol=1e-7,
                               atol=1e-12)


def test_data_dependent_while_in_a_callee():
    # The bisection's iteration count depends on x[i]: its values go to a packed per-item
    # tape (dynamic_tape.py). d sqrt(x)/dx = 1 / (2 sqrt(x)), up to the bisection's tolerance.
    x = np.linspace(0.5, 3.0, 5)
    dx, out = np.zeros_like(x), np.zeros_like(x)
    adjit.autodiff(Reverse, bisected, Duplicated(x, dx), Duplicated(out, np.ones_like(x)),
                   ndrange=x.size)
    np.testing.assert_allclose(out, np.sqrt(x), rtol=1e-11)
    tout = np.zeros_like(x)
    adjit.autodiff(Forward, bisected, Duplicated(x, np.ones_like(x)),
                   Duplicated(np.zeros_like(x), tout), ndrange=x.size)
    np.testing.assert_allclose(dx, tout, rtol=1e-12)
    # Forward mode needs no tape: it differentiates the same kernel.
    tout = np.zeros_like(x)
    adjit.autodiff(Forward, bisected, Duplicated(x, np.ones_like(x)),
                   Duplicated(np.zeros_like(x), tout), ndrange=x.size)
    assert np.all(np.isfinite(tout))
