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
@adjit.kernel
def damped(u, v, c: float):
    i = adjit.index()
    n = u.shape[0]
    left = u[(i + n - 1) % n]
    right = u[(i + 1) % n]
    v[i] = u[i] + c * (left - 2.0 * u[i] + right) - 0.1 * adjit.sin(u[i])


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
