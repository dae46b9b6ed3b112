"""x @ w, np.matmul and np.dot of 1-D, 2-D and 3-D arrays in @jit code (issue 15, item 4):
NumPy's shapes, values and dtypes (f32, f64, int64; batches broadcast; empty, odd and
non-square sizes; strided inputs), through the BLAS and through gemm.cpp's own loop nest;
the inner- and batch-dimension checks; the derivatives in forward mode (dC = dA B + A dB)
and reverse mode (dA = dC B^T, dB = A^T dC, summed over a broadcast batch) against those
formulas and finite differences, batched tangents, an operand overwritten after the
product, products in a loop, and a two-layer MLP against hand-written backpropagation."""
from __future__ import annotations

import contextlib
import ctypes

import numpy as np
import pytest

import adjit
from adjit.runtime.extension import BLAS_LIBRARY, library

# (a's shape, b's shape): every rank pair, NumPy's batch broadcasting, empty dimensions
# (n, m or k of 0), odd and non-square sizes.
SHAPES = [((4, 3), (3, 5)), ((3,), (3, 5)), ((4, 3), (3,)), ((3,), (3,)),
          ((2, 4, 3), (2, 3, 5)), ((2, 4, 3), (3, 5)), ((4, 3), (2, 3, 5)),
          ((1, 4, 3), (3, 3, 5)), ((3, 4, 3), (1, 3, 5)), ((3,), (2, 3, 5)), ((2, 4, 3), (3,)),
          ((0, 3), (3, 5)), ((4, 3), (3, 0)), ((4, 0), (0, 5)), ((0,), (0,)),
          ((2, 0, 3), (3, 5)), ((0, 4, 3), (0, 3, 2)), ((37, 61), (61, 19)), ((1, 1), (1, 1))]


@contextlib.contextmanager
def loop_nest():
    """Products through gemm.cpp's loop nest, not the BLAS."""
    was = library.adj_gemm_use_blas(ctypes.c_int64(0))
    try:
        yield
    finally:
        library.adj_gemm_use_blas(ctypes.c_int64(was))


@adjit.jit
def mm(a, b):
    return a @ b


@adjit.jit
def spellings(a, b):
    return np.matmul(a, b), np.dot(a, b)


def _random(shape, dtype, rng):
    return (rng.standard_normal(shape) * 4).astype(dtype)


def _tol(dtype, k):
    return {np.float32: 1e-5 * max(1, k) ** 0.5, np.float64: 1e-13 * max(1, k)}.get(dtype, 0)


def test_numpy_s_openblas_is_found():
    # The wheels this project tests with bundle it; without it products would still be
    # right (the loop nest) but slow, which the benchmark, not this test, would show.
    assert BLAS_LIBRARY is not None and "openblas" in BLAS_LIBRARY


@pytest.mark.parametrize("blas", [True, False], ids=["blas", "loops"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("sa,sb", SHAPES)
def test_values_shapes_and_dtypes_are_numpy_s(sa, sb, dtype, blas):
    rng = np.random.default_rng(0)
    a, b = _random(sa, dtype, rng), _random(sb, dtype, rng)
    with contextlib.nullcontext() if blas else loop_nest():
        got = mm(a, b)
        by_name = spellings(a, b) if a.ndim < 3 and b.ndim < 3 else ()
    want = a @ b
    assert np.shape(got) == want.shape and np.asarray(got).dtype == want.dtype
    tol = _tol(dtype, sa[-1]) * 10
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    for g in by_name:
        assert np.shape(g) == want.shape and np.asarray(g).dtype == want.dtype
        np.testing.assert_allclose(g, np.dot(a, b), rtol=tol, atol=tol)


@pytest.mark.parametrize("da,db", [(np.float32, np.float64), (np.float32, np.int64),
                                   (np.int64, np.float64)])
def test_mixed_dtypes_promote_as_numpy_does(da, db):
    rng = np.random.default_rng(1)
    a, b = _random((5, 4), da, rng), _random((4, 3), db, rng)
    got, want = mm(a, b), a @ b
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("blas", [True, False], ids=["blas", "loops"])
def test_strided_inputs_and_views(blas):
    """Fortran-order, transposed, reversed and stepped inputs (gemm.cpp: column-major
    operands go to the BLAS transposed, others are copied), and views made in the code."""
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((7, 6)), rng.standard_normal((6, 5))
    big = rng.standard_normal((14, 12))

    @adjit.jit
    def in_code(x, y):
        return x.T @ y[::-1, :], x[1:, ::2] @ y[::3, 1:]

    with contextlib.nullcontext() if blas else loop_nest():
        for x, y in [(np.asfortranarray(a), b), (a, np.asfortranarray(b)),
                     (b.T, a.T), (big[::2, ::2], b), (a[::-1, ::-1], b[::-1])]:
            np.testing.assert_allclose(mm(x, y), x @ y, rtol=1e-13, atol=1e-13)
        got = in_code(a, a)
        want = (a.T @ a[::-1, :], a[1:, ::2] @ a[::3, 1:])
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-13)


def test_float32_at_a_large_size():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((513, 300)).astype(np.float32)
    b = rng.standard_normal((300, 257)).astype(np.float32)
    got = mm(a, b)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, a.astype(np.float64) @ b.astype(np.float64),
                               rtol=1e-4, atol=1e-4)


