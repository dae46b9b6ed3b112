"""Trust where features meet, in the autodiff pass (issue 29): a split-mode tape of a
checkpointed loop reversed several times, second order through `@` and through custom rules
that call an @func, reverse mode of an @func that returns early twice, jacrev of grad of
loops. Every derivative is checked against JAX (float64) and finite differences."""
from __future__ import annotations

import numpy as np
import pytest

import adjit

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy


# == a split-mode tape of a checkpointed loop serves several reverse calls =====================
from test_checkpoint import damped                 # noqa: E402  (the checkpoint tests' step)


@adjit.jit
def cubic_after_the_loop(u0, c: float, steps: int):
    """The code after the loop reads the final state non-linearly (its reverse reads u)."""
    u = u0.copy()
    v = adjit.empty_like(u)
    e = 0.0
    for t in adjit.checkpointed(range(steps), snapshots=3):
        damped(u, v, c, ndrange=u.shape)
        e = e + adjit.sum(v * v) * (1.0 + 0.01 * t)
        u, v = v, u
    return e + adjit.sum(u * u * u)


@adjit.jit
def cubic_after_the_while_loop(u0, c: float, steps: int):
    u = u0.copy()
    v = adjit.empty_like(u)
    e = 0.0
    t = 0
    while adjit.checkpointed(t < steps, snapshots=3):
        damped(u, v, c, ndrange=u.shape)
        e = e + adjit.sum(v * v) * (1.0 + 0.01 * t)
        u, v = v, u
        t += 1
    return e + adjit.sum(u * u * u)


def _jax_energy(u, c, steps):
    e = 0.0
    for t in range(steps):
        v = u + c * (jnp.roll(u, 1) - 2.0 * u + jnp.roll(u, -1)) - 0.1 * jnp.sin(u)
        e = e + jnp.sum(v * v) * (1.0 + 0.01 * t)
        u = v
    return e + jnp.sum(u * u * u)


@pytest.mark.parametrize("f", [cubic_after_the_loop, cubic_after_the_while_loop])
@pytest.mark.parametrize("steps", [1, 9])
def test_a_checkpointed_tape_reversed_three_times(f, steps):
    u0 = np.random.default_rng(2).uniform(-1, 1, 17)
    c = 0.2
    fwd, rev = adjit.autodiff_thunk(adjit.ReverseSplitWithPrimal, f, adjit.Duplicated,
                                    adjit.Active, adjit.Const)
    x, g0 = u0.copy(), np.zeros_like(u0)
    tape, value, _ = fwd(adjit.Duplicated(x, g0), adjit.Active(c), adjit.Const(steps))
    assert value == pytest.approx(float(_jax_energy(u0, c, steps)), rel=1e-13)
    du, dc = jax.grad(_jax_energy, argnums=(0, 1))(u0, c, steps)
    h = 1e-6
    e = np.zeros_like(u0)
    e[5] = h
    fd_u5 = (f(u0 + e, c, steps) - f(u0 - e, c, steps)) / (2 * h)
    fd_c = (f(u0, c + h, steps) - f(u0, c - h, steps)) / (2 * h)
    for seed in (1.0, 2.5, -0.5):
        g = np.zeros_like(u0)
        d = rev(adjit.Duplicated(x, g), adjit.Active(c), adjit.Const(steps), seed, tape)
        np.testing.assert_allclose(g, seed * np.asarray(du), rtol=1e-12, atol=1e-13)
        assert d[1] == pytest.approx(seed * float(dc), rel=1e-12)
        assert g[5] == pytest.approx(seed * fd_u5, rel=1e-6)
        assert d[1] == pytest.approx(seed * fd_c, rel=1e-6)


@adjit.jit
def stepped_in_place(u, c: float, steps: int):
    """The loop's state is the caller's array, which holds the final state afterwards."""
    v = adjit.empty_like(u)
    for _ in adjit.checkpointed(range(steps), snapshots=3):
        damped(u, v, c, ndrange=u.shape)
        u[:] = v
    return adjit.sum(u * u)


