"""Reverse mode of kernels whose loops run a different number of times per work item (issue
10): per-item step counts, loops stopped by an event, `while`, `break` and `continue`,
nested dynamic loops, items with no steps, 1-D and 2-D ndranges, a data-dependent `while`
in an @adjit.func. Their values go to packed per-item tapes sized by a counting pass
(passes/autodiff/generate/dynamic_tape.py). Each against a float64 NumPy reference of the primal, its
central differences, an analytic derivative where there is one, and forward mode."""
import numpy as np
import pytest

import adjit
from adjit import Active, CompilationError, Const, Duplicated, Forward, Reverse

DT = 0.01


# ---- RK4 with a per-item number of steps ------------------------------------------------------

@adjit.func
def rhs(y, k):
    return -k * y * y


@adjit.kernel
def rk4_steps(n, y0, k, out):
    i = adjit.index()
    y = y0[i]
    for _ in range(n[i]):
        a = rhs(y, k[i])
        b = rhs(y + 0.5 * DT * a, k[i])
        c = rhs(y + 0.5 * DT * b, k[i])
        d = rhs(y + DT * c, k[i])
        y = y + DT / 6.0 * (a + 2.0 * b + 2.0 * c + d)
    out[i] = y


def rk4_np(n, y0, k):
    """Vectorised over items: each item stops after its own n[i] steps."""
    y = y0.astype(np.float64).copy()
    k = k.astype(np.float64)
    for s in range(int(n.max(initial=0))):
        go = s < n
        a = -k * y * y
        b = -k * (y + 0.5 * DT * a) ** 2
        c = -k * (y + 0.5 * DT * b) ** 2
        d = -k * (y + DT * c) ** 2
        y = np.where(go, y + DT / 6.0 * (a + 2 * b + 2 * c + d), y)
    return y