def test_dimension_checks_and_refusals():
    with pytest.raises(ValueError, match="inner dimensions differ"):
        mm(np.ones((2, 3)), np.ones((2, 3)))
    with pytest.raises(ValueError, match="inner dimensions differ"):
        mm(np.ones((2, 2, 3)), np.ones(4))
    with pytest.raises(ValueError, match="batch dimensions differ"):
        mm(np.ones((2, 2, 3)), np.ones((3, 3, 2)))

    @adjit.jit
    def four_d(a, b):
        return a @ b

    with pytest.raises(adjit.CompilationError, match="1-D, 2-D or 3-D arrays"):
        four_d(np.ones((1, 2, 2, 2)), np.ones((2, 2)))


def test_a_mismatch_names_the_user_s_line():
    @adjit.jit
    def product(a, b):
        c = a * 2.0
        return c @ b

    with pytest.raises(ValueError) as info:
        product(np.ones((2, 3)), np.ones((4, 3)))
    assert "return c @ b" in str(info.value) or "test_matmul.py" in str(info.value)


# ---- derivatives -------------------------------------------------------------------------
def _reduce_to(g, shape):
    """A broadcast operand's adjoint: summed over the batch it was broadcast along."""
    while g.ndim > len(shape):
        g = g.sum(axis=0)
    return g.sum(axis=0, keepdims=True) if g.shape != shape else g


def _analytic_vjp(a, b, ct):
    """dA = ct @ B^T, dB = A^T @ ct, with NumPy's 1-D conventions (a vector is a row on the
    left, a column on the right) and broadcast batches summed."""
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    c2 = np.asarray(ct)
    if b.ndim == 1:
        c2 = c2[..., None]
    if a.ndim == 1:
        c2 = c2[..., None, :]
    da = c2 @ np.swapaxes(b2, -1, -2)
    db = np.swapaxes(a2, -1, -2) @ c2
    da = _reduce_to(da, a2.shape).reshape(a.shape)
    db = _reduce_to(db, b2.shape).reshape(b.shape)
    return da, db


DIFF_SHAPES = [((4, 3), (3, 5)), ((3,), (3, 5)), ((4, 3), (3,)), ((3,), (3,)),
               ((2, 4, 3), (2, 3, 5)), ((2, 4, 3), (3, 5)), ((4, 3), (2, 3, 5)),
               ((1, 4, 3), (3, 3, 5)), ((3,), (2, 3, 5)), ((0, 3), (3, 2)), ((9, 17), (17, 6))]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("sa,sb", DIFF_SHAPES)
def test_forward_and_reverse_derivatives_are_the_two_products(sa, sb, dtype):
    rng = np.random.default_rng(4)
    a, b = _random(sa, dtype, rng), _random(sb, dtype, rng)
    ta, tb = _random(sa, dtype, rng), _random(sb, dtype, rng)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    primal, tangent = adjit.jvp(mm, (a, b), (ta, tb))
    np.testing.assert_allclose(primal, a @ b, rtol=tol, atol=tol)
    np.testing.assert_allclose(tangent, ta @ b + a @ tb, rtol=tol * 10, atol=tol * 10)
    ct = _random(np.shape(a @ b), dtype, rng)
    _, pullback = adjit.vjp(mm, a, b)
    ga, gb = pullback(ct)
    wa, wb = _analytic_vjp(a.astype(np.float64), b.astype(np.float64), ct)
    np.testing.assert_allclose(ga, wa, rtol=tol * 10, atol=tol * 10)
    np.testing.assert_allclose(gb, wb, rtol=tol * 10, atol=tol * 10)


@adjit.jit
def weighted(a, b, w):
    return np.sum(w * (a @ b))


