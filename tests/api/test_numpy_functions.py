"""NumPy's array functions in compiled code (issue 15, item 3): prod, argmax/argmin,
linspace, concatenate, stack, reshape/ravel/flatten, and diff (issue 33: architecture.md's
worked example of a new NumPy function), against NumPy (values, shapes, dtypes) and their
derivatives against central differences (and JAX's, diff's)."""
import numpy as np
import pytest

import adjit

RNG = np.random.default_rng(1515)


def _check(got, want):
    assert np.shape(got) == np.shape(want)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_allclose(got, want, rtol=1e-6 if np.asarray(want).dtype == np.float32
                               else 1e-13)


@adjit.jit
def joined(x, y):
    return (np.concatenate((x, y)), np.concatenate((x, y, x), axis=1),
            np.concatenate([x[:, ::-1], y], axis=-1), np.stack((x, y)),
            np.stack((x, y), axis=2), np.stack([x[0], y[1]], axis=-1))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_concatenate_and_stack(dtype):
    x = (RNG.standard_normal((3, 4)) * 10).astype(dtype)
    y = (RNG.standard_normal((3, 4)) * 10).astype(dtype)
    want = (np.concatenate((x, y)), np.concatenate((x, y, x), axis=1),
            np.concatenate([x[:, ::-1], y], axis=-1), np.stack((x, y)),
            np.stack((x, y), axis=2), np.stack([x[0], y[1]], axis=-1))
    for g, w in zip(joined(x, y), want):
        _check(g, w)


@adjit.jit
def mixed_concatenate(x, y):
    return np.concatenate((x, y))


def test_concatenate_promotes_and_checks_sizes():
    _check(mixed_concatenate(np.ones((2, 3), np.float32), np.ones((1, 3))),
           np.concatenate((np.ones((2, 3), np.float32), np.ones((1, 3)))))
    _check(mixed_concatenate(np.ones((0, 3)), np.ones((2, 3))), np.ones((2, 3)))
    with pytest.raises(ValueError, match="other than the axis"):
        mixed_concatenate(np.ones((2, 3)), np.ones((2, 4)))


@adjit.jit
def reshaped(x):
    return (x.reshape(3, 4), x.reshape((2, -1)), np.reshape(x, (4, 3)), x.ravel(),
            (x * 2.0).reshape(6, 2), x[::-1].reshape(2, 2, 3), x.reshape(12, 1)[:, 0],
            x.flatten())


def test_reshape_ravel_flatten():
    x = RNG.standard_normal(12)
    want = (x.reshape(3, 4), x.reshape((2, -1)), np.reshape(x, (4, 3)), x.ravel(),
            (x * 2.0).reshape(6, 2), x[::-1].reshape(2, 2, 3), x.reshape(12, 1)[:, 0],
            x.flatten())
    for g, w in zip(reshaped(x), want):
        _check(g, w)


@adjit.jit
def reshape_to(x, rows: int):
    return x.reshape(rows, -1) + 0.0


def test_reshape_checks_the_element_count():
    _check(reshape_to(np.arange(6.0), 3), np.arange(6.0).reshape(3, -1))
    with pytest.raises(ValueError, match="element counts differ"):
        reshape_to(np.arange(6.0), 4)


@adjit.jit
def reshape_writes(x):
    m = x.reshape(2, 3)     # a view: writes reach x
    m[1, 2] = 100.0
    return x


def test_reshape_is_a_view():
    _check(reshape_writes(np.arange(6.0)), np.array([0, 1, 2, 3, 4, 100.0]))


@adjit.jit
def products(x, k):
    return np.prod(x), x.prod(axis=0), np.prod(x, axis=1, keepdims=True), np.prod(k)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_prod(dtype):
    x = RNG.uniform(0.5, 1.5, (5, 4)).astype(dtype)
    k = np.arange(1, 8, dtype=np.int32)
    got = products(x, k)
    want = (np.prod(x), x.prod(axis=0), np.prod(x, axis=1, keepdims=True), np.prod(k))
    for g, w in zip(got, want):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_allclose(g, w, rtol=1e-5 if dtype == np.float32 else 1e-13)
    assert np.asarray(got[3]).dtype == np.int64


