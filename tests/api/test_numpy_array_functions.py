"""NumPy's array functions of issue 33 in @jit code: pad, roll, diff (its values:
test_numpy_functions.py), the arithmetic ufuncs by name (np.add, np.square, ...) and
x.astype, cumsum/cumprod,
var/std, logaddexp/logaddexp2, transpose(x, axes)/swapaxes/moveaxis, np.array/np.asarray of
computed values. Values and dtypes against NumPy (size-0 and size-1 dimensions, float32,
ints and bools), derivatives against JAX in float64 (reverse, forward and forward over
reverse) and central differences; cumprod's gradient where inputs are zero, std's at zero
variance, logaddexp at large and infinite arguments. One compiled function per family,
parametrised over inputs."""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import adjit

jax.config.update("jax_enable_x64", True)
RNG = np.random.default_rng(3333)


def _same(got, want, rtol=1e-13):
    assert np.shape(got) == np.shape(want), (np.shape(got), np.shape(want))
    assert np.asarray(got).dtype == np.asarray(want).dtype, (np.asarray(got).dtype,
                                                             np.asarray(want).dtype)
    if np.asarray(want).dtype == np.float32:
        rtol = max(rtol, 1e-5)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-300 if rtol < 1e-10 else 1e-6)


def _all_same(got, want, rtol=1e-13):
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        try:
            _same(g, w, rtol)
        except AssertionError as e:
            raise AssertionError(f"result {k}: {e}") from None


# ---- values and dtypes --------------------------------------------------------------------

def layout_reference(x):
    return (np.transpose(x, (1, 2, 0)), x.transpose(2, 0, 1), x.transpose((0, 2, 1)), x.T,
            np.transpose(x), np.swapaxes(x, 0, 2), np.moveaxis(x, 0, -1),
            np.moveaxis(x, (0, 1), (2, 0)), np.roll(x, 1), np.roll(x, -7, axis=1),
            np.roll(x, (1, -2), axis=(0, 2)), np.roll(x, (1, 2), axis=2),
            np.pad(x, 1), np.pad(x, (1, 2), constant_values=7),
            np.pad(x, 1, constant_values=((1, 2), (3, 4), (5, 6))))


@adjit.jit
def layout(x):
    return (np.transpose(x, (1, 2, 0)), x.transpose(2, 0, 1), x.transpose((0, 2, 1)), x.T,
            np.transpose(x), np.swapaxes(x, 0, 2), np.moveaxis(x, 0, -1),
            np.moveaxis(x, (0, 1), (2, 0)), np.roll(x, 1), np.roll(x, -7, axis=1),
            np.roll(x, (1, -2), axis=(0, 2)), np.roll(x, (1, 2), axis=2),
            np.pad(x, 1), np.pad(x, (1, 2), constant_values=7),
            np.pad(x, 1, constant_values=((1, 2), (3, 4), (5, 6))))


@pytest.mark.parametrize("shape", [(2, 3, 4), (1, 1, 1), (3, 0, 2), (1, 5, 1)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32])
def test_layout_functions_are_numpys(shape, dtype):
    x = (RNG.standard_normal(shape) * 10).astype(dtype)
    _all_same(layout(x), layout_reference(x))


def padded_reference(x, k: int):
    return tuple(np.pad(x, w, mode=m) for m in ("edge", "wrap", "reflect", "symmetric")
                 for w in (k, ((k, 0), (1, k + 2))))


@adjit.jit
def padded(x, k: int):
    return (np.pad(x, k, mode="edge"), np.pad(x, ((k, 0), (1, k + 2)), mode="edge"),
            np.pad(x, k, mode="wrap"), np.pad(x, ((k, 0), (1, k + 2)), mode="wrap"),
            np.pad(x, k, mode="reflect"), np.pad(x, ((k, 0), (1, k + 2)), mode="reflect"),
            np.pad(x, k, mode="symmetric"),
            np.pad(x, ((k, 0), (1, k + 2)), mode="symmetric"))


@pytest.mark.parametrize("shape,k", [((3, 4), 1), ((3, 4), 7), ((1, 2), 3), ((2, 1), 0)])
def test_pad_modes_are_numpys(shape, k):
    """Widths known at run time, larger than the array too (NumPy repeats the pattern)."""
    x = RNG.standard_normal(shape)
    _all_same(padded(x, k), padded_reference(x, k))


