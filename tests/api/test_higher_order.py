"""Derivatives that compose (issue 13): autodiff inside compiled code, derivatives of
derivatives (forward over reverse, reverse over forward, reverse over reverse), and JAX's
conveniences (hvp, jacfwd, jacrev, hessian), each against analytic derivatives or finite
differences of gradients."""
from __future__ import annotations

import math

import numpy as np
import pytest

import adjit


# ---- functions under test -----------------------------------------------------------------------
@adjit.jit
def rosen(x):
    s = 0.0
    for i in range(len(x) - 1):
        s += 100.0 * (x[i + 1] - x[i] * x[i]) ** 2 + (1.0 - x[i]) ** 2
    return s


def rosen_grad(x):
    g = np.zeros_like(x)
    g[:-1] += -400.0 * x[:-1] * (x[1:] - x[:-1] ** 2) - 2.0 * (1.0 - x[:-1])
    g[1:] += 200.0 * (x[1:] - x[:-1] ** 2)
    return g


def rosen_hessian(x):
    n = len(x)
    h = np.zeros((n, n))
    for i in range(n - 1):
        h[i, i] += 1200.0 * x[i] ** 2 - 400.0 * x[i + 1] + 2.0
        h[i + 1, i + 1] += 200.0
        h[i, i + 1] -= 400.0 * x[i]
        h[i + 1, i] -= 400.0 * x[i]
    return h


@adjit.jit
def directional(x, v):
    """grad(rosen)(x) . v by forward mode (inside compiled code)."""
    primal, tangent = adjit.jvp(rosen, (x,), (v,))
    return tangent


@adjit.jit
def hvp_compiled(x, v):
    return adjit.hvp(rosen, (x,), (v,))


@adjit.func
def smooth(x, y):
    return adjit.sin(x) * y + x * x * y


X = np.random.default_rng(0).uniform(-1.5, 1.5, 9)
V = np.random.default_rng(1).standard_normal(9)


# ---- autodiff inside compiled code ------------------------------------------------------------
def test_grad_autodiff_and_jvp_inside_a_jit_function():
    @adjit.jit
    def all_three(x, y):
        g = adjit.grad(smooth)(x, y)
        dx, dy = adjit.autodiff(adjit.Reverse, smooth, adjit.Active(x), adjit.Active(y))
        value, tangent = adjit.jvp(smooth, (x, y), (1.0, 0.0))
        v2, (gx, gy) = adjit.value_and_grad(smooth, (0, 1))(x, y)
        return g, dx, dy, value, tangent, v2, gx, gy

    x, y = 0.3, 2.0
    g, dx, dy, value, tangent, v2, gx, gy = all_three(x, y)
    exact_dx, exact_dy = math.cos(x) * y + 2 * x * y, math.sin(x) + x * x
    for got in (g, dx, tangent, gx):
        assert got == pytest.approx(exact_dx, rel=1e-14)
    assert dy == pytest.approx(exact_dy, rel=1e-14) and gy == pytest.approx(exact_dy, rel=1e-14)
    assert value == pytest.approx(math.sin(x) * y + x * x * y) and v2 == value


def test_an_array_gradient_inside_a_jit_function_is_a_new_array():
    @adjit.jit
    def g(x):
        return adjit.grad(rosen)(x)

    np.testing.assert_allclose(g(X), rosen_grad(X), rtol=1e-13)


def test_autodiff_inside_a_kernel():
    @adjit.func
    def energy(x, k):
        return k * x * x * x

    @adjit.kernel
    def force(x, k, out):
        i = adjit.index()
        out[i] = -adjit.grad(energy)(x[i], k)

    x, out = np.linspace(-1.0, 1.0, 7), np.zeros(7)
    force(x, 2.0, out, ndrange=7)
    np.testing.assert_allclose(out, -6.0 * x * x, rtol=1e-15)