def test_4096_odes_with_per_item_step_counts():
    rng = np.random.default_rng(0)
    m = 4096
    n = rng.integers(0, 200, m)
    n[:3] = 0, 1, 199                         # no steps, one step, the most
    y0, k = rng.uniform(0.5, 1.5, m), rng.uniform(0.1, 2.0, m)
    seed = rng.standard_normal(m)
    out, dy0, dk = np.zeros(m), np.zeros(m), np.zeros(m)
    adjit.autodiff(Reverse, rk4_steps, Const(n), Duplicated(y0, dy0), Duplicated(k, dk),
                   Duplicated(out, seed.copy()), ndrange=m)
    np.testing.assert_allclose(out, rk4_np(n, y0, k), rtol=1e-13)
    h = 1e-6
    fd_y0 = (rk4_np(n, y0 + h, k) - rk4_np(n, y0 - h, k)) / (2 * h)
    fd_k = (rk4_np(n, y0, k + h) - rk4_np(n, y0, k - h)) / (2 * h)
    np.testing.assert_allclose(dy0, seed * fd_y0, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(dk, seed * fd_k, rtol=1e-6, atol=1e-9)
    # The exact flow of y' = -k y^2 is y0 / (1 + k y0 t): RK4 is within 1e-8 of it here.
    t = n * DT
    np.testing.assert_allclose(dy0, seed / (1 + k * y0 * t) ** 2, rtol=1e-6, atol=1e-9)
    # no steps: the identity
    assert dy0[0] == seed[0] and dk[0] == 0.0
    # forward mode agrees
    ty0 = rng.standard_normal(m)
    tout = np.zeros(m)
    adjit.autodiff(Forward, rk4_steps, Const(n), Duplicated(y0, ty0), Duplicated(k, np.zeros(m)),
                   Duplicated(np.zeros(m), tout), ndrange=m)
    np.testing.assert_allclose(tout, ty0 * dy0 / seed, rtol=1e-10, atol=1e-12)


def test_float32_odes_at_large_size():
    rng = np.random.default_rng(1)
    m = 1 << 16
    n = rng.integers(0, 40, m)
    y0 = rng.uniform(0.5, 1.5, m).astype(np.float32)
    k = rng.uniform(0.1, 2.0, m).astype(np.float32)
    out, dy0, dk = (np.zeros(m, np.float32) for _ in range(3))
    adjit.autodiff(Reverse, rk4_steps, Const(n), Duplicated(y0, dy0), Duplicated(k, dk),
                   Duplicated(out, np.ones(m, np.float32)), ndrange=m)
    t = n * DT
    y64, k64 = y0.astype(np.float64), k.astype(np.float64)
    np.testing.assert_allclose(dy0, 1 / (1 + k64 * y64 * t) ** 2, rtol=1e-4)
    np.testing.assert_allclose(dk, -(y64 ** 2) * t / (1 + k64 * y64 * t) ** 2, rtol=1e-3,
                               atol=1e-6)


# ---- an event stops each item's integration -------------------------------------------------

@adjit.kernel
def fall_until_ground(h0, v0, g, out):
    # Explicit Euler of a falling body with drag, stopped when it reaches the ground (an
    # event: a `while` on the state) or after 10,000 steps (a `break`).
    i = adjit.index()
    h = h0[i]
    v = v0[i]
    steps = 0
    while h > 0.0:
        a = -g[0] - 0.1 * v * abs(v)
        h = h + DT * v
        v = v + DT * a
        steps += 1
        if steps >= 10000:
            break
    out[i] = h + 0.5 * v * v


def fall_np(h0, v0, g):
    out = np.empty_like(h0)
    for i in range(len(h0)):
        h, v, steps = h0[i], v0[i], 0
        while h > 0.0:
            a = -g - 0.1 * v * abs(v)
            h, v = h + DT * v, v + DT * a
            steps += 1
            if steps >= 10000:
                break
        out[i] = h + 0.5 * v * v
    return out


def test_event_stopped_integration():
    rng = np.random.default_rng(2)
    m = 4096
    h0, v0 = rng.uniform(0.5, 3.0, m), rng.uniform(-1.0, 2.0, m)
    h0[0] = -1.0                             # already on the ground: no step
    g = np.array([9.81])
    seed = rng.standard_normal(m)
    out, dh0, dv0, dg = np.zeros(m), np.zeros(m), np.zeros(m), np.zeros(1)
    adjit.autodiff(Reverse, fall_until_ground, Duplicated(h0, dh0), Duplicated(v0, dv0),
                   Duplicated(g, dg), Duplicated(out, seed.copy()), ndrange=m)
    np.testing.assert_allclose(out, fall_np(h0, v0, g[0]), rtol=1e-12)
    # The step count is piecewise constant: differences small enough to keep it (each item's
    # last step ends strictly below 0) match the derivative of the unrolled steps.
    eps = 1e-7
    fd_h0 = (fall_np(h0 + eps, v0, g[0]) - fall_np(h0 - eps, v0, g[0])) / (2 * eps)
    fd_v0 = (fall_np(h0, v0 + eps, g[0]) - fall_np(h0, v0 - eps, g[0])) / (2 * eps)
    fd_g = np.dot(seed, fall_np(h0, v0, g[0] + eps) - fall_np(h0, v0, g[0] - eps)) / (2 * eps)
    np.testing.assert_allclose(dh0, seed * fd_h0, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(dv0, seed * fd_v0, rtol=1e-5, atol=1e-7)
    assert dg[0] == pytest.approx(fd_g, rel=1e-5)
    assert dh0[0] == seed[0] and dv0[0] == seed[0] * v0[0]
    tout = np.zeros(m)
    adjit.autodiff(Forward, fall_until_ground, Duplicated(h0, np.ones(m)),
                   Duplicated(v0, np.zeros(m)), Duplicated(g, np.zeros(1)),
                   Duplicated(np.zeros(m), tout), ndrange=m)
    np.testing.assert_allclose(seed * tout, dh0, rtol=1e-12, atol=1e-14)


# ---- break and continue, nested dynamic loops, 2-D ----------------------------------------

@adjit.kernel
def grow(x, out):
    i = adjit.index()
    s = x[i]
    j = 0
    while s < 100.0:
        j += 1
        if j % 3 == 0:
            s = s + 1.0
            continue
        s = s * s * 0.5 + s
        if s > 50.0 and j > 4:
            break
    out[i] = s


def grow_np(x):
    out = np.empty_like(x)
    for i, s in enumerate(x):
        j = 0
        while s < 100.0:
            j += 1
            if j % 3 == 0:
                s = s + 1.0
                continue
            s = s * s * 0.5 + s
            if s > 50.0 and j > 4:
                break
        out[i] = s
    return out


def test_break_and_continue():
    rng = np.random.default_rng(3)
    x = rng.uniform(0.1, 3.0, 257)
    seed = rng.standard_normal(257)
    out, dx = np.zeros(257), np.zeros(257)
    adjit.autodiff(Reverse, grow, Duplicated(x, dx), Duplicated(out, seed.copy()), ndrange=257)
    np.testing.assert_allclose(out, grow_np(x), rtol=1e-14)
    h = 1e-7
    np.testing.assert_allclose(dx, seed * (grow_np(x + h) - grow_np(x - h)) / (2 * h),
                               rtol=1e-6)
    tout = np.zeros(257)
    adjit.autodiff(Forward, grow, Duplicated(x, np.ones(257)), Duplicated(np.zeros(257), tout),
                   ndrange=257)
    np.testing.assert_allclose(seed * tout, dx, rtol=1e-12)


@adjit.kernel
def nested(n, x, out):
    i, j = adjit.index_nd()
    s = x[i, j]
    for p in range(n[i, j]):
        q = 0
        while q < p:                     # a dynamic loop in a dynamic loop
            s = s * 0.9 + 0.01 * s * s
            q += 1
    out[i, j] = s


def nested_np(n, x):
    out = np.empty_like(x)
    for idx in np.ndindex(*x.shape):
        s = x[idx]
        for p in range(n[idx]):
            for _ in range(p):
                s = s * 0.9 + 0.01 * s * s
        out[idx] = s
    return out


def test_nested_dynamic_loops_2d_and_forward_mode():
    rng = np.random.default_rng(4)
    shape = (9, 13)
    n, x = rng.integers(0, 8, shape), rng.uniform(0.1, 2.0, shape)
    seed = rng.standard_normal(shape)
    out, dx = np.zeros(shape), np.zeros(shape)
    adjit.autodiff(Reverse, nested, Const(n), Duplicated(x, dx), Duplicated(out, seed.copy()),
                   ndrange=shape)
    np.testing.assert_allclose(out, nested_np(n, x), rtol=1e-14)
    h = 1e-6
    fd = (nested_np(n, x + h) - nested_np(n, x - h)) / (2 * h)
    np.testing.assert_allclose(dx, seed * fd, rtol=1e-7, atol=1e-12)
    tout = np.zeros(shape)
    adjit.autodiff(Forward, nested, Const(n), Duplicated(x, np.ones(shape)),
                   Duplicated(np.zeros(shape), tout), ndrange=shape)
    np.testing.assert_allclose(dx, seed * tout, rtol=1e-12)


def test_every_item_with_no_steps():
    n = np.zeros((4, 5), np.int64)
    x = np.arange(20.0).reshape(4, 5)
    out, dx = np.zeros((4, 5)), np.zeros((4, 5))
    adjit.autodiff(Reverse, nested, Const(n), Duplicated(x, dx),
                   Duplicated(out, np.full((4, 5), 2.0)), ndrange=(4, 5))
    np.testing.assert_array_equal(out, x)
    np.testing.assert_array_equal(dx, np.full((4, 5), 2.0))


# ---- a data-dependent `while` in an @adjit.func ----------------------------------------------

@adjit.func
def cbrt_newton(a):
    x = a
    while abs(x * x * x - a) > 1e-13 * a:
        x = x - (x * x * x - a) / (3.0 * x * x)
    return x


@adjit.kernel
def newton_roots(a, out):
    i = adjit.index()
    out[i] = cbrt_newton(a[i]) * a[i]


def test_newton_in_a_device_function():
    rng = np.random.default_rng(5)
    a = rng.uniform(0.5, 20.0, 300)
    out, da = np.zeros(300), np.zeros(300)
    adjit.autodiff(Reverse, newton_roots, Duplicated(a, da), Duplicated(out, np.ones(300)),
                   ndrange=300)
    np.testing.assert_allclose(out, np.cbrt(a) * a, rtol=1e-13)
    # d (a^(4/3)) / da; Newton's iterates converge to the root and their derivative to its
    np.testing.assert_allclose(da, 4.0 / 3.0 * np.cbrt(a), rtol=1e-10)
    tout = np.zeros(300)
    adjit.autodiff(Forward, newton_roots, Duplicated(a, np.ones(300)),
                   Duplicated(np.zeros(300), tout), ndrange=300)
    np.testing.assert_allclose(tout, da, rtol=1e-12)


# ---- what stays refused ------------------------------------------------------------------

@adjit.kernel
def doubling_in_place(x, out):
    i = adjit.index()
    while x[i] < 10.0:          # the count depends on x, which the loop writes
        x[i] = x[i] * x[i] + 1.0
    out[i] = x[i]


@adjit.kernel
def ticketed(x, counter, out):
    i = adjit.index()
    s = x[i]
    turn = adjit.atomic_add(counter, 0, 1)   # differs between the two passes
    for _ in range(turn % 4):
        s = s * s
    out[i] = s


def test_a_loop_count_from_an_atomic_result_is_refused():
    with pytest.raises(CompilationError, match="depends on this value, which the kernel "
                                               "itself changes") as info:
        adjit.autodiff(Reverse, ticketed, Duplicated(np.ones(3), np.zeros(3)),
                       Const(np.zeros(1, np.int64)), Duplicated(np.zeros(3), np.ones(3)),
                       ndrange=3)
    assert "adjit.atomic_add(counter, 0, 1)" in str(info.value)


def test_a_loop_count_from_an_array_the_kernel_writes_is_refused():
    with pytest.raises(CompilationError, match="depends on this value, which the kernel "
                                               "itself changes") as info:
        adjit.autodiff(Reverse, doubling_in_place, Duplicated(np.ones(3), np.zeros(3)),
                       Duplicated(np.zeros(3), np.ones(3)), ndrange=3)
    assert "while x[i] < 10.0" in str(info.value)
    assert "scf." not in str(info.value) and "__adj" not in str(info.value)


# ---- a kernel's local scratch array, overwritten in a loop --------------------------------

@adjit.kernel
def horner_rows(x, out):
    i = adjit.index()
    buf = adjit.zeros(4)          # the item's own array, overwritten three times
    for _ in range(3):
        for j in range(4):
            buf[j] = buf[j] * x[i] + (j + 1.0)
    out[i] = buf[0] + buf[1] * buf[2] + buf[3]


def horner_rows_np(x):
    buf = np.zeros((len(x), 4))
    for _ in range(3):
        buf = buf * x[:, None] + np.arange(1.0, 5.0)
    return buf[:, 0] + buf[:, 1] * buf[:, 2] + buf[:, 3]


@adjit.kernel
def local_until(x, out):
    # a local array updated in a loop that stops on the array's own values
    i = adjit.index()
    w = adjit.ones(3)
    t = 0
    while w[0] + w[1] + w[2] < 10.0 + x[i]:
        w[t % 3] = w[t % 3] * 1.3 + 0.1 * w[(t + 1) % 3] * x[i]
        t += 1
    out[i] = w[0] * w[1] - w[2]


def local_until_np(x):
    out = np.empty_like(x)
    for i in range(len(x)):
        w, t = np.ones(3), 0
        while w.sum() < 10.0 + x[i]:
            w[t % 3] = w[t % 3] * 1.3 + 0.1 * w[(t + 1) % 3] * x[i]
            t += 1
        out[i] = w[0] * w[1] - w[2]
    return out


@pytest.mark.parametrize("kernel, reference", [(horner_rows, horner_rows_np),
                                               (local_until, local_until_np)])
def test_local_scratch_array_overwritten_in_a_loop(kernel, reference):
    rng = np.random.default_rng(6)
    x = rng.uniform(-0.5, 3.0, 301)
    seed = rng.standard_normal(301)
    out, dx = np.zeros(301), np.zeros(301)
    adjit.autodiff(Reverse, kernel, Duplicated(x, dx), Duplicated(out, seed.copy()),
                   ndrange=301)
    np.testing.assert_allclose(out, reference(x), rtol=1e-14)
    h = 1e-7
    np.testing.assert_allclose(dx, seed * (reference(x + h) - reference(x - h)) / (2 * h),
                               rtol=1e-6, atol=1e-8)
    tout = np.zeros(301)
    adjit.autodiff(Forward, kernel, Duplicated(x, np.ones(301)),
                   Duplicated(np.zeros(301), tout), ndrange=301)
    np.testing.assert_allclose(seed * tout, dx, rtol=1e-12, atol=1e-14)


# ---- an Active scalar argument: its per-item adjoints summed per chunk --------------------

@adjit.kernel
def decay_rate(n, y0, k: float, out):
    i = adjit.index()
    y = y0[i]
    for _ in range(n[i]):
        y = y - 0.01 * k * y * y
    out[i] = y


def decay_rate_np(n, y0, k):
    y = y0.copy()
    for s in range(int(n.max(initial=0))):
        y = np.where(s < n, y - 0.01 * k * y * y, y)
    return y


def test_active_scalar_with_per_item_step_counts():
    rng = np.random.default_rng(7)
    m = 5003
    n, y0 = rng.integers(0, 30, m), rng.uniform(0.5, 1.5, m)
    seed = rng.standard_normal(m)
    out, dy0 = np.zeros(m), np.zeros(m)
    _, _, dk, _ = adjit.autodiff(Reverse, decay_rate, Const(n), Duplicated(y0, dy0),
                                 Active(0.7), Duplicated(out, seed.copy()), ndrange=m)
    h = 1e-6
    fd = np.dot(seed, decay_rate_np(n, y0, 0.7 + h) - decay_rate_np(n, y0, 0.7 - h)) / (2 * h)
    assert dk == pytest.approx(fd, rel=1e-7)
    np.testing.assert_allclose(out, decay_rate_np(n, y0, 0.7), rtol=1e-14)


@adjit.kernel
def count_from_a_branch(x, out):
    i = adjit.index()
    n = 2
    if x[i] > 0.5:               # the count depends on x through the branch's condition
        n = 4
    s = x[i]
    for _ in range(n + i):
        s = s * s * 0.5
    x[i] = s
    out[i] = s


def test_a_loop_count_selected_by_a_written_array_is_refused():
    with pytest.raises(CompilationError, match="depends on this value") as info:
        adjit.autodiff(Reverse, count_from_a_branch, Duplicated(np.ones(3), np.zeros(3)),
                       Duplicated(np.zeros(3), np.ones(3)), ndrange=3)
    assert "if x[i] > 0.5" in str(info.value)


# ---- a guarded stencil with a per-item loop (its reads of neighbours add atomically) -------

@adjit.kernel
def smooth_then_iterate(n, u, v):
    i = adjit.index()
    m = u.shape[0]
    if 0 < i < m - 1:
        s = 0.5 * u[i] + 0.25 * (u[i - 1] + u[i + 1])
        for _ in range(n[i]):
            s = s * s * 0.3 + 0.1
        v[i] = s
    else:
        v[i] = u[i]


def smooth_then_iterate_np(n, u):
    v = u.copy()
    s = 0.5 * u[1:-1] + 0.25 * (u[:-2] + u[2:])
    for k in range(int(n.max(initial=0))):
        s = np.where(k < n[1:-1], s * s * 0.3 + 0.1, s)
    v[1:-1] = s
    return v


def test_guarded_stencil_with_per_item_steps():
    rng = np.random.default_rng(8)
    m = 203
    n, u, seed = rng.integers(0, 6, m), rng.random(m), rng.standard_normal(m)
    v, du = np.zeros(m), np.zeros(m)
    adjit.autodiff(Reverse, smooth_then_iterate, Const(n), Duplicated(u, du),
                   Duplicated(v, seed.copy()), ndrange=m)
    np.testing.assert_allclose(v, smooth_then_iterate_np(n, u), rtol=1e-14)
    h = 1e-6
    d = rng.standard_normal(m)
    fd = np.dot(seed, smooth_then_iterate_np(n, u + h * d) -
                smooth_then_iterate_np(n, u - h * d)) / (2 * h)
    assert np.dot(du, d) == pytest.approx(fd, rel=1e-7)


@pytest.mark.parametrize("m", [0, 1, 1023, 1024, 1025, 3000])
def test_offsets_over_chunk_boundaries_and_no_items(m):
    # The scan of the counts runs per chunk of 1024 items (dynamic_tape.emit_offsets).
    rng = np.random.default_rng(m)
    n = rng.integers(0, 7, m)
    y0, k = rng.uniform(0.5, 1.5, m), rng.uniform(0.1, 2.0, m)
    out, dy0, dk = np.zeros(m), np.zeros(m), np.zeros(m)
    adjit.autodiff(Reverse, rk4_steps, Const(n), Duplicated(y0, dy0), Duplicated(k, dk),
                   Duplicated(out, np.ones(m)), ndrange=m)
    np.testing.assert_allclose(out, rk4_np(n, y0, k), rtol=1e-13)
    np.testing.assert_allclose(dy0, 1 / (1 + k * y0 * n * DT) ** 2, rtol=1e-6)
