"""Launch tapes kept in place (issue 30, item 3): a kernel launch inside a loop or a branch
writes its per-item tape straight into the function's in-place stack, and the reverse
kernel reads it there at the offset the index stack kept (tape.py, launch.py), instead of a
tape made per launch, copied onto the stack, and copied off it in reverse. The gradients
must not change: the swap form of G2b (`u, v = v, u`), the stacked-state form (states
written into a (S+1, N, M) array), launches in branches and in while loops, kernels whose
slots per item depend on their arguments, kernels with a dynamic tape beside a fixed one,
checkpointed loops and split-mode tapes read twice, each against JAX in float64 and central
differences; 0, 1 and odd step counts. tests/ir/autodiff/tape_in_place.mlir checks that
the per-step copies are gone from the IR."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import adjit
from adjit import Const, Duplicated, Reverse, ReverseSplitWithPrimal, ReverseWithPrimal

from test_checkpoint import reaction_diffusion_step as rd_step  # noqa: E402  (G2b's step)

jax.config.update("jax_enable_x64", True)


@adjit.kernel
def cube_step(u, v):
    # another kernel that tapes its input (c), for the branch test
    i, j = adjit.index_nd()
    c = u[i, j]
    v[i, j] = c - 0.1 * c * c * c


@adjit.jit
def swap_form(u0, steps: int):
    u = u0.copy()
    v = adjit.empty_like(u)
    for _ in range(steps):
        rd_step(u, v, ndrange=u.shape)
        u, v = v, u
    return adjit.sum(u * u)


@adjit.jit
def stacked_form(u0, steps: int):
    n, m = u0.shape[0], u0.shape[1]
    u_all = adjit.empty((steps + 1, n, m), dtype=u0.dtype)
    u_all[0] = u0
    for t in range(steps):
        rd_step(u_all[t], u_all[t + 1], ndrange=u0.shape)
    last = u_all[steps]
    return adjit.sum(last * last)


@adjit.jit
def stacked_states(u_all, steps: int):
    # the states array is the caller's (Duplicated): its shadow is theirs
    for t in range(steps):
        rd_step(u_all[t], u_all[t + 1], ndrange=(u_all.shape[1], u_all.shape[2]))
    last = u_all[steps]
    return adjit.sum(last * last)


@adjit.jit
def stacked_rewritten(u0, steps: int):
    # the second launch overwrites the row the first one read: that row must be taped
    n, m = u0.shape[0], u0.shape[1]
    u_all = adjit.empty((steps + 1, n, m), dtype=u0.dtype)
    u_all[0] = u0
    for t in range(steps):
        rd_step(u_all[t], u_all[t + 1], ndrange=u0.shape)
        cube_step(u_all[t + 1], u_all[t], ndrange=u0.shape)
    first, last = u_all[0], u_all[steps]
    return adjit.sum(last * last) + adjit.sum(first * first)


@adjit.jit
def branchy(u0, steps: int):
    # launches in both branches of an if in the loop: kept in place, the stack doubling
    u = u0.copy()
    v = adjit.empty_like(u)
    for t in range(steps):
        if t % 3 == 1:
            cube_step(u, v, ndrange=u.shape)
        else:
            rd_step(u, v, ndrange=u.shape)
        u, v = v, u
    return adjit.sum(u * u)


@adjit.jit
def while_form(u0, steps: int):
    u = u0.copy()
    v = adjit.empty_like(u)
    t = 0
    while t < steps:
        rd_step(u, v, ndrange=u.shape)
        u, v = v, u
        t += 1
    return adjit.sum(u * u)


@adjit.jit
def nested_form(u0, outer: int, inner: int):
    u = u0.copy()
    v = adjit.empty_like(u)
    for _ in range(outer):
        for _ in range(inner):
            rd_step(u, v, ndrange=u.shape)
            u, v = v, u
        cube_step(u, v, ndrange=u.shape)
        u, v = v, u
    return adjit.sum(u * u)


@adjit.kernel
def integrate(x, out, substeps: int):
    # slots per item depend on `substeps` (an expression the launch computes)
    i = adjit.index()
    y = x[i]
    for _ in range(substeps):
        y = y - 0.1 * y * y * y
    out[i] = y


@adjit.kernel
def until_small(x, w, out):
    # a dynamic tape (a while loop per item) beside a fixed slot (w[i], overwritten)
    i = adjit.index()
    y = x[i]
    k = 0
    while y * y > 0.25 and k < 20:
        y = 0.8 * y + 0.01 * y * y
        k += 1
    c = w[i]
    w[i] = 0.5 * c
    out[i] = y + c * c * c


@adjit.jit
def kernels_in_loop(x0, steps: int, substeps: int):
    x = x0.copy()
    w = x0 * 0.5
    out = adjit.empty_like(x)
    for _ in range(steps):
        integrate(x, out, substeps, ndrange=x.shape[0])
        x, out = out, x
        until_small(x, w, out, ndrange=x.shape[0])
        x, out = out, x
    return adjit.sum(x * x) + adjit.sum(w * w)


def checkpointed_form(snapshots):
    @adjit.jit
    def loss(u0, steps: int):
        u = u0.copy()
        v = adjit.empty_like(u)
        for _ in adjit.checkpointed(range(steps), snapshots=snapshots):
            for _ in range(2):      # two launches a step: kept in place inside the step
                rd_step(u, v, ndrange=u.shape)
                u, v = v, u
        return adjit.sum(u * u)
    return loss


checkpointed_2 = checkpointed_form(2)


# ---- float64 references ------------------------------------------------------------------

def rd_np(u):
    c = u[1:-1, 1:-1]
    lap = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4.0 * c
    return u.at[1:-1, 1:-1].set(c + 0.1 * lap + 0.05 * c * (1.0 - c))


def cube_np(u):
    return u - 0.1 * u * u * u


def loss_jax(u0, kinds):
    u = u0
    for kind in kinds:
        u = cube_np(u) if kind == "cube" else rd_np(u)
    return jnp.sum(u * u)


def integrate_np(x, substeps):
    for _ in range(substeps):
        x = x - 0.1 * x * x * x
    return x


def until_small_np(x, w):
    y = np.array(x, dtype=np.float64)
    for i in range(len(y)):
        k = 0
        while y[i] * y[i] > 0.25 and k < 20:
            y[i] = 0.8 * y[i] + 0.01 * y[i] * y[i]
            k += 1
    return y + w ** 3, 0.5 * w


def kernels_in_loop_np(x, steps, substeps):
    w = 0.5 * x
    for _ in range(steps):
        x, w = until_small_np(integrate_np(x, substeps), w)
    return float(np.sum(x * x) + np.sum(w * w))


def grad_of(fn, u0, *consts):
    du = np.zeros_like(u0)
    _, value = adjit.autodiff(ReverseWithPrimal, fn, Duplicated(u0, du),
                              *(Const(c) for c in consts))
    return du, value


def central_differences(loss, u0, points, h=1e-6):
    out = []
    for p in points:
        up, um = u0.copy(), u0.copy()
        up[p] += h
        um[p] -= h
        out.append((loss(up) - loss(um)) / (2 * h))
    return np.array(out)


def field(shape=(7, 6), seed=0):
    return np.random.default_rng(seed).random(shape)


POINTS = [(0, 0), (1, 1), (3, 2), (5, 4), (6, 5), (2, 5)]


def check(fn, kinds, *consts):
    u0 = field()
    g, value = grad_of(fn, u0, *consts)
    ref_value, ref = jax.value_and_grad(loss_jax)(jnp.asarray(u0), tuple(kinds))
    assert value == pytest.approx(float(ref_value), rel=1e-13)
    np.testing.assert_allclose(g, np.asarray(ref), rtol=1e-11, atol=1e-13)
    fd = central_differences(lambda u: float(loss_jax(jnp.asarray(u), tuple(kinds))), u0,
                             POINTS)
    np.testing.assert_allclose([g[p] for p in POINTS], fd, rtol=1e-6, atol=1e-8)


# ---- the tests ----------------------------------------------------------------------------

@pytest.mark.parametrize("steps", [0, 1, 2, 7])
def test_swap_form(steps):
    check(swap_form, ["rd"] * steps, steps)


@pytest.mark.parametrize("steps", [0, 1, 2, 7])
def test_stacked_form(steps):
    check(stacked_form, ["rd"] * steps, steps)


@pytest.mark.parametrize("steps", [0, 1, 5])
def test_stacked_states_of_the_caller(steps):
    u0 = field()
    u_all = np.zeros((steps + 1, *u0.shape))
    u_all[0] = u0
    du_all = np.zeros_like(u_all)
    _, value = adjit.autodiff(ReverseWithPrimal, stacked_states, Duplicated(u_all, du_all),
                              Const(steps))
    ref_value, ref = jax.value_and_grad(loss_jax)(jnp.asarray(u0), ("rd",) * steps)
    assert value == pytest.approx(float(ref_value), rel=1e-13)
    np.testing.assert_allclose(du_all[0], np.asarray(ref), rtol=1e-11, atol=1e-13)
    # the primal effect: every state written
    u = jnp.asarray(u0)
    for t in range(steps):
        u = rd_np(u)
        np.testing.assert_allclose(u_all[t + 1], np.asarray(u), rtol=1e-14)


@pytest.mark.parametrize("steps", [0, 1, 4])
def test_stacked_row_rewritten(steps):
    # memory.py proves rows t and t + 1 apart only where no later write reaches the row read
    def loss(u0):
        rows = [u0] + [None] * steps
        for t in range(steps):
            rows[t + 1] = rd_np(rows[t])
            rows[t] = cube_np(rows[t + 1])
        return jnp.sum(rows[steps] * rows[steps]) + jnp.sum(rows[0] * rows[0])
    u0 = field()
    g, value = grad_of(stacked_rewritten, u0, steps)
    ref_value, ref = jax.value_and_grad(loss)(jnp.asarray(u0))
    assert value == pytest.approx(float(ref_value), rel=1e-13)
    np.testing.assert_allclose(g, np.asarray(ref), rtol=1e-11, atol=1e-13)


@pytest.mark.parametrize("steps", [0, 1, 4, 7])
def test_launches_in_branches(steps):
    check(branchy, ["cube" if t % 3 == 1 else "rd" for t in range(steps)], steps)


@pytest.mark.parametrize("steps", [0, 1, 5])
def test_launch_in_a_while_loop(steps):
    check(while_form, ["rd"] * steps, steps)


def test_nested_loops_and_two_kernels():
    kinds = (["rd"] * 3 + ["cube"]) * 3
    check(nested_form, kinds, 3, 3)


@pytest.mark.parametrize("steps, substeps", [(0, 3), (1, 3), (3, 2), (3, 0)])
def test_slots_from_arguments_and_dynamic_tapes(steps, substeps):
    x0 = np.linspace(-1.2, 1.3, 23)
    g, value = grad_of(kernels_in_loop, x0, steps, substeps)
    assert value == pytest.approx(kernels_in_loop_np(x0, steps, substeps), rel=1e-13)
    fd = central_differences(lambda x: kernels_in_loop_np(x, steps, substeps), x0,
                             range(len(x0)))
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("steps", [0, 1, 3, 7])
def test_checkpointed_loop(steps):
    # Each checkpointed step runs two launches in an inner loop: their tapes are kept in
    # place on the step's own tape, which the schedule's turns make and read.
    check(checkpointed_2, ["rd"] * (2 * steps), steps)
    u0 = field()
    g, _ = grad_of(checkpointed_2, u0, steps)
    g_all, _ = grad_of(swap_form, u0, 2 * steps)
    np.testing.assert_array_equal(g, g_all)


def test_split_tape_serves_two_reverse_calls():
    u0 = field()
    du = np.zeros_like(u0)
    fwd, rev = adjit.autodiff_thunk(ReverseSplitWithPrimal, swap_form, Duplicated, Const)
    tape, value, _ = fwd(Duplicated(u0, du), Const(5))
    rev(Duplicated(u0, du), Const(5), 1.0, tape)
    once = du.copy()
    rev(Duplicated(u0, du), Const(5), 1.0, tape)
    np.testing.assert_array_equal(du, 2 * once)
    ref = jax.grad(loss_jax)(jnp.asarray(u0), ("rd",) * 5)
    np.testing.assert_allclose(once, np.asarray(ref), rtol=1e-11, atol=1e-13)


def test_float32_matches_the_copying_tape():
    # f32 G2b at a size with interior and borders: the same numbers as the store-all
    # gradient in float64 to f32 rounding, swap and stacked forms alike.
    u0 = field((33, 40), seed=2).astype(np.float32)
    ref = np.asarray(jax.grad(loss_jax)(jnp.asarray(u0, dtype=jnp.float64), ("rd",) * 9))
    for fn in (swap_form, stacked_form):
        g, _ = grad_of(fn, u0, 9)
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, ref, rtol=2e-5, atol=2e-5 * np.abs(ref).max())


def test_reverse_only_entry():
    u0 = field()
    du = np.zeros_like(u0)
    adjit.autodiff(Reverse, swap_form, Duplicated(u0, du), Const(4))
    ref = jax.grad(loss_jax)(jnp.asarray(u0), ("rd",) * 4)
    np.testing.assert_allclose(du, np.asarray(ref), rtol=1e-11, atol=1e-13)
