"""Higher-order benchmark (issue 13): a Hessian-vector product (forward over reverse:
adjit.hvp = jvp of grad) over the gradient's time, on Rosenbrock (n = 1M, f64) and on the
50-step heat stencil (256^2, f32), beside JAX's jvp(grad(f)) when JAX is installed; and a
16x16 Jacobian by adjit.jacfwd (one compiled call looping over 16 forward passes; batched
passes, width=N, are bench_batched.py's) beside JAX's jacfwd (vmap: one batched pass).
Medians of many runs after warm-up, in one process.

    python benchmarks/bench_higher_order.py
"""
from __future__ import annotations

import numpy as np

import adjit
from timing import median_of


@adjit.jit
def rosen(x):
    s = 0.0
    for i in range(len(x) - 1):
        s += 100.0 * (x[i + 1] - x[i] * x[i]) ** 2 + (1.0 - x[i]) ** 2
    return s


@adjit.kernel
def heat_step(u, v, k: adjit.f32):
    i, j = adjit.index_nd()
    n, m = u.shape[0], u.shape[1]
    up, down = u[(i + n - 1) % n, j], u[(i + 1) % n, j]
    left, right = u[i, (j + m - 1) % m], u[i, (j + 1) % m]
    v[i, j] = u[i, j] + k * (up + down + left + right - 4.0 * u[i, j])


@adjit.jit
def heat_loss(u0, steps: int):
    u = u0.copy()
    v = adjit.empty_like(u)
    for _ in range(steps):
        heat_step(u, v, 0.1, ndrange=u.shape)
        u, v = v, u
    return adjit.sum(u * u * u)


@adjit.jit
def sixteen(x):
    y = adjit.empty_like(x)
    for i in range(len(x)):
        y[i] = adjit.sin(x[i]) * x[(i + 1) % len(x)] + x[i] * x[i]
    return y


def jax_side(x, v, u0, w, steps):
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)

    def rosen_j(x):
        return jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)

    def heat_j(u):
        # (a fori_loop, as a JAX user writes a time loop: 50 unrolled steps took XLA 476 s
        # to compile the gradient of, measured here)
        def step(_, u):
            return u + np.float32(0.1) * (jnp.roll(u, 1, 0) + jnp.roll(u, -1, 0) +
                                          jnp.roll(u, 1, 1) + jnp.roll(u, -1, 1) - 4.0 * u)
        return jnp.sum(jax.lax.fori_loop(0, steps, step, u) ** 3)

    def sixteen_j(x):
        return jnp.sin(x) * jnp.roll(x, -1) + x * x

    out = {}
    for name, f, args, tangent in (("rosen", rosen_j, x, v), ("heat", heat_j, u0, w)):
        a, t = jnp.asarray(args), jnp.asarray(tangent)
        g = jax.jit(jax.grad(f))
        h = jax.jit(lambda a, t, f=f: jax.jvp(jax.grad(f), (a,), (t,))[1])
        out[name] = (median_of(lambda: jax.block_until_ready(g(a))),
                     median_of(lambda: jax.block_until_ready(h(a, t))))
    j = jax.jit(jax.jacfwd(sixteen_j))
    x16 = jnp.linspace(0.1, 1.6, 16)
    out["jac16"] = median_of(lambda: jax.block_until_ready(j(x16)))
    return out


def main() -> None:
    rng = np.random.default_rng(0)
    n, steps = 1_000_000, 50
    x, v = rng.uniform(-1, 1, n), rng.standard_normal(n)
    u0 = rng.random((256, 256), dtype=np.float32)
    w = rng.standard_normal((256, 256)).astype(np.float32)
    rows = []
    for name, f, args, tangent in (("rosenbrock 1M f64", rosen, (x,), (v,)),
                                   ("heat 256^2 x50 f32", heat_loss, (u0, steps), None)):
        g = adjit.grad(f)
        if tangent is None:          # (steps is an int: only the array has a tangent)
            grad_t = median_of(lambda: g(*args), repeat=11)
            hvp_t = median_of(lambda: adjit.autodiff(
                adjit.Forward, g, adjit.Duplicated(u0, w), adjit.Const(steps)), repeat=11)
        else:
            grad_t = median_of(lambda: g(*args), repeat=11)
            hvp_t = median_of(lambda: adjit.hvp(f, args, tangent), repeat=11)
        rows.append((name, grad_t, hvp_t))
    x16 = np.linspace(0.1, 1.6, 16)
    jac = adjit.jacfwd(sixteen)
    jac_t = median_of(lambda: jac(x16), repeat=21)
    jx = jax_side(x, v, u0, w, steps)
    print(f"{'':<22}{'grad ms':>10}{'hvp ms':>10}{'hvp/grad':>10}"
          f"{'jax grad':>10}{'jax hvp':>10}{'jax h/g':>9}{'hvp vs jax':>11}")
    for (name, g, h), key in zip(rows, ("rosen", "heat")):
        if jx:
            jg, jh = jx[key]
            tail = f"{jg * 1e3:>10.3f}{jh * 1e3:>10.3f}{jh / jg:>9.2f}{h / jh:>10.2f}x"
        else:
            tail = "  (JAX not installed)"
        print(f"{name:<22}{g * 1e3:>10.3f}{h * 1e3:>10.3f}{h / g:>10.2f}{tail}")
    j16 = f"{jx['jac16'] * 1e6:.1f} us" if jx else "n/a"
    print(f"16x16 Jacobian: adjit.jacfwd {jac_t * 1e6:.1f} us (16 forward passes), "
          f"JAX jacfwd {j16} (one batched pass)")


if __name__ == "__main__":
    main()
