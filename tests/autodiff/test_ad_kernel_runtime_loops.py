"""Reverse mode of kernels whose loops around taped values run a number of times known only at
launch (a scalar argument, an array's size): each item's tape size is computed from the
launch's arguments. Loops whose trip count depends on the work item stay refused."""
import numpy as np
import pytest

import adjit
from adjit import Active, Const, Duplicated, Reverse
from adjit.core.errors import CompilationError
# The same recurrence, unannotated (dt's type that of the argument: an np.float32 keeps it
# all in f32), and its NumPy forward and hand-written reverse, from the GPU user cases.
from user_kernels import integrate as integrate_any
from user_kernels import integrate_np, integrate_reverse_np


@adjit.kernel
def integrate(x, v, steps: int, dt: float):
    i = adjit.index()
    p, q = x[i], v[i]
    for _ in range(steps):
        q = q - dt * adjit.sin(p)
        p = p + dt * q
    x[i] = p
    v[i] = q


def run_reverse(x, v, steps, dt, ap, aq, active_dt=True, kernel=integrate):
    x, v, dx, dv = x.copy(), v.copy(), ap.copy(), aq.copy()
    ddt = Active(dt) if active_dt else Const(dt)
    grads = adjit.autodiff(Reverse, kernel, Duplicated(x, dx), Duplicated(v, dv),
                           Const(steps), ddt, ndrange=len(x))
    return x, v, dx, dv, grads[3]


def states(n, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, n).astype(dtype) for _ in range(4)]


@pytest.mark.parametrize("kernel,dtype,rtol", [(integrate, np.float64, 1e-10),
                                               (integrate, np.float32, 2e-4),
                                               (integrate_any, np.float32, 2e-4)])
def test_integrate_against_hand_written_reverse(kernel, dtype, rtol):
    x, v, ap, aq = states(37, dtype)
    dt = dtype(0.01)
    xo, vo, dx, dv, ddt = run_reverse(x, v, 100, dt, ap, aq, kernel=kernel)
    p, q = integrate_np(x.astype(np.float64), v.astype(np.float64), 100, float(dt))
    np.testing.assert_allclose(xo, p, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(vo, q, rtol=rtol, atol=rtol)
    want_x, want_v, want_dt = integrate_reverse_np(x, v, 100, float(dt), ap, aq)
    np.testing.assert_allclose(dx, want_x, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(dv, want_v, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(ddt, want_dt, rtol=10 * rtol)
    assert dx.dtype == dtype
    if kernel is integrate_any:
        assert np.asarray(ddt).dtype == dtype


@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-6), (np.float32, 2e-2)])
def test_integrate_against_finite_differences(dtype, rtol):
    x, v, ap, aq = states(5, dtype, seed=1)
    steps, dt = 50, 0.02

    def loss(x_, v_, dt_):
        p, q = x_.copy(), v_.copy()
        integrate(p, q, steps, dtype(dt_), ndrange=len(p))
        return float(np.sum(ap.astype(np.float64) * p) + np.sum(aq.astype(np.float64) * q))

    _, _, dx, dv, ddt = run_reverse(x, v, steps, dtype(dt), ap, aq)
    h = 1e-6 if dtype == np.float64 else 1e-2
    for k in range(len(x)):
        e = np.zeros(len(x), dtype)
        e[k] = h
        fd_x = (loss(x + e, v, dt) - loss(x - e, v, dt)) / (2 * h)
        fd_v = (loss(x, v + e, dt) - loss(x, v - e, dt)) / (2 * h)
        np.testing.assert_allclose(dx[k], fd_x, rtol=rtol, atol=rtol)
        np.testing.assert_allclose(dv[k], fd_v, rtol=rtol, atol=rtol)
    hd = 1e-6 if dtype == np.float64 else 1e-3
    fd_dt = (loss(x, v, dt + hd) - loss(x, v, dt - hd)) / (2 * hd)
    np.testing.assert_allclose(ddt, fd_dt, rtol=rtol, atol=rtol)


def test_zero_steps_pass_adjoints_through():
    x, v, ap, aq = states(8, np.float64)
    xo, vo, dx, dv, ddt = run_reverse(x, v, 0, 0.01, ap, aq)
    np.testing.assert_array_equal(xo, x)
    np.testing.assert_array_equal(dx, ap)
    np.testing.assert_array_equal(dv, aq)
    assert ddt == 0.0


def test_one_compilation_serves_every_step_count():
    x, v, ap, aq = states(6, np.float64, seed=2)
    for steps in (1, 7, 30):
        _, _, dx, dv, ddt = run_reverse(x, v, steps, 0.05, ap, aq)
        want_x, want_v, want_dt = integrate_reverse_np(x, v, steps, 0.05, ap, aq)
        np.testing.assert_allclose(dx, want_x, rtol=1e-12)
        np.testing.assert_allclose(dv, want_v, rtol=1e-12)
        np.testing.assert_allclose(ddt, want_dt, rtol=1e-12)


