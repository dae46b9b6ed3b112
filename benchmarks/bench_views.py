"""The heat equation written with NumPy slices (issue 15): the same source run by NumPy,
compiled by adjit (@adjit.jit) and by Numba (@njit), against adjit's kernel version and JAX
(jnp with .at[].set under jax.jit); then the gradient of a loss of the final state, adjit's
of the slice-written function against its kernel version's and JAX's. Medians of many
runs after warm-up, in one process, reported as ratios; every result is checked against
NumPy (and the gradients against each other) before anything is timed.

    python benchmarks/bench_views.py [n] [steps]
"""
from __future__ import annotations

import sys

import numpy as np

import adjit
from timing import median_of

K = 0.1


def heat_slices(u0, steps: int):
    """NumPy code, unchanged under @adjit.jit and @numba.njit."""
    u = u0.copy()
    un = u0.copy()
    for _ in range(steps):
        un[1:-1, 1:-1] = u[1:-1, 1:-1] + K * (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:]
                                              + u[1:-1, :-2] - 4.0 * u[1:-1, 1:-1])
        u[...] = un
    return u


def loss_slices(u0, steps: int):
    u = heat_slices_jit(u0, steps)
    return np.sum(u * u)


heat_slices_jit = adjit.jit(heat_slices)
loss_slices_jit = adjit.jit(loss_slices)


@adjit.kernel
def heat_step(u, un):
    i, j = adjit.index_nd()
    if 0 < i < u.shape[0] - 1 and 0 < j < u.shape[1] - 1:
        un[i, j] = u[i, j] + K * (u[i + 1, j] + u[i - 1, j] + u[i, j + 1] + u[i, j - 1]
                                  - 4.0 * u[i, j])
    else:
        un[i, j] = u[i, j]


@adjit.jit
def heat_kernels(u0, steps: int):
    u = u0.copy()
    un = u0.copy()
    for _ in range(steps):
        heat_step(u, un, ndrange=u.shape)
        u, un = un, u
    return u


@adjit.jit
def loss_kernels(u0, steps: int):
    u = heat_kernels(u0, steps)
    return adjit.sum(u * u)


def _jax(steps: int):
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)

    def run(u0):
        def step(_, u):
            return u.at[1:-1, 1:-1].set(
                u[1:-1, 1:-1] + K * (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:]
                                     + u[1:-1, :-2] - 4.0 * u[1:-1, 1:-1]))
        return jax.lax.fori_loop(0, steps, step, u0)

    forward = jax.jit(run)
    grad = jax.jit(jax.grad(lambda u0: jnp.sum(run(u0) ** 2)))
    return forward, grad


def _numba():
    try:
        import numba
    except ImportError:
        return None
    return numba.njit(heat_slices)


def main(n: int = 512, steps: int = 50, repeat: int = 15) -> None:
    rng = np.random.default_rng(0)
    u0 = rng.random((n, n))
    want = heat_slices(u0, steps)
    forward = {"NumPy (slices)": lambda: heat_slices(u0, steps),
               "adjit @jit (the same slices)": lambda: heat_slices_jit(u0, steps),
               "adjit kernel version": lambda: heat_kernels(u0, steps)}
    numba_fn = _numba()
    if numba_fn is not None:
        forward["Numba @njit (the same slices)"] = lambda: numba_fn(u0, steps)
    jax_fns = _jax(steps)
    if jax_fns is not None:
        forward["JAX jit (.at[].set)"] = lambda: np.asarray(jax_fns[0](u0))
    for name, fn in forward.items():
        np.testing.assert_allclose(fn(), want, rtol=1e-12, atol=1e-12, err_msg=name)

    g_slices = adjit.grad(loss_slices_jit)(u0, steps)
    g_kernels = adjit.grad(loss_kernels)(u0, steps)
    np.testing.assert_allclose(g_slices, g_kernels, rtol=1e-10, atol=1e-12)
    gradient = {"adjit grad (slices)": lambda: adjit.grad(loss_slices_jit)(u0, steps),
                "adjit grad (kernel version)": lambda: adjit.grad(loss_kernels)(u0, steps)}
    if jax_fns is not None:
        np.testing.assert_allclose(np.asarray(jax_fns[1](u0)), g_slices, rtol=1e-10,
                                   atol=1e-12)
        gradient["JAX grad"] = lambda: np.asarray(jax_fns[1](u0))

    for title, table, base in (("forward", forward, "NumPy (slices)"),
                               ("gradient", gradient, "adjit grad (slices)")):
        times = {name: median_of(fn, repeat) for name, fn in table.items()}
        print(f"\nheat equation {n}x{n}, {steps} steps, float64: {title} "
              f"(median of {repeat}; ratio = time / {base})")
        for name, t in times.items():
            print(f"  {name:34s} {t * 1e3:9.2f} ms   {t / times[base]:6.2f}x")


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    main(*args)
