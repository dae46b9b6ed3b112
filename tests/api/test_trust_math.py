"""log1p and expm1 keep their accuracy near 0 (issue 29, item 2): the CPU lowering computed
them as log(1 + x) and exp(x) - 1, which cancel there (log1p(1e-17) was 0 in f64, 4.6% off at
1e-6 in f32, a stable softplus gave softplus(-50) = 0). Checked in @jit (arrays and scalars),
@func and kernels, f32 and f64, values against NumPy and derivatives against NumPy's formula
(1/(1+x), exp(x)) and JAX in float64."""
import numpy as np
import pytest

import adjit

# Near 0 (where log(1+x) and exp(x)-1 cancel), both signs, moderate and large.
POINTS = np.array([1e-17, 1e-6, -1e-6, 1e-30, -3e-9, 0.5, -0.5, 30.0, 1e10, 1e30, 700.0])


def _ulps(got, want, dtype):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    with np.errstate(invalid="ignore"):                 # inf - inf where both are inf
        return _ulps_of(got, want, dtype)


def _ulps_of(got, want, dtype):
    spacing = np.abs(np.spacing(want.astype(dtype))).astype(np.float64)
    return np.where(got == want, 0.0, np.abs(got - want) / spacing)


def _reference(name, x, dtype):
    """NumPy's float64 value rounded to `dtype` (NumPy's float32 log1p is no better)."""
    with np.errstate(over="ignore"):
        return getattr(np, name)(x.astype(np.float64)).astype(dtype)


@adjit.jit
def both(x):
    return np.log1p(x), np.expm1(x)


@adjit.func
def scalar_both(x):
    return adjit.log1p(x), adjit.expm1(x)


@adjit.kernel
def both_kernel(x, a, b):
    i = adjit.index()
    a[i] = adjit.log1p(x[i])
    b[i] = adjit.expm1(x[i])


@adjit.jit
def softplus(x):
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


def _finite(name, dtype):
    x = POINTS.astype(dtype)
    return x[np.isfinite(_reference(name, x, dtype))] if name == "expm1" else x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_jit_arrays_match_numpy(dtype):
    x = POINTS.astype(dtype)
    lp, em = both(x)
    assert lp.dtype == dtype and em.dtype == dtype
    assert _ulps(lp, _reference("log1p", x, dtype), dtype).max() <= 2
    with np.errstate(over="ignore"):
        assert _ulps(em, _reference("expm1", x, dtype), dtype).max() <= 2
    # the reported cases, exactly: log1p(1e-17) is 1e-17, not 0
    if dtype == np.float64:
        assert lp[0] == 1e-17 and em[0] == 1e-17


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kernel_matches_numpy(dtype):
    x = POINTS.astype(dtype)
    a, b = np.zeros_like(x), np.zeros_like(x)
    both_kernel(x, a, b, ndrange=len(x))
    assert _ulps(a, _reference("log1p", x, dtype), dtype).max() <= 2
    with np.errstate(over="ignore"):
        assert _ulps(b, _reference("expm1", x, dtype), dtype).max() <= 2


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("v", [1e-17, 1e-6, -1e-6, 0.25])
def test_func_scalars_match_numpy(dtype, v):
    lp, em = scalar_both(dtype(v))
    assert _ulps(lp, _reference("log1p", np.array([v]), dtype)[0], dtype) <= 2
    assert _ulps(em, _reference("expm1", np.array([v]), dtype)[0], dtype) <= 2


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_stable_softplus(dtype):
    x = np.array([-50.0, -20.0, -1e-3, 0.0, 3.0, 50.0], dtype)
    want = (np.maximum(x.astype(np.float64), 0)
            + np.log1p(np.exp(-np.abs(x.astype(np.float64))))).astype(dtype)
    got = softplus(x)
    assert got.dtype == dtype
    assert got[0] > 0                          # was exactly 0
    assert _ulps(got, want, dtype).max() <= 2


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_derivatives_near_zero(dtype):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    def loss(x):
        return np.sum(np.log1p(x) + np.expm1(x))

    x = np.array([1e-17, 1e-6, -1e-6, 0.5, -0.5, 3.0], dtype)
    g = adjit.grad(adjit.jit(loss))(x)
    assert g.dtype == dtype
    want = np.asarray(jax.grad(lambda v: jnp.sum(jnp.log1p(v) + jnp.expm1(v)))(
        x.astype(np.float64)))
    assert _ulps(g, want.astype(dtype), dtype).max() <= 4
    # and against central differences of NumPy's functions, in float64
    h = 1e-6
    x64 = x.astype(np.float64)
    fd = ((np.log1p(x64 + h) + np.expm1(x64 + h)) - (np.log1p(x64 - h) + np.expm1(x64 - h))) / (2 * h)
    np.testing.assert_allclose(g, fd, rtol=1e-5 if dtype == np.float32 else 1e-8)