def test_reverse_mode_leaves_the_state_array_as_the_primal_call_does():
    u0 = np.random.default_rng(3).uniform(-1, 1, 17)
    x = u0.copy()
    stepped_in_place(x, 0.2, 9)
    y, g = u0.copy(), np.zeros_like(u0)
    adjit.autodiff(adjit.Reverse, stepped_in_place, adjit.Duplicated(y, g), adjit.Active(0.2), 9)
    np.testing.assert_array_equal(y, x)


# == second order through @ and np.dot =========================================================
def _fd_gradient(f, x, h=1e-6):
    """Central differences of f's gradient: the Hessian, column by column."""
    cols = []
    for k in range(x.size):
        e = np.zeros_like(x)
        e.flat[k] = h
        cols.append((np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * h))
    return np.stack(cols, axis=-1).reshape(x.shape + x.shape)


@adjit.jit
def quadratic(x, a):
    return 0.5 * (x @ a @ x)


@adjit.jit
def quadratic_dot(x, a):
    return 0.5 * np.dot(x, np.dot(a.T, x)) + np.sum(np.dot(x, a) ** 2)


def _jax_quadratic_dot(x, a):
    return 0.5 * jnp.dot(x, jnp.dot(a.T, x)) + jnp.sum(jnp.dot(x, a) ** 2)


@adjit.jit
def summed_gradient(x, a):
    return adjit.sum(adjit.grad(quadratic)(x, a))


@pytest.mark.parametrize("how", ["hessian", "jacrev(grad)", "jacfwd(grad)", "grad(grad)"])
def test_second_order_through_matmul(how):
    rng = np.random.default_rng(4)
    a = rng.standard_normal((5, 5))
    x = rng.standard_normal(5)
    want = np.asarray(jax.hessian(lambda x: 0.5 * (x @ jnp.asarray(a) @ x))(x))
    np.testing.assert_allclose(want, 0.5 * (a + a.T), rtol=1e-14)
    if how == "hessian":
        got = adjit.hessian(quadratic)(x, a)
    elif how == "jacrev(grad)":
        got = adjit.jacrev(adjit.grad(quadratic))(x, a)
    elif how == "jacfwd(grad)":
        got = adjit.jacfwd(adjit.grad(quadratic))(x, a)
    else:      # d/dx_k of the gradient's component k, summed: the trace
        got = adjit.grad(summed_gradient)(x, a)
        want = want.sum(axis=0)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)
    got = adjit.hessian(quadratic_dot)(x, a)
    want = np.asarray(jax.hessian(_jax_quadratic_dot)(x, jnp.asarray(a)))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    fd = _fd_gradient(lambda y: adjit.grad(quadratic_dot)(y, a), x)
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-6)


@adjit.jit
def mlp_loss(w1, x, w2, y):
    h = np.tanh(x @ w1)
    return 0.5 * np.sum((h @ w2 - y) ** 2)


def _jax_mlp_loss(w1, x, w2, y):
    h = jnp.tanh(x @ w1)
    return 0.5 * jnp.sum((h @ w2 - y) ** 2)


def test_hvp_of_an_mlp_loss_against_jax_and_finite_differences():
    rng = np.random.default_rng(5)
    w1, x, w2, y = (rng.standard_normal(s) for s in ((3, 6), (8, 3), (6, 2), (8, 2)))
    v = rng.standard_normal(w1.shape)
    zeros = [np.zeros_like(t) for t in (x, w2, y)]
    hv = adjit.hvp(mlp_loss, (w1, x, w2, y), (v, *zeros))[0]
    want = jax.jvp(jax.grad(lambda w: _jax_mlp_loss(w, x, w2, y)), (w1,), (v,))[1]
    np.testing.assert_allclose(hv, np.asarray(want), rtol=1e-11, atol=1e-12)
    h = 1e-6
    g = adjit.grad(mlp_loss)
    fd = (g(w1 + h * v, x, w2, y) - g(w1 - h * v, x, w2, y)) / (2 * h)
    np.testing.assert_allclose(hv, fd, rtol=1e-6, atol=1e-7)


