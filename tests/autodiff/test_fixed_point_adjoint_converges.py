"""Fixed-point adjoints that converge where they can (issue 30, item 5).

A step that copies a Dirichlet boundary from x (`out[i] = x[i]`) has identity rows in
d step/d x, so I - (d step/d x)^T is singular there: the adjoint iteration
lambda <- xbar + (d step/d x)^T lambda grew on the boundary at every step and ran to max_iter
(an error by default; 380x the primal with must_converge=False). Such held components are
found by two tangent probes and left out of the iteration: x* there is x0's, so their adjoint
goes to x0. Checked against the implicit-function theorem in NumPy (np.linalg.solve, the
interior system), central differences, and JAX differentiating the unrolled iteration
(float64); a singular system that is not an identity row is reported, not iterated."""
from __future__ import annotations

import numpy as np
import pytest

import adjit


@adjit.kernel
def jacobi_1d(x, out, f, h2: float):
    i = adjit.index()
    n = x.shape[0]
    if 0 < i < n - 1:
        out[i] = 0.5 * (x[i - 1] + x[i + 1] + h2 * f[i])
    else:
        out[i] = x[i]                 # Dirichlet: the boundary is copied from x


@adjit.jit
def poisson_step(x, f, h2: float):
    out = adjit.empty_like(x)
    jacobi_1d(x, out, f, h2, ndrange=x.shape[0])
    return out


@adjit.jit
def poisson_loss(x0, f, h2: float):
    x = adjit.fixed_point(poisson_step, x0, f, h2, tol=1e-12, max_iter=50000)
    return adjit.sum(x * x)


@adjit.jit
def boundary_loss(g: float, f, h2: float):
    """The left boundary value is a parameter, through x0: x*[0] = g."""
    x0 = adjit.zeros_like(f)
    x0[0] = g
    x0[f.shape[0] - 1] = -0.5
    x = adjit.fixed_point(poisson_step, x0, f, h2, tol=1e-12, max_iter=50000)
    return adjit.sum(x * x)


def problem(n=24, dtype=np.float64):
    f = np.sin(np.linspace(0.0, 3.0, n)).astype(dtype)
    x0 = np.zeros(n, dtype)
    x0[0], x0[-1] = 1.0, -0.5
    return x0, f, 1.0 / (n - 1) ** 2


def reference_1d(x0, f, h2):
    """x*, dL/df and dL/dx0 of sum(x*^2) by the implicit-function theorem on the interior:
    (I - J_II) x_I = 0.5 (h2 f_I + J_Ib-terms), lambda_I = (I - J_II)^-T xbar_I."""
    x0, f = x0.astype(np.float64), f.astype(np.float64)
    n = f.size
    m = n - 2
    jii = 0.5 * (np.eye(m, k=1) + np.eye(m, k=-1))
    rhs = 0.5 * h2 * f[1:-1]
    rhs[0] += 0.5 * x0[0]
    rhs[-1] += 0.5 * x0[-1]
    x = x0.copy()
    x[1:-1] = np.linalg.solve(np.eye(m) - jii, rhs)
    xbar = 2 * x
    lam = np.linalg.solve((np.eye(m) - jii).T, xbar[1:-1])
    gf = np.zeros(n)
    gf[1:-1] = 0.5 * h2 * lam
    gx0 = np.zeros(n)                  # x*_b = x0_b; the interior reads it through J_Ib
    gx0[0] = xbar[0] + 0.5 * lam[0]
    gx0[-1] = xbar[-1] + 0.5 * lam[-1]
    return x, gf, gx0


