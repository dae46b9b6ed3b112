"""Derivatives of @jit array code with named temporaries (compiler/lazy.py): the named form
`r = a*x + b - y; sum(r*r)` differentiates to the same fused loops as the one-expression
form, and its gradients match float64 references and finite differences."""
from __future__ import annotations

import re

import numpy as np
import pytest

import adjit
from adjit import Active, Const, Duplicated, Forward, Reverse, ReverseWithPrimal, autodiff


@adjit.jit
def named_loss(a, b, x, y):
    r = a * x + b - y
    return adjit.sum(r * r)


@adjit.jit
def one_expression_loss(a, b, x, y):
    return adjit.sum((a * x + b - y) ** 2)


def _g1(n, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    return np.float32(1.5), np.float32(-0.5), x, y


def test_g1_float32_gradients_within_1e5_of_float64():
    # The G1: 4M float32 elements, gradients with respect to a, b and x.
    a, b, x, y = _g1(4 * 1024 * 1024)
    dx = np.zeros_like(x)
    (da, db, _, _), loss = autodiff(ReverseWithPrimal, named_loss, Active(a), Active(b),
                                    Duplicated(x, dx), Const(y))
    r = np.float64(a) * x.astype(np.float64) + np.float64(b) - y
    assert abs(loss - np.sum(r * r)) <= 1e-5 * np.sum(r * r)
    assert abs(da - np.sum(2 * r * x)) <= 1e-5 * abs(np.sum(2 * r * x))
    assert abs(db - np.sum(2 * r)) <= 1e-5 * abs(np.sum(2 * r))
    np.testing.assert_allclose(dx, 2 * np.float64(a) * r, rtol=1e-5, atol=1e-5 * np.abs(r).max())


def _derivative_text(f) -> str:
    """The differentiated module the last autodiff of `f` compiled, without locations and
    with the function's own name taken out (so two functions' modules can be compared)."""
    text = list(f.__dict__["_derivatives"].values())[-1].adj_text
    text = re.sub(r"loc\([^)]*\)", "", text)
    return text.replace(f.__name__, "F")


def test_named_form_differentiates_to_the_one_expression_form():
    a, b, x, y = _g1(1000)
    out = []
    for f in (named_loss, one_expression_loss):
        dx = np.zeros_like(x)
        grads, loss = autodiff(ReverseWithPrimal, f, Active(a), Active(b), Duplicated(x, dx),
                               Const(y))
        out.append((grads[0], grads[1], dx, loss))
    for got, want in zip(out[0], out[1]):
        np.testing.assert_array_equal(got, want)
    named, one = _derivative_text(named_loss), _derivative_text(one_expression_loss)
    assert named == one
    # one fused loop forward, one reverse; no array holds r (only f64 partial sums)
    assert len(re.findall(r"scf\.parallel", named)) == 2
    assert not re.search(r"memref\.alloc\([^\n]*memref<\?xf32>", named)


def _fd_grad(f, args, k, eps=1e-6):
    """Central finite differences of scalar f with respect to array args[k]."""
    x = args[k]
    g = np.zeros_like(x)
    for i in range(x.size):
        hi = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        lo = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        hi[k][i] += eps
        lo[k][i] -= eps
        g[i] = (f(*hi) - f(*lo)) / (2 * eps)
    return g


@adjit.jit
def chain_with_math(x, y):
    e = adjit.exp(0.3 * x)
    s = e * y + adjit.sin(x)
    t = s * e                     # e is read by two statements: stored (exp), s fused
    return adjit.sum(t) + adjit.sum(s * s)


def _chain_with_math_np(x, y):
    e = np.exp(0.3 * x)
    s = e * y + np.sin(x)
    return np.sum(s * e) + np.sum(s * s)


@adjit.jit
def branch_bound(x, c):
    if c > 0:
        r = x * x
    else:
        r = x - 2.0
    return adjit.sum(r * adjit.cos(r))


@adjit.jit
def loop_carried(x, n):
    r = x * 0.5
    for k in range(n):
        r = r * x + 1.0
    return adjit.sum(r)


def test_gradients_against_finite_differences_and_analytic_forms():
    x = np.linspace(-1.0, 1.2, 9)
    y = np.linspace(0.5, -0.7, 9)
    dx, dy = np.zeros_like(x), np.zeros_like(y)
    autodiff(Reverse, chain_with_math, Duplicated(x, dx), Duplicated(y, dy))
    np.testing.assert_allclose(dx, _fd_grad(_chain_with_math_np, [x, y], 0), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(dy, _fd_grad(_chain_with_math_np, [x, y], 1), rtol=1e-6, atol=1e-8)
    # analytic: d/dy = e*(e + 2s)
    e = np.exp(0.3 * x)
    s = e * y + np.sin(x)
    np.testing.assert_allclose(dy, e * (e + 2 * s), rtol=1e-12)
    for c in (1, -1):
        d = np.zeros_like(x)
        autodiff(Reverse, branch_bound, Duplicated(x, d), Const(c))
        r = x * x if c > 0 else x - 2.0
        dr = np.cos(r) - r * np.sin(r)
        np.testing.assert_allclose(d, dr * (2 * x if c > 0 else 1.0), rtol=1e-12)
    d = np.zeros_like(x)
    autodiff(Reverse, loop_carried, Duplicated(x, d), Const(3))
    # r3 = ((0.5x*x + 1)*x + 1)*x + 1 = 0.5x^4 + x^2 + x + 1
    np.testing.assert_allclose(d, 2 * x ** 3 + 2 * x + 1, rtol=1e-12)


def test_forward_mode_of_the_named_form():
    a, b, x, y = (np.float64(1.5), np.float64(-0.5), np.linspace(-1, 1, 7), np.linspace(2, 0, 7))
    t = np.linspace(0.1, 0.7, 7)
    got = autodiff(Forward, named_loss, Const(a), Const(b), Duplicated(x, t), Const(y))
    r = a * x + b - y
    np.testing.assert_allclose(got, np.sum(2 * r * a * t), rtol=1e-12)


@adjit.jit
def write_after_bind(x, w):
    r = x * w
    w[0] = 0.0          # r keeps w's old values
    return adjit.sum(r * r) + adjit.sum(w)


def test_gradient_through_a_write_after_the_binding():
    x = np.linspace(-1.0, 1.0, 6)
    w0 = np.linspace(0.5, 2.0, 6)
    dx = np.zeros_like(x)
    w = w0.copy()
    (_, _), loss = autodiff(ReverseWithPrimal, write_after_bind, Duplicated(x, dx), Const(w))
    assert loss == pytest.approx(np.sum((x * w0) ** 2) + np.sum(w0[1:]), rel=1e-12)
    np.testing.assert_allclose(dx, 2 * x * w0 * w0, rtol=1e-12)
    assert w[0] == 0.0


@adjit.jit
def statement_chain(a, b, x, y):
    u = a * x
    v = u + b
    r = v - y
    return adjit.sum(r * r)


def test_a_chain_of_statements_and_a_reduction_is_one_loop_each_way():
    a, b, x, y = _g1(1000, seed=2)
    dx = np.zeros_like(x)
    (da, db, _, _), loss = autodiff(ReverseWithPrimal, statement_chain, Active(a), Active(b),
                                    Duplicated(x, dx), Const(y))
    text = _derivative_text(statement_chain)
    assert len(re.findall(r"scf\.parallel", text)) == 2
    assert not re.search(r"memref\.alloc\([^\n]*memref<\?xf32>", text)
    r = np.float64(a) * x + np.float64(b) - y
    assert abs(da - np.sum(2 * r * x)) <= 1e-5 * abs(np.sum(2 * r * x))
    assert abs(db - np.sum(2 * r)) <= 1e-5 * abs(np.sum(2 * r))
    np.testing.assert_allclose(dx, 2 * np.float64(a) * r, rtol=1e-5, atol=1e-6)
