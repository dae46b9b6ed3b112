"""Gradient workloads of issue 9, written as a user writes them, beside JAX and hand-written
derivative code in one run. Each row reports the primal time, the gradient time (one
`ReverseWithPrimal` call, zeroing or seeding the shadows included), their ratio, the memory the
gradient allocated above what was in use before it (adjit.memory_stats / reset_peak_memory),
and JAX's `jit(value_and_grad)` of the same code; NumPy and Numba rows are hand-written
derivative code. Times are medians of 21 runs after a warm-up.

Before a row is timed its gradient is checked against a float64 NumPy reference (and JAX's
against the same reference): the "err" column is the largest of max|g - ref| / max|ref| over
the gradients and the value. A gradient further than WRONG from the reference is reported
as wrong, not timed, and makes the script exit with status 1.

    python benchmarks/bench_grad_workloads.py        # JAX/Numba: pip install -e '.[bench]'
    python benchmarks/bench_grad_workloads.py G2b G2s # only those rows

tests/bench/test_grad_workloads.py runs the same workloads at a tiny size.
"""
from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

import adjit
from adjit import Active, Const, Duplicated, ReverseWithPrimal
from timing import extra_bytes, median_of

WRONG = 1e-2      # relative error beyond which a gradient is wrong rather than inaccurate
REPEAT = 21


# ---- adjit: the user's code --------------------------------------------------------------

@adjit.jit
def linreg_loss(a: adjit.f32, b: adjit.f32, x, y):
    r = a * x + b - y             # a named temporary, as users write it
    return adjit.sum(r * r)


@adjit.jit
def linreg_loss_inline(a: adjit.f32, b: adjit.f32, x, y):
    # G1 as one expression: naming `r` above must cost no more than a few percent over this.
    return adjit.sum((a * x + b - y) * (a * x + b - y))


@adjit.kernel
def heat_step(u, v):
    i, j = adjit.index_nd()
    n, m = u.shape[0], u.shape[1]
    if 0 < i < n - 1 and 0 < j < m - 1:
        c = u[i, j]
        lap = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * c
        v[i, j] = c + 0.1 * lap
    else:
        v[i, j] = u[i, j]


@adjit.kernel
def reaction_diffusion_step(u, v):
    i, j = adjit.index_nd()
    n, m = u.shape[0], u.shape[1]
    if 0 < i < n - 1 and 0 < j < m - 1:
        c = u[i, j]
        lap = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * c
        v[i, j] = c + 0.1 * lap + 0.05 * c * (1.0 - c)
    else:
        v[i, j] = u[i, j]


@adjit.jit
def heat(u0, steps: int):
    u = u0.copy()
    v = adjit.empty_like(u)
    for _ in range(steps):
        heat_step(u, v, ndrange=u.shape)
        u, v = v, u
    return adjit.sum(u * u)


@adjit.jit
def reaction_diffusion(u0, steps: int):
    u = u0.copy()
    v = adjit.empty_like(u)
    for _ in range(steps):
        reaction_diffusion_step(u, v, ndrange=u.shape)
        u, v = v, u
    return adjit.sum(u * u)


@adjit.jit
def reaction_diffusion_stacked(u0, steps: int):
    # G2b with every state kept, as users write it when they want the trajectory: each step
    # writes the next row of a (steps + 1, n, m) array. Its gradient reads the states where
    # they are (no tape: memory.py proves row t never written again) and needs no copies.
    n, m = u0.shape[0], u0.shape[1]
    u_all = adjit.empty((steps + 1, n, m), dtype=u0.dtype)
    u_all[0] = u0
    for t in range(steps):
        reaction_diffusion_step(u_all[t], u_all[t + 1], ndrange=u0.shape)
    last = u_all[steps]
    return adjit.sum(last * last)


@adjit.func
def softplus(x):
    return adjit.log(1.0 + adjit.exp(x))


@adjit.kernel
def softplus_kernel(x, out):
    i = adjit.index()
    out[i] = softplus(x[i])


@adjit.jit
def softplus_loss(x):
    out = adjit.empty_like(x)
    softplus_kernel(x, out, ndrange=x.shape[0])
    return adjit.sum(out)