def test_pad_of_an_empty_axis_with_a_repeating_mode_raises():
    with pytest.raises(ValueError, match="empty axis"):
        padded(np.zeros((0, 3)), 1)


def scans_reference(x):
    return (np.cumsum(x), np.cumsum(x, axis=0), np.cumprod(x, axis=-1), x.cumsum(axis=1),
            x.cumprod(), np.cumsum(x, dtype=np.float32), np.cumprod(x, axis=0, dtype=np.float64))


@adjit.jit
def scans(x):
    return (np.cumsum(x), np.cumsum(x, axis=0), np.cumprod(x, axis=-1), x.cumsum(axis=1),
            x.cumprod(), np.cumsum(x, dtype=np.float32), np.cumprod(x, axis=0, dtype=np.float64))


@pytest.mark.parametrize("shape", [(4, 3), (1, 1), (0, 3), (3, 0)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32, np.int64, np.bool_])
def test_cumsum_cumprod_are_numpys(shape, dtype):
    """NumPy's dtypes: int32 and bool accumulate as int64, float32 as float32."""
    x = (RNG.uniform(0.5, 2.0, shape) * (3 if dtype != np.bool_ else 1)).astype(dtype)
    _all_same(scans(x), scans_reference(x), rtol=1e-12)


def statistics_reference(x):
    return (np.var(x), np.std(x), np.var(x, axis=0), np.std(x, axis=1, ddof=1),
            x.var(axis=-1, keepdims=True), x.std(keepdims=True), np.var(x, ddof=2),
            np.std(x, axis=0, dtype=np.float32))


@adjit.jit
def statistics(x):
    return (np.var(x), np.std(x), np.var(x, axis=0), np.std(x, axis=1, ddof=1),
            x.var(axis=-1, keepdims=True), x.std(keepdims=True), np.var(x, ddof=2),
            np.std(x, axis=0, dtype=np.float32))


@pytest.mark.parametrize("shape", [(5, 3), (1, 1), (2, 1)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32])
def test_var_std_are_numpys(shape, dtype):
    """ddof at or above the count gives inf or nan, as NumPy's (which warns)."""
    x = (RNG.standard_normal(shape) * 10).astype(dtype)
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)    # ("Degrees of freedom <= 0")
        want = statistics_reference(x)
    _all_same(statistics(x), want, rtol=1e-12)


@adjit.jit
def log_sums(x, y, a: float):
    return np.logaddexp(x, y), np.logaddexp2(x, y), np.logaddexp(x, a), np.logaddexp2(a, 2.0)


def test_logaddexp_is_numpys_at_large_and_infinite_arguments():
    inf, nan = np.inf, np.nan
    x = np.array([1000.0, -1000.0, -inf, inf, -inf, nan, 0.0, 5.0, 3.0, 1e308, -inf])
    y = np.array([1000.0, 1000.0, -inf, inf, 3.0, 1.0, 0.0, -700.0, 3.0, 1e308, inf])
    with np.errstate(invalid="ignore"):
        want = (np.logaddexp(x, y), np.logaddexp2(x, y), np.logaddexp(x, 0.5),
                np.logaddexp2(0.5, 2.0))
    _all_same(log_sums(x, y, 0.5), want)
    with np.errstate(invalid="ignore", over="ignore"):     # (1e308 is inf in float32)
        f32 = x.astype(np.float32), y.astype(np.float32)
        want32 = (np.logaddexp(*f32), np.logaddexp2(*f32), np.logaddexp(f32[0], 0.5),
                  np.logaddexp2(0.5, 2.0))
    _all_same(log_sums(*f32, 0.5), want32)


def literals_reference(a, b, v, w, c):
    return (np.array([a, b, a * b]), np.array([[a, b], [b, a]]), np.array([v, w]),
            np.array([1, 2]), np.array([a, 1], dtype=np.float32), np.asarray([v, w, v]),
            np.array(v), np.asarray(v), np.array([[v], [w]]), np.array([c, 1.0]), np.array([c, c]),
            np.array([True, False]), np.array([1, 2.5]), np.array([]))


@adjit.jit
def literals(a: float, b: float, v, w, c: adjit.f32):
    return (np.array([a, b, a * b]), np.array([[a, b], [b, a]]), np.array([v, w]),
            np.array([1, 2]), np.array([a, 1], dtype=np.float32), np.asarray([v, w, v]),
            np.array(v), np.asarray(v), np.array([[v], [w]]), np.array([c, 1.0]), np.array([c, c]),
            np.array([True, False]), np.array([1, 2.5]), np.array([]))


