"""adjit's side of benchmarks/bench_forward.py (W1-W5), as a user writes it."""
from __future__ import annotations

import adjit


@adjit.kernel
def saxpy(a: adjit.f32, x, y):
    i = adjit.index()
    y[i] = a * x[i] + y[i]


@adjit.jit
def transcendental(x, z):
    return adjit.sin(adjit.exp(x)) * z + 0.5 * x * x


@adjit.kernel
def stencil_step(u, v):
    i, j = adjit.index_nd()
    n, m = u.shape[0], u.shape[1]
    if 0 < i < n - 1 and 0 < j < m - 1:
        v[i, j] = u[i, j] + 0.1 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]
                                   - 4.0 * u[i, j])
    else:
        v[i, j] = u[i, j]


@adjit.jit
def stencil(u0, steps: int):
    u = u0.copy()
    v = adjit.empty_like(u)
    for _ in range(steps):
        stencil_step(u, v, ndrange=u.shape)
        u, v = v, u
    return u


@adjit.jit
def sum_squares(x):
    return adjit.sum(x * x)


@adjit.kernel
def sum_squares_atomic(x, out):
    i = adjit.index()
    adjit.atomic_add(out, 0, x[i] * x[i])