@adjit.kernel
def residual_sq(a: adjit.f32, b: adjit.f32, x, y, out):
    i = adjit.index()
    out[i] = (a * x[i] + b - y[i]) ** 2


@adjit.kernel
def table_lookup(idx, w, x, out):
    i = adjit.index()
    out[i] = w[idx[i]] * x[i]     # an indirect read: its adjoint scatters into dw


# ---- float64 NumPy references and hand-written NumPy derivatives ---------------------------
# The stencil steps v = S(u): interior points v = c + 0.1*lap(c) (+ 0.05*c*(1-c)), borders
# copied. Their adjoint g -> S'(u)^T g is written in scatter form with slices.

def stencil_step_np(u, reaction: bool):
    v = u.copy()
    c = u[1:-1, 1:-1]
    lap = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4.0 * c
    v[1:-1, 1:-1] = c + 0.1 * lap + (0.05 * c * (1.0 - c) if reaction else 0.0)
    return v


def stencil_adjoint_np(u, g, reaction: bool):
    gi = g[1:-1, 1:-1]
    out = g.copy()                       # borders: v = u
    self_coef = 0.6 + (0.05 * (1.0 - 2.0 * u[1:-1, 1:-1]) if reaction else 0.0)
    out[1:-1, 1:-1] = self_coef * gi
    w = 0.1 * gi
    out[:-2, 1:-1] += w
    out[2:, 1:-1] += w
    out[1:-1, :-2] += w
    out[1:-1, 2:] += w
    return out


def stencil_loss_np(u0, steps: int, reaction: bool):
    u = u0
    for _ in range(steps):
        u = stencil_step_np(u, reaction)
    return float(np.sum(u * u))


def stencil_grad_np(u0, steps: int, reaction: bool):
    """(dL/du0,), L: the heat steps are linear, so nothing is stored for them; the
    reaction-diffusion steps keep each step's input state."""
    states = []
    u = u0
    for _ in range(steps):
        if reaction:
            states.append(u)
        u = stencil_step_np(u, reaction)
    g = 2.0 * u
    for k in reversed(range(steps)):
        g = stencil_adjoint_np(states[k] if reaction else None, g, reaction)
    return (g,), float(np.sum(u * u))


def linreg_grad_np(a, b, x, y):
    r = a * x + b - y
    g = 2.0 * r
    return (np.sum(g * x), np.sum(g), a * g), np.sum(r * r)


def softplus_grad_np(x):
    return (1.0 / (1.0 + np.exp(-x)),), np.sum(np.log(1.0 + np.exp(x)))


def lookup_grad_np(idx, w, x):
    """dw for the seed dout = 1, out."""
    return (np.bincount(idx, weights=x, minlength=len(w)).astype(w.dtype),), w[idx] * x


def residual_grad_np(a, b, x, y):
    """(da, db), out for the seed dout = 1 (the launch's loss is sum(out))."""
    r = a * x + b - y
    g = 2.0 * r
    return (np.sum(g * x), np.sum(g)), r * r


# ---- workloads ------------------------------------------------------------------------------

@dataclass
class Workload:
    name: str
    primal: Callable[[], object]
    grad: Callable[[], tuple]            # -> ((gradients...), value)
    reference: Callable[[], tuple]       # float64 NumPy, same shape of answer
    ref_loss: Callable[..., float]       # float64 loss of the differentiated inputs (FD tests)
    wrt: tuple                           # the differentiated inputs, float64
    numpy_grad: Callable[[], tuple] | None = None   # hand-written, in the data's dtype
    jax: Callable[[], tuple] | None = None   # -> (primal, value_and_grad, its answer) or None
    numba: Callable[[], Callable] | None = None  # -> gradient thunk or None
    state_bytes: int = 0                 # one float32 state of the computation
    notes: list = field(default_factory=list)


def _f64(*arrays):
    return tuple(np.asarray(a, dtype=np.float64) for a in arrays)