def test_a_dirichlet_step_gradient_converges_to_the_implicit_derivative():
    x0, f, h2 = problem()
    x, gf_ref, gx0_ref = reference_1d(x0, f, h2)
    assert poisson_loss(x0, f, h2) == pytest.approx(np.sum(x * x), rel=1e-10)
    gf, gx0 = np.zeros_like(f), np.zeros_like(x0)
    adjit.autodiff(adjit.Reverse, poisson_loss, adjit.Duplicated(x0, gx0),
                   adjit.Duplicated(f, gf), adjit.Const(h2))
    assert gf.dtype == np.float64
    np.testing.assert_allclose(gf, gf_ref, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(gx0, gx0_ref, rtol=1e-8, atol=1e-10)
    # central differences, of f and of x0 (its boundary moves x*; its interior does not)
    h = 1e-5
    for k in (1, 7, 22):
        e = np.zeros_like(f)
        e[k] = h
        fd = (poisson_loss(x0, f + e, h2) - poisson_loss(x0, f - e, h2)) / (2 * h)
        assert gf[k] == pytest.approx(fd, rel=1e-6, abs=1e-9)
    for k in (0, 5, 23):
        e = np.zeros_like(x0)
        e[k] = h
        fd = (poisson_loss(x0 + e, f, h2) - poisson_loss(x0 - e, f, h2)) / (2 * h)
        assert gx0[k] == pytest.approx(fd, rel=1e-6, abs=1e-7)


def test_a_boundary_value_parameter_gets_its_gradient_through_x0():
    x0, f, h2 = problem()
    g = 0.75
    x0[0] = g
    _, _, gx0_ref = reference_1d(x0, f, h2)
    dg, = adjit.autodiff(adjit.Reverse, boundary_loss, adjit.Active(g), adjit.Const(f),
                         adjit.Const(h2))[:1]
    assert dg == pytest.approx(gx0_ref[0], rel=1e-8)
    h = 1e-6
    fd = (boundary_loss(g + h, f, h2) - boundary_loss(g - h, f, h2)) / (2 * h)
    assert dg == pytest.approx(fd, rel=1e-6)


def test_the_limit_of_the_unrolled_iteration_in_jax():
    """JAX differentiating the iteration itself, run to convergence (float64): the
    derivative a fixed point's adjoint stands for, held boundary included."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    x0, f, h2 = problem()

    def loss(x0, f):
        def body(_, x):
            return x.at[1:-1].set(0.5 * (x[:-2] + x[2:] + h2 * f[1:-1]))
        x = jax.lax.fori_loop(0, 6000, body, x0)
        return jnp.sum(x * x)

    jgx0, jgf = jax.grad(loss, argnums=(0, 1))(jnp.asarray(x0), jnp.asarray(f))
    gf, gx0 = np.zeros_like(f), np.zeros_like(x0)
    adjit.autodiff(adjit.Reverse, poisson_loss, adjit.Duplicated(x0, gx0),
                   adjit.Duplicated(f, gf), adjit.Const(h2))
    np.testing.assert_allclose(gf, np.asarray(jgf), rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(gx0, np.asarray(jgx0), rtol=1e-8, atol=1e-10)


def test_float32_gradient_against_the_float64_reference():
    x0, f, h2 = problem(dtype=np.float32)

    @adjit.jit
    def loss32(x0, f, h2: float):
        x = adjit.fixed_point(poisson_step, x0, f, h2, tol=1e-6, max_iter=50000)
        return adjit.sum(x * x)

    _, gf_ref, _ = reference_1d(x0, f, h2)
    gf = np.zeros_like(f)
    adjit.autodiff(adjit.Reverse, loss32, adjit.Const(x0), adjit.Duplicated(f, gf),
                   adjit.Const(h2))
    assert gf.dtype == np.float32
    np.testing.assert_allclose(gf, gf_ref, rtol=2e-3, atol=1e-5 * np.abs(gf_ref).max())


@adjit.kernel
def jacobi_2d(x, out, f, h2: float):
    i, j = adjit.index_nd()
    n, m = x.shape[0], x.shape[1]
    if 0 < i < n - 1 and 0 < j < m - 1:
        out[i, j] = 0.25 * (x[i - 1, j] + x[i + 1, j] + x[i, j - 1] + x[i, j + 1]
                            + h2 * f[i, j])
    else:
        out[i, j] = x[i, j]


@adjit.jit
def poisson_step_2d(x, f, h2: float):
    out = adjit.empty_like(x)
    jacobi_2d(x, out, f, h2, ndrange=x.shape)
    return out


@adjit.jit
def poisson_loss_2d(x0, f, h2: float, w):
    x = adjit.fixed_point(poisson_step_2d, x0, f, h2, tol=1e-12, max_iter=50000)
    return adjit.sum(w * x)


def test_a_2d_dirichlet_grid_against_the_implicit_derivative():
    n = 10
    rng = np.random.default_rng(3)
    f, w = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    x0 = np.zeros((n, n))
    x0[0, :], x0[:, -1] = 1.0, -0.25
    h2 = 1.0 / (n - 1) ** 2
    # J of the step on the whole grid (identity rows on the boundary), its interior block
    idx = np.arange(n * n).reshape(n, n)
    inner = np.zeros((n, n), bool)
    inner[1:-1, 1:-1] = True
    jac = np.eye(n * n)
    for i in range(1, n - 1):
        for j in range(1, n - 1):
            r = idx[i, j]
            jac[r, r] = 0.0
            for a, b in ((i - 1, j), (i + 1, j), (i, j - 1), (i, j + 1)):
                jac[r, idx[a, b]] = 0.25
    ii, bb = inner.ravel(), ~inner.ravel()
    a_ii = np.eye(ii.sum()) - jac[np.ix_(ii, ii)]
    x = x0.ravel().copy()
    x[ii] = np.linalg.solve(a_ii, 0.25 * h2 * f.ravel()[ii] + jac[np.ix_(ii, bb)] @ x[bb])
    lam = np.linalg.solve(a_ii.T, w.ravel()[ii])
    gf_ref = np.zeros(n * n)
    gf_ref[ii] = 0.25 * h2 * lam
    assert poisson_loss_2d(x0, f, h2, w) == pytest.approx(w.ravel() @ x, rel=1e-10)
    gf = np.zeros_like(f)
    adjit.autodiff(adjit.Reverse, poisson_loss_2d, adjit.Const(x0), adjit.Duplicated(f, gf),
                   adjit.Const(h2), adjit.Const(w))
    np.testing.assert_allclose(gf.ravel(), gf_ref, rtol=1e-8, atol=1e-13)


@adjit.func
def keep(x: float, a: float) -> float:
    return x + 0.0 * a


@adjit.jit
def kept(x0: float, a: float):
    return adjit.fixed_point(keep, x0, a, tol=1e-12, max_iter=100)


def test_a_scalar_step_that_holds_x_gives_x0_its_adjoint():
    """x <- x: x* = x0, so dx*/dx0 = 1 and dx*/da = 0 (the adjoint iteration 1 + lambda
    never converged)."""
    assert kept(2.5, 1.0) == 2.5
    dx0, da = adjit.autodiff(adjit.Reverse, kept, adjit.Active(2.5), adjit.Active(1.0))
    assert (dx0, da) == (1.0, 0.0)


@adjit.kernel
def smooth_periodic(x, out):
    i = adjit.index()
    n = x.shape[0]
    out[i] = 0.25 * x[(i + n - 1) % n] + 0.5 * x[i] + 0.25 * x[(i + 1) % n]


@adjit.jit
def smooth_step(x):
    out = adjit.empty_like(x)
    smooth_periodic(x, out, ndrange=x.shape[0])
    return out


@adjit.jit
def smoothed_loss(x0):
    x = adjit.fixed_point(smooth_step, x0, tol=1e-12, max_iter=1000000)  # SINGULAR
    return adjit.sum(x * x)


def test_a_singular_adjoint_system_is_reported_at_the_users_line():
    """The step conserves the sum (every row of J^T sums to 1, no identity row): x* is x0's
    mean everywhere, and the adjoint of sum(x*^2), 2 x*, is a null vector of I - J^T. Reported
    as singular at the call (before: a million iterations, then 'did not converge')."""
    x0 = np.linspace(0.0, 1.0, 16)
    np.testing.assert_allclose(smoothed_loss(x0), 16 * x0.mean() ** 2, rtol=1e-10)
    line = next(n for n, text in enumerate(open(__file__), start=1)
                if text.rstrip().endswith("# SINGULAR"))
    with pytest.raises(RuntimeError, match=rf"(?s)adjoint \(reverse-mode\) solve is singular"
                                           rf".*test_fixed_point_adjoint_converges.py:{line}"):
        adjit.autodiff(adjit.Reverse, smoothed_loss, adjit.Duplicated(x0, np.zeros(16)))


def test_a_strided_start_gives_the_same_gradient():
    """x0 a view (a strided type) starts a contiguous copy of it (the step's result type;
    before, 'must return one value of x0's type'), its shadow the view's."""
    n = 10
    rng = np.random.default_rng(4)
    f, w = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    big = np.zeros((2 * n, n))
    big[0, :] = 1.0
    x0 = big[::2]
    assert not x0.flags.c_contiguous
    h2 = 1.0 / (n - 1) ** 2
    grads = []
    for start in (x0, np.ascontiguousarray(x0)):
        gf, gx0 = np.zeros_like(f), np.zeros((n, n))
        adjit.autodiff(adjit.Reverse, poisson_loss_2d, adjit.Duplicated(start, gx0),
                       adjit.Duplicated(f, gf), adjit.Const(h2), adjit.Const(w))
        grads.append((gf, gx0))
    np.testing.assert_allclose(grads[0][0], grads[1][0], rtol=1e-13, atol=1e-16)
    np.testing.assert_allclose(grads[0][1], grads[1][1], rtol=1e-13, atol=1e-16)
    # the boundary's adjoint is x0's, the interior's is not
    assert np.all(grads[0][1][1:-1, 1:-1] == 0.0) and np.any(grads[0][1][0] != 0.0)


@adjit.jit
def halve_towards(x, b):
    return 0.5 * x + b


@adjit.jit
def halving_root(x0, b):
    return adjit.sum(adjit.fixed_point(halve_towards, x0, b, tol=1e-13, max_iter=200))


def test_a_start_with_a_dimension_of_one():
    """A (1, n) start (a dimension known to be 1 in its type) was refused as x0's type."""
    b = np.array([[0.5, -1.0, 2.0]])
    assert halving_root(np.zeros((1, 3)), b) == pytest.approx(2 * b.sum(), rel=1e-12)
    g = np.zeros_like(b)
    adjit.autodiff(adjit.Reverse, halving_root, adjit.Const(np.zeros((1, 3))),
                   adjit.Duplicated(b, g))
    np.testing.assert_allclose(g, 2.0, rtol=1e-12)