def test_third_order_through_matmul():
    """The rules' products carry the rules again: any order works."""
    rng = np.random.default_rng(6)
    a = rng.standard_normal((4, 4))
    x = rng.standard_normal(4)

    @adjit.jit
    def cubic(x, a):
        return np.sum((a @ x) ** 3)

    got = adjit.jacfwd(adjit.hessian(cubic))(x, a)
    want = jax.jacfwd(jax.hessian(lambda x: jnp.sum((jnp.asarray(a) @ x) ** 3)))(x)
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-11, atol=1e-11)


# == second order through custom rules that call another @func ================================
@adjit.func
def sigmoid(x):
    return 1.0 / (1.0 + adjit.exp(-x))


@adjit.func
def softplus(x):
    return adjit.log(1.0 + adjit.exp(x))


@adjit.rules.forward(softplus)
def _(config, x):
    return softplus(x.val), sigmoid(x.val) * x.dval


@adjit.rules.augmented_primal(softplus)
def _(config, x):
    return adjit.rules.AugmentedReturn(softplus(x.val), None, x.val)


@adjit.rules.reverse(softplus)
def _(config, dret, tape, x):
    return (dret * sigmoid(tape),)


@adjit.jit
def softplus_loss(x):
    s = 0.0
    for i in range(x.shape[0]):
        s = s + softplus(x[i] * x[(i + 1) % x.shape[0]])
    return s


def _jax_softplus_loss(x):
    return jnp.sum(jax.nn.softplus(x * jnp.roll(x, -1)))


@adjit.jit
def summed_softplus_gradient(x):
    return adjit.sum(adjit.grad(softplus_loss)(x))


@pytest.mark.parametrize("how", ["hessian", "jacrev(grad)", "grad(grad)"])
def test_second_order_through_rules_that_call_a_func(how):
    x = np.random.default_rng(7).standard_normal(5)
    want = np.asarray(jax.hessian(_jax_softplus_loss)(x))
    if how == "hessian":
        got = adjit.hessian(softplus_loss)(x)
    elif how == "jacrev(grad)":
        got = adjit.jacrev(adjit.grad(softplus_loss))(x)
    else:
        got = adjit.grad(summed_softplus_gradient)(x)
        want = want.sum(axis=0)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)
    if how == "hessian":
        fd = _fd_gradient(adjit.grad(softplus_loss), x)
        np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-7)


# == reverse mode of a kernel calling an @func that returns early twice ======================
@adjit.func
def piecewise(x):
    if x > 1.0:
        return x * x
    if x < -1.0:
        return -x
    return x * 0.5


@adjit.func
def through(x):
    """A call of it from another @func with a branch of its own."""
    if x > 2.5:
        return piecewise(x) * adjit.sin(x)
    return piecewise(x)


@adjit.kernel
def apply_piecewise(x, y):
    i = adjit.index()
    y[i] = piecewise(x[i])


@adjit.kernel
def apply_through(x, y):
    i = adjit.index()
    y[i] = through(x[i]) * x[i]


def _jax_piecewise(x):
    return jnp.where(x > 1.0, x * x, jnp.where(x < -1.0, -x, x * 0.5))


def _jax_through(x):
    return jnp.where(x > 2.5, _jax_piecewise(x) * jnp.sin(x), _jax_piecewise(x)) * x