def linreg_workload(n: int, rng, inline: bool = False) -> Workload:
    x = rng.random(n, dtype=np.float32)
    y = rng.random(n, dtype=np.float32)
    a, b = np.float32(2.0), np.float32(1.0)
    dx = np.zeros_like(x)
    x64, y64 = _f64(x, y)
    loss = linreg_loss_inline if inline else linreg_loss

    def grad():
        dx.fill(0.0)
        (da, db, _, _), value = adjit.autodiff(ReverseWithPrimal, loss, Active(a),
                                               Active(b), Duplicated(x, dx), Const(y))
        return (da, db, dx), value

    def jax():
        jnp, jx = _jax()
        if jnp is None:
            return None

        def f(a, b, x, y):
            r = a * x + b - y
            return jnp.sum(r * r)
        args = (jnp.float32(a), jnp.float32(b), jnp.asarray(x), jnp.asarray(y))
        p, vg = jx.jit(f), jx.jit(jx.value_and_grad(f, argnums=(0, 1, 2)))
        return (lambda: jx.block_until_ready(p(*args)),
                lambda: jx.block_until_ready(vg(*args)),
                _jax_answer)

    def numba():
        nb = _numba()
        if nb is None:
            return None
        kernel = _numba_kernels(nb)["linreg"]
        return lambda: _swap(kernel(a, b, x, y, dx), (0, 1, dx))

    return Workload(
        ("G1e `sum((a*x + b - y)*(a*x + b - y))`: G1 as one expression" if inline
         else "G1 `r = a*x + b - y; sum(r*r)`, grad a, b, x"), lambda: loss(a, b, x, y), grad,
        lambda: linreg_grad_np(2.0, 1.0, x64, y64),
        lambda a_, b_, x_: float(np.sum((a_ * x_ + b_ - y64) ** 2)), (2.0, 1.0, x64),
        numpy_grad=lambda: linreg_grad_np(a, b, x, y), jax=jax, numba=numba,
        state_bytes=x.nbytes)


def stencil_workload(grid: int, steps: int, reaction: bool, rng,
                     stacked: bool = False) -> Workload:
    """G2 (heat), G2b (reaction-diffusion) on two swapped arrays, or with `stacked` G2s:
    G2b's steps writing every state into a (steps + 1, grid, grid) array."""
    u0 = rng.random((grid, grid), dtype=np.float32)
    du0 = np.zeros_like(u0)
    u64, = _f64(u0)
    fn = reaction_diffusion_stacked if stacked else reaction_diffusion if reaction else heat

    def grad():
        du0.fill(0.0)
        _, value = adjit.autodiff(ReverseWithPrimal, fn, Duplicated(u0, du0), Const(steps))
        return (du0,), value

    def jax():
        jnp, jx = _jax()
        if jnp is None:
            return None

        def step(u):
            c = u[1:-1, 1:-1]
            lap = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4.0 * c
            new = c + 0.1 * lap + (0.05 * c * (1.0 - c) if reaction else 0.0)
            return u.at[1:-1, 1:-1].set(new)

        def f(u):
            for _ in range(steps):
                u = step(u)
            return jnp.sum(u * u)

        def f_stacked(u):
            # JAX's way to keep every state: a scan that stacks them
            def body(v, _):
                v = step(v)
                return v, v
            _, states = jx.lax.scan(body, u, None, length=steps)
            u_all = jnp.concatenate([u[None], states])
            return jnp.sum(u_all[steps] * u_all[steps])
        f = f_stacked if stacked else f
        uj = jnp.asarray(u0)
        p, vg = jx.jit(f), jx.jit(jx.value_and_grad(f))
        return (lambda: jx.block_until_ready(p(uj)),
                lambda: jx.block_until_ready(vg(uj)),
                lambda r: _jax_answer(r, single=True))

    def numba():
        nb = _numba()
        if nb is None:
            return None
        k = _numba_kernels(nb)
        states = np.empty((steps + 1, grid, grid), dtype=np.float32)
        buf = (np.empty_like(u0), np.empty_like(u0))

        def run():
            value = k["stencil_grad"](u0, steps, reaction, states, buf[0], buf[1], du0)
            return (du0,), value
        return run

    name = ("G2s G2b, the states stacked: `u_all[t + 1] = step(u_all[t])`" if stacked else
            "G2b reaction-diffusion `u + 0.1*lap(u) + 0.05*u*(1-u)`" if reaction else
            "G2 heat stencil") + f" {grid}^2 x {steps}, dL/du0"
    return Workload(
        name, lambda: fn(u0, steps), grad, lambda: stencil_grad_np(u64, steps, reaction),
        lambda u: stencil_loss_np(u, steps, reaction), (u64,),
        numpy_grad=lambda: stencil_grad_np(u0, steps, reaction), jax=jax, numba=numba,
        state_bytes=u0.nbytes)


