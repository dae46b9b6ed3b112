"""Gradient benchmark: loss = sum((a*x + b - y)**2) over 4M f32, its gradient with respect to
(a, b) and with respect to x, beside JAX's grad of the same function when JAX is installed
(`pip install -e '.[bench]'`). Reports primal time, gradient time, their ratio, and the tape.

    python benchmarks/bench_grad.py
"""
from __future__ import annotations

import numpy as np

import adjit
from timing import best_of
from adjit import Active, Const, Duplicated, Reverse, ReverseSplitWithPrimal


@adjit.jit
def loss(a: adjit.f32, b: adjit.f32, x, y):
    return adjit.sum((a * x + b - y) ** 2)


def jax_times(x, y):
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    f = jax.jit(lambda a, b, x, y: jnp.sum((a * x + b - y) ** 2))
    gab = jax.jit(jax.grad(lambda a, b, x, y: jnp.sum((a * x + b - y) ** 2), argnums=(0, 1)))
    gx = jax.jit(jax.grad(lambda a, b, x, y: jnp.sum((a * x + b - y) ** 2), argnums=2))
    xj, yj = jnp.asarray(x), jnp.asarray(y)
    a, b = jnp.float32(2.0), jnp.float32(1.0)
    run = lambda g: lambda: jax.block_until_ready(g(a, b, xj, yj))  # noqa: E731
    return best_of(run(f)), best_of(run(gab)), best_of(run(gx))


def main() -> None:
    n = 4_000_000
    rng = np.random.default_rng(0)
    x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    dx = np.zeros_like(x)
    primal = best_of(lambda: loss(2.0, 1.0, x, y))
    g_ab = best_of(lambda: adjit.autodiff(Reverse, loss, Active(2.0), Active(1.0),
                                          Const(x), Const(y)))
    g_x = best_of(lambda: adjit.autodiff(Reverse, loss, Const(2.0), Const(1.0),
                                         Duplicated(x, dx), Const(y)))
    fwd, _ = adjit.autodiff_thunk(ReverseSplitWithPrimal, loss, Active, Active, Const, Const)
    tape, _, _ = fwd(Active(2.0), Active(1.0), Const(x), Const(y))
    print(f"loss = sum((a*x+b-y)**2), {n:,} f32")
    print(f"{'':<22}{'adjit ms':>10}{'ratio to primal':>17}{'jax ms':>10}")
    jx = jax_times(x, y)
    rows = [("primal", primal), ("grad wrt (a, b)", g_ab), ("grad wrt x", g_x)]
    for k, (name, t) in enumerate(rows):
        j = f"{jx[k] * 1e3:>10.3f}" if jx else f"{'n/a':>10}"
        print(f"{name:<22}{t * 1e3:>10.3f}{t / primal:>17.2f}{j}")
    print(f"split-mode tape: {tape.nbytes} bytes")
    if jx is None:
        print("(JAX not installed: pip install -e '.[bench]' to compare)")


if __name__ == "__main__":
    main()
