"""An f32 MLP whose parameters are a dict (issue 33's "Done when"): 4 -> 32 -> 32 -> 1, tanh,
a batch of 256, one SGD step per call from Python, JAX's habit:

- adjit: `@adjit.jit def step(params, x, y, lr)` calling `adjit.value_and_grad(loss)` of
  the dict and returning `(loss, {k: params[k] - lr * g[k] for k in params})`;
- JAX: the same step under `jax.jit(...)` with `jax.value_and_grad`, `block_until_ready`.

Both train from the same parameters for a few steps first, and their parameters must agree
to 1e-5 (relative, float32 kept by adjit) before anything is timed. Medians of many steps
after warm-up, in one process, in microseconds per step, and JAX's time as a ratio to
adjit's.

    python benchmarks/bench_mlp_dict.py [batch] [repeat]
"""
from __future__ import annotations

import os
import sys

import numpy as np

import adjit
from timing import median_of

D_IN, D_HIDDEN, D_OUT = 4, 32, 1
BATCH, LR = 256, 0.05
DTYPE = np.float32


def loss(params, x, y):
    h1 = np.tanh(x @ params["w1"] + params["b1"])
    h2 = np.tanh(h1 @ params["w2"] + params["b2"])
    return np.mean((h2 @ params["w3"] + params["b3"] - y) ** 2)


@adjit.jit
def step(params, x, y, lr):
    value, g = adjit.value_and_grad(loss)(params, x, y)
    return value, {k: params[k] - lr * g[k] for k in params}


def problem(batch: int = BATCH, seed: int = 0) -> tuple[dict, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, D_IN)).astype(DTYPE)
    y = np.sin(x.sum(axis=1, keepdims=True)).astype(DTYPE)
    sizes = [(D_IN, D_HIDDEN), (D_HIDDEN, D_HIDDEN), (D_HIDDEN, D_OUT)]
    params = {}
    for k, (m, n) in enumerate(sizes, 1):
        params[f"w{k}"] = (rng.standard_normal((m, n)) / np.sqrt(m)).astype(DTYPE)
        params[f"b{k}"] = np.zeros(n, DTYPE)
    return params, x, y


def jax_step():
    """JAX's jitted step, or None without JAX."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None

    def jloss(params, x, y):
        h1 = jnp.tanh(x @ params["w1"] + params["b1"])
        h2 = jnp.tanh(h1 @ params["w2"] + params["b2"])
        return jnp.mean((h2 @ params["w3"] + params["b3"] - y) ** 2)

    @jax.jit
    def jstep(params, x, y, lr):
        value, g = jax.value_and_grad(jloss)(params, x, y)
        return value, {k: params[k] - lr * g[k] for k in params}

    def run(params, x, y, lr):
        return jax.block_until_ready(jstep(params, x, y, DTYPE(lr)))
    return run


def check(params: dict, x, y, jstep, steps: int = 5) -> None:
    """adjit's parameters and losses after `steps` steps against JAX's (1e-5), float32."""
    mine, theirs = dict(params), dict(params)
    for _ in range(steps):
        value, mine = step(mine, x, y, LR)
        jvalue, theirs = jstep(theirs, x, y, LR)
        assert value.dtype == DTYPE, value.dtype
        np.testing.assert_allclose(value, np.asarray(jvalue), rtol=1e-5)
    for k in params:
        assert mine[k].dtype == DTYPE, (k, mine[k].dtype)
        np.testing.assert_allclose(mine[k], np.asarray(theirs[k]), rtol=1e-5, atol=1e-6,
                                   err_msg=k)


def main(batch: int = BATCH, repeat: int = 201) -> dict[str, float]:
    params, x, y = problem(batch)
    steps = {"adjit": lambda: step(params, x, y, LR)}
    jstep = jax_step()
    if jstep is not None:
        check(params, x, y, jstep)
        steps["JAX jit(value_and_grad)"] = lambda: jstep(params, x, y, LR)
    # (interleaved blocks, so that a change of the machine's load reaches both)
    times = {name: [] for name in steps}
    for _ in range(5):
        for name, fn in steps.items():
            times[name].append(median_of(fn, repeat))
    med = {name: sorted(t)[len(t) // 2] for name, t in times.items()}
    print(f"MLP {D_IN}-{D_HIDDEN}-{D_HIDDEN}-{D_OUT} (tanh), parameters a dict, batch {batch}, "
          f"float32, one SGD step per call from Python; {os.cpu_count()} cores, load "
          f"{os.getloadavg()[0]:.2f}; medians of {repeat} steps (5 interleaved blocks)"
          + ("; parameters checked against JAX's (1e-5)" if jstep is not None else ""))
    for name, t in med.items():
        print(f"  {name:26s} {t * 1e6:9.1f} us/step   {t / med['adjit']:6.2f}x adjit")
    return med


if __name__ == "__main__":
    main(*[int(a) for a in sys.argv[1:]])
    sys.exit(0)
