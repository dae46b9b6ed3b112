"""Derivatives of hypot, copysign, maximum and minimum (adjit's and the math module's names),
and of code using isnan/isinf/isfinite, full, full_like and arange, in @jit functions, device
functions and kernels, forward and reverse: each against its analytic form and central finite
differences."""
from __future__ import annotations

import math

import numpy as np
import pytest

import adjit
from adjit import Active, Const, Duplicated, Forward, Reverse, autodiff


def fd(f, args, k, eps=1e-6):
    lo, hi = list(args), list(args)
    lo[k] -= eps
    hi[k] += eps
    return (f(*hi) - f(*lo)) / (2 * eps)


@adjit.func
def hyp(a, b):
    return adjit.hypot(a, b)


@adjit.jit
def hypot_of(a: float, b: float):
    return hyp(a, b) + math.hypot(2.0 * a, b) * 0.5


def hypot_grad(a, b):
    h, g = math.hypot(a, b), math.hypot(2 * a, b)
    return a / h + a / g * 2.0, b / h + b / g * 0.5


@adjit.jit
def copysign_of(a: float, b: float):
    return adjit.copysign(a * a + a, b) + math.copysign(3.0 * a, b * b - 1.0)


def copysign_grad(a, b):
    s1 = np.sign(a * a + a) * np.sign(b)
    s2 = np.sign(a) * np.sign(b * b - 1.0)
    return s1 * (2 * a + 1) + 3.0 * s2, 0.0


@adjit.jit
def extrema_of(a: float, b: float):
    return adjit.maximum(a * a, b) * 3.0 + adjit.minimum(a, b * b) * 5.0


def extrema_grad(a, b):
    da = 3.0 * 2 * a * (a * a >= b) + 5.0 * (a <= b * b)
    db = 3.0 * (b > a * a) + 5.0 * 2 * b * (b * b < a)
    return da, db


SCALAR_CASES = [(hypot_of, hypot_grad), (copysign_of, copysign_grad), (extrema_of, extrema_grad)]
POINTS = [(0.7, -1.3), (-2.0, 0.5), (1.5, 0.25), (-0.3, -1.1), (1.25, -1.25)]


