"""adjit.jvp and adjit.vjp of functions returning float arrays (JAX's meanings): each
derivative against its analytic form and central finite differences, in f32 and f64, for 1-D,
2-D and 3-D results; tangents and cotangents of the wrong shape or dtype refused by name; and
the scalar-result behaviour as before."""
import math

import numpy as np
import pytest

import adjit
from adjit import Const, Duplicated, Forward, ForwardWithPrimal, Reverse, autodiff

DTYPES = [adjit.f32, adjit.f64]


# ---- the functions -----------------------------------------------------------------------
@adjit.jit
def sin_scale(x, a):
    return adjit.sin(x) * a


@adjit.jit
def passthrough(x):
    return x


def matvec_loops(dt):
    """W @ x with explicit loops, the result of dtype `dt`."""
    @adjit.jit
    def matvec(W, x):
        n = W.shape[0]
        out = adjit.zeros(n, dtype=dt)
        for i in range(n):
            s = out[i]
            for j in range(x.shape[0]):
                s += W[i, j] * x[j]
            out[i] = s
        return out
    return matvec


def matvec_dot(dt):
    """W @ x with adjit.dot row by row (the row buffer is overwritten each iteration)."""
    @adjit.jit
    def matvec(W, x):
        n = W.shape[0]
        out = adjit.zeros(n, dtype=dt)
        row = adjit.empty_like(x)
        for i in range(n):
            for j in range(x.shape[0]):
                row[j] = W[i, j]
            out[i] = adjit.dot(row, x)
        return out
    return matvec


def tanh_layer(dt):
    """tanh(W @ x + b), through a call of another @jit function returning an array."""
    matvec = matvec_dot(dt)

    @adjit.jit
    def layer(W, x, b):
        return adjit.tanh(matvec(W, x) + b)
    return layer


def batched_layer(dt):
    """tanh(X @ W + b) for a batch X (rows): a 2-D result."""
    @adjit.jit
    def layer(X, W, b):
        out = adjit.empty((X.shape[0], W.shape[1]), dtype=dt)
        for i in range(X.shape[0]):
            for k in range(W.shape[1]):
                s = b[k]
                for j in range(X.shape[1]):
                    s += X[i, j] * W[j, k]
                out[i, k] = adjit.tanh(s)
        return out
    return layer


# ---- helpers -----------------------------------------------------------------------------
def rand(rng, shape, dt):
    return rng.standard_normal(shape).astype(dt.np_dtype) if shape else float(
        rng.standard_normal())


def tolerance(dt):
    """(rtol, atol, finite-difference step) for results of dtype `dt`."""
    return (1e-9, 1e-9, 1e-6) if dt == adjit.f64 else (3e-3, 3e-4, 1e-2)


def shifted(args, direction, h):
    return [a + h * d for a, d in zip(args, direction)]


def central_difference(f, args, direction, h):
    """(f(args + h d) - f(args - h d)) / 2h, in f64."""
    def at(s):
        return np.asarray(f(*[v.astype(a.dtype) if isinstance(a, np.ndarray) else v
                              for v, a in zip(shifted(args, direction, s), args)]),
                          dtype=np.float64)
    return (at(h) - at(-h)) / (2 * h)


def check_jvp(f, args, tangents, want, dt):
    rtol, atol, h = tolerance(dt)
    primal, tangent = adjit.jvp(f, args, tangents)
    np.testing.assert_allclose(primal, f(*args), rtol=1e-6)
    assert tangent.shape == primal.shape and tangent.dtype == primal.dtype
    np.testing.assert_allclose(tangent, want, rtol=rtol, atol=atol)
    np.testing.assert_allclose(tangent, central_difference(f, args, tangents, h),
                               rtol=rtol * 10, atol=atol * 10)


def check_vjp(f, args, ct, want, dt, seed=1):
    """pullback(ct) against `want` and, per argument, <vjp_k, d> against the central
    difference of <ct, f> along d."""
    rtol, atol, h = tolerance(dt)
    primal, pullback = adjit.vjp(f, *args)
    np.testing.assert_allclose(primal, f(*args), rtol=1e-6)
    got = pullback(ct)
    assert isinstance(got, tuple) and len(got) == len(args)
    rng = np.random.default_rng(seed)
    for k, (g, w, a) in enumerate(zip(got, want, args)):
        if isinstance(a, np.ndarray):
            assert g.shape == a.shape and g.dtype == a.dtype, k
        else:
            assert np.isscalar(g), k
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
        direction = [rand(rng, np.shape(a), dt) if j == k else 0 * a
                     for j, a in enumerate(args)]
        fd = float(np.sum(central_difference(f, args, direction, h) * ct))
        assert float(np.sum(np.asarray(g, np.float64) * direction[k])) == pytest.approx(
            fd, rel=rtol * 10, abs=atol * 10)
    return got


