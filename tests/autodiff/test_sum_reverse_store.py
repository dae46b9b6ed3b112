"""The reverse of adjit.sum (and max/min) over a whole C-contiguous array (issue 30, G3).

compiler/arrays.py `reduce` marks its loop nest `adj.covers_once`: it loads one array, each
element once. Its reverse then runs in parallel (the chunks' adjoint updates do not overlap),
and where the array's shadow is untouched so far (memory.shadow_fresh_before: an array the
function allocated, nothing after the sum touching it, the sum not in a loop) the reverse
stores each element's adjoint instead of adding it, and zero-fills the shadow only when the
loop covers less than the whole allocation (control_flow._reverse_covering). Where the shadow
may already hold values (the user's Duplicated shadow, a second use of the array after the
sum) it keeps adding; a strided view or an expression is not marked. Every gradient against
JAX in float64 and central differences; which form each case took, from the derivative's IR.
tests/ir/autodiff/sum_reverse_store.mlir checks the pass on its own."""
from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np

import adjit
from adjit import Duplicated, ReverseWithPrimal

from test_adjoint_zeroing import softplus, softplus_kernel  # noqa: E402  (G3's kernel)

jax.config.update("jax_enable_x64", True)


@adjit.kernel
def softplus_2d(x, out):
    i, j = adjit.index_nd()
    out[i, j] = softplus(x[i, j])


@adjit.jit
def g3(x):
    out = adjit.empty_like(x)
    softplus_kernel(x, out, ndrange=x.shape[0])
    return adjit.sum(out)


@adjit.jit
def sum_then_square(x):
    # sum(out) runs first, so its reverse runs last: out's shadow holds the squares' adds
    out = adjit.empty_like(x)
    softplus_kernel(x, out, ndrange=x.shape[0])
    return adjit.sum(out) + adjit.sum(out * out)


@adjit.jit
def square_then_sum(x):
    # sum(out) runs last, its reverse first: the shadow is untouched then
    out = adjit.empty_like(x)
    softplus_kernel(x, out, ndrange=x.shape[0])
    return adjit.sum(out * out) + adjit.sum(out)


@adjit.jit
def summed_twice(x):
    out = adjit.empty_like(x)
    softplus_kernel(x, out, ndrange=x.shape[0])
    return adjit.sum(out) + 2.0 * adjit.sum(out)


@adjit.jit
def g3_2d(x):
    out = adjit.empty_like(x)
    softplus_2d(x, out, ndrange=x.shape)
    return adjit.sum(out)


@adjit.jit
def g3_max(x):
    out = adjit.empty_like(x)
    softplus_kernel(x, out, ndrange=x.shape[0])
    return adjit.max(out) + adjit.sum(out)


@adjit.jit
def strided(x):
    out = adjit.empty_like(x)
    softplus_kernel(x, out, ndrange=x.shape[0])
    return adjit.sum(out[::2])


@adjit.jit
def transposed(x):
    # a view that is not C-contiguous: summed from a C-order copy, a fresh array read once
    out = adjit.empty_like(x)
    softplus_2d(x, out, ndrange=x.shape)
    return adjit.sum(out.T)


@adjit.jit
def user_output(x, out):
    softplus_kernel(x, out, ndrange=x.shape[0])
    return adjit.sum(out)


@adjit.jit
def plain_sum(y):
    return adjit.sum(y)


def sp(x):
    return jnp.log(1.0 + jnp.exp(x))


JAX = {
    g3: lambda x: jnp.sum(sp(x)),
    sum_then_square: lambda x: jnp.sum(sp(x)) + jnp.sum(sp(x) ** 2),
    square_then_sum: lambda x: jnp.sum(sp(x) ** 2) + jnp.sum(sp(x)),
    summed_twice: lambda x: 3.0 * jnp.sum(sp(x)),
    g3_2d: lambda x: jnp.sum(sp(x)),
    g3_max: lambda x: jnp.max(sp(x)) + jnp.sum(sp(x)),
    strided: lambda x: jnp.sum(sp(x)[::2]),
    transposed: lambda x: jnp.sum(sp(x).T),
}


def _x(shape=(37,), dtype=np.float64, seed=5):
    return np.random.default_rng(seed).uniform(-2.0, 2.0, shape).astype(dtype)


def _grad(fn, x):
    dx = np.zeros_like(x)
    _, value = adjit.autodiff(ReverseWithPrimal, fn, Duplicated(x, dx))
    return dx, value


def _central(fn, x, h=1e-6):
    out = np.empty_like(x)
    for k in range(x.size):
        e = np.zeros_like(x)
        e.flat[k] = h
        out.flat[k] = (fn(x + e) - fn(x - e)) / (2 * h)
    return out


def check(fn, x):
    dx, value = _grad(fn, x)
    want = np.asarray(jax.grad(JAX[fn])(jnp.asarray(x)))
    np.testing.assert_allclose(value, float(JAX[fn](jnp.asarray(x))), rtol=1e-12)
    np.testing.assert_allclose(dx, want, rtol=1e-10, atol=1e-12)
    if x.size:
        np.testing.assert_allclose(dx, _central(fn, x), rtol=1e-6, atol=1e-6)
    x32 = x.astype(np.float32)
    dx32, _ = _grad(fn, x32)
    assert dx32.dtype == np.float32
    np.testing.assert_allclose(dx32, want, rtol=2e-5, atol=2e-5)


def _reverse_ir(fn) -> str:
    """The reverse function of fn's latest derivative, as text."""
    text = list(fn.__dict__["_derivatives"].values())[-1].adj_text
    start = re.search(r"func\.func @\w*_rev\(", text).start()
    end = text.find("\n  func.func", start + 1)
    return text[start:end if end > 0 else len(text)]


