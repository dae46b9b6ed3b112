"""Loops as people write them (issue 33, item 4): a for loop over a tuple of functions, kernels
or constants (unrolled while compiling; enumerate, zip, len); reverse mode of a while loop
that rebinds an array it makes; second order through a loop whose body makes temporaries;
a checkpointed loop whose step makes its new state (`u = step(u)`); fixed_point with a
tolerance given at run time. Each against JAX in float64 and central differences, with odd
step counts, 0 and 1 iterations; each function compiled once in the module."""
from __future__ import annotations

import numpy as np
import pytest

import adjit
from adjit import Array, Const, Duplicated, f64

jax = pytest.importorskip("jax")
jnp = jax.numpy
jax.config.update("jax_enable_x64", True)

U0 = np.linspace(0.5, 2.0, 5)


def central(f, x, *rest, h=1e-6):
    """The gradient of scalar f in its array x by central differences."""
    out = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e.flat[i] = h
        out.flat[i] = (f(x + e, *rest) - f(x - e, *rest)) / (2 * h)
    return out


# ---- a loop over a tuple of functions, kernels, constants: unrolled --------------------------
@adjit.jit
def double(x):
    return x * 2.0


@adjit.jit
def shift(x):
    return x + 1.0


@adjit.jit
def square(x):
    return x * x


STAGES = (double, shift, square)        # a module-level tuple of functions (of arrays too)
WEIGHTS = [1.0, 2.0, 3.0]               # a list of constants


@adjit.jit
def staged(x):
    for f in STAGES:
        x = f(x)
    return x * len(STAGES)


@adjit.jit
def weighted(x: Array[f64, 1]) -> f64:
    s = 0.0
    for k, (f, w) in enumerate(zip(STAGES, WEIGHTS)):
        s = s + (k + w) * np.sum(f(x))
    pair = (x, 2.0 * x)                 # a tuple of arrays, by item and by index
    for a in pair[:1]:
        s = s + np.sum(a * a)
    for i in range(1, len(pair)):
        s = s + np.sum(pair[i] * pair[i])
    for f in ():                        # no item: the body never runs
        s = f(s)
    return s


def weighted_jax(x):
    fs = (lambda v: v * 2.0, lambda v: v + 1.0, lambda v: v * v)
    s = 0.0
    for k, (f, w) in enumerate(zip(fs, WEIGHTS)):
        s = s + (k + w) * jnp.sum(f(x))
    return s + jnp.sum(x * x) + jnp.sum(4.0 * x * x)


@adjit.jit
def by_index(x: Array[f64, 1]) -> f64:
    """`for i in range(len(STAGES))` indexing the tuple (and a list of constants) by i."""
    for i in range(len(STAGES)):
        x = STAGES[i](x) * WEIGHTS[i]
    return np.sum(x)


def by_index_jax(x):
    return jnp.sum((((x * 2.0) * 1.0 + 1.0) * 2.0) ** 2 * 3.0)


def test_a_range_loop_indexing_a_tuple_unrolls():
    assert by_index(U0) == pytest.approx(float(by_index_jax(U0)), rel=1e-14)
    np.testing.assert_allclose(adjit.grad(by_index)(U0), jax.grad(by_index_jax)(U0),
                               rtol=1e-14)


@adjit.jit
def layers(params, x):
    """A loop over a pytree argument (a list of (W, b) pairs), and by index."""
    for W, b in params[:1]:
        x = np.tanh(x @ W + b)
    for k in range(1, len(params)):
        W, b = params[k]
        x = np.tanh(x @ W + b)
    return np.sum(x * x)


def layers_jax(params, x):
    for W, b in params:
        x = jnp.tanh(x @ W + b)
    return jnp.sum(x * x)


def test_a_loop_over_the_layers_of_a_pytree_argument():
    rng = np.random.default_rng(5)
    params = [(rng.standard_normal((3, 4)), rng.standard_normal(4)),
              (rng.standard_normal((4, 2)), rng.standard_normal(2))]
    x = rng.standard_normal((5, 3))
    assert layers(params, x) == pytest.approx(float(layers_jax(params, x)), rel=1e-13)
    got, want = adjit.grad(layers)(params, x), jax.grad(layers_jax)(params, x)
    for (gw, gb), (jw, jb) in zip(got, want):
        np.testing.assert_allclose(gw, jw, rtol=1e-12)
        np.testing.assert_allclose(gb, jb, rtol=1e-12)