@pytest.mark.parametrize("shape", [(3,), (2, 2), (0,)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32])
def test_np_array_of_computed_values_is_numpys(shape, dtype):
    """NumPy's dtypes: the items' promotion, a Python number as its default type (an f32
    array beside a Python float in one list is float64)."""
    v, w = (RNG.standard_normal(shape) * 5).astype(dtype), np.ones(shape, dtype)
    _all_same(literals(2.0, 3.0, v, w, np.float32(1.5)),
              literals_reference(2.0, 3.0, v, w, np.float32(1.5)))


@adjit.jit
def stacked_sizes(v, w):
    return np.array([v, w])


def test_np_array_checks_the_shapes_of_its_arrays():
    with pytest.raises(ValueError, match="one shape"):
        stacked_sizes(np.ones(2), np.ones(3))


def ufuncs_reference(x, k, b, s):
    return (np.add(x, k), np.subtract(x, 1), np.multiply(k, k), np.divide(k, 2),
            np.true_divide(x, k), np.floor_divide(x, 0.7), np.remainder(k, 3), np.mod(x, -0.6),
            np.negative(k), np.positive(x), np.square(x), np.square(k), np.sign(x), np.sign(k),
            np.reciprocal(x), np.add(b, b), np.multiply(b, b), x.astype(np.float32),
            x.astype(np.int32), k.astype(np.float64), np.add(s, 1.0), b.astype(np.int64),
            np.divide(b, True))


@adjit.jit
def ufuncs(x, k, b, s: float):
    return (np.add(x, k), np.subtract(x, 1), np.multiply(k, k), np.divide(k, 2),
            np.true_divide(x, k), np.floor_divide(x, 0.7), np.remainder(k, 3), np.mod(x, -0.6),
            np.negative(k), np.positive(x), np.square(x), np.square(k), np.sign(x), np.sign(k),
            np.reciprocal(x), np.add(b, b), np.multiply(b, b), x.astype(np.float32),
            x.astype(np.int32), k.astype(np.float64), np.add(s, 1.0), b.astype(np.int64),
            np.divide(b, True))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_arithmetic_ufuncs_by_name_are_numpys(dtype):
    """np.add of bools is `or`, np.multiply `and` (not Python's int sums); a Python float
    beside an np.add is typed (np.float64), as NumPy's results are."""
    x = np.array([-1.5, 0.0, 2.25, np.nan, -0.0, 7.0], dtype)
    k = np.array([-3, 0, 2, 5, 1, -7], np.int32)
    b = np.array([True, False, True, False, True, True])
    with np.errstate(all="ignore"):
        want = ufuncs_reference(x, k, b, 0.5)
        got = ufuncs(x, k, b, 0.5)
    for j, (g, w) in enumerate(zip(got, want)):
        assert np.shape(g) == np.shape(w) and np.asarray(g).dtype == np.asarray(w).dtype, j
        np.testing.assert_allclose(g, w, rtol=1e-6, equal_nan=True, err_msg=str(j))


@adjit.jit
def bool_operators(b, k):
    return b + b, b * b, b + True, b * 2, b + k, np.True_ + b


def test_bool_array_operators_are_numpys():
    """+ and * of bool arrays are `or` and `and` in NumPy (not counts, as Python's bools)."""
    b, k = np.array([True, False, True]), np.array([1, 2, 3], np.int32)
    for j, (g, w) in enumerate(zip(bool_operators(b, k),
                                   (b + b, b * b, b + True, b * 2, b + k, np.True_ + b))):
        assert g.dtype == w.dtype and np.array_equal(g, w), j


@adjit.jit
def ufunc_loss(x):
    y = x.astype(np.float64)
    return np.sum(np.square(np.subtract(y, 1.0)) * np.reciprocal(np.add(y, 3.0))
                  + np.multiply(np.sign(y), np.divide(y, 2.0)) - np.negative(y))


def test_arithmetic_ufunc_derivatives_against_jax():
    x = RNG.uniform(-2.0, 2.0, 7)
    f = lambda y: jnp.sum(jnp.square(y - 1.0) / (y + 3.0) + jnp.sign(y) * y / 2.0 + y)  # noqa: E731
    assert ufunc_loss(x) == pytest.approx(float(f(x)), rel=1e-14)
    np.testing.assert_allclose(adjit.grad(ufunc_loss)(x), np.asarray(jax.grad(f)(x)),
                               rtol=1e-14)
    t = RNG.standard_normal(7)
    _, tangent = adjit.jvp(ufunc_loss, (x,), (t,))
    assert tangent == pytest.approx(float(jax.jvp(f, (x,), (t,))[1]), rel=1e-13)