def _stores_into_fresh_shadow(fn) -> bool:
    """Whether the sum's reverse took the store form: a parallel loop, the f32/f64 shadow's
    zero-fill under an scf.if (only when the loop covers part of it)."""
    rev = _reverse_ir(fn)
    return "scf.parallel" in rev and re.search(r"scf\.if %\S+ \{\n\s+scf\.for", rev) is not None


def test_g3_stores_the_seed():
    x = _x()
    check(g3, x)
    assert _stores_into_fresh_shadow(g3)
    rev = _reverse_ir(g3)
    # no add into the shadow of out in the sum's reverse: the only f32/f64 adds left are the
    # pairwise sum's (f64) and the seed's; none reads an element of the f32 shadow first
    assert not re.search(r"= arith\.addf %\S+, %\S+ : f32", rev)


def test_sum_then_square_adds():
    check(sum_then_square, _x())


def test_square_then_sum():
    check(square_then_sum, _x())


def test_summed_twice():
    check(summed_twice, _x())


def test_two_dimensional():
    check(g3_2d, _x((7, 9)))
    assert _stores_into_fresh_shadow(g3_2d)
    check(g3_2d, _x((1, 5)))
    check(g3_2d, _x((3, 1)))


def test_max_and_sum():
    check(g3_max, _x())


def test_sizes_zero_and_one():
    for n in (0, 1, 2, 3, 4, 5):
        check(g3, _x((n,)))


def test_strided_view_takes_the_old_path():
    check(strided, _x())
    check(strided, _x((1,)))
    assert "scf.parallel" not in _reverse_ir(strided)


def test_transposed_view():
    check(transposed, _x((5, 3)))


def test_float32_a_million():
    x = _x((1_000_003,), np.float32, seed=11)
    dx, value = _grad(g3, x)
    x64 = x.astype(np.float64)
    want = np.asarray(jax.grad(JAX[g3])(jnp.asarray(x64)))
    assert dx.dtype == np.float32
    np.testing.assert_allclose(dx, want, rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(value, float(JAX[g3](jnp.asarray(x64))), rtol=1e-6)


def test_user_output_shadow_holds_values():
    # out is the user's, with a shadow holding 7 per element (an adjoint of its final value):
    # the sum adds its seed to it, so d/dx = (1 + 7) * sigmoid(x); the reverse kernel then
    # zeroes it.
    x = _x()
    out, dout = np.zeros_like(x), np.full_like(x, 7.0)
    dx = np.full_like(x, 0.5)
    adjit.autodiff(ReverseWithPrimal, user_output, Duplicated(x, dx), Duplicated(out, dout))
    want = np.asarray(jax.grad(lambda v: 8.0 * jnp.sum(sp(v)))(jnp.asarray(x)))
    np.testing.assert_allclose(dx, 0.5 + want, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(dout, np.zeros_like(x))
    assert not _stores_into_fresh_shadow(user_output)


def test_plain_sum_of_an_argument_adds():
    for n in (0, 1, 4097, 10_000):
        y = _x((n,))
        dy = np.linspace(-1.0, 1.0, n)
        before = dy.copy()
        adjit.autodiff(ReverseWithPrimal, plain_sum, Duplicated(y, dy))
        np.testing.assert_array_equal(dy, before + 1.0)


@adjit.jit
def in_branch(x):
    # The sum's reverse runs only in one branch; the other one adds into out's shadow, which
    # must still be zero-filled there.
    out = adjit.empty_like(x)
    softplus_kernel(x, out, ndrange=x.shape[0])
    if x[0] > 0.0:
        total = adjit.sum(out)
    else:
        total = adjit.sum(out * out)
    return total


JAX[in_branch] = lambda x: jnp.where(x[0] > 0.0, jnp.sum(sp(x)), jnp.sum(sp(x) ** 2))


def test_sum_in_a_branch():
    for first in (1.0, -1.0):
        x = _x((4099,))
        x[0] = first
        dx, value = _grad(in_branch, x)
        want = np.asarray(jax.grad(JAX[in_branch])(jnp.asarray(x)))
        np.testing.assert_allclose(value, float(JAX[in_branch](jnp.asarray(x))), rtol=1e-12)
        np.testing.assert_allclose(dx, want, rtol=1e-10, atol=1e-12)
        x32 = x.astype(np.float32)
        for _ in range(3):    # (fresh memory from the allocator may hold old values)
            dx32, _ = _grad(in_branch, x32)
            np.testing.assert_allclose(dx32, want, rtol=2e-5, atol=2e-5)


@adjit.jit
def summed_in_loop(x):
    # each iteration's sum adds into the shadow the later iterations' reverses filled
    out = adjit.empty_like(x)
    softplus_kernel(x, out, ndrange=x.shape[0])
    total = 0.0
    for k in range(3):
        total = total + (k + 1.0) * adjit.sum(out)
    return total


JAX[summed_in_loop] = lambda x: 6.0 * jnp.sum(sp(x))


def test_sum_in_a_loop_adds():
    check(summed_in_loop, _x())
    assert not _stores_into_fresh_shadow(summed_in_loop)
    x = _x((4099,))     # (two chunks; central differences of a sum this long are too coarse)
    dx, _ = _grad(summed_in_loop, x)
    np.testing.assert_allclose(dx, np.asarray(jax.grad(JAX[summed_in_loop])(jnp.asarray(x))),
                               rtol=1e-10, atol=1e-12)
