"""Issue 10's benchmark: the gradient of a per-item RK4 integration whose number of steps
differs between work items (n[i], uniform in [0, 2N]), against the same kernel with a fixed
number of steps N for every item (a kernel argument: fixed tape slots, kernel_tape.py).
Dynamic loops take a counting pass, an exclusive scan of the counts and a packed tape
(passes/autodiff/generate/dynamic_tape.py): this measures what that costs. Same mean work per item.

    python benchmarks/bench_dynamic_loops.py

Each row: primal ms, gradient ms (one Reverse call, shadows zeroed inside), their ratio, and
the bytes the gradient allocated above those in use before it (its tape). Medians of 21 runs.
JAX has no reverse mode of a loop whose trip count is traced (lax.while_loop), and Warp's
dynamic-loop gradients are wrong (its documentation): neither has a row.
"""
from __future__ import annotations

import os
import sys

import numpy as np

import adjit
from adjit import Const, Duplicated, Reverse
from timing import extra_bytes, median_of

DT = 0.01


@adjit.func
def rhs(y, k):
    return -k * y * y


@adjit.func
def rk4(y, k):
    a = rhs(y, k)
    b = rhs(y + 0.5 * DT * a, k)
    c = rhs(y + 0.5 * DT * b, k)
    d = rhs(y + DT * c, k)
    return y + DT / 6.0 * (a + 2.0 * b + 2.0 * c + d)


@adjit.kernel
def per_item_steps(n, y0, k, out):
    i = adjit.index()
    y = y0[i]
    for _ in range(n[i]):
        y = rk4(y, k[i])
    out[i] = y


@adjit.kernel
def fixed_steps(steps: int, y0, k, out):
    i = adjit.index()
    y = y0[i]
    for _ in range(steps):
        y = rk4(y, k[i])
    out[i] = y


def main(m: int = 1 << 16, mean_steps: int = 50, repeat: int = 21) -> None:
    rng = np.random.default_rng(0)
    n = rng.integers(0, 2 * mean_steps + 1, m)
    y0, k = rng.uniform(0.5, 1.5, m), rng.uniform(0.1, 2.0, m)
    out, dy0, dk, dout = (np.zeros(m) for _ in range(4))
    state = y0.nbytes

    def row(name, kernel, first):
        def primal():
            kernel(first, y0, k, out, ndrange=m)

        def grad():
            dy0.fill(0.0)
            dk.fill(0.0)
            dout.fill(1.0)
            adjit.autodiff(Reverse, kernel, Const(first), Duplicated(y0, dy0), Duplicated(k, dk),
                           Duplicated(out, dout), ndrange=m)
        p, g = median_of(primal, repeat), median_of(grad, repeat)
        tape = extra_bytes(grad)
        print(f"| {name} | {p * 1e3:.3f} | {g * 1e3:.3f} | {g / p:.1f} | "
              f"{tape / 2**20:.1f} ({tape / state:.1f}) |")
        return dy0.copy()

    print(f"adjit; {m} items, {mean_steps} RK4 steps per item on average, float64, "
          f"{os.cpu_count()} cores, medians of {repeat} runs")
    print("| kernel | primal ms | grad ms | grad/primal | tape MiB (states of y) |")
    print("|---|---|---|---|---|")
    fixed = row(f"fixed: `for _ in range(steps)`, steps = {mean_steps}", fixed_steps,
                mean_steps)
    dynamic = row(f"per item: `for _ in range(n[i])`, n[i] in [0, {2 * mean_steps}]",
                  per_item_steps, n)
    # Both against the exact flow of y' = -k y^2: y0 / (1 + k y0 t).
    for got, t in ((fixed, mean_steps * DT), (dynamic, n * DT)):
        want = 1.0 / (1.0 + k * y0 * t) ** 2
        assert np.max(np.abs(got - want) / want) < 1e-6, "wrong gradient"


if __name__ == "__main__":
    sys.exit(main())