def test_a_loop_over_a_tuple_of_functions_unrolls():
    assert staged(3.0) == 3 * (2 * 3.0 + 1.0) ** 2
    assert adjit.grad(staged)(3.0) == pytest.approx(3 * 4 * (2 * 3.0 + 1.0))
    _, dy = adjit.jvp(staged, (3.0,), (1.0,))
    assert dy == pytest.approx(3 * 4 * (2 * 3.0 + 1.0))


def test_enumerate_zip_and_tuples_of_arrays_against_jax():
    assert weighted(U0) == pytest.approx(float(weighted_jax(U0)), rel=1e-14)
    g = adjit.grad(weighted)(U0)
    np.testing.assert_allclose(g, jax.grad(weighted_jax)(U0), rtol=1e-13)
    np.testing.assert_allclose(g, central(weighted, U0), rtol=1e-7)
    _, dy = adjit.jvp(weighted, (U0,), (np.ones(5),))
    assert dy == pytest.approx(float(g.sum()), rel=1e-13)


@adjit.kernel
def accumulate(x, y):
    i = adjit.index()
    y[i] = y[i] + x[i]


@adjit.kernel
def scale_by(x, y):
    i = adjit.index()
    y[i] = y[i] * adjit.sin(x[i])


@adjit.kernel
def polynomial(x, y):
    """A kernel whose loop over constants unrolls in the kernel itself."""
    i = adjit.index()
    s = 0.0
    for c in WEIGHTS:
        s = s * x[i] + c
    y[i] = s


def pipeline(kernels):
    """A closure over a tuple of kernels, launched in order (the Warp habit)."""
    @adjit.jit
    def run(x, y):
        for k in kernels:
            k(x, y, ndrange=x.shape[0])
        polynomial(x, y, ndrange=0)      # (a launch of no items: y unchanged)
        return np.sum(y * y)
    return run


run_both = pipeline((accumulate, scale_by))


def run_both_jax(x, y):
    return jnp.sum(((y + x) * jnp.sin(x)) ** 2)


@pytest.mark.parametrize("n", [0, 1, 4])
def test_a_tuple_of_kernels_launched_in_a_loop(n):
    x, y = np.linspace(0.1, 1.0, n), np.linspace(-1.0, 1.0, n)
    assert run_both(x, y.copy()) == pytest.approx(float(run_both_jax(x, y)), rel=1e-13)
    gx, gy = adjit.grad(run_both, argnums=(0, 1))(x, y.copy())
    jx, jy = jax.grad(run_both_jax, argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gx, jx, rtol=1e-12)
    np.testing.assert_allclose(gy, jy, rtol=1e-12)


def test_a_kernel_unrolls_a_loop_over_constants():
    x = np.linspace(-1.0, 1.0, 7)
    y = np.zeros(7)
    polynomial(x, y, ndrange=7)
    np.testing.assert_allclose(y, (1.0 * x + 2.0) * x + 3.0, rtol=1e-15)


@adjit.func
def halve(x):
    return x * 0.5


@adjit.func
def sine(x):
    return adjit.sin(x)


SCALAR_STAGES = (halve, sine, halve)     # device functions


@adjit.func
def chain(x):
    for f in SCALAR_STAGES[1:]:          # a tuple the code slices, in a device function
        x = f(x)
    return x


@adjit.jit
def call_chain(x):
    return chain(x)


def test_a_func_loops_over_a_tuple():
    assert call_chain(3.0) == 0.5 * np.sin(3.0)
    assert adjit.grad(call_chain)(3.0) == pytest.approx(0.5 * np.cos(3.0), rel=1e-15)


@adjit.jit
def early_break(x, limit):
    for f in STAGES:
        x = f(x)
        if x > limit:
            break
    return x