def softplus_workload(n: int, rng) -> Workload:
    x = (2.0 * rng.standard_normal(n)).astype(np.float32)
    dx = np.zeros_like(x)
    x64, = _f64(x)

    def grad():
        dx.fill(0.0)
        _, value = adjit.autodiff(ReverseWithPrimal, softplus_loss, Duplicated(x, dx))
        return (dx,), value

    def jax():
        jnp, jx = _jax()
        if jnp is None:
            return None

        def f(x):
            return jnp.sum(jnp.log(1.0 + jnp.exp(x)))
        xj = jnp.asarray(x)
        p, vg = jx.jit(f), jx.jit(jx.value_and_grad(f))
        return (lambda: jx.block_until_ready(p(xj)),
                lambda: jx.block_until_ready(vg(xj)),
                lambda r: _jax_answer(r, single=True))

    def numba():
        nb = _numba()
        if nb is None:
            return None
        kernel = _numba_kernels(nb)["softplus"]
        return lambda: ((dx,), kernel(x, dx))

    return Workload(
        "G3 softplus `log(1+exp(x))` @adjit.func in a kernel, sum, dL/dx",
        lambda: softplus_loss(x), grad, lambda: softplus_grad_np(x64),
        lambda x_: float(np.sum(np.log(1.0 + np.exp(x_)))), (x64,),
        numpy_grad=lambda: softplus_grad_np(x), jax=jax, numba=numba, state_bytes=x.nbytes)


def residual_workload(n: int, rng) -> Workload:
    x = rng.random(n, dtype=np.float32)
    y = rng.random(n, dtype=np.float32)
    a, b = np.float32(2.0), np.float32(1.0)
    out, dout = np.empty_like(x), np.empty_like(x)
    x64, y64 = _f64(x, y)

    def grad():
        dout.fill(1.0)    # the seed: the launch's loss is sum(out)
        (da, db, *_), _ = adjit.autodiff(ReverseWithPrimal, residual_sq, Active(a), Active(b),
                                         Const(x), Const(y), Duplicated(out, dout), ndrange=n)
        return (da, db), out     # the launch's primal effect

    def jax():
        jnp, jx = _jax()
        if jnp is None:
            return None

        def f(a, b, x, y):
            return (a * x + b - y) ** 2

        def vg(a, b, x, y):   # value_and_grad of an array result: its vjp with a seed of ones
            out, pull = jx.vjp(lambda a, b: f(a, b, x, y), a, b)
            return out, pull(jnp.ones_like(out))
        args = (jnp.float32(a), jnp.float32(b), jnp.asarray(x), jnp.asarray(y))
        p, vg = jx.jit(f), jx.jit(vg)
        return (lambda: jx.block_until_ready(p(*args)),
                lambda: jx.block_until_ready(vg(*args)),
                _jax_answer)

    def numba():
        nb = _numba()
        if nb is None:
            return None
        kernel = _numba_kernels(nb)["residual"]
        return lambda: (kernel(a, b, x, y, out), out)

    return Workload(
        "kernel `out[i] = (a*x[i]+b-y[i])**2`, Active a, b",
        lambda: residual_sq(a, b, x, y, out, ndrange=n), grad,
        lambda: residual_grad_np(2.0, 1.0, x64, y64),
        lambda a_, b_: float(np.sum((a_ * x64 + b_ - y64) ** 2)), (2.0, 1.0),
        numpy_grad=lambda: residual_grad_np(a, b, x, y), jax=jax, numba=numba,
        state_bytes=x.nbytes)


