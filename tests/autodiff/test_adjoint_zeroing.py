"""Adjoints of kernel outputs that nothing reads after the launch's reverse (issue 30, item 3):
the reverse kernel reads the adjoint of each element the kernel stores and zeroes it for what
reads the shadow next; where the shadow is a temporary the function allocated and nothing
touched before the launch (memory.shadow_dead_after), the launch runs a copy without that
zeroing (memory.without_dead_zeroing). Where the shadow IS read again (a second launch
over the same output, launches in a loop, an output the user gives with its shadow, a kernel
that stores one element twice or in a loop) the zeroing stays. Each gradient against JAX in
float64 and central differences; tests/ir/autodiff/kernel_dead_adjoint.mlir checks which
launches drop it."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import adjit
from adjit import Duplicated, ReverseWithPrimal

# G2b's step (the border copies, the interior a stencil): the reverse kernel reads and
# zeroes v's adjoint in both branches of its `if`.
from test_checkpoint import reaction_diffusion_step as border_step  # noqa: E402

jax.config.update("jax_enable_x64", True)


@adjit.func
def softplus(x):
    return adjit.log(1.0 + adjit.exp(x))


@adjit.kernel
def softplus_kernel(x, out):
    i = adjit.index()
    out[i] = softplus(x[i])


@adjit.kernel
def square_kernel(x, out):
    i = adjit.index()
    out[i] = x[i] * x[i]


@adjit.kernel
def sin_kernel(x, out):
    i = adjit.index()
    out[i] = adjit.sin(x[i])


@adjit.kernel
def store_twice(x, out):
    i = adjit.index()
    out[i] = x[i] * x[i]
    out[i] = 3.0 * x[i]


@adjit.kernel
def store_in_loop(x, out):
    i = adjit.index()
    for k in range(3):
        out[i] = x[i] * (k + 1.0)


@adjit.jit
def one_step(u):
    v = adjit.empty_like(u)
    border_step(u, v, ndrange=u.shape)
    return adjit.sum(v * v)


@adjit.jit
def g3_like(x):
    out = adjit.empty_like(x)
    softplus_kernel(x, out, ndrange=x.shape[0])
    return adjit.sum(out)


@adjit.jit
def used_twice(x):
    out = adjit.empty_like(x)
    softplus_kernel(x, out, ndrange=x.shape[0])
    return adjit.sum(out) + adjit.sum(out * out)


@adjit.jit
def overwritten(x):
    out = adjit.empty_like(x)
    square_kernel(x, out, ndrange=x.shape[0])
    sin_kernel(x, out, ndrange=x.shape[0])     # the squares' adjoint must read 0
    return adjit.sum(out * x)


@adjit.jit
def in_loop(x):
    out = adjit.empty_like(x)
    total = 0.0
    for _ in range(3):
        square_kernel(x, out, ndrange=x.shape[0])
        total = total + adjit.sum(out * out)
    return total


@adjit.jit
def twice_in_kernel(x):
    out = adjit.empty_like(x)
    store_twice(x, out, ndrange=x.shape[0])
    return adjit.sum(out)


@adjit.jit
def loop_in_kernel(x):
    out = adjit.empty_like(x)
    store_in_loop(x, out, ndrange=x.shape[0])
    return adjit.sum(out)


@adjit.jit
def into_user_output(x, out):
    softplus_kernel(x, out, ndrange=x.shape[0])
    return adjit.sum(out * out)


def sp(x):
    return jnp.log(1.0 + jnp.exp(x))


def one_step_jax(u):
    c = u[1:-1, 1:-1]
    lap = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4.0 * c
    v = u.at[1:-1, 1:-1].set(c + 0.1 * lap + 0.05 * c * (1.0 - c))
    return jnp.sum(v * v)


JAX = {
    g3_like: lambda x: jnp.sum(sp(x)),
    used_twice: lambda x: jnp.sum(sp(x)) + jnp.sum(sp(x) ** 2),
    overwritten: lambda x: jnp.sum(jnp.sin(x) * x),
    in_loop: lambda x: 3.0 * jnp.sum(x ** 4),
    twice_in_kernel: lambda x: jnp.sum(3.0 * x),
    loop_in_kernel: lambda x: jnp.sum(3.0 * x),
    one_step: one_step_jax,
}


def _x(n=37, dtype=np.float64):
    return np.random.default_rng(5).uniform(-2.0, 2.0, n).astype(dtype)


def _grad(fn, x, start=0.0):
    dx = np.full_like(x, start)
    _, value = adjit.autodiff(ReverseWithPrimal, fn, Duplicated(x, dx))
    return dx, value


def _central(fn, x, h=1e-6):
    out = np.empty_like(x)
    for k in range(x.size):
        e = np.zeros_like(x)
        e.flat[k] = h
        out.flat[k] = (fn(x + e) - fn(x - e)) / (2 * h)
    return out


def check(fn, x=None):
    x = _x() if x is None else x
    dx, value = _grad(fn, x)
    want = np.asarray(jax.grad(JAX[fn])(jnp.asarray(x)))
    np.testing.assert_allclose(value, float(JAX[fn](jnp.asarray(x))), rtol=1e-12)
    np.testing.assert_allclose(dx, want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dx, _central(fn, x), rtol=1e-6, atol=1e-6)
    x32 = x.astype(np.float32)
    dx32, _ = _grad(fn, x32)
    assert dx32.dtype == np.float32
    np.testing.assert_allclose(dx32, want, rtol=2e-5, atol=2e-5)


def test_g3_like():
    check(g3_like)


def test_output_adjoint_used_twice():
    check(used_twice)


def test_output_overwritten_by_a_second_launch():
    check(overwritten)


def test_launches_in_a_loop():
    check(in_loop)


def test_kernel_storing_one_element_twice():
    check(twice_in_kernel)


def test_kernel_storing_in_a_loop():
    check(loop_in_kernel)


def test_border_branches():
    check(one_step, _x(7 * 9).reshape(7, 9))


def test_user_shadow_accumulates():
    # Duplicated adds into the user's shadow: what was in dx stays, the gradient added to it.
    x = _x()
    dx, _ = _grad(g3_like, x, start=1.5)
    np.testing.assert_allclose(dx, 1.5 + np.asarray(jax.grad(JAX[g3_like])(jnp.asarray(x))),
                               rtol=1e-12)


def test_user_given_output_and_its_shadow():
    # The output is the user's array with the user's shadow: its shadow is the caller's, not a
    # temporary. What it holds is an adjoint of out's final value (7 per element: d/dx of
    # 7 * sum(out) joins the gradient), the reverse kernel still zeroes it (out's old values
    # reach nothing), and x's shadow gets the gradient added to its contents.
    x = _x()
    out, dout = np.zeros_like(x), np.full_like(x, 7.0)
    dx = np.full_like(x, 0.5)
    adjit.autodiff(ReverseWithPrimal, into_user_output, Duplicated(x, dx),
                   Duplicated(out, dout))
    want = np.asarray(jax.grad(lambda v: jnp.sum(sp(v) ** 2) + 7.0 * jnp.sum(sp(v)))(
        jnp.asarray(x)))
    np.testing.assert_allclose(dx, 0.5 + want, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(dout, np.zeros_like(x))