# ---- derivatives ----------------------------------------------------------------------------

def loss_reference(xp, x):
    parts = (xp.pad(x, ((1, 2), (0, 1)), mode="reflect"), xp.pad(x, 1, mode="wrap"),
             xp.pad(x, (2, 1), constant_values=0.5), xp.pad(x, 1, mode="edge"),
             xp.pad(x, 2, mode="symmetric"), xp.roll(x, 2, axis=1) + xp.roll(x, -1),
             xp.transpose(x[None], (2, 0, 1)), xp.moveaxis(x[None], 0, 2),
             xp.swapaxes(x, 0, 1), xp.cumsum(x, axis=0), xp.cumprod(x, axis=1),
             xp.cumprod(x), xp.diff(x, axis=0), xp.diff(x, n=2), xp.var(x, axis=1, ddof=1),
             xp.std(x), xp.std(x, axis=0, keepdims=True), xp.logaddexp(x, x[::-1]),
             xp.logaddexp2(x, 1.0), xp.array([xp.sum(x), x[0, 0] * x[1, 1], xp.max(x)]),
             xp.array([x[0], x[1] * 2.0]))
    return sum(xp.sum(xp.sin(p * (k + 1))) for k, p in enumerate(parts))


@adjit.jit
def loss(x):
    parts = (np.pad(x, ((1, 2), (0, 1)), mode="reflect"), np.pad(x, 1, mode="wrap"),
             np.pad(x, (2, 1), constant_values=0.5), np.pad(x, 1, mode="edge"),
             np.pad(x, 2, mode="symmetric"), np.roll(x, 2, axis=1) + np.roll(x, -1),
             np.transpose(x[None], (2, 0, 1)), np.moveaxis(x[None], 0, 2),
             np.swapaxes(x, 0, 1), np.cumsum(x, axis=0), np.cumprod(x, axis=1),
             np.cumprod(x), np.diff(x, axis=0), np.diff(x, n=2), np.var(x, axis=1, ddof=1),
             np.std(x), np.std(x, axis=0, keepdims=True), np.logaddexp(x, x[::-1]),
             np.logaddexp2(x, 1.0), np.array([np.sum(x), x[0, 0] * x[1, 1], np.max(x)]),
             np.array([x[0], x[1] * 2.0]))
    return (np.sum(np.sin(parts[0] * 1)) + np.sum(np.sin(parts[1] * 2)) +
            np.sum(np.sin(parts[2] * 3)) + np.sum(np.sin(parts[3] * 4)) +
            np.sum(np.sin(parts[4] * 5)) + np.sum(np.sin(parts[5] * 6)) +
            np.sum(np.sin(parts[6] * 7)) + np.sum(np.sin(parts[7] * 8)) +
            np.sum(np.sin(parts[8] * 9)) + np.sum(np.sin(parts[9] * 10)) +
            np.sum(np.sin(parts[10] * 11)) + np.sum(np.sin(parts[11] * 12)) +
            np.sum(np.sin(parts[12] * 13)) + np.sum(np.sin(parts[13] * 14)) +
            np.sum(np.sin(parts[14] * 15)) + np.sum(np.sin(parts[15] * 16)) +
            np.sum(np.sin(parts[16] * 17)) + np.sum(np.sin(parts[17] * 18)) +
            np.sum(np.sin(parts[18] * 19)) + np.sum(np.sin(parts[19] * 20)) +
            np.sum(np.sin(parts[20] * 21)))


def _central(f, x, h=1e-6):
    g = np.zeros_like(x)
    for k in range(x.size):
        up, down = x.copy(), x.copy()
        up.flat[k] += h
        down.flat[k] -= h
        g.flat[k] = (f(up) - f(down)) / (2 * h)
    return g


X = RNG.uniform(0.5, 1.5, (3, 4))


def test_loss_value_is_numpys():
    assert loss(X) == pytest.approx(loss_reference(np, X), rel=1e-13)


_jax_loss = jax.jit(lambda x: loss_reference(jnp, x))