def lookup_workload(n: int, table: int, rng) -> Workload:
    idx = rng.integers(0, table, n)
    w = rng.random(table, dtype=np.float32)
    x = rng.random(n, dtype=np.float32)
    dw = np.zeros_like(w)
    out, dout = np.empty_like(x), np.empty_like(x)
    w64, x64 = _f64(w, x)

    def grad():
        dw.fill(0.0)
        dout.fill(1.0)    # the seed: the launch's loss is sum(out)
        adjit.autodiff(ReverseWithPrimal, table_lookup, Const(idx), Duplicated(w, dw), Const(x),
                       Duplicated(out, dout), ndrange=n)
        return (dw,), out

    def jax():
        jnp, jx = _jax()
        if jnp is None:
            return None
        # idx and x are arguments: closed over, they are constants that XLA folds dw into
        # at compile time (dw does not depend on w).
        args = (jnp.asarray(w), jnp.asarray(idx), jnp.asarray(x))

        def f(w, idx, x):
            return w[idx] * x

        def vg(w, idx, x):
            out, pull = jx.vjp(lambda w: f(w, idx, x), w)
            return out, pull(jnp.ones_like(out))[0]
        p, vg = jx.jit(f), jx.jit(vg)
        return (lambda: jx.block_until_ready(p(*args)), lambda: jx.block_until_ready(vg(*args)),
                lambda r: _jax_answer(r, single=True))

    def numba():
        nb = _numba()
        if nb is None:
            return None
        kernel = _numba_kernels(nb)["lookup"]

        def run():
            dw.fill(0.0)
            return (kernel(idx, w, x, out, dw),), out
        return run

    return Workload(
        f"G4 table lookup `out[i] = w[idx[i]] * x[i]`, {table} entries, dL/dw",
        lambda: table_lookup(idx, w, x, out, ndrange=n), grad,
        lambda: lookup_grad_np(idx, w64, x64),
        lambda w_: float(np.sum(w_[idx] * x64)), (w64,),
        numpy_grad=lambda: lookup_grad_np(idx, w, x), jax=jax, numba=numba,
        state_bytes=x.nbytes)


def workloads(n: int = 4_000_000, grid: int = 256, steps: int = 50, seed: int = 0,
              table: int = 256):
    rng = np.random.default_rng(seed)
    return [linreg_workload(n, rng), linreg_workload(n, rng, inline=True),
            stencil_workload(grid, steps, False, rng),
            stencil_workload(grid, steps, True, rng),
            # (its own generator: the other rows keep their data)
            stencil_workload(grid, steps, True, np.random.default_rng(seed + 1), stacked=True),
            softplus_workload(n, rng),
            residual_workload(n, rng), lookup_workload(n, table, rng)]


def rel_error(answer: tuple, reference: tuple) -> float:
    """max over the gradients and the value of max|g - ref| / max|ref|."""
    (grads, value), (ref_grads, ref_value) = answer, reference
    worst = 0.0
    for g, r in zip((*grads, value), (*ref_grads, ref_value)):
        g, r = np.asarray(g, dtype=np.float64), np.asarray(r, dtype=np.float64)
        if g.shape != r.shape:
            return float("inf")
        scale = max(float(np.max(np.abs(r))), 1e-30)
        worst = max(worst, float(np.max(np.abs(g - r))) / scale)
    return worst


# ---- optional competitors -----------------------------------------------------------------

def _jax():
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None, None
    return jnp, jax


def _jax_answer(value_and_grads, single: bool = False):
    """JAX's (value, grads) in the workload's ((grads...), value), outside the timed call."""
    value, grads = value_and_grads
    grads = (grads,) if single else tuple(grads)
    return tuple(np.asarray(g) for g in grads), np.asarray(value)


def _swap(result, layout):
    """Numba kernels return (value, scalar gradients...): put them in the workload's order."""
    value, *scalars = result
    grads = tuple(scalars[k] if isinstance(k, int) else k for k in layout)
    return grads, value


def _numba():
    try:
        import numba
    except ImportError:
        return None
    return numba


_NUMBA_KERNELS: dict = {}


