"""A two-layer MLP written as NumPy code under @adjit.jit (issue 15): x (512x64) -> tanh(x W1
+ b1) (256) -> h W2 + b2 (10), loss = the mean squared error against targets y, float32.
The forward (the loss) and the gradient with respect to W1, b1, W2, b2 (adjit.value_and_grad)
against NumPy (the forward, and a hand-written backpropagation: the products are NumPy's
BLAS) and JAX (jax.jit(jax.value_and_grad(...)), XLA's CPU backend) when installed.
Medians of many runs after warm-up, in one process; milliseconds and ratios to adjit.

adjit's products call the sgemm of the OpenBLAS that NumPy bundles (compiler/matmul.py), the
same as NumPy's `@`; its gradient is two products per product (dA = dC B^T, dB = A^T dC) plus
the element-wise parts (tanh's derivative, the squared error's), each one fused loop.

Before timing, every loss and gradient is checked against NumPy's (np.testing.assert_allclose):
the benchmark refuses to time a wrong one.

    python benchmarks/bench_mlp.py
"""
from __future__ import annotations

import os
import sys

import numpy as np

import adjit
from timing import median_of

BATCH, D_IN, D_HIDDEN, D_OUT = 512, 64, 256, 10
DTYPE = np.float32


@adjit.jit
def loss(w1, b1, w2, b2, x, y):
    h = np.tanh(x @ w1 + b1)
    out = h @ w2 + b2
    return np.mean((out - y) ** 2)


grad_adjit = adjit.value_and_grad(loss, (0, 1, 2, 3))


def loss_numpy(w1, b1, w2, b2, x, y):
    h = np.tanh(x @ w1 + b1)
    return np.mean((h @ w2 + b2 - y) ** 2)


def grad_numpy(w1, b1, w2, b2, x, y):
    """Backpropagation by hand: the value and (dW1, db1, dW2, db2)."""
    h = np.tanh(x @ w1 + b1)
    r = h @ w2 + b2 - y
    value = np.mean(r * r)
    d_out = (2.0 / r.size) * r
    d_w2 = h.T @ d_out
    d_b2 = d_out.sum(axis=0)
    d_z = (d_out @ w2.T) * (1.0 - h * h)
    return value, (x.T @ d_z, d_z.sum(axis=0), d_w2, d_b2)


def problem(batch: int = BATCH, d_in: int = D_IN, d_hidden: int = D_HIDDEN,
            d_out: int = D_OUT, seed: int = 0) -> tuple:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, d_in)).astype(DTYPE)
    y = rng.standard_normal((batch, d_out)).astype(DTYPE)
    w1 = (rng.standard_normal((d_in, d_hidden)) / np.sqrt(d_in)).astype(DTYPE)
    b1 = (0.1 * rng.standard_normal(d_hidden)).astype(DTYPE)
    w2 = (rng.standard_normal((d_hidden, d_out)) / np.sqrt(d_hidden)).astype(DTYPE)
    b2 = (0.1 * rng.standard_normal(d_out)).astype(DTYPE)
    return w1, b1, w2, b2, x, y


def jax_functions():
    """(loss, value_and_grad) jitted by JAX, or None without JAX."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None

    def jloss(w1, b1, w2, b2, x, y):
        h = jnp.tanh(x @ w1 + b1)
        return jnp.mean((h @ w2 + b2 - y) ** 2)
    return jax.jit(jloss), jax.jit(jax.value_and_grad(jloss, argnums=(0, 1, 2, 3)))


def check(args: tuple, jx) -> None:
    """Every loss and gradient against NumPy's (float32: relative 2e-4)."""
    want_value, want_grads = grad_numpy(*args)
    np.testing.assert_allclose(loss(*args), loss_numpy(*args), rtol=2e-4)
    value, grads = grad_adjit(*args)
    np.testing.assert_allclose(value, want_value, rtol=2e-4)
    for g, w in zip(grads, want_grads):
        np.testing.assert_allclose(g, w, rtol=2e-3, atol=2e-5)
    if jx is not None:
        jl, jg = jx
        np.testing.assert_allclose(float(jl(*args)), want_value, rtol=2e-4)
        value, grads = jg(*args)
        for g, w in zip(grads, want_grads):
            np.testing.assert_allclose(np.asarray(g), w, rtol=2e-3, atol=2e-5)


def rows(args: tuple, jx, repeat: int) -> dict[str, dict[str, float]]:
    """Median seconds per framework for "forward" and "gradient"."""
    out = {"adjit": {"forward": median_of(lambda: loss(*args), repeat),
                     "gradient": median_of(lambda: grad_adjit(*args), repeat)},
           "numpy": {"forward": median_of(lambda: loss_numpy(*args), repeat),
                     "gradient": median_of(lambda: grad_numpy(*args), repeat)}}
    if jx is not None:
        jl, jg = jx
        out["jax"] = {"forward": median_of(lambda: jl(*args).block_until_ready(), repeat),
                      "gradient": median_of(lambda: jg(*args)[0].block_until_ready(), repeat)}
    return out


def main(repeat: int = 201, sizes: tuple = (BATCH, D_IN, D_HIDDEN, D_OUT)) -> dict:
    args = problem(*sizes)
    jx = jax_functions()
    check(args, jx)
    times = rows(args, jx, repeat)
    b, i, h, o = sizes
    print(f"MLP {b}x{i} -> {h} (tanh) -> {o}, mean squared error, float32; "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; medians of {repeat} runs "
          f"after warm-up; checked against NumPy" + ("" if jx else "; JAX not installed"))
    print(f"{'':10}{'forward ms':>12}{'gradient ms':>13}{'fwd / adjit':>13}"
          f"{'grad / adjit':>14}")
    mine = times["adjit"]
    for name, t in times.items():
        print(f"{name:10}{t['forward'] * 1e3:12.3f}{t['gradient'] * 1e3:13.3f}"
              f"{t['forward'] / mine['forward']:13.2f}{t['gradient'] / mine['gradient']:14.2f}")
    return times


if __name__ == "__main__":
    main()
    sys.exit(0)