@adjit.jit
def skip_some(x, limit):
    s = 0.0
    for k, f in enumerate(STAGES):
        y = f(x)
        if y > limit:
            continue
        s = s + (k + 1) * y
    return s


@adjit.jit
def early_return(x, limit):
    for f in STAGES:
        x = f(x)
        if x > limit:
            return -x
    return x


def in_python(jumping, x, limit):
    """The same function run by Python over plain functions."""
    stages = (lambda v: v * 2.0, lambda v: v + 1.0, lambda v: v * v)
    if jumping == "break":
        for f in stages:
            x = f(x)
            if x > limit:
                break
        return x
    if jumping == "continue":
        s = 0.0
        for k, f in enumerate(stages):
            y = f(x)
            if y > limit:
                continue
            s = s + (k + 1) * y
        return s
    for f in stages:
        x = f(x)
        if x > limit:
            return -x
    return x


@pytest.mark.parametrize("jumping, fn", [("break", early_break), ("continue", skip_some),
                                         ("return", early_return)])
def test_an_unrolled_loop_breaks_continues_and_returns_as_python(jumping, fn):
    for limit in (0.5, 3.5, 6.5, 100.0):      # a jump at each item, and none
        assert fn(1.5, limit) == in_python(jumping, 1.5, limit)
        g = adjit.grad(fn)(1.5, limit)
        h = 1e-6
        fd = (in_python(jumping, 1.5 + h, limit) - in_python(jumping, 1.5 - h, limit)) / (2 * h)
        assert g == pytest.approx(fd, rel=1e-7, abs=1e-9)


MANY = tuple(float(k) for k in range(300))


def test_a_long_sequence_is_not_unrolled():
    @adjit.jit
    def long_sum(x):
        for c in MANY:
            x = x + c
        return x

    with pytest.raises(adjit.CompilationError, match="at most 256 items; this one has 300"):
        long_sum(1.0)


def test_zip_of_an_array_is_refused_clearly():
    @adjit.jit
    def zipped(x):
        s = 0.0
        for a, b in zip(x, x):
            s = s + a * b
        return s

    with pytest.raises(adjit.CompilationError, match=r"zip\(\) of an array"):
        zipped(np.ones(2))


# ---- reverse mode of a while loop that rebinds an array it makes ------------------------------
@adjit.jit
def relax(u0: Array[f64, 1], tol: f64) -> f64:
    u = u0.copy()
    err = 1.0
    while err > tol:
        un = 0.5 * u + 0.1 * np.sin(u) * np.mean(u)      # a new array every iteration
        err = np.max(np.abs(un - u))
        u = un
    return np.sum(u * u)


def iterations(u, tol):
    n, err = 0, 1.0
    while err > tol:
        un = 0.5 * u + 0.1 * np.sin(u) * np.mean(u)
        err, u, n = np.max(np.abs(un - u)), un, n + 1
    return n


def relax_jax(u, n):
    for _ in range(n):
        u = 0.5 * u + 0.1 * jnp.sin(u) * jnp.mean(u)
    return jnp.sum(u * u)


@pytest.mark.parametrize("tol", [2.0, 0.9, 1e-3])      # 0, 1 and 12 iterations
def test_while_loop_rebinding_a_new_array_reverse(tol):
    n = iterations(U0, tol)
    g = adjit.grad(relax)(U0, tol)
    np.testing.assert_allclose(g, jax.grad(relax_jax)(U0, n), rtol=1e-12)
    np.testing.assert_allclose(g, central(relax, U0, tol), rtol=1e-6, atol=1e-12)


@adjit.jit
def relax_by_items(u0, tol):
    """The same, the new array written item by item."""
    u = u0.copy()
    err = 1.0
    while err > tol:
        un = adjit.empty_like(u)
        for i in range(u.shape[0]):
            un[i] = 0.5 * u[i] + 0.1 * adjit.sin(u[i - 1])
        err = np.max(np.abs(un - u))
        u = un
    return np.sum(u * u)


