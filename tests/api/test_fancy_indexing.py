"""Indexing with integer arrays, scatter and sort in @jit code (compiler/fancy_indexing.py,
compiler/sorting.py): values and dtypes against NumPy, derivatives (reverse, forward, second
order) against JAX in float64 and finite differences. Each function is compiled once per
argument types; the cases are inputs."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import adjit
from adjit import CompilationError

jax.config.update("jax_enable_x64", True)
RNG = np.random.default_rng(33)


def _same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_array_equal(got, want)


def _central(f, x, h=1e-6):
    g = np.zeros_like(x)
    for k in range(x.size):
        up, down = x.copy(), x.copy()
        up.flat[k] += h
        down.flat[k] -= h
        g.flat[k] = (f(up) - f(down)) / (2 * h)
    return g


# ---- reads ------------------------------------------------------------------------------------

@adjit.jit
def reads(x, i1, i2, along):
    return (x[i1], x[i1, i2], x[:, i2], x[i1, 1], x[[0, -1]], x[..., i2], x[1:, i2],
            np.take(x, i1), np.take(x, i2, axis=1), np.take(x, i1, axis=0, mode="wrap"),
            np.take(x, i2, 1, mode="clip"), np.take_along_axis(x, along, axis=1),
            np.take_along_axis(x, along[:1], 0))


def reads_np(x, i1, i2, along):
    return (x[i1], x[i1, i2], x[:, i2], x[i1, 1], x[[0, -1]], x[..., i2], x[1:, i2],
            np.take(x, i1), np.take(x, i2, axis=1), np.take(x, i1, axis=0, mode="wrap"),
            np.take(x, i2, 1, mode="clip"), np.take_along_axis(x, along, axis=1),
            np.take_along_axis(x, along[:1], 0))


@pytest.mark.parametrize("dtype, itype", [(np.float64, np.int64), (np.float32, np.int32),
                                          (np.int32, np.int64)])
def test_reads_are_numpys(dtype, itype):
    x = (RNG.standard_normal((4, 3)) * 10).astype(dtype)
    i1 = np.array([[0, 3], [3, 1]], dtype=itype)    # 2-D, duplicates
    i2 = np.array([2, 0], dtype=itype)
    along = np.array([[2, 0, 0], [1, 1, 2], [0, 2, 1], [2, 2, 2]], dtype=itype)
    i1[1, 1] = -3                                     # negative: from the end
    i2[0] = -1
    for got, want in zip(reads(x, i1, i2, along), reads_np(x, i1, i2, along)):
        _same(got, want)


@adjit.jit
def taken(x, i, j):
    return np.take(x, i, axis=0, mode="wrap"), np.take(x, j, axis=1, mode="clip")


def test_wrap_and_clip_take_any_index():
    x = RNG.standard_normal((4, 3))
    i, j = np.array([[7, -9], [4, -1]]), np.array([5, -4, 1])
    got = taken(x, i, j)
    _same(got[0], np.take(x, i, axis=0, mode="wrap"))
    _same(got[1], np.take(x, j, axis=1, mode="clip"))
    with pytest.raises(IndexError, match="empty axis"):
        taken(np.zeros((0, 3)), i, j)


@adjit.jit
def gather_1d(x, idx):
    return x[idx]


def test_empty_and_single_indices():
    x = np.arange(5.0)
    for idx in (np.zeros(0, dtype=np.int64), np.array([4]), np.zeros((2, 0), dtype=np.int64),
                np.array([[-5]])):
        _same(gather_1d(x, idx), x[idx])
    _same(gather_1d(np.zeros(0), np.zeros(0, dtype=np.int64)), np.zeros(0))
    _same(gather_1d(np.array([7.5]), np.array([0, 0, -1])), np.array([7.5, 7.5, 7.5]))


@pytest.mark.parametrize("idx", [[5], [-6], [0, 9, 1]])
def test_an_index_outside_raises_numpys_index_error(idx):
    x = np.arange(5.0)
    with pytest.raises(IndexError):
        x[np.array(idx)]
    with pytest.raises(IndexError, match="index out of bounds for axis 0"):
        gather_1d(x, np.array(idx))
    with pytest.raises(IndexError):
        gather_1d(np.zeros(0), np.array([0]))


# ---- derivatives of reads ---------------------------------------------------------------------

@adjit.jit
def gather_loss(x, i1, i2, w):
    a = x[i1, i2]
    b = x[:, i2]
    return (np.sum(a * a * w) + np.sum(np.sin(b)) + np.sum(np.take(x, i1) ** 3)
            + np.sum(np.take_along_axis(x, np.argsort(x, axis=1), axis=1)[:, 0] ** 2))


def gather_loss_jax(x, i1, i2, w):
    a = x[i1, i2]
    b = x[:, i2]
    return (jnp.sum(a * a * w) + jnp.sum(jnp.sin(b)) + jnp.sum(jnp.take(x, i1) ** 3)
            + jnp.sum(jnp.take_along_axis(x, jnp.argsort(x, axis=1), axis=1)[:, 0] ** 2))


def test_gather_derivatives_in_every_mode():
    x = RNG.standard_normal((4, 3))
    i1 = np.array([0, 3, 3, -1])          # duplicates: their adjoints add up
    i2 = np.array([1, 1, -3, 2])
    w = RNG.standard_normal(4)
    args = (x, i1, i2, w)
    assert gather_loss(*args) == pytest.approx(float(gather_loss_jax(*args)), rel=1e-14)
    g = adjit.grad(gather_loss)(*args)
    np.testing.assert_allclose(g, jax.grad(gather_loss_jax)(*args), rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(g, _central(lambda v: gather_loss(v, i1, i2, w), x),
                               rtol=1e-6, atol=1e-8)
    t = RNG.standard_normal(x.shape)
    fwd = adjit.autodiff(adjit.Forward, gather_loss, adjit.Duplicated(x, t), adjit.Const(i1),
                         adjit.Const(i2), adjit.Const(w))
    want = jax.jvp(lambda v: gather_loss_jax(v, i1, i2, w), (x,), (t,))[1]
    assert fwd == pytest.approx(float(want), rel=1e-13)
    h = adjit.hessian(gather_loss)(*args)
    np.testing.assert_allclose(h, jax.hessian(gather_loss_jax)(*args), rtol=1e-12, atol=1e-13)


# ---- writes -----------------------------------------------------------------------------------

@adjit.jit
def scatters(x, idx, v):
    y = x * 1.0
    y[idx] = v * 2.0
    z = x * 1.0
    z[idx] += v
    w = x * 1.0
    np.add.at(w, idx, v * v)
    return y, z, w


def scatters_np(x, idx, v):
    y = x * 1.0
    y[idx] = v * 2.0
    z = x * 1.0
    z[idx] += v
    w = x * 1.0
    np.add.at(w, idx, v * v)
    return y, z, w


@adjit.jit
def scatter_loss(x, idx, v):
    y, z, w = scatters(x, idx, v)
    return np.sum(y * np.arange(y.shape[0] * 1.0)) + np.sum(z * z) + np.sum(np.sin(w))


def scatter_loss_np(x, idx, v):
    y, z, w = scatters_np(x, idx, v)
    return np.sum(y * np.arange(y.shape[0] * 1.0)) + np.sum(z * z) + np.sum(np.sin(w))


def add_at_loss_jax(x, idx, v):
    return jnp.sum(jnp.sin(x.at[idx].add(v * v)))


@pytest.mark.parametrize("idx", [[1, 1, 3], [-1, 0, -1], [2, 2, 2]])
def test_writes_are_numpys_with_duplicates(idx):
    """Assignment keeps the last of duplicates, += does not accumulate them, add.at does."""
    x = RNG.standard_normal(5)
    v = RNG.standard_normal(3)
    idx = np.array(idx)
    for got, want in zip(scatters(x, idx, v), scatters_np(x, idx, v)):
        _same(got, want)
    gx, gv = adjit.grad(scatter_loss, argnums=(0, 2))(x, idx, v)
    np.testing.assert_allclose(gx, _central(lambda a: scatter_loss_np(a, idx, v), x),
                               rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gv, _central(lambda a: scatter_loss_np(x, idx, a), v),
                               rtol=1e-6, atol=1e-8)
    t = RNG.standard_normal(3)
    fwd = adjit.autodiff(adjit.Forward, scatter_loss, adjit.Const(x), adjit.Const(idx),
                         adjit.Duplicated(v, t))
    assert fwd == pytest.approx(float(gv @ t), rel=1e-12)


@adjit.jit
def add_at_loss(x, idx, v):
    w = x * 1.0
    np.add.at(w, idx, v * v)
    return np.sum(np.sin(w))


def test_add_at_against_jax_and_second_order():
    x, v = RNG.standard_normal(5), RNG.standard_normal(4)
    idx = np.array([4, 0, 4, -1])
    gx, gv = adjit.grad(add_at_loss, argnums=(0, 2))(x, idx, v)
    jx, jv = jax.grad(add_at_loss_jax, argnums=(0, 2))(x, idx, v)
    np.testing.assert_allclose(gx, jx, rtol=1e-13)
    np.testing.assert_allclose(gv, jv, rtol=1e-13)
    h = adjit.hessian(add_at_loss)(x, idx, v)
    np.testing.assert_allclose(h, jax.hessian(add_at_loss_jax)(x, idx, v), rtol=1e-12,
                               atol=1e-14)


@adjit.jit
def scatter_2d(x, rows, cols, v):
    y = x.copy()
    y[rows, cols] = v
    z = x.copy()
    z[:, cols] += 1.0
    w = x.copy()
    np.add.at(w, (rows, cols), v)
    return y, z, w


def test_writes_in_two_dimensions_and_float32():
    for dtype in (np.float64, np.float32):
        x = RNG.standard_normal((3, 4)).astype(dtype)
        rows, cols = np.array([0, 2, 0]), np.array([1, -1, 1])
        v = np.array([1.5, 2.5, 3.5], dtype=dtype)
        y, z, w = x.copy(), x.copy(), x.copy()
        y[rows, cols] = v
        z[:, cols] += 1.0
        np.add.at(w, (rows, cols), v)
        for got, want in zip(scatter_2d(x, rows, cols, v), (y, z, w)):
            _same(got, want)


def test_a_write_outside_raises_and_writes_nothing_outside():
    x, v = RNG.standard_normal(5), np.ones(2)
    with pytest.raises(IndexError):
        scatters(x, np.array([1, 5]), v)


# ---- sort -------------------------------------------------------------------------------------

@adjit.jit
def sorts(x):
    return (np.sort(x), np.argsort(x), np.sort(x, axis=0), np.argsort(x, axis=0),
            np.sort(x, axis=None), np.argsort(x, axis=None, kind="stable"), x.argsort())


def sorts_np(x):
    return (np.sort(x), np.argsort(x, kind="stable"), np.sort(x, axis=0),
            np.argsort(x, axis=0, kind="stable"), np.sort(x, axis=None),
            np.argsort(x, axis=None, kind="stable"), x.argsort(kind="stable"))


@pytest.mark.parametrize("x", [
    np.array([[3.0, 1.0, np.nan, 1.0, -2.0], [5.0, np.nan, 3.0, np.inf, 1.0]]),
    RNG.standard_normal((3, 70)).astype(np.float32),           # past a few merge passes
    RNG.integers(-3, 3, size=(4, 9)),                            # many ties
    RNG.integers(0, 2, size=(3, 7)).astype(bool),
    np.zeros((2, 0)), np.ones((0, 3)), np.array([[2.0]]),
], ids=["nan", "f32", "int-ties", "bool", "empty-rows", "no-rows", "one"])
def test_sort_and_argsort_are_numpys(x):
    for got, want in zip(sorts(x), sorts_np(x)):
        assert np.asarray(got).dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@adjit.jit
def sort_in_place(x):
    x.sort()


def test_the_sort_method_sorts_in_place():
    x = RNG.standard_normal((3, 5))
    want = np.sort(x)
    sort_in_place(x)
    _same(x, want)


@adjit.jit
def sort_loss(x, w):
    s = np.sort(x)
    return np.sum(s * w) + np.sum(np.sort(x, axis=0)[0] ** 2)


def sort_loss_jax(x, w):
    return jnp.sum(jnp.sort(x) * w) + jnp.sum(jnp.sort(x, axis=0)[0] ** 2)


def test_sort_derivatives_follow_the_permutation_ties_as_jax():
    x = RNG.standard_normal((3, 6))
    x[0, 4] = x[0, 1]                      # a tie: the stable order, as JAX's
    x[2, :] = 0.5
    w = RNG.standard_normal(6)
    g = adjit.grad(sort_loss)(x, w)
    np.testing.assert_allclose(g, jax.grad(sort_loss_jax)(x, w), rtol=1e-14)
    t = RNG.standard_normal(x.shape)
    fwd = adjit.autodiff(adjit.Forward, sort_loss, adjit.Duplicated(x, t), adjit.Const(w))
    assert fwd == pytest.approx(float(jax.jvp(lambda v: sort_loss_jax(v, w), (x,), (t,))[1]),
                                rel=1e-13)
    y = RNG.standard_normal((3, 6))        # no ties: finite differences too
    np.testing.assert_allclose(adjit.grad(sort_loss)(y, w),
                               _central(lambda v: sort_loss(v, w), y), rtol=1e-6, atol=1e-8)


# ---- refusals ---------------------------------------------------------------------------------

@adjit.jit
def masked(x, m):
    return x[m]


@adjit.jit
def float_index(x, f):
    return x[f]


@adjit.jit
def add_at_ints(x):
    np.add.at(x, [0, 0], 1.0)


@adjit.kernel
def kernel_gather(x, idx, out):
    i = adjit.index()
    out[i] = adjit.sum(x[idx])


@pytest.mark.parametrize("call, message", [
    (lambda: masked(np.ones(3), np.ones(3, dtype=bool)), "boolean array"),
    (lambda: float_index(np.ones(3), np.ones(2)), "must be of integer type"),
    (lambda: add_at_ints(np.ones(3)), "integer array"),
    (lambda: kernel_gather(np.ones(3), np.zeros(2, dtype=np.int64), np.zeros(2), ndrange=2),
     "only @adjit.jit functions"),
])
def test_what_is_refused_says_why(call, message):
    with pytest.raises(CompilationError, match=message):
        call()
