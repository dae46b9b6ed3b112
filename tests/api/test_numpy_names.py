"""NumPy's spellings in compiled code (issue 15, item 3, the functions adjit has): np.sin,
np.sum, np.zeros, np.maximum, np.arctan2, ... compile as adjit's functions, with NumPy's
values and dtypes, and differentiate."""
from __future__ import annotations

import numpy as np
import pytest

import adjit


@adjit.jit
def numpy_code(x, y):
    z = np.sin(x) * np.exp(-x * x) + np.sqrt(np.abs(y)) + np.arctan2(x, y) + np.power(x, 2.0)
    w = np.maximum(z, 0.1) - np.minimum(x, y) + np.log1p(np.absolute(x)) + np.cbrt(y)
    total = np.sum(w) + np.max(x) + np.amin(y) + np.degrees(np.min(y))
    return total, np.zeros_like(x) + np.tanh(w) + np.floor(y) + np.radians(x)


def reference(x, y):
    z = np.sin(x) * np.exp(-x * x) + np.sqrt(np.abs(y)) + np.arctan2(x, y) + np.power(x, 2.0)
    w = np.maximum(z, 0.1) - np.minimum(x, y) + np.log1p(np.absolute(x)) + np.cbrt(y)
    total = np.sum(w) + np.max(x) + np.amin(y) + np.degrees(np.min(y))
    return total, np.zeros_like(x) + np.tanh(w) + np.floor(y) + np.radians(x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_numpy_names_compute_what_numpy_does(dtype):
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, 33).astype(dtype)
    y = rng.uniform(0.5, 2, 33).astype(dtype)
    total, arr = numpy_code(x, y)
    want_total, want_arr = reference(x, y)
    tol = 2e-5 if dtype == np.float32 else 1e-13
    assert total == pytest.approx(float(want_total), rel=tol)
    assert np.asarray(total).dtype == want_total.dtype
    np.testing.assert_allclose(arr, want_arr, rtol=tol, atol=tol)
    assert arr.dtype == want_arr.dtype


@adjit.jit
def loss(x):
    return np.sum(np.sin(x) * np.exp(x))


def test_and_they_differentiate():
    x = np.linspace(-1.0, 1.0, 11)
    np.testing.assert_allclose(adjit.grad(loss)(x), np.exp(x) * (np.cos(x) + np.sin(x)),
                               rtol=1e-14)
    _, t = adjit.jvp(loss, (x,), (np.ones_like(x),))
    assert t == pytest.approx(float(np.sum(np.exp(x) * (np.cos(x) + np.sin(x)))), rel=1e-13)


def test_creation_with_numpy_names():
    @adjit.jit
    def make(n: int):
        a = np.zeros(n) + np.ones(n) * 2.0 + np.arange(n)
        b = np.full(n, 0.5)
        return np.dot(a, b), np.copy(a)

    d, a = make(5)
    np.testing.assert_allclose(a, 2.0 + np.arange(5))
    assert d == pytest.approx(float(np.dot(2.0 + np.arange(5), np.full(5, 0.5))))


@adjit.jit
def selected(x):
    y = np.where(x > 0.0, np.sin(x), x * x)
    z = np.clip(y, -0.2, 0.5)       # (Python floats: weak, as in NumPy; float32 stays)
    return np.mean(z) + z.mean() * 0.0, z


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_where_clip_and_mean(dtype):
    x = np.linspace(-1.5, 1.5, 12).astype(dtype)
    m, z = selected(x)
    want = np.clip(np.where(x > 0, np.sin(x), x * x), -0.2, 0.5).astype(dtype)
    tol = 1e-6 if dtype == np.float32 else 1e-15
    np.testing.assert_allclose(z, want, rtol=tol, atol=tol)
    assert z.dtype == dtype
    assert m == pytest.approx(float(np.mean(want)), rel=tol)
    assert np.asarray(m).dtype == np.mean(want).dtype