def test_a_compiled_gradient_descent_loop_recovers_an_initial_state():
    """The heat-equation inverse problem in one compiled function: each iteration takes the
    gradient of the simulated loss and steps; the loss falls at every step."""
    @adjit.kernel
    def heat_step(u, v, k):
        i = adjit.index()
        n = u.shape[0]
        left = u[(i + n - 1) % n]
        right = u[(i + 1) % n]
        v[i] = u[i] + k * (left - 2.0 * u[i] + right)

    @adjit.jit
    def loss(u0, target, steps: int, k: float):
        u = u0.copy()
        v = adjit.empty_like(u)
        for _ in range(steps):
            heat_step(u, v, k, ndrange=u.shape)
            u, v = v, u
        return adjit.sum((u - target) * (u - target))

    @adjit.jit
    def recover(u0, target, steps: int, k: float, lr: float, iters: int):
        losses = adjit.zeros(iters)
        u = u0.copy()
        for it in range(iters):
            value, g = adjit.value_and_grad(loss)(u, target, steps, k)
            losses[it] = value
            u = u - lr * g
        return u, losses

    n, steps, k = 64, 7, 0.2
    xs = np.linspace(0, 2 * np.pi, n, endpoint=False)
    truth = np.sin(xs) + 0.5 * np.cos(3 * xs)
    target = truth.copy()
    for _ in range(steps):
        target = target + k * (np.roll(target, 1) - 2 * target + np.roll(target, -1))
    u, losses = recover(np.zeros(n), target, steps, k, 0.4, 15)
    assert np.all(np.diff(losses) < 0), losses
    assert losses[-1] < 1e-8 * losses[0]
    np.testing.assert_allclose(u, truth, atol=1e-4)
    # the compiled gradient is the Python-level one
    g = adjit.grad(loss)(u, target, steps, k)
    eps = 1e-6
    e = np.zeros(n)
    e[5] = eps
    fd = (loss(u + e, target, steps, k) - loss(u - e, target, steps, k)) / (2 * eps)
    assert g[5] == pytest.approx(fd, rel=1e-5, abs=1e-10)


# ---- higher order ----------------------------------------------------------------------------
def test_rosenbrock_hessian_vector_products_three_ways():
    exact = rosen_hessian(X) @ V
    forward_over_reverse = adjit.hvp(rosen, (X,), (V,))
    reverse_over_forward = adjit.grad(directional)(X, V)
    np.testing.assert_allclose(forward_over_reverse, exact, rtol=1e-12)
    np.testing.assert_allclose(reverse_over_forward, exact, rtol=1e-12)
    np.testing.assert_allclose(hvp_compiled(X, V), exact, rtol=1e-12)
    np.testing.assert_allclose(adjit.hessian(rosen)(X), rosen_hessian(X), rtol=1e-12,
                               atol=1e-12)
    # against finite differences of the gradient along V
    eps = 1e-6
    fd = (rosen_grad(X + eps * V) - rosen_grad(X - eps * V)) / (2 * eps)
    np.testing.assert_allclose(forward_over_reverse, fd, rtol=1e-6, atol=1e-6)


def test_second_derivatives_of_scalars_by_every_composition():
    x, y = 0.3, 2.0
    d2x = -math.sin(x) * y + 2 * y          # d2/dx2 of sin(x) y + x^2 y
    dxdy = math.cos(x) + 2 * x
    assert adjit.grad(adjit.grad(smooth))(x, y) == pytest.approx(d2x, rel=1e-14)
    assert adjit.grad(adjit.grad(smooth), 1)(x, y) == pytest.approx(dxdy, rel=1e-14)
    tangent = adjit.jvp(adjit.grad(smooth), (x, y), (1.0, 0.0))[1]
    assert tangent == pytest.approx(d2x, rel=1e-14)
    hv = adjit.hvp(smooth, (x, y), (1.0, 2.0))
    h = np.array([[d2x, dxdy], [dxdy, 0.0]])
    np.testing.assert_allclose(hv, h @ [1.0, 2.0], rtol=1e-14)
    # third order: reverse over reverse over reverse
    assert adjit.grad(adjit.grad(adjit.grad(smooth)))(x, y) == \
        pytest.approx(-math.cos(x) * y, rel=1e-13)


def test_hessian_vector_products_of_a_small_mlp_loss():
    rng = np.random.default_rng(3)
    w = rng.standard_normal(12) * 0.5
    data = rng.standard_normal((8, 3))
    labels = rng.standard_normal(8)

    @adjit.jit
    def mlp_loss(w, data, labels):
        total = 0.0
        for s in range(data.shape[0]):
            out = 0.0
            for j in range(3):
                h = adjit.tanh(w[3 * j] * data[s, 0] + w[3 * j + 1] * data[s, 1]
                               + w[3 * j + 2] * data[s, 2])
                out += w[9 + j] * h
            total += (out - labels[s]) ** 2
        return total / data.shape[0]

    v = rng.standard_normal(12)
    f_over_r = adjit.hvp(mlp_loss, (w, data, labels), (v, np.zeros_like(data),
                                                       np.zeros_like(labels)))[0]

    @adjit.jit
    def along(w, v, data, labels):
        return adjit.jvp(mlp_loss, (w, data, labels), (v, data * 0.0, labels * 0.0))[1]

    r_over_f = adjit.grad(along)(w, v, data, labels)
    np.testing.assert_allclose(f_over_r, r_over_f, rtol=1e-12, atol=1e-14)
    full = adjit.hessian(mlp_loss)(w, data, labels)
    np.testing.assert_allclose(full @ v, f_over_r, rtol=1e-11, atol=1e-13)
    eps = 1e-6
    g = adjit.grad(mlp_loss)
    fd = (g(w + eps * v, data, labels) - g(w - eps * v, data, labels)) / (2 * eps)
    np.testing.assert_allclose(f_over_r, fd, rtol=1e-5, atol=1e-7)


