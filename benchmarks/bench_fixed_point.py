"""The gradient of a fixed point whose step copies a Dirichlet boundary (issue 30, item 5),
beside JAX's custom_vjp fixed point (the recipe of JAX's documentation, "implicit function
differentiation of iterative implementations"), in one run.

A Jacobi solve of the 2-D Poisson equation on a GRID x GRID grid, the boundary copied from x
(`out[i, j] = x[i, j]`), written as a user writes it: a kernel launched by an @adjit.jit
step, `adjit.fixed_point(step, x0, f, h2, tol=TOL)`, the loss sum(w * x*). Rows: the primal,
the gradient with respect to f (one `ReverseWithPrimal` call, shadows zeroed inside), their
ratio; JAX's recipe on the interior unknowns (what a JAX user writes: on the whole grid its
adjoint iteration never converges on the boundary, as adjit's did, and runs to the cap), and
on the whole grid with an iteration cap of MAX_ITER, for comparison. Medians after warm-up.

Before anything is timed, every gradient is checked against the implicit-function theorem
in float64 NumPy (np.linalg.solve on the interior system): a gradient further than WRONG
from it is reported as wrong, not timed, and the script exits with status 1.

    python benchmarks/bench_fixed_point.py [--quick] [--no-jax]

tests/bench/test_bench_fixed_point.py runs it at a tiny size.
"""
from __future__ import annotations

import os
import sys
from functools import partial

import numpy as np

import adjit
from adjit import Const, Duplicated, ReverseWithPrimal
from timing import median_of

GRID, TOL, MAX_ITER, REPEAT = 32, 1e-9, 100000, 11
WRONG = 1e-6


@adjit.kernel
def jacobi_2d(x, out, f, h2: float):
    i, j = adjit.index_nd()
    n, m = x.shape[0], x.shape[1]
    if 0 < i < n - 1 and 0 < j < m - 1:
        out[i, j] = 0.25 * (x[i - 1, j] + x[i + 1, j] + x[i, j - 1] + x[i, j + 1]
                            + h2 * f[i, j])
    else:
        out[i, j] = x[i, j]           # Dirichlet: the boundary stays x0's


@adjit.jit
def poisson_step(x, f, h2: float):
    out = adjit.empty_like(x)
    jacobi_2d(x, out, f, h2, ndrange=x.shape)
    return out


@adjit.jit
def poisson_loss(x0, f, h2: float, w):
    x = adjit.fixed_point(poisson_step, x0, f, h2, tol=1e-9, max_iter=100000)
    return adjit.sum(w * x)


def problem(n: int):
    rng = np.random.default_rng(0)
    f, w = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    x0 = np.zeros((n, n))
    x0[0, :], x0[:, -1] = 1.0, -0.25
    return x0, f, 1.0 / (n - 1) ** 2, w


def reference(x0, f, h2, w):
    """Loss and dL/df by the implicit-function theorem on the interior, float64."""
    n = f.shape[0]
    m = n - 2
    lap = np.zeros((m, m, m, m))
    for i in range(m):
        for j in range(m):
            for a, b in ((i - 1, j), (i + 1, j), (i, j - 1), (i, j + 1)):
                if 0 <= a < m and 0 <= b < m:
                    lap[i, j, a, b] = 0.25
    a_ii = np.eye(m * m) - lap.reshape(m * m, m * m)
    rhs = 0.25 * h2 * f[1:-1, 1:-1].copy()
    rhs[0, :] += 0.25 * x0[0, 1:-1]
    rhs[-1, :] += 0.25 * x0[-1, 1:-1]
    rhs[:, 0] += 0.25 * x0[1:-1, 0]
    rhs[:, -1] += 0.25 * x0[1:-1, -1]
    x = x0.copy()
    x[1:-1, 1:-1] = np.linalg.solve(a_ii, rhs.ravel()).reshape(m, m)
    lam = np.linalg.solve(a_ii.T, w[1:-1, 1:-1].ravel()).reshape(m, m)
    g = np.zeros_like(f)
    g[1:-1, 1:-1] = 0.25 * h2 * lam
    return float(np.sum(w * x)), g


def adjit_grad(x0, f, h2, w):
    gf = np.zeros_like(f)

    def grad():
        gf[...] = 0.0
        return adjit.autodiff(ReverseWithPrimal, poisson_loss, Const(x0),
                              Duplicated(f, gf), Const(h2), Const(w))[-1]
    return grad, gf