def _numba_kernels(nb) -> dict:
    """Hand-written derivative loops, parallel over the work (prange), float64 sums;
    fastmath where a sum would otherwise keep its loop from vectorising."""
    if _NUMBA_KERNELS:
        return _NUMBA_KERNELS
    prange = nb.prange

    @nb.njit(parallel=True, fastmath=True, cache=False)
    def linreg(a, b, x, y, dx):
        loss = 0.0
        da = 0.0
        db = 0.0
        for i in prange(x.shape[0]):
            r = a * x[i] + b - y[i]
            g = 2.0 * r
            loss += r * r
            da += g * x[i]
            db += g
            dx[i] = a * g
        return loss, da, db

    @nb.njit(parallel=True, fastmath=True, cache=False)
    def residual(a, b, x, y, out):
        da = 0.0
        db = 0.0
        for i in prange(x.shape[0]):
            r = a * x[i] + b - y[i]
            g = 2.0 * r
            out[i] = r * r
            da += g * x[i]
            db += g
        return da, db

    @nb.njit(cache=False)
    def lookup(idx, w, x, out, dw):   # serial: a parallel scatter into dw would race
        for i in range(x.shape[0]):
            out[i] = w[idx[i]] * x[i]
            dw[idx[i]] += x[i]
        return dw

    @nb.njit(parallel=True, fastmath=True, cache=False)
    def softplus(x, dx):
        loss = 0.0
        for i in prange(x.shape[0]):
            e = np.exp(x[i])
            loss += np.log(np.float32(1.0) + e)
            dx[i] = e / (np.float32(1.0) + e)
        return loss

    @nb.njit(inline="always")
    def interior(i, j, n, m):
        return 0 < i < n - 1 and 0 < j < m - 1

    @nb.njit(parallel=True, cache=False)
    def step(u, v, reaction):
        n, m = u.shape
        for i in prange(n):
            for j in range(m):
                if interior(i, j, n, m):
                    c = u[i, j]
                    lap = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * c
                    w = c + 0.1 * lap
                    if reaction:
                        w += 0.05 * c * (1.0 - c)
                    v[i, j] = w
                else:
                    v[i, j] = u[i, j]

    @nb.njit(parallel=True, cache=False)
    def adjoint(u, g, out, reaction):
        # Gather form: each point sums the partials of the points that read it.
        n, m = g.shape
        for i in prange(n):
            for j in range(m):
                if interior(i, j, n, m):
                    coef = 0.6
                    if reaction:
                        coef += 0.05 * (1.0 - 2.0 * u[i, j])
                    s = coef * g[i, j]
                else:
                    s = g[i, j]
                if interior(i - 1, j, n, m):
                    s += 0.1 * g[i - 1, j]
                if interior(i + 1, j, n, m):
                    s += 0.1 * g[i + 1, j]
                if interior(i, j - 1, n, m):
                    s += 0.1 * g[i, j - 1]
                if interior(i, j + 1, n, m):
                    s += 0.1 * g[i, j + 1]
                out[i, j] = s

    @nb.njit(cache=False)
    def stencil_grad(u0, steps, reaction, states, g, h, du0):
        # The heat steps are linear: only the reaction-diffusion states are kept.
        states[0] = u0
        cur = 0
        for k in range(steps):
            src = states[k] if reaction else states[cur]
            dst = states[k + 1] if reaction else states[1 - cur]
            step(src, dst, reaction)
            cur = 1 - cur
        last = states[steps] if reaction else states[cur]
        value = 0.0
        for i in range(last.shape[0]):
            for j in range(last.shape[1]):
                value += last[i, j] * last[i, j]
                g[i, j] = 2.0 * last[i, j]
        for k in range(steps - 1, -1, -1):
            adjoint(states[k], g, h, reaction)
            g, h = h, g
        du0[:] = g
        return value

    _NUMBA_KERNELS.update(linreg=linreg, residual=residual, softplus=softplus, lookup=lookup,
                          stencil_grad=stencil_grad)
    return _NUMBA_KERNELS


# ---- the run ------------------------------------------------------------------------------

def _ms(t):
    return "-" if t is None else f"{t * 1e3:.3f}"


def _ratio(a, b):
    return "-" if a is None or b is None else f"{a / b:.1f}"


