"""The derivative of max/min where an operand is NaN (issue 19, item 9): defined, no crash,
and the documented rule: the derivative goes to the operand whose value is returned: the
NaN one (the first if both are), the second on a tie (NumPy returns it), and for Python's
builtin max/min of scalars the one Python returns. Elsewhere it is checked against the
analytic derivative and central differences, forward and reverse."""
from __future__ import annotations

import math

import numpy as np
import pytest

import adjit
from adjit import Active, Const, Duplicated, Forward, Reverse, autodiff

NAN = float("nan")


@adjit.jit
def numpy_extrema(a: float, b: float):
    return adjit.max(a, b) * 2.0 + adjit.minimum(a, b) * 3.0


@adjit.jit
def python_extrema(a: float, b: float):
    return max(a, b) * 2.0 + min(a, b) * 3.0


def grads(f, a, b):
    rev = autodiff(Reverse, f, Active(a), Active(b))
    fwd = (autodiff(Forward, f, Duplicated(a, 1.0), Const(b)),
           autodiff(Forward, f, Const(a), Duplicated(b, 1.0)))
    assert rev == fwd, (rev, fwd)
    return tuple(float(g) for g in rev)


@pytest.mark.parametrize("a, b, want", [
    (NAN, 1.0, (5.0, 0.0)),      # the result is a's NaN: a gets max's 2 and min's 3
    (1.0, NAN, (0.0, 5.0)),      # the same in the other order
    (NAN, NAN, (5.0, 0.0)),      # both NaN: the first
    (1.5, 1.5, (0.0, 5.0)),      # a tie: b, which NumPy returns
    (2.0, -1.0, (2.0, 3.0)),
    (-1.0, 2.0, (3.0, 2.0)),
])
def test_numpy_max_min_derivative(a, b, want):
    assert grads(numpy_extrema, a, b) == want
    value = numpy_extrema(a, b)
    assert math.isnan(value) == (math.isnan(a) or math.isnan(b))


@pytest.mark.parametrize("a, b, want", [
    (NAN, 1.0, (5.0, 0.0)),      # Python returns a (nan) for both max and min
    (1.0, NAN, (5.0, 0.0)),      # Python returns a (1.0): the NaN is dropped
    (1.5, 1.5, (5.0, 0.0)),      # a tie: Python returns the first
    (2.0, -1.0, (2.0, 3.0)),
])
def test_python_max_min_derivative(a, b, want):
    assert grads(python_extrema, a, b) == want
    got, expect = python_extrema(a, b), python_extrema.__wrapped__(a, b)
    assert got == expect or math.isnan(got) and math.isnan(expect)


@pytest.mark.parametrize("f", [numpy_extrema, python_extrema])
@pytest.mark.parametrize("a, b", [(0.7, -1.3), (-2.0, 0.5), (1.25, 3.0)])
def test_regular_points_match_finite_differences(f, a, b):
    eps = 1e-6
    da, db = grads(f, a, b)
    assert da == pytest.approx((f(a + eps, b) - f(a - eps, b)) / (2 * eps), rel=1e-6)
    assert db == pytest.approx((f(a, b + eps) - f(a, b - eps)) / (2 * eps), rel=1e-6)


@adjit.jit
def reduced(x):
    return adjit.max(x) * 2.0 + adjit.min(x * x) * 3.0 + max(x) * 0.5


@pytest.mark.parametrize("n, pos", [(9, 4), (37, 36), (4096 + 37, 4100), (4096 + 37, 0)])
def test_reduction_derivative_at_nan_goes_to_the_nan(n, pos):
    x = np.linspace(-3.0, 2.0, n)
    x[pos] = NAN
    dx = np.zeros(n)
    autodiff(Reverse, reduced, Duplicated(x, dx))
    # every reduction returns the NaN: all of the seed lands on it (min(x*x): 3 * 2x = NaN)
    assert np.isnan(dx[pos])
    assert np.all(np.delete(dx, pos) == 0.0)
    tangent = autodiff(Forward, reduced, Duplicated(x, np.ones(n)))
    assert math.isnan(tangent)


def test_reduction_derivative_without_nan():
    n = 4096 + 37
    x = np.random.default_rng(5).uniform(-3, 2, n)
    dx = np.zeros(n)
    autodiff(Reverse, reduced, Duplicated(x, dx))
    want = np.zeros(n)
    want[np.argmax(x)] += 2.5
    k = np.argmin(x * x)
    want[k] += 3.0 * 2 * x[k]
    np.testing.assert_allclose(dx, want, rtol=1e-13)
    v = np.random.default_rng(6).uniform(-1, 1, n)
    assert autodiff(Forward, reduced, Duplicated(x, v)) == pytest.approx(np.dot(want, v))


@adjit.kernel
def clipped(x, lo, out):
    i = adjit.index()
    out[i] = adjit.max(x[i], lo[i]) * x[i]


def test_kernel_derivative_at_nan():
    x = np.array([1.0, NAN, 0.5, -2.0, 3.0])
    lo = np.array([0.0, 0.0, NAN, 1.0, 3.0])
    dx, dlo, out = np.zeros(5), np.zeros(5), np.zeros(5)
    autodiff(Reverse, clipped, Duplicated(x, dx), Duplicated(lo, dlo),
             Duplicated(out, np.ones(5)), ndrange=5)
    # out = max(x, lo) * x: where the max returns x, d/dx = 2x; where lo, d/dx = lo, d/dlo = x
    np.testing.assert_array_equal(dx[[0, 3, 4]], [2.0, 1.0, 3.0])
    np.testing.assert_array_equal(dlo[[0, 3, 4]], [0.0, -2.0, 3.0])
    assert np.isnan(dx[1]) and dlo[1] == 0.0       # x NaN: the max is x's NaN
    assert np.isnan(dx[2]) and dlo[2] == 0.5       # lo NaN: the max is lo's NaN