@pytest.mark.parametrize("sa,sb", [((4, 3), (3, 5)), ((2, 4, 3), (3, 5)), ((3,), (2, 3, 5))])
def test_gradients_against_finite_differences(sa, sb):
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    w = rng.standard_normal(np.shape(a @ b))
    ga, gb = adjit.grad(weighted, (0, 1))(a, b, w)
    for x, g, k in ((a, ga, 0), (b, gb, 1)):
        for flat in rng.choice(x.size, 3, replace=False):
            e = np.zeros_like(x)
            e.flat[flat] = 1e-6
            args = [a, b, w]
            args[k] = x + e
            up = weighted(*args)
            args[k] = x - e
            fd = (up - weighted(*args)) / 2e-6
            assert g.flat[flat] == pytest.approx(fd, rel=1e-6, abs=1e-8)


@pytest.mark.parametrize("width", [2, 3])
def test_batched_tangents_each_lane(width):
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((3, 5))
    tas = tuple(rng.standard_normal(a.shape) for _ in range(width))
    tbs = tuple(rng.standard_normal(b.shape) for _ in range(width))

    @adjit.jit
    def into(a, b, out):
        out[...] = a @ b

    lanes = tuple(np.zeros((4, 5)) for _ in range(width))
    adjit.autodiff(adjit.Forward, into, adjit.BatchDuplicated(a, tas),
                   adjit.BatchDuplicated(b, tbs),
                   adjit.BatchDuplicated(np.zeros((4, 5)), lanes))
    for k in range(width):
        np.testing.assert_allclose(lanes[k], tas[k] @ b + a @ tbs[k], rtol=1e-12)
    # a constant operand's lanes: A @ dB only
    lanes = tuple(np.zeros((4, 5)) for _ in range(width))
    adjit.autodiff(adjit.Forward, into, a, adjit.BatchDuplicated(b, tbs),
                   adjit.BatchDuplicated(np.zeros((4, 5)), lanes))
    for k in range(width):
        np.testing.assert_allclose(lanes[k], a @ tbs[k], rtol=1e-12)


@adjit.jit
def overwrites(a, b):
    c = a @ b
    a[...] = 0.0            # after the product: its reverse needs the old a (taped)
    b[...] = 7.0
    return np.sum(c * c)


def test_an_operand_overwritten_after_the_product():
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((3, 5))
    c = a @ b
    ga, gb = np.zeros_like(a), np.zeros_like(b)
    adjit.autodiff(adjit.Reverse, overwrites, adjit.Duplicated(a.copy(), ga),
                   adjit.Duplicated(b.copy(), gb))
    np.testing.assert_allclose(ga, 2 * c @ b.T, rtol=1e-12)
    np.testing.assert_allclose(gb, a.T @ (2 * c), rtol=1e-12)


@adjit.jit
def layers(h, w, steps):
    for _ in range(steps):
        h = np.tanh(h @ w)
    return np.sum(h)


def test_products_in_a_loop():
    rng = np.random.default_rng(8)
    h0, w = rng.standard_normal((5, 4)), rng.standard_normal((4, 4)) * 0.5
    gh, gw = adjit.grad(layers, (0, 1))(h0, w, 3)
    hs = [h0]
    for _ in range(3):
        hs.append(np.tanh(hs[-1] @ w))
    d, want_w = np.ones_like(h0), np.zeros_like(w)
    for k in range(3, 0, -1):
        z = d * (1 - hs[k] ** 2)
        want_w += hs[k - 1].T @ z
        d = z @ w.T
    np.testing.assert_allclose(gw, want_w, rtol=1e-12)
    np.testing.assert_allclose(gh, d, rtol=1e-12)


@adjit.jit
def mlp(x, w1, w2):
    h = np.tanh(x @ w1)
    return np.sum((h @ w2) ** 2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_an_mlp_written_with_matmul_differentiates(dtype):
    rng = np.random.default_rng(1)
    x, w1, w2 = (rng.standard_normal(s).astype(dtype) for s in ((8, 3), (3, 6), (6, 2)))
    g1, g2 = adjit.grad(mlp, (1, 2))(x, w1, w2)
    h = np.tanh(x @ w1)
    out = 2 * (h @ w2)
    tol = 1e-5 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(g2, h.T @ out, rtol=tol, atol=tol)
    np.testing.assert_allclose(g1, x.T @ ((out @ w2.T) * (1 - h ** 2)), rtol=tol, atol=tol)
    if dtype == np.float64:
        e = np.zeros_like(w1)
        e[1, 2] = 1e-6
        fd = (mlp(x, w1 + e, w2) - mlp(x, w1 - e, w2)) / 2e-6
        assert g1[1, 2] == pytest.approx(fd, rel=1e-6)
