"""An f32 MLP trained in a compiled loop (issue 30): 4 -> 32 -> 32 -> 1, tanh, a batch of 256,
50 steps of plain SGD on the mean squared error, the whole training one call:

- adjit: an @adjit.jit loop calling adjit.value_and_grad of the loss each step (no Python
  between steps);
- NumPy: backpropagation by hand, a Python loop;
- JAX: the same loop as a lax.fori_loop under one jax.jit, and jax.jit(value_and_grad)
  called per step from a Python loop (both reported);
- Numba: the hand backpropagation under @njit.

The final parameters of every framework are checked against NumPy's (float32: relative 2e-3)
before anything is timed. Medians of many runs after warm-up, in one process, reported in
milliseconds and as ratios to adjit.

    python benchmarks/bench_mlp_train.py [steps] [batch] [repeat]
"""
from __future__ import annotations

import os
import sys

import numpy as np

import adjit
from timing import median_of

D_IN, D_HIDDEN, D_OUT = 4, 32, 1
BATCH, STEPS, LR = 256, 50, 0.05
DTYPE = np.float32


@adjit.jit
def loss(w1, b1, w2, b2, w3, b3, x, y):
    h1 = np.tanh(x @ w1 + b1)
    h2 = np.tanh(h1 @ w2 + b2)
    out = h2 @ w3 + b3
    return np.mean((out - y) ** 2)


@adjit.jit
def train_adjit(w1, b1, w2, b2, w3, b3, x, y, lr: float, steps: int):
    value = 0.0
    for _ in range(steps):
        value, g = adjit.value_and_grad(loss, (0, 1, 2, 3, 4, 5))(w1, b1, w2, b2, w3, b3, x, y)
        w1 = w1 - lr * g[0]
        b1 = b1 - lr * g[1]
        w2 = w2 - lr * g[2]
        b2 = b2 - lr * g[3]
        w3 = w3 - lr * g[4]
        b3 = b3 - lr * g[5]
    return w1, b1, w2, b2, w3, b3


def train_numpy(w1, b1, w2, b2, w3, b3, x, y, lr: float, steps: int):
    """Backpropagation by hand (the products are NumPy's BLAS)."""
    lr = DTYPE(lr)
    for _ in range(steps):
        h1 = np.tanh(x @ w1 + b1)
        h2 = np.tanh(h1 @ w2 + b2)
        r = h2 @ w3 + b3 - y
        d_out = DTYPE(2.0 / r.size) * r
        d_z2 = (d_out @ w3.T) * (1 - h2 * h2)
        d_z1 = (d_z2 @ w2.T) * (1 - h1 * h1)
        w3 = w3 - lr * (h2.T @ d_out)
        b3 = b3 - lr * d_out.sum(axis=0)
        w2 = w2 - lr * (h1.T @ d_z2)
        b2 = b2 - lr * d_z2.sum(axis=0)
        w1 = w1 - lr * (x.T @ d_z1)
        b1 = b1 - lr * d_z1.sum(axis=0)
    return w1, b1, w2, b2, w3, b3


def problem(batch: int = BATCH, seed: int = 0) -> tuple:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, D_IN)).astype(DTYPE)
    y = np.sin(x.sum(axis=1, keepdims=True)).astype(DTYPE)
    w1 = (rng.standard_normal((D_IN, D_HIDDEN)) / np.sqrt(D_IN)).astype(DTYPE)
    b1 = np.zeros(D_HIDDEN, DTYPE)
    w2 = (rng.standard_normal((D_HIDDEN, D_HIDDEN)) / np.sqrt(D_HIDDEN)).astype(DTYPE)
    b2 = np.zeros(D_HIDDEN, DTYPE)
    w3 = (rng.standard_normal((D_HIDDEN, D_OUT)) / np.sqrt(D_HIDDEN)).astype(DTYPE)
    b3 = np.zeros(D_OUT, DTYPE)
    return w1, b1, w2, b2, w3, b3, x, y


def jax_functions():
    """{name: train(params..., x, y, lr, steps)} jitted by JAX, or {} without JAX."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return {}

    def jloss(p, x, y):
        w1, b1, w2, b2, w3, b3 = p
        h1 = jnp.tanh(x @ w1 + b1)
        h2 = jnp.tanh(h1 @ w2 + b2)
        return jnp.mean((h2 @ w3 + b3 - y) ** 2)

    vg = jax.value_and_grad(jloss)

    def step(p, x, y, lr):
        _, g = vg(p, x, y)
        return tuple(a - lr * b for a, b in zip(p, g))

    @jax.jit
    def loop(p, x, y, lr, steps):
        return jax.lax.fori_loop(0, steps, lambda _, q: step(q, x, y, lr), p)

    jstep = jax.jit(step)

    def fori(w1, b1, w2, b2, w3, b3, x, y, lr, steps):
        out = loop((w1, b1, w2, b2, w3, b3), x, y, DTYPE(lr), steps)
        return jax.block_until_ready(out)

    def per_step(w1, b1, w2, b2, w3, b3, x, y, lr, steps):
        p = (w1, b1, w2, b2, w3, b3)
        lr = DTYPE(lr)
        for _ in range(steps):
            p = jstep(p, x, y, lr)
        return jax.block_until_ready(p)

    return {"JAX jit(fori_loop)": fori, "JAX jit(value_and_grad) per step": per_step}


def numba_function():
    try:
        import numba
    except ImportError:
        return None
    return numba.njit(train_numpy)


def check(args: tuple, lr: float, steps: int, frameworks: dict) -> None:
    """Every framework's trained parameters against NumPy's (dtype included for adjit)."""
    want = train_numpy(*args, lr, steps)
    for name, fn in frameworks.items():
        got = fn(*args, lr, steps)
        for g, w in zip(got, want):
            if name == "adjit":
                assert g.dtype == w.dtype, (name, g.dtype)
            np.testing.assert_allclose(np.asarray(g), w, rtol=2e-3, atol=2e-5, err_msg=name)


def main(steps: int = STEPS, batch: int = BATCH, repeat: int = 31,
         numba: bool = True) -> dict[str, float]:
    """`numba=False` leaves Numba out (its compile takes ~4 s: the tiny test's choice)."""
    args = problem(batch)
    frameworks = {"adjit": train_adjit, "NumPy (hand backprop)": train_numpy}
    nb = numba_function() if numba else None
    if nb is not None:
        frameworks["Numba (hand backprop)"] = nb
    frameworks.update(jax_functions())
    check(args, LR, steps, frameworks)
    times = {name: median_of(lambda fn=fn: fn(*args, LR, steps), repeat)
             for name, fn in frameworks.items()}
    print(f"MLP {D_IN}-{D_HIDDEN}-{D_HIDDEN}-{D_OUT} (tanh), batch {batch}, float32, "
          f"{steps} SGD steps in one call; {os.cpu_count()} cores, load "
          f"{os.getloadavg()[0]:.2f}; medians of {repeat} runs after warm-up; final "
          f"parameters checked against NumPy")
    for name, t in times.items():
        print(f"  {name:34s} {t * 1e3:9.3f} ms   {t / times['adjit']:6.2f}x adjit")
    return times


if __name__ == "__main__":
    main(*[int(a) for a in sys.argv[1:]])
    sys.exit(0)