def test_reverse_mode_against_jax_and_central_differences():
    g = adjit.grad(loss)(X)
    want = np.asarray(jax.grad(_jax_loss)(X))
    np.testing.assert_allclose(g, want, rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(g, _central(lambda x: loss_reference(np, x), X), rtol=1e-6,
                               atol=1e-7)


def test_forward_mode_against_jax():
    t = RNG.standard_normal(X.shape)
    value, tangent = adjit.jvp(loss, (X,), (t,))
    want_value, want_tangent = jax.jvp(_jax_loss, (X,), (t,))
    assert value == pytest.approx(float(want_value), rel=1e-13)
    assert tangent == pytest.approx(float(want_tangent), rel=1e-11)


def curvature_reference(xp, x):
    return (xp.sum(xp.cumprod(x, axis=1) * xp.pad(x, ((0, 0), (1, 0)), mode="reflect")[:, :4])
            + xp.std(x) * xp.sum(xp.var(x, axis=0)) + xp.sum(xp.logaddexp(x, 2.0 * x[::-1]))
            + xp.sum(xp.array([x[0, 0] * x[1, 1], xp.sum(x)]) ** 3)
            + xp.sum(xp.roll(x, 1) * xp.diff(x, axis=0, append=x[:1])
                      * xp.cumsum(x).reshape(3, 4)))


@adjit.jit
def curvature(x):
    return (np.sum(np.cumprod(x, axis=1) * np.pad(x, ((0, 0), (1, 0)), mode="reflect")[:, :4])
            + np.std(x) * np.sum(np.var(x, axis=0)) + np.sum(np.logaddexp(x, 2.0 * x[::-1]))
            + np.sum(np.array([x[0, 0] * x[1, 1], np.sum(x)]) ** 3)
            + np.sum(np.roll(x, 1) * np.diff(x, axis=0, append=x[:1])
                     * np.cumsum(x).reshape(3, 4)))


def test_second_order_against_jax():
    """Forward over reverse (hvp) through cumprod, pad, std/var, logaddexp, np.array, roll,
    diff and cumsum."""
    t = RNG.standard_normal(X.shape)
    f = jax.jit(lambda x: curvature_reference(jnp, x))
    assert curvature(X) == pytest.approx(float(f(X)), rel=1e-13)
    np.testing.assert_allclose(adjit.hvp(curvature, (X,), (t,)),
                               np.asarray(jax.jvp(jax.grad(f), (X,), (t,))[1]), rtol=1e-10,
                               atol=1e-11)


@adjit.jit
def running_products(x, w):
    return np.sum(np.cumprod(x) * w) + np.sum(np.cumprod(x.reshape(2, -1), axis=1) * w.reshape(2, -1))


@pytest.mark.parametrize("x", [[2.0, 0.0, 3.0, 0.5], [0.0, 0.0, 3.0, 1.5], [1.5, 2.0, -1.0, 0.0]])
def test_cumprod_gradient_where_inputs_are_zero(x):
    """No division by the inputs: the gradient at zeros is the product of the others."""
    x, w = np.array(x), np.array([1.0, -2.0, 0.5, 3.0])
    f = lambda x: jnp.sum(jnp.cumprod(x) * w) + jnp.sum(jnp.cumprod(x.reshape(2, -1), axis=1)  # noqa: E731
                                                         * w.reshape(2, -1))
    g = adjit.grad(running_products)(x, w)
    np.testing.assert_allclose(g, np.asarray(jax.grad(f)(x)), rtol=1e-14)
    np.testing.assert_allclose(g, _central(lambda v: float(f(v)), x), rtol=1e-7, atol=1e-8)
    assert np.all(np.isfinite(g))


@adjit.jit
def spread(x):
    return np.std(x)


def test_std_derivative_at_zero_variance_is_nan_as_jaxs():
    g = adjit.grad(spread)(np.ones(3))
    assert np.all(np.isnan(g)) and np.all(np.isnan(np.asarray(jax.grad(jnp.std)(jnp.ones(3)))))
    x = RNG.standard_normal(5)
    np.testing.assert_allclose(adjit.grad(spread)(x), np.asarray(jax.grad(jnp.std)(x)),
                               rtol=1e-13)


@adjit.jit
def log_sum_loss(x, y):
    return np.sum(np.logaddexp(x, y) + np.logaddexp2(y, x) * 0.5)


def test_logaddexp_derivatives_are_stable():
    """At ties each side gets 1/2; at large arguments no overflow (exp(1000) would)."""
    x = np.array([1000.0, -1000.0, 0.0, 3.0, 700.0, -5.0])
    y = np.array([1000.0, 1000.0, 0.0, -3.0, -700.0, 40.0])
    f = lambda x, y: jnp.sum(jnp.logaddexp(x, y) + jnp.logaddexp2(y, x) * 0.5)  # noqa: E731
    gx, gy = adjit.grad(log_sum_loss, argnums=(0, 1))(x, y)
    want = jax.grad(f, argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gx, np.asarray(want[0]), rtol=1e-13)
    np.testing.assert_allclose(gy, np.asarray(want[1]), rtol=1e-13)
    _, tangent = adjit.jvp(log_sum_loss, (x, y), (np.ones(6), np.zeros(6)))
    assert tangent == pytest.approx(gx.sum(), rel=1e-13)


@adjit.jit
def matrix_transposes(a: float):
    m = adjit.mat22(1.0, 2.0, 3.0, a)
    t = np.transpose(m)
    return t[0, 1], t[1, 0], np.dot(adjit.vec2(1.0, a), adjit.vec2(a, 1.0))


def test_numpys_transpose_and_dot_of_adjit_matrices_and_vectors():
    """np.transpose of a matrix value is its transpose (it had come back unchanged), np.dot
    of two vectors their dot product, as adjit.transpose and adjit.dot."""
    assert matrix_transposes(4.0) == (3.0, 2.0, 8.0)


# ---- kernels ---------------------------------------------------------------------------------

@adjit.kernel
def elementwise_kernel(x: adjit.Array[adjit.f64, 1], y: adjit.Array[adjit.f64, 1],
                       out: adjit.Array[adjit.f64, 1]):
    i = adjit.index()
    out[i] = (np.logaddexp(x[i], y[i]) + adjit.logaddexp2(x[i], 0.5) + np.arcsinh(x[i])
              + np.arctanh(y[i] * 0.1) + np.arccosh(2.0 + x[i] * x[i]))


def _kernel_reference(xp, x, y):
    return (xp.logaddexp(x, y) + xp.logaddexp2(x, 0.5) + xp.arcsinh(x) + xp.arctanh(y * 0.1)
            + xp.arccosh(2.0 + x * x))


def test_element_wise_functions_in_a_kernel_and_its_derivative():
    x, y = RNG.standard_normal(7), RNG.standard_normal(7)
    out = np.zeros(7)
    elementwise_kernel(x, y, out, ndrange=7)
    np.testing.assert_allclose(out, _kernel_reference(np, x, y), rtol=1e-14)
    dout = np.ones(7)
    dx, dy = np.zeros(7), np.zeros(7)
    adjit.autodiff(adjit.Reverse, elementwise_kernel, adjit.Duplicated(x, dx),
                   adjit.Duplicated(y, dy), adjit.Duplicated(np.zeros(7), dout), ndrange=7)
    want = jax.grad(lambda x, y: jnp.sum(_kernel_reference(jnp, x, y)), argnums=(0, 1))(x, y)
    np.testing.assert_allclose(dx, np.asarray(want[0]), rtol=1e-13)
    np.testing.assert_allclose(dy, np.asarray(want[1]), rtol=1e-13)


# ---- refusals ----------------------------------------------------------------------------

@adjit.jit
def bad_mode(x):
    return np.pad(x, 1, mode="median")


@adjit.jit
def bad_axes(x):
    return np.transpose(x, (0, 0))


@adjit.jit
def ragged(a: float):
    return np.array([[a, a], [a]])


@adjit.jit
def negative_width(x):
    return np.pad(x, -1)


@adjit.jit
def into(x):
    return np.add(x, x, out=x)


@adjit.jit
def bool_difference(x):
    return np.subtract(x > 0, x < 0)


@adjit.jit
def bool_minus(x):
    return (x > 0) - (x < 0)


@pytest.mark.parametrize("f,message", [
    (bad_mode, "mode 'median' is not supported"),
    (bad_axes, r"axes \(0, 0\) are not a permutation"),
    (negative_width, "negative values"),
    (ragged, "inhomogeneous shape"),
    (into, r"out= is not supported in adjit: assign the result"),
    (bool_difference, "of two booleans is not supported"),
    (bool_minus, "`-` of two booleans where one is an array is not supported")])
def test_refusals_name_the_problem_and_the_line(f, message):
    with pytest.raises(adjit.CompilationError, match=message) as e:
        f(1.0) if f is ragged else f(np.ones((2, 2)))
    assert "test_numpy_array_functions.py" in str(e.value)