def test_a_newton_solve_with_jacfwd():
    @adjit.jit
    def residual(x):
        r = adjit.empty_like(x)
        r[0] = x[0] * x[0] + x[1] * x[1] - 4.0
        r[1] = adjit.exp(x[0]) + x[1] - 1.0
        r[2] = x[2] * x[2] * x[2] - x[0]
        r[3] = x[3] + adjit.sin(x[2]) - 0.5
        return r

    x = np.array([1.0, -1.5, 1.0, 0.0])
    jac = adjit.jacfwd(residual)
    for _ in range(20):
        x = x - np.linalg.solve(jac(x), residual(x))
    assert np.abs(residual(x)).max() < 1e-12
    np.testing.assert_allclose(jac(x), adjit.jacrev(residual)(x), rtol=1e-14, atol=1e-14)


def test_a_custom_rule_inside_a_second_order_derivative():
    """The reverse rule's body is differentiated like any function when a second derivative
    needs it."""
    @adjit.func
    def softplus(x):
        return adjit.log(1.0 + adjit.exp(x))

    @adjit.rules.augmented_primal(softplus)
    def _(config, x):
        return adjit.rules.AugmentedReturn(softplus(x.val), None, x.val)

    @adjit.rules.reverse(softplus)
    def _(config, dret, tape, x):
        return (dret / (1.0 + adjit.exp(-tape)),)

    @adjit.func
    def outer(x):
        return 3.0 * softplus(x)

    for x in (-2.0, 0.0, 1.5):
        s = 1.0 / (1.0 + math.exp(-x))
        assert adjit.grad(outer)(x) == pytest.approx(3.0 * s, rel=1e-14)
        assert adjit.grad(adjit.grad(outer))(x) == pytest.approx(3.0 * s * (1 - s), rel=1e-12)


def test_float32_hessian_vector_product_at_size():
    x = np.random.default_rng(5).uniform(-1, 1, 100_001).astype(np.float32)
    v = np.random.default_rng(6).standard_normal(100_001).astype(np.float32)
    got = adjit.hvp(rosen, (x,), (v,))
    assert got.dtype == np.float32
    x64, v64 = x.astype(np.float64), v.astype(np.float64)
    h = rosen_hessian_vector(x64, v64)
    np.testing.assert_allclose(got, h, rtol=2e-3, atol=2e-2 * np.abs(h).max() * 1e-3)


def rosen_hessian_vector(x, v):
    out = np.zeros_like(x)
    out[:-1] += (1200.0 * x[:-1] ** 2 - 400.0 * x[1:] + 2.0) * v[:-1] - 400.0 * x[:-1] * v[1:]
    out[1:] += 200.0 * v[1:] - 400.0 * x[:-1] * v[:-1]
    return out


# ---- errors --------------------------------------------------------------------------------
def test_derivative_calls_refuse_what_makes_no_sense():
    @adjit.jit
    def active_array(x):
        return adjit.autodiff(adjit.Reverse, rosen, adjit.Active(x))

    with pytest.raises(adjit.CompilationError, match="only float scalars are"):
        active_array(X)

    @adjit.func
    def total(x):
        return x[0] + x[1]

    @adjit.kernel
    def array_gradient_in_a_kernel(x, out):
        i = adjit.index()
        g = adjit.grad(total)(x)
        out[i] = g[0]

    with pytest.raises(adjit.CompilationError, match="only @adjit.jit functions allocate"):
        array_gradient_in_a_kernel(np.ones(3), np.ones(3), ndrange=3)

    @adjit.jit
    def doubled(x):
        return x * 2.0

    @adjit.jit
    def gradient_of_an_array_function(x):
        return adjit.grad(doubled)(x)

    with pytest.raises(adjit.CompilationError, match="returns an array"):
        gradient_of_an_array_function(X)

    def product(x, y):
        return x * x * y

    # value_and_grad over a tuple of argnums returns (value, (gx, gy)); differentiating it
    # again was an internal error (a nested tuple reached the defined function's return).
    nested = adjit.grad(adjit.value_and_grad(product, argnums=(0, 1)))
    with pytest.raises(adjit.CompilationError, match=r"returns \(value, \(gradients"):
        nested(2.0, 3.0)


