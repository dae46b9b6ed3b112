"""BatchDuplicated in reverse mode (issue 33, item 4): N cotangents at one point, the primal
and its tape run once and the reverse sweep once per lane. Each lane equals its own reverse
call exactly (the same compiled reverse sweep on the same tape), and JAX's vjp in float64;
the primal's effects happen once; a kernel's too; bad batches are refused with the
arguments named."""
from __future__ import annotations

import numpy as np
import pytest

import adjit
from adjit import Active, BatchDuplicated, Const, Duplicated, Reverse, ReverseWithPrimal

jax = pytest.importorskip("jax")
jnp = jax.numpy
jax.config.update("jax_enable_x64", True)


@adjit.jit
def simulate(a: float, u0, out, steps: int):
    """A loop making temporaries, written into `out`; returns a float too."""
    u = u0
    for _ in range(steps):
        u = u + a * np.sin(u) * u
    out[:] = u * u
    return np.sum(u)


def simulate_jax(a, u0, steps):
    u = u0
    for _ in range(steps):
        u = u + a * jnp.sin(u) * u
    return u * u, jnp.sum(u)


@adjit.kernel
def damp(a: float, x, y):
    i = adjit.index()
    y[i] = a * adjit.sin(x[i]) * y[i]


@adjit.jit
def counted(x, calls):
    calls[0] += 1.0                         # the primal's effect: once per primal run
    return np.sum(x * x * x)


U0 = np.linspace(0.1, 1.0, 6)
RNG = np.random.default_rng(11)


@pytest.mark.parametrize("width, steps", [(1, 0), (3, 1), (4, 5)])
def test_each_lane_is_its_own_reverse_call(width, steps):
    seeds = [RNG.standard_normal(6) for _ in range(width)]
    du0s = tuple(np.zeros(6) for _ in range(width))
    outs = tuple(s.copy() for s in seeds)
    out = np.zeros(6)
    (das, _, _, _), primal = adjit.autodiff(
        ReverseWithPrimal, simulate, Active(0.3), BatchDuplicated(U0, du0s),
        BatchDuplicated(out, outs), Const(steps))
    want_out, want_sum = simulate_jax(0.3, U0, steps)
    assert primal == pytest.approx(float(want_sum), rel=1e-14)
    np.testing.assert_allclose(out, want_out, rtol=1e-14)          # the primal's effect
    assert isinstance(das, tuple) and len(das) == width
    _, pullback = jax.vjp(lambda a, u: simulate_jax(a, u, steps), 0.3, U0)
    for k in range(width):
        du0 = np.zeros(6)
        (da, _, _, _) = adjit.autodiff(Reverse, simulate, Active(0.3), Duplicated(U0, du0),
                                       Duplicated(np.zeros(6), seeds[k].copy()), Const(steps))
        assert das[k] == da
        np.testing.assert_array_equal(du0s[k], du0)
        np.testing.assert_array_equal(outs[k], 0.0)     # a written array's seed is consumed
        ja, ju = pullback((jnp.asarray(seeds[k]), 1.0))
        assert das[k] == pytest.approx(float(ja), rel=1e-12)
        np.testing.assert_allclose(du0s[k], ju, rtol=1e-12)


@adjit.jit
def switching(x, y, n: int):
    """A loop that carries one argument, then the other, writing each in place."""
    u = x
    for t in range(n):
        if t == 1:
            u = y
        u[0] = u[0] * u[1] + np.sin(u[2])
    return np.sum(u * u)


@pytest.mark.parametrize("n", [0, 1, 3])
def test_lanes_of_arguments_written_in_place(n):
    """Each lane's shadows are its own, where the loop writes the arguments themselves."""
    x0, y0 = np.linspace(0.1, 1.0, 5), np.linspace(1.0, 0.1, 5)
    dxs = tuple(np.zeros(5) for _ in range(2))
    dys = tuple(np.full(5, k + 1.0) for k in range(2))    # the seeds of y's final values
    x, y = x0.copy(), y0.copy()
    adjit.autodiff(Reverse, switching, BatchDuplicated(x, dxs), BatchDuplicated(y, dys),
                   Const(n))
    for k in range(2):
        dx, dy = np.zeros(5), np.full(5, k + 1.0)
        xk, yk = x0.copy(), y0.copy()
        adjit.autodiff(Reverse, switching, Duplicated(xk, dx), Duplicated(yk, dy), Const(n))
        np.testing.assert_array_equal(dxs[k], dx)
        np.testing.assert_array_equal(dys[k], dy)
        np.testing.assert_array_equal((x, y), (xk, yk))


