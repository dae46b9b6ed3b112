"""CPU benchmarks: adjit against NumPy in one run, reported as ratios (NumPy time / adjit
time: above 1 means adjit is faster) with adjit's first-call (compile) time.

    python benchmarks/bench_cpu.py
"""
from __future__ import annotations

import numpy as np

import adjit
from forward_kernels import saxpy, sum_squares, sum_squares_atomic, transcendental
from timing import best_of


@adjit.kernel
def stencil_step(u, v):
    i, j = adjit.index_nd()
    n, m = u.shape[0], u.shape[1]
    if 0 < i < n - 1 and 0 < j < m - 1:
        v[i, j] = 0.2 * (u[i, j] + u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1])
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


def stencil_numpy(u0, steps):
    u = u0.copy()
    v = np.empty_like(u)
    for _ in range(steps):
        v[...] = u
        v[1:-1, 1:-1] = 0.2 * (u[1:-1, 1:-1] + u[:-2, 1:-1] + u[2:, 1:-1]
                               + u[1:-1, :-2] + u[1:-1, 2:])
        u, v = v, u
    return u


@adjit.kernel
def histogram(bins, w, h):
    # Adds into a small array at indices that vary: private copies per part of the items
    # (passes/chunked_launch.py lower_privatised_launch)
    i = adjit.index()
    adjit.atomic_add(h, bins[i], w[i])


def row(name: str, first: float, ours: float, numpy: float) -> None:
    print(f"{name:<34} {first * 1e3:>9.1f} {ours * 1e3:>10.3f} {numpy * 1e3:>10.3f} "
          f"{numpy / ours:>8.2f}x")


def main() -> None:
    rng = np.random.default_rng(0)
    print(f"{'benchmark':<34} {'compile ms':>9} {'adjit ms':>10} {'numpy ms':>10} {'ratio':>9}")

    x = rng.random(10_000_000, dtype=np.float32)
    y = rng.random(10_000_000, dtype=np.float32)
    first = best_of(lambda: saxpy(2.0, x, y, ndrange=len(x)), 1, warmup=False)
    ours = best_of(lambda: saxpy(2.0, x, y, ndrange=len(x)))
    a = np.float32(2.0)

    def np_saxpy():
        np.multiply(x, a, out=x2)
        np.add(x2, y, out=y)
    x2 = np.empty_like(x)
    row("saxpy 10M f32 (in place)", first, ours, best_of(np_saxpy))

    x = rng.random(4_000_000, dtype=np.float32)
    z = rng.random(4_000_000, dtype=np.float32)
    first = best_of(lambda: transcendental(x, z), 1, warmup=False)
    assert np.allclose(transcendental(x, z), np.sin(np.exp(x)) * z + 0.5 * x * x, rtol=1e-5)
    row("sin(exp(x))*z + 0.5*x*x 4M f32", first, best_of(lambda: transcendental(x, z)),
        best_of(lambda: np.sin(np.exp(x)) * z + 0.5 * x * x))

    u0 = rng.random((1024, 1024))
    first = best_of(lambda: stencil(u0, 20), 1, warmup=False)
    assert np.allclose(stencil(u0, 20), stencil_numpy(u0, 20))
    row("5-point stencil 1024^2 x20 f64", first, best_of(lambda: stencil(u0, 20), 3),
        best_of(lambda: stencil_numpy(u0, 20), 3))

    x = rng.random(10_000_000)
    first = best_of(lambda: sum_squares(x), 1, warmup=False)
    assert np.isclose(sum_squares(x), np.sum(x * x), rtol=1e-12)
    row("sum of squares 10M f64", first, best_of(lambda: sum_squares(x)),
        best_of(lambda: np.sum(x * x)))

    x = rng.random(10_000_000, dtype=np.float32)
    out = np.zeros(1, np.float32)

    def atomic_sum():
        out[0] = 0.0
        sum_squares_atomic(x, out, ndrange=len(x))
        return out[0]
    first = best_of(atomic_sum, 1, warmup=False)
    assert np.isclose(atomic_sum(), np.sum(x.astype(np.float64) ** 2), rtol=1e-6)
    row("sum of squares, atomic_add kernel 10M f32", first, best_of(atomic_sum),
        best_of(lambda: np.sum(x * x)))

    bins = rng.integers(0, 256, 4_000_000)
    w = rng.random(4_000_000, dtype=np.float32)
    h = np.zeros(256, np.float32)

    def hist():
        h.fill(0.0)
        histogram(bins, w, h, ndrange=len(w))
        return h
    first = best_of(hist, 1, warmup=False)
    assert np.allclose(hist(), np.bincount(bins, weights=w, minlength=256), rtol=1e-6)
    row("histogram 4M f32 into 256 bins", first, best_of(hist),
        best_of(lambda: np.bincount(bins, weights=w, minlength=256)))


if __name__ == "__main__":
    main()