@pytest.mark.parametrize("kernel, reference", [(apply_piecewise, _jax_piecewise),
                                               (apply_through, _jax_through)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reverse_of_a_kernel_calling_a_func_with_two_early_returns(kernel, reference, dtype):
    x = np.array([-2.0, -1.5, -0.5, 0.3, 0.9, 1.5, 2.0, 3.0], dtype=dtype)   # every branch
    y, dx = np.zeros_like(x), np.zeros_like(x)
    dy = np.linspace(0.5, 2.0, x.size).astype(dtype)
    adjit.autodiff(adjit.Reverse, kernel, adjit.Duplicated(x, dx), adjit.Duplicated(y, dy),
                   ndrange=x.size)
    x64 = x.astype(np.float64)
    want_y = np.asarray(reference(x64))
    want_dx = np.asarray(jax.vmap(jax.grad(reference))(x64)) * np.linspace(0.5, 2.0, x.size)
    rtol = 1e-6 if dtype == np.float32 else 1e-14
    assert y.dtype == dtype and dx.dtype == dtype
    np.testing.assert_allclose(y, want_y, rtol=rtol)
    np.testing.assert_allclose(dx, want_dx, rtol=rtol)
    h = 1e-6
    fd = np.zeros_like(x64)
    for k in range(x.size):
        e = np.zeros_like(x64)
        e[k] = h
        up, down = np.zeros_like(x64), np.zeros_like(x64)
        kernel(x64 + e, up, ndrange=x.size)
        kernel(x64 - e, down, ndrange=x.size)
        fd[k] = (up[k] - down[k]) / (2 * h)
    np.testing.assert_allclose(dx, fd * np.linspace(0.5, 2.0, x.size), rtol=1e-5, atol=1e-7)


# == jacrev(grad(f)) of loops: reverse over reverse ============================================
@adjit.jit
def chained(x):
    s = 0.5
    for i in range(x.shape[0]):
        s = adjit.sin(s) * x[i] + x[i] * x[(i + 1) % x.shape[0]]
    return s


@adjit.jit
def chained_with_break(x):
    """A for loop that can break is an scf.while, whose augmented pass (the first
    derivative's) grows its stacks in the loop: arrays made inside it, for the second."""
    s = 0.5
    for i in range(x.shape[0]):
        if x[i] > 100.0:
            break
        s = adjit.sin(s) * x[i] + x[i] * x[(i + 1) % x.shape[0]]
    return s


@adjit.jit
def chained_while(x):
    s = 0.5
    i = 0
    while i < x.shape[0]:
        s = adjit.sin(s) * x[i] + x[i] * x[(i + 1) % x.shape[0]]
        i += 1
    return s


def _jax_chained(x):
    s = 0.5
    for i in range(x.shape[0]):
        s = jnp.sin(s) * x[i] + x[i] * x[(i + 1) % x.shape[0]]
    return s


@adjit.jit
def rows_for(x):
    """Row arithmetic: an array made in each step, carried."""
    r = adjit.zeros(x.shape[1])
    for i in range(x.shape[0]):
        r = r * x[i, :] + x[i, :] * x[i, :]
    return adjit.sum(r * r)


@adjit.jit
def rows_with_break(x):
    r = adjit.zeros(x.shape[1])
    for i in range(x.shape[0]):
        if x[i, 0] > 100.0:
            break
        r = r * x[i, :] + x[i, :] * x[i, :]
    return adjit.sum(r * r)


@adjit.jit
def rows_while(x):
    r = adjit.zeros(x.shape[1])
    i = 0
    while i < x.shape[0]:
        r = r * x[i, :] + x[i, :] * x[i, :]
        i += 1
    return adjit.sum(r * r)


def _jax_rows(x):
    r = jnp.zeros(x.shape[1])
    for i in range(x.shape[0]):
        r = r * x[i, :] + x[i, :] * x[i, :]
    return jnp.sum(r * r)


@pytest.mark.parametrize("f, reference, shape", [
    (chained, _jax_chained, (5,)), (chained_with_break, _jax_chained, (5,)),
    (chained_while, _jax_chained, (5,)), (rows_for, _jax_rows, (3, 2)),
    (rows_with_break, _jax_rows, (3, 2)), (rows_while, _jax_rows, (3, 2))])
def test_jacrev_of_grad_of_loops(f, reference, shape):
    x = np.random.default_rng(8).uniform(-1, 1, shape)
    want = np.asarray(jax.hessian(reference)(x))
    np.testing.assert_allclose(adjit.grad(f)(x), np.asarray(jax.grad(reference)(x)),
                               rtol=1e-12, atol=1e-13)
    got = adjit.jacrev(adjit.grad(f))(x)
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(adjit.hessian(f)(x), want, rtol=1e-11, atol=1e-12)
    fd = _fd_gradient(adjit.grad(f), x)
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-6)