def test_a_kernel_takes_a_batch_of_cotangents():
    x, y0 = np.linspace(-1.0, 1.0, 5), np.linspace(1.0, 2.0, 5)
    seeds = [RNG.standard_normal(5) for _ in range(3)]
    dxs, dys = tuple(np.zeros(5) for _ in range(3)), tuple(s.copy() for s in seeds)
    y = y0.copy()
    das, _, _ = adjit.autodiff(Reverse, damp, Active(0.7), BatchDuplicated(x, dxs),
                               BatchDuplicated(y, dys), ndrange=5)
    np.testing.assert_allclose(y, 0.7 * np.sin(x) * y0, rtol=1e-15)
    for k in range(3):
        assert das[k] == pytest.approx(float(np.sum(seeds[k] * np.sin(x) * y0)), rel=1e-14)
        np.testing.assert_allclose(dxs[k], seeds[k] * 0.7 * np.cos(x) * y0, rtol=1e-14)
        np.testing.assert_allclose(dys[k], seeds[k] * 0.7 * np.sin(x), rtol=1e-14)


def test_the_primal_runs_once():
    calls = np.zeros(1)
    dxs = tuple(np.zeros(4) for _ in range(5))
    adjit.autodiff(Reverse, counted, BatchDuplicated(np.ones(4), dxs), Const(calls))
    assert calls[0] == 1.0
    for d in dxs:
        np.testing.assert_array_equal(d, 3.0)


def test_bad_batches_are_refused():
    x = np.ones(6)
    with pytest.raises(ValueError, match="same number of tangents; got 1, 2"):
        adjit.autodiff(Reverse, simulate, Active(0.3), BatchDuplicated(x, (np.zeros(6),)),
                       BatchDuplicated(np.zeros(6), (np.ones(6), np.ones(6))), Const(1))
    with pytest.raises(TypeError, match="Duplicated and BatchDuplicated arguments in one"):
        adjit.autodiff(Reverse, simulate, Active(0.3), Duplicated(x, np.zeros(6)),
                       BatchDuplicated(np.zeros(6), (np.ones(6), np.ones(6))), Const(1))
    with pytest.raises(TypeError, match="BatchDuplicated in reverse mode runs on the CPU"):
        adjit.autodiff(Reverse, simulate, Active(0.3), BatchDuplicated(x, (np.zeros(6),)),
                       BatchDuplicated(np.zeros(6), (np.ones(6),)), Const(1), device="cuda")


def test_inside_compiled_code_a_batch_is_refused_with_the_way_out():
    @adjit.jit
    def batched_inside(x, d0, d1):
        adjit.autodiff(adjit.Reverse, counted, BatchDuplicated(x, (d0, d1)), Const(x))
        return d0

    with pytest.raises(adjit.CompilationError, match="make one call per cotangent"):
        batched_inside(np.ones(3), np.zeros(3), np.zeros(3))


@adjit.jit
def writes_then_reads(x, y):
    for i in range(x.shape[0]):
        y[i] = np.sin(x[i]) * y[i]
    x[0] = x[0] * 3.0
    return np.sum(y * y * x)


def writes_then_reads_jax(x, y):
    y = jnp.sin(x) * y
    return jnp.sum(y * y * x.at[0].multiply(3.0))


def test_a_vjp_pullback_records_its_tape_once_and_serves_every_cotangent():
    """A float result's pullback runs the augmented primal at its first call only; later
    cotangents reuse the tape (the function writes its arguments: the tape holds what the
    reverse sweep reads of them)."""
    x0, y0 = np.linspace(0.1, 1.0, 4), np.linspace(1.0, 2.0, 4)
    _, pullback = adjit.vjp(writes_then_reads, x0.copy(), y0.copy())
    want = jax.grad(writes_then_reads_jax, argnums=(0, 1))(x0, y0)
    for ct in (1.0, -2.5, 1.0):
        gx, gy = pullback(ct)
        np.testing.assert_allclose(gx, ct * np.asarray(want[0]), rtol=1e-13)
        np.testing.assert_allclose(gy, ct * np.asarray(want[1]), rtol=1e-13)
