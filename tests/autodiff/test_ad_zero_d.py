"""Derivatives with 0-d arrays (issue 19, item 16): Duplicated 0-d arrays and their 0-d
shadows in @jit functions and kernel launches, forward and reverse, jvp/vjp of functions
taking and returning them; each against the analytic derivative and central differences."""
from __future__ import annotations

import numpy as np
import pytest

import adjit
from adjit import Const, Duplicated, Forward, Reverse, autodiff

EPS = 1e-6


@adjit.jit
def loss(w0, y):
    # w0 broadcast in an element-wise expression, read with w0[()], reduced on its own
    return adjit.sum(w0 * y * y) + w0[()] * w0[()] + adjit.sum(adjit.sin(w0))


def loss_grad(w, y):
    return np.sum(y * y) + 2 * w + np.cos(w), 2 * w * y


Y = np.linspace(-1.0, 2.0, 37)


def fd0(f, w, *rest):
    return (f(np.array(w + EPS), *rest) - f(np.array(w - EPS), *rest)) / (2 * EPS)


@pytest.mark.parametrize("w", [1.5, -0.25])
def test_jit_reverse_and_forward(w):
    dw_want, dy_want = loss_grad(w, Y)
    w0, dw0, dy = np.array(w), np.zeros(()), np.zeros_like(Y)
    autodiff(Reverse, loss, Duplicated(w0, dw0), Duplicated(Y, dy))
    assert dw0.shape == () and dw0[()] == pytest.approx(dw_want, rel=1e-13)
    np.testing.assert_allclose(dy, dy_want, rtol=1e-13)
    assert dw0[()] == pytest.approx(fd0(loss, w, Y), rel=1e-6)
    tangent = autodiff(Forward, loss, Duplicated(w0, np.array(1.0)), Const(Y))
    assert tangent == pytest.approx(dw_want, rel=1e-13)
    assert adjit.grad(loss)(w0, Y) == pytest.approx(dw_want, rel=1e-13)


@adjit.jit
def square0(x0):
    out = adjit.zeros_like(x0)
    out[()] = 3.0 * x0[()] * x0[()]
    return out


def test_jvp_and_vjp_of_0d_in_and_out():
    x0 = np.array(2.0)
    primal, tangent = adjit.jvp(square0, (x0,), (np.array(0.5),))
    assert primal.shape == () and primal[()] == 12.0
    assert tangent.shape == () and tangent[()] == pytest.approx(6.0 * 2.0 * 0.5)
    primal, pullback = adjit.vjp(square0, x0)
    (ct,) = pullback(np.array(2.0))
    assert ct.shape == () and ct[()] == pytest.approx(6.0 * 2.0 * 2.0)


@adjit.kernel
def weighted(w0, y, out, total0):
    i = adjit.index()
    out[i] = w0[()] * y[i] * y[i]
    adjit.atomic_add(total0, (), w0[()] * y[i])


def kernel_loss(w, y):
    out, total0 = np.zeros_like(y), np.zeros(())
    weighted(np.array(w), y, out, total0, ndrange=len(y))
    return out.sum() + 3.0 * total0[()]


def test_kernel_reverse_and_forward():
    w, n = 0.75, len(Y)
    # sum_i w y_i^2 + 3 w sum_i y_i: d/dw = sum y^2 + 3 sum y; d/dy_i = 2 w y_i + 3 w
    dw_want, dy_want = np.sum(Y * Y) + 3 * np.sum(Y), 2 * w * Y + 3 * w
    dw0, dy = np.zeros(()), np.zeros(n)
    autodiff(Reverse, weighted, Duplicated(np.array(w), dw0), Duplicated(Y, dy),
             Duplicated(np.zeros(n), np.ones(n)), Duplicated(np.zeros(()), np.array(3.0)),
             ndrange=n)
    assert dw0[()] == pytest.approx(dw_want, rel=1e-12)
    np.testing.assert_allclose(dy, dy_want, rtol=1e-12)
    assert dw0[()] == pytest.approx((kernel_loss(w + EPS, Y) - kernel_loss(w - EPS, Y))
                                    / (2 * EPS), rel=1e-6)
    dout, dtotal0 = np.zeros(n), np.zeros(())
    autodiff(Forward, weighted, Duplicated(np.array(w), np.array(1.0)), Const(Y),
             Duplicated(np.zeros(n), dout), Duplicated(np.zeros(()), dtotal0), ndrange=n)
    assert dout.sum() + 3.0 * dtotal0[()] == pytest.approx(dw_want, rel=1e-12)
