"""G3's gradient with the reverse of `adjit.sum` three ways, paired in one process.

`sum(out)` over an array the function allocated: its reverse used to zero-fill out's
adjoint and add the seed into it in a serial loop; now it runs in parallel and stores the
seed into the untouched adjoint without the fill (passes/autodiff/rules/control_flow_ops.py
`_reverse_covering`). The same workload is compiled with that switched off (`before`), with
the parallel adds alone (`parallel adds`), and on (`after`), then timed alternately,
beside JAX's `jit(value_and_grad)`; medians. Every variant's gradient is checked against
the float64 NumPy derivative first, and the three against each other (bit for bit).

    python benchmarks/bench_sum_reverse.py            # 4M float32, 41 rounds
    python benchmarks/bench_sum_reverse.py --quick    # 10^4, 3 rounds
    python benchmarks/bench_sum_reverse.py --no-jax
Threads: adjit's default (ADJIT_NUM_THREADS); for one core run it under
`taskset -c 0` with ADJIT_NUM_THREADS=1.
"""
from __future__ import annotations

import os
import statistics
import sys
import time

import numpy as np

import adjit
from adjit import Duplicated, ReverseWithPrimal
from adjit.passes.autodiff.rules import control_flow_ops as control_flow

N = 4 * 1024 * 1024
ROUNDS = 41
# name: (store into a fresh shadow, parallel reversal of adds)
VARIANTS = {"before": (False, False), "parallel adds": (False, True), "after": (True, True)}


@adjit.func
def softplus(x):
    return adjit.log(1.0 + adjit.exp(x))


@adjit.kernel
def softplus_kernel(x, out):
    i = adjit.index()
    out[i] = softplus(x[i])


def make_loss():
    """A new function object per variant, so that each compiles on its own."""
    @adjit.jit
    def softplus_loss(x):
        out = adjit.empty_like(x)
        softplus_kernel(x, out, ndrange=x.shape[0])
        return adjit.sum(out)
    return softplus_loss


def compiled_variants(x: np.ndarray) -> dict:
    # Without the disk cache: its records of a derivative are keyed by the Python source and
    # the compiler's files, which the three variants share, so a later one would load the
    # first one's code.
    saved = control_flow.STORE_FRESH, control_flow.PARALLEL_ADDS
    disk = os.environ.get("ADJIT_DISK_CACHE")
    os.environ["ADJIT_DISK_CACHE"] = "0"
    fns = {}
    try:
        for name, (store, parallel) in VARIANTS.items():
            control_flow.STORE_FRESH, control_flow.PARALLEL_ADDS = store, parallel
            fn = make_loss()
            adjit.autodiff(ReverseWithPrimal, fn, Duplicated(x, np.zeros_like(x)))
            fns[name] = fn
    finally:
        control_flow.STORE_FRESH, control_flow.PARALLEL_ADDS = saved
        if disk is None:
            del os.environ["ADJIT_DISK_CACHE"]
        else:
            os.environ["ADJIT_DISK_CACHE"] = disk
    return fns


def reference_grad(x: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    return 1.0 / (1.0 + np.exp(-x64))


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    n, rounds = (10_000, 3) if quick else (N, ROUNDS)
    x = (2.0 * np.random.default_rng(0).standard_normal(n)).astype(np.float32)
    dx = np.zeros_like(x)
    fns = compiled_variants(x)
    want = reference_grad(x)
    first = None
    for name, fn in fns.items():
        dx.fill(0.0)
        adjit.autodiff(ReverseWithPrimal, fn, Duplicated(x, dx))
        err = float(np.max(np.abs(dx - want)) / np.max(np.abs(want)))
        if err > 1e-6:
            print(f"{name}: gradient off by {err:.1e} (relative, max) from float64 NumPy")
            return 1
        if first is None:
            first = dx.copy()
        elif not np.array_equal(dx, first):
            print(f"{name}: gradient differs from {next(iter(fns))}'s")
            return 1

    def grad(fn):
        def run():
            dx.fill(0.0)
            adjit.autodiff(ReverseWithPrimal, fn, Duplicated(x, dx))
        return run
    runs = {name: grad(fn) for name, fn in fns.items()}
    runs["primal"] = lambda: fns["after"](x)
    if "--no-jax" not in argv:
        import jax
        import jax.numpy as jnp

        def f(v):
            return jnp.sum(jnp.log(1.0 + jnp.exp(v)))
        xj = jnp.asarray(x)
        vg, p = jax.jit(jax.value_and_grad(f)), jax.jit(f)
        jgrad = np.asarray(vg(xj)[1], dtype=np.float64)
        if np.max(np.abs(jgrad - want)) / np.max(np.abs(want)) > 1e-6:
            print("JAX's gradient is off")
            return 1
        runs["JAX grad"] = lambda: jax.block_until_ready(vg(xj))
        runs["JAX primal"] = lambda: jax.block_until_ready(p(xj))
    for run in runs.values():
        run()
    adjit.wait_for_builds()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            t = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - t)
    med = {name: statistics.median(ts) * 1e3 for name, ts in times.items()}
    print(f"G3 softplus, {n} float32, medians of {rounds} alternated rounds; "
          f"threads {os.environ.get('ADJIT_NUM_THREADS', 'default')}; "
          f"load {' '.join(open('/proc/loadavg').read().split()[:3])}")
    print("| | ms | / before | / JAX grad |")
    print("|---|---|---|---|")
    for name, ms in med.items():
        vs_jax = f"{ms / med['JAX grad']:.2f}" if "JAX grad" in med else ""
        vs_before = f"{ms / med['before']:.2f}" if name in fns else ""
        print(f"| {name} | {ms:.3f} | {vs_before} | {vs_jax} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
