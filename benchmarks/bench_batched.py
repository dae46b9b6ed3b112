"""Batched tangents in forward mode (BatchDuplicated, width N): N directions in one pass over
the primal against N passes of one direction, beside JAX's jacfwd (vmap of jvp: one batched
pass) when JAX is installed, float64, medians of many runs after warm-up, in one process.

(a) The 16x16 Jacobian of a small map R^16 -> R^16 with transcendentals and loops (four
    explicit steps of x' = x + h (sum_j sin(a_ij x_j) - x_i^2/4), then y = x + x^2): adjit.jacfwd
    with width 16 (one batched pass), 4 (four passes) and 1 (sixteen passes), JAX's jacfwd
    (jitted), and NumPy central differences (32 evaluations of a vectorised NumPy version);
    microseconds per Jacobian.
(b) The Jacobian of an element-wise model on 100,000 points with respect to its 8 parameters
    (y = p0 exp(-p1 x^2) sin(p2 x + p3) + p4 tanh(p5 x) + p6 x + p7): the 8 directions by one
    adjit.autodiff(Forward, model, BatchDuplicated(p, (e0, ..., e7)), x) against 8 calls with
    Duplicated(p, e_k), for an @adjit.jit function (returns the 8 tangent arrays) and for a
    kernel writing y (8 shadows of y written in place); adjit.jacfwd(width=8) of the function;
    JAX's jacfwd with respect to p; milliseconds.

What to expect: in (a) the primal is cheap to batch (scalar code, 16 lanes of tangents per
sin), so width 16 beats 16 passes several times over. In (b) the batched pass keeps LLVM's
vectorisation of the item loop across items (its N lanes are scalars, not vector<N> values,
which the loop vectoriser refuses), so one batched call saves the primal's N - 1 repetitions
and N - 1 passes over x.

Before timing, every Jacobian is checked against the others, JAX's and finite differences
(np.testing.assert_allclose): the benchmark refuses to time a wrong one.

    python benchmarks/bench_batched.py
"""
from __future__ import annotations

import os
import sys

import numpy as np

import adjit
from adjit import BatchDuplicated, Const, Duplicated, Forward
from timing import median_of

STEPS, H = 4, 0.1
N_SMALL, N_BIG, N_PARAMS = 16, 100_000, 8


# ---- (a) a small map R^16 -> R^16 ----------------------------------------------------------
@adjit.jit
def small_map(x, a):
    n = len(x)
    z = x.copy()
    w = adjit.empty_like(x)
    for _ in range(STEPS):
        for i in range(n):
            s = 0.0
            for j in range(n):
                s += adjit.sin(a[i, j] * z[j])
            w[i] = z[i] + H * (s - 0.25 * z[i] * z[i])
        z, w = w, z
    return z + z * z


def small_map_numpy(x, a):
    z = x.copy()
    for _ in range(STEPS):
        z = z + H * (np.sum(np.sin(a * z[None, :]), axis=1) - 0.25 * z * z)
    return z + z * z


def central_differences(f, x, eps=1e-6):
    cols = [(f(x + eps * e) - f(x - eps * e)) / (2 * eps) for e in np.eye(len(x))]
    return np.stack(cols, axis=-1)


# ---- (b) an element-wise model with 8 parameters -------------------------------------------
@adjit.jit
def model(p, x):
    return (p[0] * adjit.exp(-p[1] * x * x) * adjit.sin(p[2] * x + p[3])
            + p[4] * adjit.tanh(p[5] * x) + p[6] * x + p[7])


@adjit.kernel
def model_kernel(p, x, y):
    i = adjit.index()
    t = x[i]
    y[i] = (p[0] * adjit.exp(-p[1] * t * t) * adjit.sin(p[2] * t + p[3])
            + p[4] * adjit.tanh(p[5] * t) + p[6] * t + p[7])


def model_numpy(p, x):
    return (p[0] * np.exp(-p[1] * x * x) * np.sin(p[2] * x + p[3])
            + p[4] * np.tanh(p[5] * x) + p[6] * x + p[7])


def model_jacobian_exact(p, x):
    """d model / d p, shape (len(x), 8)."""
    g, s, c = np.exp(-p[1] * x * x), np.sin(p[2] * x + p[3]), np.cos(p[2] * x + p[3])
    t = np.tanh(p[5] * x)
    return np.stack([g * s, -p[0] * x * x * g * s, p[0] * g * c * x, p[0] * g * c,
                     t, p[4] * x * (1 - t * t), x, np.ones_like(x)], axis=-1)


