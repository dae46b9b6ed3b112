"""`@adjit.jit` functions for device="cuda" tests, with NumPy stand-ins for their kernels
that the fake driver (fake_driver.py) runs: each reads the parameter words the host program
packed, as the PTX entry would. Importable without MLIR or pytest's skips: a subprocess
without MLIR runs them from the cache (test_cuda_jit.py)."""
from __future__ import annotations

import numpy as np

import adjit
from fake_driver import as_f32, device_view, slots


@adjit.kernel
def heat_step(u, v, dt: adjit.f32):
    i, j = adjit.index_nd()
    n, m = u.shape[0], u.shape[1]
    if 0 < i < n - 1 and 0 < j < m - 1:
        v[i, j] = u[i, j] + dt * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]
                                  - 4.0 * u[i, j])
    else:
        v[i, j] = u[i, j]


@adjit.jit
def simulate(u0, steps: int, dt: adjit.f32):
    u = u0.copy()
    v = adjit.empty_like(u)
    for _ in range(steps):
        heat_step(u, v, dt, ndrange=u.shape)
        u, v = v, u
    return adjit.sum(u * u), u


@adjit.kernel
def scale(x, a: float):
    i = adjit.index()
    x[i] = a * x[i]


@adjit.jit(device="cuda")
def scale_twice(x, a: float):
    scale(x, a, ndrange=x.shape[0], workgroupsize=128)
    scale(x, a, ndrange=x.shape[0])


def fake_heat_step(api, params, grid, block):
    """heat_step(u, v, dt: f32) over a 2-D f32 ndrange, from its 17 parameter words."""
    words = slots(params, 17)
    u_alloc, u, u_off, n, m, u_s0, u_s1 = words[:7]
    v_alloc, v, v_off, vn, vm, v_s0, v_s1 = words[7:14]
    dt, en, em = as_f32(words[14]), words[15], words[16]
    assert (u_alloc, v_alloc, u_off, v_off, u_s0, u_s1, v_s0, v_s1) == (u, v, 0, 0, m, 1, m, 1)
    assert (vn, vm, en, em) == (n, m, n, m) and grid * block >= n * m > (grid - 1) * block
    us = device_view(u, n * m, np.float32).reshape(n, m)
    vs = device_view(v, n * m, np.float32).reshape(n, m)
    vs[:] = us
    vs[1:-1, 1:-1] = us[1:-1, 1:-1] + dt * (us[:-2, 1:-1] + us[2:, 1:-1] + us[1:-1, :-2]
                                            + us[1:-1, 2:] - 4 * us[1:-1, 1:-1])


def fake_scale(api, params, grid, block):
    x_alloc, x, off, n, stride, a, en = slots(params, 7)
    assert (x_alloc, off, stride, en) == (x, 0, 1, n)
    xs = device_view(x, n, np.float64)
    xs[:] *= np.array([a], np.uint64).view(np.float64)[0]


@adjit.kernel
def divide(x, n: int):
    i = adjit.index()
    x[i] = x[i] + float(i // n)


@adjit.jit
def divide_twice(x, n: int):
    divide(x, n, ndrange=x.shape[0])
    divide(x, n, ndrange=x.shape[0])


KERNELS = {"heat_step__a2f32_a2f32_f32__2d": fake_heat_step, "scale__a1f64_wf64__1d": fake_scale}


@adjit.jit
def scale_once(x, a: float):
    scale(x, a, ndrange=x.shape[0])


@adjit.jit
def scale_often(x, times: int):
    for _ in range(times):
        scale_once(x, 1.0)        # inlined into the loop, launch and all