def test_while_loop_writing_its_new_array_item_by_item():
    def step(u):
        return 0.5 * u + 0.1 * jnp.sin(jnp.roll(u, 1))

    u, n, err = jnp.asarray(U0), 0, 1.0
    while err > 1e-3:
        un = step(u)
        u, n, err = un, n + 1, float(jnp.max(jnp.abs(un - u)))

    def loss(u):
        for _ in range(n):
            u = step(u)
        return jnp.sum(u * u)

    g = adjit.grad(relax_by_items)(U0, 1e-3)
    np.testing.assert_allclose(g, jax.grad(loss)(U0), rtol=1e-12)


# ---- second order through a loop whose body makes temporaries --------------------------------
@adjit.jit
def euler(u0: Array[f64, 1], steps: int, dt: f64) -> f64:
    u = u0
    for _ in range(steps):
        tmp = np.sin(u) * dt
        u = u + tmp * u
    return np.sum(u * u * u)


def euler_jax(u, steps, dt):
    for _ in range(steps):
        u = u + jnp.sin(u) * dt * u
    return jnp.sum(u * u * u)


@adjit.jit
def grad_norm(u0: Array[f64, 1], steps: int, dt: f64) -> f64:
    g = adjit.grad(euler)(u0, steps, dt)
    return np.sum(g * g)


@pytest.mark.parametrize("steps", [0, 1, 3])
def test_second_order_through_loop_temporaries(steps):
    h = adjit.hessian(euler)(U0, steps, 0.1)
    np.testing.assert_allclose(h, jax.hessian(euler_jax)(U0, steps, 0.1), rtol=1e-12,
                               atol=1e-12)
    v = np.linspace(1.0, -1.0, 5)
    hv = adjit.autodiff(adjit.Forward, adjit.grad(euler), Duplicated(U0, v), Const(steps),
                        Const(0.1))                                   # jvp of grad
    np.testing.assert_allclose(hv, h @ v, rtol=1e-12, atol=1e-12)
    gg = adjit.grad(grad_norm)(U0, steps, 0.1)                        # grad of grad
    want = jax.grad(lambda u: jnp.sum(jax.grad(euler_jax)(u, steps, 0.1) ** 2))(U0)
    np.testing.assert_allclose(gg, want, rtol=1e-11)
    np.testing.assert_allclose(gg, central(grad_norm, U0, steps, 0.1), rtol=1e-6)


# ---- a checkpointed loop whose step makes its new state -------------------------------------
@adjit.jit
def advance(u: Array[f64, 1], dt: f64) -> Array[f64, 1]:
    return u + dt * np.sin(u) * np.mean(u)


@adjit.jit
def checkpointed_steps(u0: Array[f64, 1], steps: int, dt: f64) -> f64:
    u = u0                                   # the caller's array: never written
    for _ in adjit.checkpointed(range(steps), snapshots=2):
        u = advance(u, dt)                   # a new array each step
    return np.sum(u * u)


@adjit.jit
def stored_steps(u0: Array[f64, 1], steps: int, dt: f64) -> f64:
    u = u0
    for _ in range(steps):
        u = advance(u, dt)
    return np.sum(u * u)


@adjit.jit
def checkpointed_while(u0: Array[f64, 1], t_end: f64, dt: f64) -> f64:
    u = u0
    t = 0.0
    while adjit.checkpointed(t < t_end, every=2):
        u = advance(u, dt)
        t = t + dt
    return np.sum(u * u)


def advance_jax(u, steps, dt):
    for _ in range(steps):
        u = u + dt * jnp.sin(u) * jnp.mean(u)
    return jnp.sum(u * u)


@pytest.mark.parametrize("steps", [0, 1, 7])
def test_checkpointed_loop_of_a_functional_step(steps):
    u0 = U0.copy()
    assert checkpointed_steps(u0, steps, 0.1) == pytest.approx(stored_steps(u0, steps, 0.1),
                                                               rel=1e-15)
    g = adjit.grad(checkpointed_steps)(u0, steps, 0.1)
    np.testing.assert_array_equal(u0, U0)
    np.testing.assert_allclose(g, adjit.grad(stored_steps)(u0, steps, 0.1), rtol=1e-14)
    np.testing.assert_allclose(g, jax.grad(advance_jax)(U0, steps, 0.1), rtol=1e-12)
    np.testing.assert_allclose(g, central(checkpointed_steps, U0, steps, 0.1), rtol=1e-6)
    v = np.linspace(1.0, -1.0, 5)
    tangent = adjit.autodiff(adjit.Forward, checkpointed_steps, Duplicated(u0, v),
                             Const(steps), Const(0.1))
    assert tangent == pytest.approx(float(g @ v), rel=1e-12, abs=1e-14)
    t_end = 0.1 * steps - 0.05       # `steps` steps of 0.1
    gw = adjit.grad(checkpointed_while)(u0, max(t_end, 0.0), 0.1)
    np.testing.assert_allclose(gw, g, rtol=1e-14)