# ---- element-wise, any rank --------------------------------------------------------------
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4)])
def test_sin_scale(dt, shape):
    rng = np.random.default_rng(0)
    scalar = dt.np_dtype.type      # an f32 scalar keeps the result f32
    x, a = rand(rng, shape, dt), scalar(1.7)
    tx, ta = rand(rng, shape, dt), scalar(0.3)
    check_jvp(sin_scale, (x, a), (tx, ta), np.cos(x) * a * tx + np.sin(x) * ta, dt)
    ct = rand(rng, shape, dt)
    check_vjp(sin_scale, (x, a), ct, (np.cos(x) * a * ct, np.sum(np.sin(x) * ct)), dt)


def test_result_that_is_an_argument():
    x, ct = np.linspace(0, 1, 6), np.arange(6.0)
    primal, tangent = adjit.jvp(passthrough, (x,), (ct,))
    np.testing.assert_array_equal(tangent, ct)
    (gx,) = adjit.vjp(passthrough, x)[1](ct)
    np.testing.assert_array_equal(gx, ct)


# ---- W @ x and layers ---------------------------------------------------------------------
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("make", [matvec_loops, matvec_dot])
def test_matvec(dt, make):
    f = make(dt)
    rng = np.random.default_rng(2)
    W, x = rand(rng, (4, 6), dt), rand(rng, (6,), dt)
    dW, dx = rand(rng, (4, 6), dt), rand(rng, (6,), dt)
    check_jvp(f, (W, x), (dW, dx), dW @ x + W @ dx, dt)
    ct = rand(rng, (4,), dt)
    check_vjp(f, (W, x), ct, (np.outer(ct, x), W.T @ ct), dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_tanh_layer(dt):
    f = tanh_layer(dt)
    rng = np.random.default_rng(3)
    W, x, b = rand(rng, (5, 3), dt), rand(rng, (3,), dt), rand(rng, (5,), dt)
    tW, tx, tb = rand(rng, (5, 3), dt), rand(rng, (3,), dt), rand(rng, (5,), dt)
    slope = 1 - np.tanh(W @ x + b) ** 2
    check_jvp(f, (W, x, b), (tW, tx, tb), slope * (tW @ x + W @ tx + tb), dt)
    ct = rand(rng, (5,), dt)
    g = slope * ct
    check_vjp(f, (W, x, b), ct, (np.outer(g, x), W.T @ g, g), dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_batched_layer_2d_result(dt):
    rng = np.random.default_rng(4)
    X, W, b = rand(rng, (4, 3), dt), rand(rng, (3, 2), dt), rand(rng, (2,), dt)
    tX, tW, tb = rand(rng, (4, 3), dt), rand(rng, (3, 2), dt), rand(rng, (2,), dt)
    slope = 1 - np.tanh(X @ W + b) ** 2
    f = batched_layer(dt)
    check_jvp(f, (X, W, b), (tX, tW, tb), slope * (tX @ W + X @ tW + tb), dt)
    ct = rand(rng, (4, 2), dt)
    G = slope * ct
    check_vjp(f, (X, W, b), ct, (G @ W.T, X.T @ G, G.sum(axis=0)), dt)


def test_jacobian_by_rows_equals_jacobian_by_columns():
    f = tanh_layer(adjit.f64)
    rng = np.random.default_rng(5)
    W, x, b = rand(rng, (3, 4), adjit.f64), rand(rng, (4,), adjit.f64), np.zeros(3)
    _, pullback = adjit.vjp(f, W, x, b)
    rows = np.array([pullback(e)[1] for e in np.eye(3)])
    columns = np.array([adjit.jvp(f, (W, x, b), (0 * W, e, 0 * b))[1] for e in np.eye(4)]).T
    np.testing.assert_allclose(rows, columns, rtol=1e-12)


def test_pullback_is_reusable_and_leaves_the_primals_alone():
    f = matvec_loops(adjit.f64)
    W, x = np.arange(6.0).reshape(2, 3), np.array([1.0, -2.0, 0.5])
    W0, x0 = W.copy(), x.copy()
    _, pullback = adjit.vjp(f, W, x)
    first = pullback(np.array([1.0, 2.0]))
    second = pullback(np.array([1.0, 2.0]))
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)       # fresh cotangents, not accumulated
    np.testing.assert_array_equal(W, W0)
    np.testing.assert_array_equal(x, x0)


def test_autodiff_forward_returns_the_tangent_array():
    x = np.linspace(0, 1, 5)
    tangent = autodiff(Forward, sin_scale, Duplicated(x, np.ones(5)), Const(2.0))
    np.testing.assert_allclose(tangent, 2 * np.cos(x), rtol=1e-14)
    tangent, primal = autodiff(ForwardWithPrimal, sin_scale, Duplicated(x, np.ones(5)), 2.0)
    np.testing.assert_allclose(primal, 2 * np.sin(x), rtol=1e-14)


# ---- scalar results: as before -----------------------------------------------------------
@adjit.jit
def poly(a: float, b: float):
    return a * a * b + adjit.sin(a) / b


@adjit.jit
def weighted_loss(w: float, x, y):
    return adjit.sum((w * x - y) ** 2)


def test_scalar_results_unchanged():
    a, b = 0.7, 1.3
    da, db = 2 * a * b + math.cos(a) / b, a * a - math.sin(a) / b ** 2
    primal, tangent = adjit.jvp(poly, (a, b), (1.0, 0.5))
    assert primal == pytest.approx(poly(a, b)) and tangent == pytest.approx(da + 0.5 * db)
    primal, pullback = adjit.vjp(poly, a, b)
    assert pullback(2.0) == pytest.approx((2 * da, 2 * db), rel=1e-12)
    assert pullback(np.float64(2.0)) == pytest.approx((2 * da, 2 * db), rel=1e-12)
    x, y = np.linspace(0, 1, 10), np.linspace(1, 2, 10)
    _, pullback = adjit.vjp(weighted_loss, 0.5, x, y)
    gw, gx, gy = pullback(3.0)
    r = 0.5 * x - y
    assert gw == pytest.approx(3 * np.sum(2 * r * x), rel=1e-12)
    np.testing.assert_allclose(gx, 3 * 2 * r * 0.5, rtol=1e-12)
    np.testing.assert_allclose(gy, -3 * 2 * r, rtol=1e-12)


# ---- what is refused -----------------------------------------------------------------------
def test_bad_cotangents_name_the_expected_shape():
    f = matvec_loops(adjit.f64)
    _, pullback = adjit.vjp(f, np.ones((3, 2)), np.ones(2))
    with pytest.raises(ValueError, match=r"cotangent has shape \(4,\); expected shape \(3,\)"):
        pullback(np.ones(4))
    with pytest.raises(ValueError, match=r"expected shape \(3,\)"):
        pullback(np.ones((3, 1)))
    with pytest.raises(TypeError, match=r"dtype float32; expected shape \(3,\) and dtype "
                                        r"float64"):
        pullback(np.ones(3, np.float32))
    with pytest.raises(TypeError, match=r"must be an array of shape \(3,\)"):
        pullback(1.0)
    with pytest.raises(TypeError, match=r"must be an array of shape \(3,\)"):
        pullback([1.0, 2.0, 3.0])
    _, pullback = adjit.vjp(poly, 0.7, 1.3)
    with pytest.raises(TypeError, match="cotangent must be a real scalar"):
        pullback(np.ones(3))


def test_bad_tangents_name_the_expected_shape():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(ValueError, match=r"tangent 0 has shape \(3,\); expected shape "
                                         r"\(2, 3\) and dtype float32"):
        adjit.jvp(sin_scale, (x, 1.0), (np.ones(3, np.float32), 0.0))
    with pytest.raises(TypeError, match=r"tangent 0 has dtype float64; expected shape "
                                        r"\(2, 3\) and dtype float32"):
        adjit.jvp(sin_scale, (x, 1.0), (np.ones((2, 3)), 0.0))
    with pytest.raises(TypeError, match="tangent 1 must be a real scalar"):
        adjit.jvp(sin_scale, (x, 1.0), (np.ones_like(x), np.ones(2)))
    # A nested list is converted to the primal's dtype, as before.
    _, tangent = adjit.jvp(sin_scale, (x, 1.0), ([[1.0] * 3] * 2, 0.0))
    np.testing.assert_allclose(tangent, np.cos(x), rtol=1e-6)


@adjit.jit
def pair(x):
    return x * 2.0, x * 3.0


@adjit.jit
def count(x):
    n = adjit.zeros(x.shape[0], dtype=adjit.i64)
    return n


def test_unsupported_results_refused():
    x = np.ones(3)
    with pytest.raises(TypeError, match="adjit.vjp"):
        autodiff(Reverse, sin_scale, Duplicated(x, np.zeros(3)), Const(1.0))
    with pytest.raises(TypeError, match="one float scalar, float array or struct"):
        adjit.vjp(count, x)
    with pytest.raises(TypeError, match="for a function returning a tuple or tree, adjit.vjp"):
        autodiff(Reverse, pair, Duplicated(x, np.zeros(3)))
    # Several results are a tuple (a pytree): tangent and cotangent tuples of them
    (y2, y3), (t2, t3) = adjit.jvp(pair, (x,), (x,))
    np.testing.assert_allclose(t3, 3.0 * x)
    _, pullback = adjit.vjp(pair, x)
    np.testing.assert_allclose(pullback((np.ones(3), 2.0 * np.ones(3)))[0], 8.0 * x)