@adjit.kernel
def stencil(u, v, k):
    i, j = adjit.index_nd()
    n, m = u.shape[0], u.shape[1]
    v[i, j] = u[i, j] + k * (u[(i + n - 1) % n, j] + u[(i + 1) % n, j] + u[i, (j + m - 1) % m]
                             + u[i, (j + 1) % m] - 4.0 * u[i, j])


@adjit.jit
def cubed_after(u0, steps: int):
    u = u0.copy()
    v = adjit.empty_like(u)
    for _ in range(steps):
        stencil(u, v, 0.1, ndrange=u.shape)
        u, v = v, u
    return adjit.sum(u * u * u)


@pytest.mark.parametrize("steps", [1, 4, 7])
def test_hessian_vector_product_through_launches_and_swapped_arrays(steps):
    """Forward over reverse of a time loop of kernel launches whose arrays swap each step
    (the reverse code selects between shadows), against finite differences of gradients."""
    rng = np.random.default_rng(steps)
    u0, w = rng.random((6, 5)), rng.standard_normal((6, 5))
    g = adjit.grad(cubed_after)
    hv = adjit.autodiff(adjit.Forward, g, adjit.Duplicated(u0, w), adjit.Const(steps))
    eps = 1e-6
    fd = (g(u0 + eps * w, steps) - g(u0 - eps * w, steps)) / (2 * eps)
    np.testing.assert_allclose(hv, fd, rtol=1e-6, atol=1e-8)


def test_a_derivative_of_a_derivative_compiles_once_per_signature():
    assert adjit.grad(smooth) is adjit.grad(smooth)
    assert adjit.grad(smooth, [0, 1]) is adjit.grad(smooth, (0, 1))
    assert adjit.grad(smooth) is not adjit.value_and_grad(smooth)
    before = len(adjit.grad(rosen).compiled)
    for _ in range(3):
        adjit.hvp(rosen, (X,), (V,))
    assert len(adjit.grad(rosen).compiled) <= before + 1