@pytest.mark.parametrize("a, b", POINTS)
@pytest.mark.parametrize("f, grad", SCALAR_CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_reverse_and_forward_match_analytic_and_fd(f, grad, a, b):
    want = grad(a, b)
    da, db = autodiff(Reverse, f, Active(a), Active(b))
    ta = autodiff(Forward, f, Duplicated(a, 1.0), Const(b))
    tb = autodiff(Forward, f, Const(a), Duplicated(b, 1.0))
    for got, w, k in ((da, want[0], 0), (db, want[1], 1), (ta, want[0], 0), (tb, want[1], 1)):
        assert got == pytest.approx(w, rel=1e-12, abs=1e-12)
        assert got == pytest.approx(fd(f, [a, b], k), rel=1e-6, abs=1e-8)


def test_hypot_derivative_is_finite_for_huge_and_at_zero():
    for a, b in ((3e200, 4e200), (1e-200, -1e-200), (2.0, 2.0), (-1.5, 1.5)):
        da, db = autodiff(Reverse, hyp, Active(a), Active(b))
        assert (da, db) == (pytest.approx(a / math.hypot(a, b)), pytest.approx(b / math.hypot(a, b)))
    # the origin has no gradient: a subgradient, finite, rather than NaN
    assert all(map(math.isfinite, autodiff(Reverse, hyp, Active(0.0), Active(0.0))))


@adjit.jit
def array_loss(x, y, s: float):
    u = adjit.hypot(x, y) + adjit.maximum(x, s) * adjit.minimum(y, x) + adjit.copysign(x, y)
    return adjit.sum(u * u)


def array_grads(x, y, s):
    h = np.hypot(x, y)
    mx, mn = np.maximum(x, s), np.minimum(y, x)
    u = h + mx * mn + np.copysign(x, y)
    du = 2 * u
    dx = du * (x / h + (x >= s) * mn + mx * (y > x) + np.sign(x) * np.sign(y))
    dy = du * (y / h + mx * (y <= x))
    ds = np.sum(du * (s > x) * mn)
    return dx, dy, ds


def test_elementwise_array_gradients():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(40), rng.standard_normal(40)
    s = 0.1
    dx, dy = np.zeros(40), np.zeros(40)
    _, _, ds = autodiff(Reverse, array_loss, Duplicated(x, dx), Duplicated(y, dy), Active(s))
    wx, wy, ws = array_grads(x, y, s)
    np.testing.assert_allclose(dx, wx, rtol=1e-12)
    np.testing.assert_allclose(dy, wy, rtol=1e-12)
    assert ds == pytest.approx(ws, rel=1e-12)
    tx = rng.standard_normal(40)
    t = autodiff(Forward, array_loss, Duplicated(x, tx), Const(y), Const(s))
    assert t == pytest.approx(np.sum(wx * tx), rel=1e-12)
    assert adjit.check_grad(array_loss, x, y, s) < 1e-6


@adjit.kernel
def hypot_kernel(x, y, out, flags):
    i = adjit.index()
    out[i] = adjit.hypot(x[i], y[i]) * adjit.maximum(x[i], 0.0) + adjit.copysign(y[i], x[i])
    flags[i] = adjit.isnan(out[i]) or not math.isfinite(out[i])


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-12), (np.float32, 1e-5)])
def test_kernel_reverse_and_forward(dtype, rtol):
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(33).astype(dtype), rng.standard_normal(33).astype(dtype)
    flags = np.zeros(33, np.bool_)
    h = np.hypot(x, y)
    dx_want = (x / h) * np.maximum(x, 0) + h * (x >= 0)
    dy_want = (y / h) * np.maximum(x, 0) + np.sign(y) * np.sign(x)
    seed = rng.standard_normal(33).astype(dtype)
    dx, dy, out = np.zeros_like(x), np.zeros_like(y), np.zeros_like(x)
    autodiff(Reverse, hypot_kernel, Duplicated(x, dx), Duplicated(y, dy),
             Duplicated(out, seed.copy()), Const(flags), ndrange=33)
    np.testing.assert_allclose(dx, seed * dx_want, rtol=rtol)
    np.testing.assert_allclose(dy, seed * dy_want, rtol=rtol)
    assert not flags.any()
    tx, tout = rng.standard_normal(33).astype(dtype), np.zeros_like(x)
    autodiff(Forward, hypot_kernel, Duplicated(x, tx), Const(y), Duplicated(out, tout),
             Const(flags), ndrange=33)
    np.testing.assert_allclose(tout, tx * dx_want, rtol=rtol)
    # finite differences of one element, in f64
    if dtype == np.float64:
        def f(v):
            xs, o = x.copy(), np.zeros_like(x)
            xs[3] = v
            hypot_kernel(xs, y, o, flags, ndrange=33)
            return o[3]
        assert dx_want[3] == pytest.approx(fd(f, [x[3]], 0), rel=1e-6)


@adjit.jit
def created_loss(x, a: float):
    """full/full_like/arange have no derivative of their own; what flows through them does."""
    w = adjit.full_like(x, a) + adjit.arange(x.shape[0]) * 0.5 + adjit.full(x.shape, 2.0)
    keep = adjit.isfinite(x)
    return adjit.sum(w * x * x) + adjit.sum(keep * x)


def test_gradient_through_created_arrays():
    rng = np.random.default_rng(2)
    x, a = rng.standard_normal(12), 0.3
    dx = np.zeros(12)
    _, da = autodiff(Reverse, created_loss, Duplicated(x, dx), Active(a))
    w = a + np.arange(12) * 0.5 + 2.0
    np.testing.assert_allclose(dx, 2 * w * x + 1.0, rtol=1e-12)
    assert da == pytest.approx(np.sum(x * x), rel=1e-12)
    assert da == pytest.approx(fd(lambda v: created_loss(x, v), [a], 0), rel=1e-7)
    assert adjit.check_grad(created_loss, x, a) < 1e-6


@adjit.jit
def guarded(a: float):
    r = a * a
    if adjit.isinf(r) or adjit.isnan(r):
        r = 0.0
    return r


def test_predicates_in_differentiated_control_flow():
    assert autodiff(Reverse, guarded, Active(1.5))[0] == pytest.approx(3.0)
    assert autodiff(Forward, guarded, Duplicated(1.5, 1.0)) == pytest.approx(3.0)