def run(wl: Workload, out) -> bool:
    """Checks then times one workload; prints its table row. False if a gradient is wrong."""
    ref = wl.reference()
    ok = True
    err = rel_error(wl.grad(), ref)
    if err > WRONG:
        ok = False
        wl.notes.append(f"adjit gradient WRONG (err {err:.2e}): not timed")
        primal = grad = mem = None
    else:
        primal = median_of(wl.primal, REPEAT)
        grad = median_of(wl.grad, REPEAT)
        mem = extra_bytes(wl.grad)
    jax_p = jax_g = numpy_g = numba_g = None
    jax = wl.jax() if wl.jax else None
    jax_err = None
    if jax is not None:
        jax_err = rel_error(jax[2](jax[1]()), ref)
        if jax_err > WRONG:
            ok = False
            wl.notes.append(f"JAX gradient differs from the reference by {jax_err:.2e}")
        else:
            jax_p, jax_g = median_of(jax[0], REPEAT), median_of(jax[1], REPEAT)
    if wl.numpy_grad is not None:
        e = rel_error(wl.numpy_grad(), ref)
        if e > WRONG:
            ok = False
            wl.notes.append(f"NumPy hand-written gradient WRONG (err {e:.2e})")
        else:
            numpy_g = median_of(wl.numpy_grad, REPEAT)
    numba = wl.numba() if wl.numba else None
    if numba is not None:
        e = rel_error(numba(), ref)
        if e > WRONG:
            ok = False
            wl.notes.append(f"Numba hand-written gradient WRONG (err {e:.2e})")
        else:
            numba_g = median_of(numba, REPEAT)
    cells = [wl.name, _ms(primal), _ms(grad), _ratio(grad, primal),
             "-" if mem is None else f"{mem / 2**20:.1f} ({mem / wl.state_bytes:.1f})",
             f"{err:.1e}", _ms(jax_p), _ms(jax_g), _ratio(jax_g, jax_p),
             "-" if jax_err is None else f"{jax_err:.1e}", _ratio(grad, jax_g), _ms(numpy_g),
             _ms(numba_g)]
    print("| " + " | ".join(cells) + " |", file=out, flush=True)
    return ok


HEADER = ("workload", "adjit primal ms", "adjit grad ms", "grad/primal",
          "grad extra MiB (states)", "adjit err", "JAX primal ms", "JAX grad ms", "JAX ratio",
          "JAX err", "adjit/JAX grad", "NumPy grad ms", "Numba grad ms")


def _source_state() -> str:
    """The commit of the adjit being measured, '-dirty' with uncommitted changes."""
    try:
        return subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True,
                              text=True, timeout=10, check=True,
                              cwd=Path(adjit.__file__).resolve().parent).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def main(argv: list[str]) -> int:
    """argv: first words of workload names (G1 G1e G2 G2b G2s G3 kernel G4): only those
    rows."""
    out = sys.stdout
    load = os.getloadavg()[0]
    print(f"adjit {_source_state()}; load average "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}, "
          f"{os.cpu_count()} cores, medians of {REPEAT} runs", file=out)
    print("| " + " | ".join(HEADER) + " |", file=out)
    print("|" + "---|" * len(HEADER), file=out, flush=True)
    ok = True
    notes = []
    for wl in workloads():
        if argv and not any(wl.name.split()[0] == a for a in argv):
            continue
        ok &= run(wl, out)
        notes += [f"{wl.name}: {n}" for n in wl.notes]
    print(file=out)
    print("grad: one ReverseWithPrimal call, zeroing (or seeding) the shadows included; "
          "JAX: jit(value_and_grad); NumPy/Numba: hand-written derivatives. err: max|g - "
          "ref|/max|ref| against float64 NumPy. grad extra: peak bytes above those in use "
          "before the call, (in float32 states of the workload).", file=out)
    if _jax()[0] is None or _numba() is None:
        print("(JAX or Numba not installed: pip install -e '.[bench]' to compare)", file=out)
    for n in notes:
        print(f"- {n}", file=out)
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}", file=out)
    if load > 0.5 * (os.cpu_count() or 1):   # before this run (which loads every core)
        # Every launch, prange loop and XLA op is fork-join: a descheduled worker holds up
        # the rest, so the times of parallel code grow far more than the load suggests.
        print("warning: other processes were using the cores; times of parallel code are "
              "inflated (seen: 2-10x): compare rows of one run on a quiet machine", file=out)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