def test_where_clip_and_mean_differentiate():
    @adjit.jit
    def f(x):
        return np.mean(np.clip(np.where(x > 0.0, np.sin(x), x * x), -0.2, 0.5))

    x = np.array([-1.0, -0.3, 0.2, 0.4, 1.0, 1.4])
    inner = np.where(x > 0, np.sin(x), x * x)
    slope = np.where(x > 0, np.cos(x), 2 * x) * ((inner > -0.2) & (inner < 0.5))
    np.testing.assert_allclose(adjit.grad(f)(x), slope / x.size, rtol=1e-14, atol=1e-16)


def test_mean_of_integers_is_float64():
    @adjit.jit
    def avg(n: int):
        return np.mean(np.arange(n))

    assert avg(5) == 2.0 and isinstance(avg(5), (float, np.float64))


@adjit.jit
def along_axes(x):
    return (np.sum(x, axis=0), np.sum(x, 1), x.sum(axis=-1, keepdims=True), np.max(x, 0),
            np.mean(x, axis=0), x.mean(1), np.min(x, axis=1, keepdims=True),
            np.sum(x, keepdims=True), adjit.max(x, axis=-2))


def along_axes_numpy(x):
    return (np.sum(x, axis=0), np.sum(x, 1), x.sum(axis=-1, keepdims=True), np.max(x, 0),
            np.mean(x, axis=0), x.mean(1), np.min(x, axis=1, keepdims=True),
            np.sum(x, keepdims=True), np.max(x, axis=-2))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 5), (1, 7)])
def test_reductions_along_an_axis(dtype, shape):
    x = (np.random.default_rng(3).standard_normal(shape) * 10).astype(dtype)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for got, want in zip(along_axes(x), along_axes_numpy(x)):
        assert np.shape(got) == np.shape(want)
        assert np.asarray(got).dtype == np.asarray(want).dtype
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_a_mean_along_an_axis_differentiates():
    @adjit.jit
    def loss(w, x):
        h = np.tanh(x * w)
        return np.sum(np.mean(h, axis=0) ** 2)

    rng = np.random.default_rng(1)
    w, x = rng.standard_normal((5, 3)), rng.standard_normal((5, 3))
    h = np.tanh(x * w)
    expected = (2 * h.mean(0) / 5)[None, :] * (1 - h ** 2) * x
    np.testing.assert_allclose(adjit.grad(loss)(w, x), expected, rtol=1e-13, atol=1e-15)


def test_bad_axes_are_refused():
    @adjit.jit
    def out_of_range(x):
        return np.sum(x, axis=2)

    @adjit.jit
    def not_constant(x, k: int):
        return np.sum(x, axis=k)

    with pytest.raises(adjit.CompilationError, match="axis 2 is out of bounds"):
        out_of_range(np.ones((2, 2)))
    with pytest.raises(adjit.CompilationError, match="axis must be a constant integer"):
        not_constant(np.ones((2, 2)), 0)


@adjit.jit
def transposed(x, y):
    a = x.T * 2.0 + y
    b = np.transpose(x) + x.transpose()
    return a, b, np.sum(x.T, axis=0), x.T.T + 0.0


def test_transpose_lazily_and_its_derivative():
    x = np.arange(6.0).reshape(2, 3)
    y = np.ones((3, 2))
    a, b, s, t = transposed(x, y)
    np.testing.assert_array_equal(a, x.T * 2 + y)
    np.testing.assert_array_equal(b, 2 * x.T)
    np.testing.assert_array_equal(s, x.T.sum(0))
    np.testing.assert_array_equal(t, x)

    @adjit.jit
    def three(x):
        return x.T + 0.0

    x3 = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(three(x3), x3.T)

    @adjit.jit
    def loss(w, v):
        return np.sum((w.T * v) ** 2)

    rng = np.random.default_rng(0)
    w, v = rng.standard_normal((3, 2)), rng.standard_normal((2, 3))
    np.testing.assert_allclose(adjit.grad(loss)(w, v), (2 * (w.T * v) * v).T, rtol=1e-14)
