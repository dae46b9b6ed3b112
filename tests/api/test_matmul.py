"""x @ w, np.matmul, np.dot of 1-D and 2-D arrays in @jit code (issue 15, item 4, without a
BLAS yet): NumPy's shapes, values and dtypes, the inner-dimension check, and the derivative
of a two-layer MLP written with @ and np.tanh against hand-written backpropagation and
finite differences."""
from __future__ import annotations

import numpy as np
import pytest

import adjit


@adjit.jit
def products(x, w, v, u):
    return x @ w, np.matmul(v, w), x @ v, v @ v, np.dot(x, w), np.dot(u, x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_shapes_values_and_dtypes(dtype):
    rng = np.random.default_rng(0)
    x, w = (rng.standard_normal((4, 3)) * 4).astype(dtype), (rng.standard_normal((3, 5)) * 4).astype(dtype)
    v, u = (rng.standard_normal(3) * 4).astype(dtype), (rng.standard_normal(4) * 4).astype(dtype)
    got = products(x, w, v, u)
    want = (x @ w, v @ w, x @ v, v @ v, np.dot(x, w), np.dot(u, x))
    tol = 1e-5 if dtype == np.float32 else 1e-13
    for g, e in zip(got, want):
        assert np.shape(g) == np.shape(e)
        assert np.asarray(g).dtype == np.asarray(e).dtype
        np.testing.assert_allclose(g, e, rtol=tol, atol=tol)


def test_inner_dimensions_must_agree():
    @adjit.jit
    def mm(a, b):
        return a @ b

    with pytest.raises(ValueError, match="inner dimensions differ"):
        mm(np.ones((2, 3)), np.ones((2, 3)))

    @adjit.jit
    def batched(a, b):
        return a @ b

    with pytest.raises(adjit.CompilationError, match="1-D or 2-D arrays"):
        batched(np.ones((2, 2, 2)), np.ones((2, 2)))


@adjit.jit
def mlp(x, w1, w2):
    h = np.tanh(x @ w1)
    return np.sum((h @ w2) ** 2)


def test_an_mlp_written_with_matmul_differentiates():
    rng = np.random.default_rng(1)
    x, w1, w2 = rng.standard_normal((8, 3)), rng.standard_normal((3, 6)), rng.standard_normal((6, 2))
    g1, g2 = adjit.grad(mlp, (1, 2))(x, w1, w2)
    h = np.tanh(x @ w1)
    out = 2 * (h @ w2)
    np.testing.assert_allclose(g2, h.T @ out, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(g1, x.T @ ((out @ w2.T) * (1 - h ** 2)), rtol=1e-13, atol=1e-14)
    e = np.zeros_like(w1)
    e[1, 2] = 1e-6
    fd = (mlp(x, w1 + e, w2) - mlp(x, w1 - e, w2)) / 2e-6
    assert g1[1, 2] == pytest.approx(fd, rel=1e-6)