@adjit.jit
def arg_extremes(x):
    return np.argmax(x), np.argmin(x), x.argmax(), x[::-1].argmin()


@pytest.mark.parametrize("values", [[3.0, 1.0, 7.0, 7.0, -2.0, -2.0], [np.nan, 1.0, np.nan],
                                    [1.0, -np.inf, np.inf, 2.0], [5.0]])
def test_argmax_argmin_are_numpys(values):
    x = np.array(values)
    assert arg_extremes(x) == (np.argmax(x), np.argmin(x), x.argmax(), x[::-1].argmin())
    m = RNG.standard_normal((4, 5))
    assert arg_extremes(m) == (np.argmax(m), np.argmin(m), m.argmax(), m[::-1].argmin())


def test_argmax_of_an_empty_array_raises():
    with pytest.raises(ValueError, match="empty sequence"):
        arg_extremes(np.zeros(0))


@adjit.jit
def spaced(n: int, a: float, b: float):
    return (np.linspace(a, b, n), np.linspace(a, b, n, endpoint=False),
            np.linspace(a, b, num=n, dtype=np.float32), np.linspace(0, 1))


@pytest.mark.parametrize("n", [0, 1, 2, 7, 100])
def test_linspace(n):
    got = spaced(n, -1.5, 2.25)
    want = (np.linspace(-1.5, 2.25, n), np.linspace(-1.5, 2.25, n, endpoint=False),
            np.linspace(-1.5, 2.25, num=n, dtype=np.float32), np.linspace(0, 1))
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-7 if w.dtype == np.float32 else 1e-15,
                                   atol=1e-15)
    if n >= 2:
        assert got[0][-1] == 2.25      # the endpoint exactly


@adjit.jit
def joined_loss(x, y):
    z = np.concatenate((x * x, np.sin(y)))
    s = np.stack((x, y), axis=1)
    r = (x * 3.0).reshape(2, -1)
    return np.sum(z * np.linspace(0.0, 1.0, z.shape[0])) + np.sum(s[:, 0] * s[:, 1]) \
        + np.prod(r[0] * 0.5 + 1.0) + np.sum(r.ravel() ** 3)


def _central(f, x, h=1e-6):
    g = np.zeros_like(x)
    for k in range(x.size):
        up, down = x.copy(), x.copy()
        up[k] += h
        down[k] -= h
        g[k] = (f(up) - f(down)) / (2 * h)
    return g


def test_derivatives_of_the_array_functions():
    x, y = RNG.standard_normal(6), RNG.standard_normal(6)

    def numpy_loss(x, y):
        z = np.concatenate((x * x, np.sin(y)))
        s = np.stack((x, y), axis=1)
        r = (x * 3.0).reshape(2, -1)
        return float(np.sum(z * np.linspace(0.0, 1.0, z.shape[0])) + np.sum(s[:, 0] * s[:, 1])
                     + np.prod(r[0] * 0.5 + 1.0) + np.sum(r.ravel() ** 3))

    assert joined_loss(x, y) == pytest.approx(numpy_loss(x, y), rel=1e-13)
    gx, gy = adjit.grad(joined_loss, argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gx, _central(lambda v: numpy_loss(v, y), x), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gy, _central(lambda v: numpy_loss(x, v), y), rtol=1e-6, atol=1e-8)
    tangent = adjit.autodiff(adjit.Forward, joined_loss, adjit.Duplicated(x, np.ones(6)),
                             adjit.Const(y))
    assert tangent == pytest.approx(gx.sum(), rel=1e-12)


def test_prod_derivative_with_zeros():
    @adjit.jit
    def p(x):
        return np.prod(x)
    for x in (np.array([2.0, 0.0, 3.0]), np.array([0.0, 0.0, 3.0]), np.array([1.5, 2.0])):
        want = np.array([np.prod(np.delete(x, k)) for k in range(x.size)])
        np.testing.assert_allclose(adjit.grad(p)(x), want, rtol=1e-14)


@adjit.jit
def identities(x):
    return (np.eye(3), np.eye(2, 4, 1, dtype=np.float32), np.eye(4, k=-2, dtype=np.int32),
            np.identity(3, np.int64), np.eye(0), np.eye(1), np.eye(3, 0),
            np.sum(np.eye(3, k=1) * x))