def test_jacfwd_and_hessian_inside_compiled_code():
    """A Jacobian is one compiled loop of forward passes, inside @jit code too; a scalar
    Newton iteration compiles whole."""
    @adjit.jit
    def cyclic(x):
        y = adjit.empty_like(x)
        for i in range(len(x)):
            y[i] = adjit.sin(x[i]) * x[(i + 1) % len(x)] + x[i] * x[i]
        return y

    @adjit.jit
    def both(x):
        return adjit.jacfwd(cyclic)(x), adjit.hessian(rosen)(x), adjit.jacrev(cyclic)(x)

    x = np.linspace(0.1, 1.6, 16)
    expected = np.diag(np.cos(x) * np.roll(x, -1) + 2 * x)
    for i in range(16):
        expected[i, (i + 1) % 16] += np.sin(x[i])
    jac, hess, by_rows = both(x)
    np.testing.assert_allclose(jac, expected, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(by_rows, expected, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(adjit.jacrev(rosen)(x), rosen_grad(x), rtol=1e-14)
    np.testing.assert_allclose(hess, rosen_hessian(x), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(adjit.jacfwd(cyclic)(x), expected, rtol=1e-14, atol=1e-15)

    @adjit.func
    def cubic(x):
        return x * x * x - 2.0 * x - 5.0

    @adjit.jit
    def newton(x, iters: int):
        for _ in range(iters):
            x = x - cubic(x) / adjit.jacfwd(cubic)(x)
        return x

    root = newton(2.0, 8)
    assert abs(root ** 3 - 2 * root - 5) < 1e-13


@adjit.kernel
def saxpy_kernel(a, x, y):
    i = adjit.index()
    y[i] = a * x[i] + y[i]


def test_autodiff_of_a_kernel_launch_inside_compiled_code():
    """As from Python: reverse mode returns the Active arguments' derivatives and fills the
    shadows (after the launch's primal effects); forward mode returns None and fills the
    tangents."""
    @adjit.jit
    def reverse(a, x, y, dx, dy):
        da, nothing, _ = adjit.autodiff(adjit.Reverse, saxpy_kernel, adjit.Active(a),
                                        adjit.Duplicated(x, dx), adjit.Duplicated(y, dy),
                                        ndrange=len(x))
        return da

    @adjit.jit
    def forward(a, x, y, dx, dy):
        adjit.autodiff(adjit.Forward, saxpy_kernel, adjit.Duplicated(a, 1.0),
                       adjit.Duplicated(x, dx), adjit.Duplicated(y, dy), ndrange=len(x))

    x, y, dx, dy = np.arange(5.0), np.ones(5), np.zeros(5), np.full(5, 0.5)
    expected = [np.arange(5.0), np.ones(5), np.zeros(5), np.full(5, 0.5)]
    da_python = adjit.autodiff(adjit.Reverse, saxpy_kernel, adjit.Active(2.0),
                               adjit.Duplicated(expected[0], expected[2]),
                               adjit.Duplicated(expected[1], expected[3]), ndrange=5)[0]
    assert reverse(2.0, x, y, dx, dy) == pytest.approx(da_python) == pytest.approx(5.0)
    for got, want in zip((x, y, dx, dy), expected):
        np.testing.assert_array_equal(got, want)
    x, y, dx, dy = np.arange(5.0), np.ones(5), np.ones(5), np.zeros(5)
    forward(2.0, x, y, dx, dy)
    np.testing.assert_allclose(dy, np.arange(5.0) + 2.0)      # x * da + a * dx
    np.testing.assert_allclose(y, 2.0 * np.arange(5.0) + 1.0)


def test_vjp_inside_compiled_code():
    """vjp(f, *primals) gives (value, pullback) in @jit code too; the pullback compiles to
    the reverse pass (of the inner product with an array cotangent), as from Python."""
    @adjit.jit
    def wave(x, a):
        y = adjit.empty_like(x)
        for i in range(len(x)):
            y[i] = adjit.sin(x[i]) * a + x[i] * x[i]
        return y

    @adjit.jit
    def pulled(x, a, ct):
        y, pullback = adjit.vjp(wave, x, a)
        gx, ga = pullback(ct)
        value, scalar_pullback = adjit.vjp(rosen, x)
        (g,) = scalar_pullback(2.0)
        return y, gx, ga, value, g

    x, ct = np.linspace(0.1, 1.0, 5), np.arange(5.0)
    y, gx, ga, value, g = pulled(x, 1.5, ct)
    np.testing.assert_allclose(y, np.sin(x) * 1.5 + x * x, rtol=1e-15)
    np.testing.assert_allclose(gx, ct * (np.cos(x) * 1.5 + 2 * x), rtol=1e-14)
    assert ga == pytest.approx(np.sum(ct * np.sin(x)), rel=1e-14)
    assert value == pytest.approx(rosen(x))
    np.testing.assert_allclose(g, 2.0 * rosen_grad(x), rtol=1e-14)
    _, python_pullback = adjit.vjp(wave, x, 1.5)
    np.testing.assert_allclose(python_pullback(ct)[0], gx, rtol=1e-15)


def test_second_derivatives_where_a_guarded_rule_sees_a_zero_seed():
    """The strong-zero guard of a rule (0 for a zero seed where the partial is inf) must not
    zero the rule's own derivative where the partial is finite: x sin(x) at 0 has second
    derivative 2 (a guard `seed == 0 ? 0 : seed * partial` gave 1), and d2/(da db) a^b at
    b = 0 is 1/a (pow's guard at b == 0)."""
    @adjit.jit
    def x_sin_x(x: float):
        return x * math.sin(x)

    @adjit.jit
    def sum_x_sin_x(x):
        s = 0.0
        for i in range(len(x)):
            s += x[i] * adjit.sin(x[i])
        return s

    @adjit.jit
    def power(a: float, b: float):
        return a ** b

    assert adjit.hvp(x_sin_x, (0.0,), (1.0,)) == 2.0
    assert adjit.grad(adjit.grad(x_sin_x))(0.0) == 2.0
    np.testing.assert_allclose(adjit.hessian(sum_x_sin_x)(np.array([0.0, 1.0])),
                               np.diag([2.0, 2 * math.cos(1.0) - math.sin(1.0)]), rtol=1e-15)
    assert adjit.grad(adjit.grad(power, 0), 1)(2.0, 0.0) == pytest.approx(0.5, rel=1e-15)
    # the guards themselves still hold: 0, not NaN, where the partial is infinite
    assert adjit.grad(power, 0)(0.0, 0.0) == 0.0 and adjit.grad(power, 1)(0.0, 2.0) == 0.0