# ---- JAX: the custom_vjp fixed point of its documentation, with an iteration cap ----------
def jax_rows(x0, f, h2, w, max_iter):
    import jax
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    @partial(jax.custom_vjp, nondiff_argnums=(0,))
    def fixed_point(step, a, x_guess):
        def cond(carry):
            k, prev, x = carry
            return (jnp.max(jnp.abs(prev - x)) > TOL) & (k < max_iter)

        def body(carry):
            k, _, x = carry
            return k + 1, x, step(a, x)
        return jax.lax.while_loop(cond, body, (0, x_guess, step(a, x_guess)))[2]

    def fixed_point_fwd(step, a, x_guess):
        x_star = fixed_point(step, a, x_guess)
        return x_star, (a, x_star)

    def rev_iter(step, packed, u):
        a, x_star, x_star_bar = packed
        _, vjp_x = jax.vjp(lambda x: step(a, x), x_star)
        return x_star_bar + vjp_x(u)[0]

    def fixed_point_rev(step, res, x_star_bar):
        a, x_star = res
        _, vjp_a = jax.vjp(lambda a: step(a, x_star), a)
        lam = fixed_point(partial(rev_iter, step), (a, x_star, x_star_bar), x_star_bar)
        return vjp_a(lam)[0], jnp.zeros_like(x_star)

    fixed_point.defvjp(fixed_point_fwd, fixed_point_rev)

    def grid_step(a, x):          # the whole grid, the boundary copied
        f_, = a
        inner = 0.25 * (x[:-2, 1:-1] + x[2:, 1:-1] + x[1:-1, :-2] + x[1:-1, 2:]
                        + h2 * f_[1:-1, 1:-1])
        return x.at[1:-1, 1:-1].set(inner)

    bx0 = jnp.asarray(x0)

    def interior_step(a, xi):     # the interior unknowns, the boundary a constant
        return grid_step(a, bx0.at[1:-1, 1:-1].set(xi))[1:-1, 1:-1]

    jw = jnp.asarray(w)

    def loss_interior(f_):
        xi = fixed_point(interior_step, (f_,), bx0[1:-1, 1:-1])
        return jnp.sum(jw * bx0.at[1:-1, 1:-1].set(xi))

    def loss_grid(f_):
        return jnp.sum(jw * fixed_point(grid_step, (f_,), bx0))

    jf = jnp.asarray(f)
    rows = {}
    for name, loss in (("interior", loss_interior), ("grid", loss_grid)):
        primal = jax.jit(loss)
        grad = jax.jit(jax.value_and_grad(loss))
        rows[name] = (lambda p=primal: p(jf).block_until_ready(),
                      lambda g=grad: g(jf)[1].block_until_ready())
    return rows


def rel_error(g, ref) -> float:
    return float(np.max(np.abs(np.asarray(g) - ref)) / np.max(np.abs(ref)))


def main(argv: list[str]) -> int:
    n = 8 if "--quick" in argv else GRID
    repeat = 3 if "--quick" in argv else REPEAT
    x0, f, h2, w = problem(n)
    value_ref, g_ref = reference(x0, f, h2, w)
    ok = True
    print(f"fixed point with a copied Dirichlet boundary: 2-D Poisson, Jacobi, {n}x{n}, "
          f"tol={TOL:g}, float64; load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print("| what | primal (ms) | gradient (ms) | gradient / primal | err vs NumPy IFT |")
    print("|---|---|---|---|---|")
    grad, gf = adjit_grad(x0, f, h2, w)
    value = grad()
    err = max(rel_error(gf, g_ref), abs(value - value_ref) / abs(value_ref))
    if err > WRONG:
        print(f"| adjit | wrong: error {err:.1e} | | | |")
        ok = False
    else:
        tp = median_of(lambda: poisson_loss(x0, f, h2, w), repeat)
        tg = median_of(grad, repeat)
        print(f"| adjit `fixed_point` | {tp * 1e3:.3f} | {tg * 1e3:.3f} | {tg / tp:.2f} | "
              f"{err:.1e} |", flush=True)
    if "--no-jax" not in argv:
        try:
            import jax  # noqa: F401
        except ImportError:
            print("| JAX | not installed (pip install -e '.[bench]') | | | |")
            return 0 if ok else 1
        for name, (primal, jgrad) in jax_rows(x0, f, h2, w, MAX_ITER).items():
            err = rel_error(jgrad(), g_ref)
            what = (f"JAX custom_vjp recipe, {name}" if name == "interior" else
                    f"JAX custom_vjp recipe, whole grid (adjoint runs to {MAX_ITER} steps)")
            if err > WRONG:
                print(f"| {what} | wrong: error {err:.1e} | | | |")
                continue          # a peer's failure is its own, not a failed benchmark
            tp = median_of(primal, repeat)
            tg = median_of(jgrad, max(3, repeat // 3))
            print(f"| {what} | {tp * 1e3:.3f} | {tg * 1e3:.3f} | {tg / tp:.2f} | {err:.1e} |",
                  flush=True)
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