@pytest.mark.parametrize("active_dt,slots", [(False, 1), (True, 2)])
def test_tape_bytes_are_items_times_steps_times_slots(active_dt, slots):
    # Each step tapes p (sin's and cos's argument); with dt Active also q (the product
    # dt * q's adjoint for dt reads it). The items' shares of dt's adjoint are summed in f64
    # per 4096-item chunk as the reverse kernel runs (passes/chunked_launch.py
    # lower_summing_launch), with no per-item buffer: one double of chunk partials here.
    n, steps = 1000, 64
    x, v, ap, aq = states(n, np.float64, seed=3)
    run_reverse(x, v, steps, 0.01, ap, aq, active_dt)    # compiled before measuring
    adjit.reset_peak_memory()
    before = adjit.memory_stats()["bytes_in_use"]
    run_reverse(x, v, steps, 0.01, ap, aq, active_dt)
    chunk_partials = 8 if active_dt else 0
    assert adjit.memory_stats()["peak_bytes"] - before == \
        n * steps * slots * 8 + chunk_partials


# ---- nested runtime loops, and a loop over an array's size ----------------------------------

@adjit.kernel
def nested(x, out, outer: int, inner: int):
    i = adjit.index()
    s = x[i]
    for _ in range(outer):
        for _ in range(inner):
            s = adjit.sin(s) + 0.5 * s
        s = s * s * 0.5
    out[i] = s


def nested_np(x, outer, inner):
    s = x.copy()
    for _ in range(outer):
        for _ in range(inner):
            s = np.sin(s) + 0.5 * s
        s = s * s * 0.5
    return s


def nested_grad_np(x, outer, inner, seed):
    """d(sum(seed * nested(x)))/dx by the chain rule, forward (the map is element-wise)."""
    s, d = x.copy(), np.ones_like(x)
    for _ in range(outer):
        for _ in range(inner):
            s, d = np.sin(s) + 0.5 * s, d * (np.cos(s) + 0.5)
        s, d = s * s * 0.5, d * s
    return seed * d


@pytest.mark.parametrize("outer,inner", [(3, 4), (2, 0), (0, 5), (5, 1)])
def test_nested_runtime_loops(outer, inner):
    rng = np.random.default_rng(4)
    x = rng.uniform(0.2, 0.9, 9)
    seed = rng.uniform(-1, 1, 9)
    dx, out = np.zeros(9), np.zeros(9)
    adjit.autodiff(Reverse, nested, Duplicated(x.copy(), dx), Duplicated(out, seed.copy()),
                   Const(outer), Const(inner), ndrange=9)
    np.testing.assert_allclose(dx, nested_grad_np(x, outer, inner, seed), rtol=1e-12,
                               atol=1e-14)


@adjit.kernel
def power_by_size(x, w, out):
    i = adjit.index()
    s = x[i]
    for k in range(w.shape[0]):
        s = s * w[k] + adjit.sin(s)
    out[i] = s


def test_loop_over_an_array_size():
    rng = np.random.default_rng(5)
    x, w, seed = rng.uniform(-1, 1, 7), rng.uniform(-1, 1, 11), rng.uniform(-1, 1, 7)
    dx, dw, out = np.zeros(7), np.zeros(11), np.zeros(7)
    adjit.autodiff(Reverse, power_by_size, Duplicated(x.copy(), dx), Duplicated(w, dw),
                   Duplicated(out, seed.copy()), ndrange=7)
    # Reference: forward-mode chain rule per item in NumPy, reverse for w by the same states.
    s, d = x.copy(), np.ones(7)
    states_ = []
    for k in range(11):
        states_.append(s)
        s, d = s * w[k] + np.sin(s), d * (w[k] + np.cos(s))
    np.testing.assert_allclose(dx, seed * d, rtol=1e-12)
    a, want_w = seed.copy(), np.zeros(11)
    for k in reversed(range(11)):
        want_w[k] = np.sum(a * states_[k])
        a = a * (w[k] + np.cos(states_[k]))
    np.testing.assert_allclose(dw, want_w, rtol=1e-12)


# ---- a trip count that depends on the work item: a packed per-item tape (dynamic_tape.py) ----

@adjit.kernel
def per_item_steps(x, counts):
    i = adjit.index()
    p = x[i]
    for _ in range(counts[i]):
        p = adjit.sin(p)
    x[i] = p


@adjit.kernel
def index_steps(x):
    i = adjit.index()
    p = x[i]
    for _ in range(i):
        p = adjit.sin(p)
    x[i] = p


def _sin_steps(x, counts):
    out = x.copy()
    for i, n in enumerate(counts):
        for _ in range(n):
            out[i] = np.sin(out[i])
    return out


@pytest.mark.parametrize("kernel,counts", [
    (per_item_steps, np.array([3, 0, 5, 1, 2], dtype=np.int64)),
    (index_steps, np.arange(5)),
])
def test_item_dependent_trip_count(kernel, counts):
    rng = np.random.default_rng(2)
    x0, seed = rng.uniform(-1, 1, 5), rng.standard_normal(5)
    x, dx = x0.copy(), seed.copy()
    extra = [Const(counts)] if kernel is per_item_steps else []
    adjit.autodiff(Reverse, kernel, Duplicated(x, dx), *extra, ndrange=5)
    np.testing.assert_allclose(x, _sin_steps(x0, counts), rtol=1e-14)
    want = np.ones(5)           # d sin^n(x)/dx: the product of cos along the way
    for i, n in enumerate(counts):
        p = x0[i]
        for _ in range(n):
            want[i] *= np.cos(p)
            p = np.sin(p)
    np.testing.assert_allclose(dx, seed * want, rtol=1e-13)
