"""Derivatives through a variable bound on one branch of an `if` whose other branch
continues, breaks or returns (issue 8, item 11), in @jit functions, device functions and
kernels, forward and reverse: against the analytic derivative and central differences."""
from __future__ import annotations

import numpy as np
import pytest

import adjit
from adjit import Active, Const, Duplicated, Forward, Reverse, autodiff


@adjit.jit
def loss(x, c: float):
    s = 0.0
    for i in range(x.shape[0]):
        if x[i] > 0.0:
            if x[i] > 2.0:
                continue
            t4 = x[i] * x[i] * c
        else:
            t4 = 3.0 * x[i] + c * c
        s += t4
    return s


def loss_grad(x, c):
    keep = (x > 0) & (x <= 2)
    dx = np.where(keep, 2 * x * c, np.where(x <= 0, 3.0, 0.0))
    dc = np.sum(np.where(keep, x * x, 0.0)) + np.sum(np.where(x <= 0, 2 * c, 0.0))
    return dx, dc


@adjit.func
def piece(a: float):
    if a < 0.0:
        return -a
    else:
        y = a * a * a
    return y + a


@adjit.jit
def piece_of(a: float):
    return piece(a)


@adjit.kernel
def per_item(x, out):
    i = adjit.index()
    s = 0.0
    for j in range(x.shape[0]):
        if x[j] > 0.0:
            if x[j] > 2.0:
                continue
            t4 = x[j] * x[j] * x[i]
        else:
            t4 = 3.0 * x[j]
        s += t4
    out[i] = s


# Points away from the branch thresholds (0 and 2), so central differences stay on one side.
X = np.array([1.0, -2.0, 3.0, 0.5, 2.5, -0.25, 1.75, -3.0, 0.125])
EPS = 1e-6


def fd_array(f, x, *rest):
    g = np.zeros_like(x)
    for k in range(len(x)):
        hi, lo = x.copy(), x.copy()
        hi[k] += EPS
        lo[k] -= EPS
        g[k] = (f(hi, *rest) - f(lo, *rest)) / (2 * EPS)
    return g


def test_jit_reverse_and_forward():
    c = 0.75
    want_dx, want_dc = loss_grad(X, c)
    dx = np.zeros_like(X)
    _, dc = autodiff(Reverse, loss, Duplicated(X, dx), Active(c))
    np.testing.assert_allclose(dx, want_dx, rtol=1e-13)
    assert dc == pytest.approx(want_dc, rel=1e-13)
    np.testing.assert_allclose(dx, fd_array(loss, X, c), rtol=1e-6, atol=1e-8)
    assert dc == pytest.approx((loss(X, c + EPS) - loss(X, c - EPS)) / (2 * EPS), rel=1e-6)
    v = np.linspace(-1.0, 1.0, len(X))
    tangent = autodiff(Forward, loss, Duplicated(X, v), Const(c))
    assert tangent == pytest.approx(np.dot(want_dx, v), rel=1e-12)


@pytest.mark.parametrize("a", [-1.5, 0.5, 2.0])
def test_device_function_with_return_on_one_branch(a):
    want = -1.0 if a < 0 else 3 * a * a + 1.0
    (da,) = autodiff(Reverse, piece_of, Active(a))
    ta = autodiff(Forward, piece_of, Duplicated(a, 1.0))
    fd = (piece_of(a + EPS) - piece_of(a - EPS)) / (2 * EPS)
    for got in (da, ta):
        assert got == pytest.approx(want, rel=1e-13)
        assert got == pytest.approx(fd, rel=1e-6)


def test_kernel_reverse_and_forward():
    n = len(X)
    keep = (X > 0) & (X <= 2)
    # out[i] = x[i] * sum_keep x_j^2 + 3 * sum_{x_j <= 0} x_j; d(sum out)/dx_k:
    want = np.sum(np.where(keep, X * X, 0.0)) + np.where(keep, 2 * X * np.sum(X), 0.0) \
        + np.where(X <= 0, 3.0 * n, 0.0)

    def total(x):
        out = np.zeros(n)
        per_item(x, out, ndrange=n)
        return out.sum()

    dx, out = np.zeros(n), np.zeros(n)
    autodiff(Reverse, per_item, Duplicated(X, dx), Duplicated(out, np.ones(n)), ndrange=n)
    np.testing.assert_allclose(dx, want, rtol=1e-13)
    np.testing.assert_allclose(dx, fd_array(total, X), rtol=1e-6, atol=1e-7)
    v = np.linspace(0.5, -1.0, n)
    dout = np.zeros(n)
    autodiff(Forward, per_item, Duplicated(X, v), Duplicated(np.zeros(n), dout), ndrange=n)
    assert dout.sum() == pytest.approx(np.dot(want, v), rel=1e-12)