def test_a_checkpointed_step_that_changes_the_shape_is_an_error():
    @adjit.jit
    def growing(u0, steps: int):
        u = u0.copy()
        for _ in adjit.checkpointed(range(steps), snapshots=2):
            u = adjit.zeros(u.shape[0] + 1) + np.sum(u)
        return np.sum(u)

    with pytest.raises(ValueError, match="checkpointed loop's step made 'u' of another shape"):
        growing(np.ones(3), 2)


# ---- fixed_point with a tolerance given at run time -----------------------------------------
@adjit.jit
def newton(x: Array[f64, 1], a: f64) -> Array[f64, 1]:
    return 0.5 * (x + a / x)


@adjit.jit
def root(a: f64, tol: f64) -> f64:
    x = adjit.fixed_point(newton, adjit.ones(2), a, tol=tol)
    return x[0] + x[1]


@adjit.jit
def cosine_step(x: f64, c: f64) -> f64:
    return np.cos(x) * c


@adjit.jit
def scalar_fixed_point(c: f64, tol: f64) -> f64:
    return adjit.fixed_point(cosine_step, 0.5, c, tol=tol, max_iter=200)


@pytest.mark.parametrize("tol", [1e-12, 1e-6])
def test_fixed_point_with_a_run_time_tolerance(tol):
    assert abs(root(2.0, tol) - 2 * np.sqrt(2.0)) < 10 * tol
    da, dtol = adjit.grad(root, argnums=(0, 1))(2.0, tol)
    assert da == pytest.approx(1.0 / np.sqrt(2.0), rel=1e-6)
    assert dtol == 0.0                       # where it stops, not what it computes
    _, dx = adjit.jvp(root, (2.0, tol), (1.0, 0.0))
    assert dx == pytest.approx(1.0 / np.sqrt(2.0), rel=1e-6)
    # x = c cos x: dx/dc = cos x / (1 + c sin x)
    c = 0.8
    x = scalar_fixed_point(c, tol)
    assert abs(x - c * np.cos(x)) < 10 * tol
    assert adjit.grad(scalar_fixed_point)(c, tol) == pytest.approx(
        np.cos(x) / (1 + c * np.sin(x)), rel=10 * tol ** 0.5)


@adjit.jit
def root32(a, tol: float):
    x = adjit.fixed_point(newton, adjit.ones(2, adjit.f32), a, tol=tol)
    return x[0]


def test_fixed_point_run_time_tolerance_in_float32():
    a = np.float32(2.0)
    x = root32(a, 1e-6)
    assert np.asarray(x).dtype == np.float32 and abs(x - np.sqrt(2.0)) < 1e-6
    g = adjit.grad(root32)(a, 1e-6)
    assert np.asarray(g).dtype == np.float32
    assert g == pytest.approx(0.5 / np.sqrt(2.0), rel=1e-5)


def test_fixed_point_run_time_tolerance_errors():
    with pytest.raises(ValueError, match=r"tol= must be >= 0"):
        root(2.0, -1.0)
    with pytest.raises(RuntimeError, match=r"did not converge: after max_iter=200 iterations"):
        scalar_fixed_point(0.8, 0.0)


# ---- float32 training with Python hyper-parameters stays float32 (item 5, NEP 50) -----------
@adjit.jit
def mlp_loss(w1, w2, x, y):
    h = np.tanh(x @ w1)
    return np.mean((h @ w2 - y) ** 2)


