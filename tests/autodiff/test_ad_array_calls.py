"""Calls of functions that return arrays, differentiated from Python in both modes: reverse
mode inlines them (passes/autodiff/inline_array_calls.py), forward mode keeps them as calls.
Every derivative is checked against its analytic form and central finite differences."""
import numpy as np
import pytest

import adjit
from adjit import Active, Const, Duplicated, Forward, Reverse, autodiff


@adjit.jit
def doubled(x):
    return x * 2.0


@adjit.jit
def sum_doubled(x):
    y = doubled(x)
    return adjit.sum(y)


@adjit.jit
def wave(x, a: float):
    return adjit.sin(x) * a


@adjit.jit
def wave_plus(x, a: float):
    w = wave(x, a)            # a call inside a callee that is itself inlined
    return w + x * x


@adjit.jit
def chain_loss(x, a: float):
    u = wave_plus(x, a)
    return adjit.sum(u * u)


@adjit.jit
def step(y, a: float):
    return adjit.sin(y) * a + y


@adjit.jit
def looped_loss(x, a: float, n: int):
    y = x
    for _ in range(n):        # the call's array is loop-carried
        y = step(y, a)
    return adjit.sum(y * y)


def chain_value(x, a):
    return np.sum((np.sin(x) * a + x * x) ** 2)


def chain_grad(x, a):
    u = np.sin(x) * a + x * x
    return 2 * u * (np.cos(x) * a + 2 * x), np.sum(2 * u * np.sin(x))


def looped_value(x, a, n):
    y = x.copy()
    for _ in range(n):
        y = np.sin(y) * a + y
    return np.sum(y * y)


def looped_grad(x, a, n):
    ys = [x.copy()]
    for _ in range(n):
        ys.append(np.sin(ys[-1]) * a + ys[-1])
    gy, ga = 2 * ys[-1], 0.0
    for y in reversed(ys[:-1]):
        ga += np.sum(gy * np.sin(y))
        gy = gy * (np.cos(y) * a + 1)
    return gy, ga


def fd_array(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        hi, lo = x.copy(), x.copy()
        hi[i] += eps
        lo[i] -= eps
        g[i] = (f(hi) - f(lo)) / (2 * eps)
    return g


def fd_scalar(f, a, eps=1e-6):
    return (f(a + eps) - f(a - eps)) / (2 * eps)


X = np.random.default_rng(7).standard_normal(9)


def test_reverse_through_a_helper_returning_an_array():
    dx = np.zeros_like(X)
    autodiff(Reverse, sum_doubled, Duplicated(X.copy(), dx))
    np.testing.assert_allclose(dx, 2.0, rtol=1e-14)
    np.testing.assert_allclose(dx, fd_array(sum_doubled, X), rtol=1e-7)


def test_forward_through_a_helper_returning_an_array():
    tx = np.random.default_rng(8).standard_normal(X.size)
    t = autodiff(Forward, sum_doubled, Duplicated(X.copy(), tx))
    assert t == pytest.approx(2.0 * np.sum(tx), rel=1e-12)


@pytest.mark.parametrize("a", [0.6, -1.4])
def test_reverse_two_level_chain(a):
    dx = np.zeros_like(X)
    _, da = autodiff(Reverse, chain_loss, Duplicated(X.copy(), dx), Active(a))
    ex, ea = chain_grad(X, a)
    np.testing.assert_allclose(dx, ex, rtol=1e-12)
    assert da == pytest.approx(ea, rel=1e-12)
    np.testing.assert_allclose(dx, fd_array(lambda x: chain_loss(x, a), X), rtol=1e-6)
    assert da == pytest.approx(fd_scalar(lambda s: chain_loss(X, s), a), rel=1e-6)
    assert chain_loss(X, a) == pytest.approx(chain_value(X, a), rel=1e-12)


def test_forward_two_level_chain():
    a, ta = 0.6, 0.3
    tx = np.random.default_rng(9).standard_normal(X.size)
    t = autodiff(Forward, chain_loss, Duplicated(X.copy(), tx), Duplicated(a, ta))
    ex, ea = chain_grad(X, a)
    assert t == pytest.approx(np.dot(ex, tx) + ea * ta, rel=1e-12)


@pytest.mark.parametrize("n", [0, 1, 4])
def test_reverse_call_in_a_loop(n):
    a = 0.8
    dx = np.zeros_like(X)
    _, da, dn = autodiff(Reverse, looped_loss, Duplicated(X.copy(), dx), Active(a), Const(n))
    ex, ea = looped_grad(X, a, n)
    np.testing.assert_allclose(dx, ex, rtol=1e-12)
    assert da == pytest.approx(ea, rel=1e-12, abs=1e-14)
    assert dn is None
    np.testing.assert_allclose(dx, fd_array(lambda x: looped_loss(x, a, n), X), rtol=1e-6)
    assert da == pytest.approx(fd_scalar(lambda s: looped_loss(X, s, n), a), rel=1e-6,
                               abs=1e-8)
    assert looped_loss(X, a, n) == pytest.approx(looped_value(X, a, n), rel=1e-12)


def test_forward_call_in_a_loop():
    a, ta, n = 0.8, -0.5, 3
    tx = np.random.default_rng(10).standard_normal(X.size)
    t = autodiff(Forward, looped_loss, Duplicated(X.copy(), tx), Duplicated(a, ta), Const(n))
    ex, ea = looped_grad(X, a, n)
    assert t == pytest.approx(np.dot(ex, tx) + ea * ta, rel=1e-12)