# ---- JAX ------------------------------------------------------------------------------------
def jax_functions():
    """JAX's jitted jacfwd of both workloads, or None without JAX."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)

    def small_j(x, a):
        z = x
        for _ in range(STEPS):
            z = z + H * (jnp.sum(jnp.sin(a * z[None, :]), axis=1) - 0.25 * z * z)
        return z + z * z

    def model_j(p, x):
        return (p[0] * jnp.exp(-p[1] * x * x) * jnp.sin(p[2] * x + p[3])
                + p[4] * jnp.tanh(p[5] * x) + p[6] * x + p[7])

    return {"small": jax.jit(jax.jacfwd(small_j)), "big": jax.jit(jax.jacfwd(model_j)),
            "put": jnp.asarray, "block": jax.block_until_ready}


# ---- the runs -------------------------------------------------------------------------------
def small_rows(x, a, jx, repeat):
    jacs = {w: adjit.jacfwd(small_map, 0, width=w) for w in (16, 4, 1)}
    ref = small_map_numpy(x, a)
    np.testing.assert_allclose(small_map(x, a), ref, rtol=1e-13, err_msg="small_map primal")
    fd = central_differences(lambda v: small_map_numpy(v, a), x)
    got = {w: j(x, a) for w, j in jacs.items()}
    for w, jac in got.items():
        assert jac.shape == (N_SMALL, N_SMALL), (w, jac.shape)
        np.testing.assert_allclose(jac, got[1], rtol=1e-12, atol=1e-13,
                                   err_msg=f"jacfwd width={w} vs width=1")
        np.testing.assert_allclose(jac, fd, rtol=1e-6, atol=1e-7,
                                   err_msg=f"jacfwd width={w} vs central differences")
    times = {f"adjit.jacfwd width={w}": median_of(lambda j=j: j(x, a), repeat)
             for w, j in jacs.items()}
    if jx:
        xj, aj = jx["put"](x), jx["put"](a)
        f, block = jx["small"], jx["block"]
        np.testing.assert_allclose(np.asarray(block(f(xj, aj))), got[16], rtol=1e-12,
                                   atol=1e-13, err_msg="JAX jacfwd vs adjit")
        times["JAX jacfwd (jit)"] = median_of(lambda: block(f(xj, aj)), repeat)
    times["NumPy central differences"] = median_of(
        lambda: central_differences(lambda v: small_map_numpy(v, a), x), repeat)
    return times


def big_rows(p, x, jx, repeat):
    lanes = tuple(np.eye(N_PARAMS))
    exact = model_jacobian_exact(p, x)
    np.testing.assert_allclose(model(p, x), model_numpy(p, x), rtol=1e-13, atol=1e-14)

    def batched_fn():        # the 8 columns, as 8 arrays (one tuple)
        return adjit.autodiff(Forward, model, BatchDuplicated(p, lanes), Const(x))

    def singles_fn():
        return [adjit.autodiff(Forward, model, Duplicated(p, e), Const(x)) for e in lanes]

    y = np.zeros_like(x)
    shadows = tuple(np.zeros_like(x) for _ in range(N_PARAMS))
    columns = tuple(np.zeros_like(x) for _ in range(N_PARAMS))   # (the 8 calls' shadows)

    def batched_kernel():
        adjit.autodiff(Forward, model_kernel, BatchDuplicated(p, lanes), Const(x),
                       BatchDuplicated(y, shadows), ndrange=len(x))
        return shadows

    def singles_kernel():
        for e, column in zip(lanes, columns):
            adjit.autodiff(Forward, model_kernel, Duplicated(p, e), Const(x),
                           Duplicated(y, column), ndrange=len(x))
        return columns

    jac8 = adjit.jacfwd(model, 0, width=8)
    checks = {"BatchDuplicated (@jit)": np.stack(batched_fn(), axis=-1),
              "8 x Duplicated (@jit)": np.stack(singles_fn(), axis=-1),
              "BatchDuplicated (kernel)": np.stack(batched_kernel(), axis=-1),
              "8 x Duplicated (kernel)": np.stack(singles_kernel(), axis=-1),
              "jacfwd width=8": jac8(p, x)}
    for name, jac in checks.items():
        assert jac.shape == (len(x), N_PARAMS), (name, jac.shape)
        np.testing.assert_allclose(jac, exact, rtol=1e-12, atol=1e-13, err_msg=name)
    h = 1e-6
    fd = np.stack([(model_numpy(p + h * e, x) - model_numpy(p - h * e, x)) / (2 * h)
                   for e in lanes], axis=-1)
    np.testing.assert_allclose(exact, fd, rtol=1e-6, atol=1e-8, err_msg="exact vs FD")
    times = {"@jit: 1 autodiff, BatchDuplicated (8 lanes)": median_of(batched_fn, repeat),
             "@jit: 8 autodiff, Duplicated": median_of(singles_fn, repeat),
             "@jit: adjit.jacfwd width=8": median_of(lambda: jac8(p, x), repeat),
             "kernel: 1 autodiff, BatchDuplicated": median_of(batched_kernel, repeat),
             "kernel: 8 autodiff, Duplicated": median_of(singles_kernel, repeat)}
    if jx:
        pj, xj = jx["put"](p), jx["put"](x)
        f, block = jx["big"], jx["block"]
        np.testing.assert_allclose(np.asarray(block(f(pj, xj))), exact, rtol=1e-12,
                                   atol=1e-13, err_msg="JAX jacfwd vs exact")
        times["JAX jacfwd w.r.t. p (jit)"] = median_of(lambda: block(f(pj, xj)), repeat)
    times["adjit primal (@jit), for scale"] = median_of(lambda: model(p, x), repeat)
    times["adjit primal (kernel), for scale"] = median_of(
        lambda: model_kernel(p, x, y, ndrange=len(x)), repeat)
    times["NumPy primal, for scale"] = median_of(lambda: model_numpy(p, x), repeat)
    return times


def table(title, times, unit, scale, base, peers):
    """A markdown table of `times` (seconds) in `unit`, each over `base`; then the ratios
    `b / a` of the pairs in `peers` (above 1: a is faster)."""
    width = max(map(len, times))
    print(f"\n{title}\n\n| {'':<{width}} | {unit:>8} | {'/ ' + base} |")
    print(f"|{'-' * (width + 2)}|{'-' * 10}|{'-' * (len(base) + 4)}|")
    for name, t in times.items():
        ratio = f"{t / times[base]:.2f}" if base in times else "-"
        print(f"| {name:<{width}} | {t * scale:>8.1f} | {ratio:>{len(base) + 2}} |")
    print()
    for a, b in peers:
        if a in times and b in times:
            print(f"- {b} / {a}: {times[b] / times[a]:.2f} (above 1: {a} is faster)")


def main(n_big: int = N_BIG, repeat: int = 101, repeat_big: int = 41) -> None:
    rng = np.random.default_rng(0)
    x16 = rng.uniform(-1.0, 1.0, N_SMALL)
    a16 = rng.uniform(-1.0, 1.0, (N_SMALL, N_SMALL))
    p = np.array([1.3, 0.8, 2.1, 0.4, -0.7, 1.9, 0.25, -0.1])
    xb = np.linspace(-3.0, 3.0, n_big)
    jx = jax_functions()
    small = small_rows(x16, a16, jx, repeat)
    big = big_rows(p, xb, jx, repeat_big)
    print(f"adjit batched tangents; float64, {os.cpu_count()} cores, load "
          f"{os.getloadavg()[0]:.2f}, "
          f"medians of {repeat} (a) / {repeat_big} (b) runs after warm-up; "
          f"all Jacobians checked before timing" + ("" if jx else "; JAX not installed"))
    w16, w1 = "adjit.jacfwd width=16", "adjit.jacfwd width=1"
    table(f"(a) 16x16 Jacobian of {STEPS} steps of a map R^16 -> R^16 (256 sin per step)",
          small, "us", 1e6, w1,
          [(w16, w1), (w16, "JAX jacfwd (jit)"), (w16, "NumPy central differences")])
    one, eight = "@jit: 1 autodiff, BatchDuplicated (8 lanes)", "@jit: 8 autodiff, Duplicated"
    kone, keight = "kernel: 1 autodiff, BatchDuplicated", "kernel: 8 autodiff, Duplicated"
    table(f"(b) {n_big} x {N_PARAMS} Jacobian of an element-wise model w.r.t. its parameters",
          big, "ms", 1e3, eight,
          [(one, eight), (kone, keight), (one, "JAX jacfwd w.r.t. p (jit)"),
           (kone, "JAX jacfwd w.r.t. p (jit)")])


if __name__ == "__main__":
    sys.exit(main())