@adjit.jit
def train(w1, w2, x, y, lr, momentum, clip, steps: int):
    """Momentum SGD with clipped gradients; lr, momentum and clip are Python floats."""
    v1, v2 = np.zeros_like(w1), np.zeros_like(w2)
    loss = 0.0
    for _ in range(steps):
        loss, (g1, g2) = adjit.value_and_grad(mlp_loss, argnums=(0, 1))(w1, w2, x, y)
        v1 = momentum * v1 - lr * np.clip(g1, -clip, clip)
        v2 = momentum * v2 - lr * np.clip(g2, -clip, clip)
        w1 = w1 + v1
        w2 = w2 + v2
    return w1, w2, loss


def train_jax(w1, w2, x, y, lr, momentum, clip, steps):
    def loss_fn(w1, w2):
        return jnp.mean((jnp.tanh(x @ w1) @ w2 - y) ** 2)
    v1, v2, loss = jnp.zeros_like(w1), jnp.zeros_like(w2), 0.0
    for _ in range(steps):
        loss, (g1, g2) = jax.value_and_grad(loss_fn, argnums=(0, 1))(w1, w2)
        v1 = momentum * v1 - lr * jnp.clip(g1, -clip, clip)
        v2 = momentum * v2 - lr * jnp.clip(g2, -clip, clip)
        w1, w2 = w1 + v1, w2 + v2
    return w1, w2, loss


@pytest.mark.parametrize("steps", [0, 1, 5])
def test_a_float32_training_loop_stays_float32(steps):
    rng = np.random.default_rng(3)
    w1, w2, x, y = (rng.standard_normal(s).astype(np.float32)
                    for s in ((3, 4), (4, 2), (6, 3), (6, 2)))
    n1, n2, loss = train(w1, w2, x, y, 0.1, 0.9, 0.5, steps)
    assert n1.dtype == n2.dtype == np.float32
    # (loss = 0.0 is weak: the loop gives it the float32 the loss has, even with no step)
    assert np.asarray(loss).dtype == np.float32
    want = train_jax(*(a.astype(np.float64) for a in (w1, w2, x, y)), 0.1, 0.9, 0.5, steps)
    np.testing.assert_allclose(n1, want[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(n2, want[1], rtol=1e-5, atol=1e-6)
    assert float(loss) == pytest.approx(float(want[2]), rel=1e-5, abs=1e-7)
    g = adjit.grad(mlp_loss)(w1, w2, x, y)           # and from Python
    assert g.dtype == np.float32


@adjit.jit
def after_training(w1, w2, x, y, lr):
    """The loss after two training steps: its gradient differentiates through the loop of
    gradients (second order), in float32."""
    w1, w2, _ = train(w1, w2, x, y, lr, 0.9, 0.5, 2)
    return mlp_loss(w1, w2, x, y)


def test_the_gradient_through_a_float32_training_loop_is_float32():
    rng = np.random.default_rng(4)
    w1, w2, x, y = (rng.standard_normal(s).astype(np.float32)
                    for s in ((3, 4), (4, 2), (6, 3), (6, 2)))
    g = adjit.grad(after_training)(w1, w2, x, y, 0.1)
    assert g.dtype == np.float32

    def after_jax(w1):
        a, b, _ = train_jax(w1, *(v.astype(np.float64) for v in (w2, x, y)), 0.1, 0.9, 0.5, 2)
        return jnp.mean((jnp.tanh(x @ a) @ b - y) ** 2)

    np.testing.assert_allclose(g, jax.grad(after_jax)(w1.astype(np.float64)), rtol=2e-4,
                               atol=1e-6)


def test_a_new_state_made_under_a_branch_is_refused_with_the_way_out():
    @adjit.jit
    def branchy(u0, steps: int):
        u = u0
        for t in adjit.checkpointed(range(steps), snapshots=2):
            if t % 2 == 0:
                u = u * 0.5
        return np.sum(u)

    assert branchy(np.ones(3), 3) == 3 * 0.25         # the primal runs
    with pytest.raises(adjit.CompilationError, match="a branch or an inner loop of its step"):
        adjit.grad(branchy)(np.ones(3), 3)