def test_eye_and_identity():
    x = RNG.standard_normal((3, 3))
    got = identities(x)
    want = (np.eye(3), np.eye(2, 4, 1, dtype=np.float32), np.eye(4, k=-2, dtype=np.int32),
            np.identity(3, np.int64), np.eye(0), np.eye(1), np.eye(3, 0),
            np.sum(np.eye(3, k=1) * x))
    for g, w in zip(got, want, strict=True):
        _check(g, w)
    # the derivative through a constant mask: the mask itself
    grad = adjit.grad(lambda x: identities(x)[-1])(x)
    np.testing.assert_array_equal(grad, np.eye(3, k=1))


def test_eye_refuses_run_time_sizes():
    @adjit.jit
    def sized(n):
        return np.eye(n)
    with pytest.raises(adjit.CompilationError, match="eye\\(\\): the number of rows must be a constant"):
        sized(3)


def differences_reference(x):
    return (np.diff(x), np.diff(x, axis=0), np.diff(x, n=2), np.diff(x, 3, 0),
            np.diff(x, prepend=0), np.diff(x, axis=0, append=x[-1:] * 2), np.diff(x, n=0))


@adjit.jit
def differences(x):
    return (np.diff(x), np.diff(x, axis=0), np.diff(x, n=2), np.diff(x, 3, 0),
            np.diff(x, prepend=0), np.diff(x, axis=0, append=x[-1:] * 2), np.diff(x, n=0))


@pytest.mark.parametrize("shape", [(4, 5), (1, 1), (2, 3), (4, 0)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32, np.bool_])
def test_diff_is_numpys(shape, dtype):
    x = (RNG.standard_normal(shape) * 10).astype(dtype)
    for got, want in zip(differences(x), differences_reference(x)):
        _check(got, want)


@adjit.jit
def diff_loss(x):
    return np.sum(np.sin(np.diff(x, axis=0)) * np.diff(x, n=2, axis=0, prepend=0.5))


def test_diff_derivatives_against_jax_and_central_differences():
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    x = RNG.standard_normal((3, 4))
    f = lambda x: jnp.sum(jnp.sin(jnp.diff(x, axis=0)) * jnp.diff(x, n=2, axis=0, prepend=0.5))  # noqa: E731
    g = adjit.grad(diff_loss)(x)
    np.testing.assert_allclose(g, np.asarray(jax.grad(f)(x)), rtol=1e-13)
    flat = _central(lambda v: float(f(v.reshape(3, 4))), x.ravel()).reshape(3, 4)
    np.testing.assert_allclose(g, flat, rtol=1e-6, atol=1e-8)
    t = RNG.standard_normal((3, 4))
    _, tangent = adjit.jvp(diff_loss, (x,), (t,))
    assert tangent == pytest.approx(float(np.sum(g * t)), rel=1e-12)


@adjit.jit
def numpy_scalars(x, s):
    lr = np.float32(0.1)          # a strong float32, as NumPy's
    return (np.float32(s) * x + lr, np.float64(s), np.int32(s), np.int64(-2.7),
            np.bool_(s), np.float32(x * 2.0), lr * 1.0, np.float32(3) * 0.5)


def _numpy_scalars_ref(x, s):
    lr = np.float32(0.1)
    return (np.float32(s) * x + lr, np.float64(s), np.int32(s), np.int64(-2.7),
            np.bool_(s), np.float32(x * 2.0), lr * 1.0, np.float32(3) * 0.5)


@pytest.mark.parametrize("s", [2.5, -1.0, 0.0])
def test_numpy_scalar_types_convert(s):
    x = np.array([1.0, -3.0, 0.5], np.float32)
    for got, want in zip(numpy_scalars(x, s), _numpy_scalars_ref(x, s), strict=True):
        _check(got, want)
    # the derivative through a cast to float32 (of a float64 argument): its cast back
    g = adjit.grad(lambda s, x: np.sum(np.float32(s) * x))(s, x.astype(np.float64))
    assert g == pytest.approx(np.sum(x))
