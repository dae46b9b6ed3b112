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


# Derivative rules that lost accuracy at representable points (found by the accuracy table,
# tests/api/accuracy_sweep.py): each case is (builtin, argument point, the exact derivative),
# the exact value from the formula in float64 (mpmath agrees to the digits given).
@adjit.jit
def expm1_f(x):
    return np.sum(np.expm1(x))


@adjit.jit
def tanh_f(x):
    return np.sum(np.tanh(x))


@adjit.jit
def asin_f(x):
    return np.sum(np.arcsin(x))


@adjit.jit
def log10_f(x):
    return np.sum(np.log10(x))


@adjit.jit
def erf_f(x):
    return np.sum(adjit.erf(x))


@adjit.jit
def atan2_f(a, b):
    return np.sum(np.arctan2(a, b))


@adjit.jit
def pow_f(a, b):
    return np.sum(np.power(a, b))


def _exact(fn, x):
    import mpmath as mp
    with mp.workdps(40):
        return np.array([float(fn(mp.mpf(float(v)))) for v in x])


UNARY_CASES = [
    # exp(x), not expm1(x) + 1 (0 for x < -17 in f32; 32 ulp at -3.7 in f64)
    ("expm1", expm1_f, [-30.0, -3.7, -17.5], lambda m, x: m.exp(x)),
    # sech^2, not 1 - tanh^2 (0 for |x| > 9 in f32)
    ("tanh", tanh_f, [10.0, -15.6, 3.0], lambda m, x: m.sech(x) ** 2),
    # 1/sqrt((1-x)(1+x)), not 1/sqrt(1-x*x) (6 ulp in f32 near 1)
    ("asin", asin_f, [0.98995, 0.99, 0.9999], lambda m, x: 1 / m.sqrt(1 - x * x)),
    # (1/ln10)/x, not 1/(x ln10), which overflowed to 0 (f32, x = 3e38)
    ("log10", log10_f, [3e38, 1e30, 7.0], lambda m, x: 1 / (x * m.log(10))),
    # exp(-x^2) with x^2 split exactly (15 ulp in f32 at 5.2)
    ("erf", erf_f, [5.2, 3.9, -4.5], lambda m, x: 2 / m.sqrt(m.pi) * m.exp(-x * x)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name, f, points, exact", UNARY_CASES, ids=[c[0] for c in UNARY_CASES])
def test_unary_derivatives_accurate(dtype, name, f, points, exact):
    import mpmath as mp
    x = np.array(points, dtype)
    x = x[np.isfinite(x)]
    g = adjit.grad(f)(x)
    assert g.dtype == dtype
    want = _exact(lambda v: exact(mp, v), x).astype(dtype)
    assert _ulps(g, want, dtype).max() <= 3, (name, g, want)
    # the forward mode (another code path through the same rule)
    t = adjit.jvp(f, (x,), (np.ones_like(x),))[1]
    assert abs(t - want.astype(np.float64).sum()) <= 4 * np.abs(want).sum() * np.finfo(dtype).eps


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_atan2_derivative_no_underflow(dtype):
    # b / (a^2 + b^2): the squares overflowed (1e20 in f32: 0, the truth 5e-21) and
    # underflowed (1e-20: inf); scaled by max(|a|, |b|) now. Infinite operands unchanged.
    a = np.array([1e20, 1e-20, 3.0, 1.0], dtype)
    b = np.array([1e20, 1e-20, 4.0, np.inf], dtype)
    ga, gb = adjit.grad(atan2_f, argnums=(0, 1))(a, b)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    fin = np.isfinite(b64)
    want_a = b64[fin] / (a64[fin] ** 2 + b64[fin] ** 2)
    want_b = -a64[fin] / (a64[fin] ** 2 + b64[fin] ** 2)
    assert _ulps(ga[fin], want_a.astype(dtype), dtype).max() <= 3
    assert _ulps(gb[fin], want_b.astype(dtype), dtype).max() <= 3
    assert np.isnan(ga[3]) and gb[3] == 0          # JAX's values at b = inf, as before


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pow_base_derivative(dtype):
    # b a^(b-1): b - 1 rounds (its error scaled by ln a: 366 ulp in f64 at a = 1e-308,
    # b = -0.001) or equals b with the wrong parity (+1e30 at a = -1, b = 1e30): a^b / a.
    tiny = float(np.finfo(dtype).tiny)
    a = np.array([tiny, -1.0, 2.0, 0.0, 0.5], dtype)
    b = np.array([-0.001, 1e30, 3.0, 2.0, -2.0], dtype)
    g = adjit.grad(pow_f)(a, b)
    import mpmath as mp
    with mp.workdps(50):
        want = np.array([float(mp.mpf(float(bb)) * mp.power(mp.mpf(float(aa)), mp.mpf(float(bb)) - 1))
                         for aa, bb in zip(a, b)]).astype(dtype)
    assert _ulps(g, want, dtype).max() <= 3, (g, want)


@adjit.kernel
def hypot_kernel(a, b, out):
    i = adjit.index()
    out[i] = adjit.hypot(a[i], b[i])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_hypot_forward_derivative_far_apart(dtype):
    # Forward mode through big*sqrt(1 + r*r) underflowed in r*r's tangent when the operands
    # differ by more than the range allows (f32 hypot(100, 1e30): d/da 0, the truth 1e-28).
    big = 1e30 if dtype == np.float32 else 1e300
    a = np.array([100.0, big, 3.0, 1.0, 0.0], dtype)
    b = np.array([big, 100.0, 4.0, 1.0, 2.0], dtype)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    h = np.hypot(a64, b64)
    for k, want in ((0, a64 / h), (1, b64 / h)):
        out, dout = np.zeros_like(a), np.zeros_like(a)
        ta = np.full_like(a, 1.0 - k)
        tb = np.full_like(b, float(k))
        adjit.autodiff(adjit.Forward, hypot_kernel, adjit.Duplicated(a.copy(), ta),
                       adjit.Duplicated(b.copy(), tb), adjit.Duplicated(out, dout),
                       ndrange=len(a))
        assert _ulps(out, h.astype(dtype), dtype).max() <= 2
        assert _ulps(dout, want.astype(dtype), dtype).max() <= 3, (k, dout, want)
