"""Checkpointed loops (issue 14): the gradient of G2b (reaction-diffusion
`u + 0.1*lap(u) + 0.05*u*(1-u)`, 256^2 float32, 1,000 steps; loss sum(u_final^2)) with
respect to u0, by a plain `for` loop (store-all: every step's state on the tape), by
`adjit.checkpointed(range(steps), snapshots=10)` and `snapshots=32` (Revolve's binomial
schedule: at most k states kept) and by `every=32` (periodic: a state every 32 steps), beside
JAX's jitted jax.grad of the same step in a `jax.lax.fori_loop`: plain (store-all), with
`jax.checkpoint` (remat) of the step, and with `jax.checkpoint` of 32-step blocks (the
periodic schedule as a JAX user writes it).

For each: the median time of one gradient (11 rounds, each calling every variant once, adjit's
and JAX's, so that a load that comes and goes falls on all alike), the
most memory it needs above what was in use before it (adjit: memory_stats()["peak_bytes"]
minus bytes_in_use after release_cached_memory() and reset_peak_memory(); JAX: XLA's temp
buffers, `jit(grad).lower(u0).compile().memory_analysis().temp_size_in_bytes`), and the
recomputation factor (steps run again / steps: adjit's from the
memory_stats()["checkpoint_steps_recomputed"] counter, beside Revolve's optimum for k
snapshots; JAX's is 1 by construction: the backward pass reruns each remat'd step's or
block's forward once), with ratios to the store-all row. adjit's augmented pass runs the
loop as the schedule's forward sweep (keeping its snapshots on the tape), so the steps run
again are Revolve's optimum less that sweep's steps - 1.

Before anything is timed every adjit gradient is checked against the store-all one and (when
JAX is installed) JAX's gradients against adjit's; "err" is max|g - g_store_all| /
max|g_store_all| (adjit's store-all). One process; the whole run takes well under a minute
on 2 cores.

    python benchmarks/bench_checkpoint.py                      # 256^2, 1,000 steps
    python benchmarks/bench_checkpoint.py --grid 64 --steps 100 --repeat 3

tests/bench/test_bench_checkpoint.py runs it at a tiny size.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

import adjit

STEPS, GRID, REPEAT = 1000, 256, 11
BLOCK = 32          # the periodic schedule's interval (adjit every=32, JAX 32-step blocks)
RTOL = 1e-4         # float32 gradients after 1,000 steps: adjit's schedules vs store-all
JAX_TOL = 1e-3      # JAX (other rounding: XLA fuses and reorders): max|g - g_ref| / max|g_ref|
MiB = 2.0 ** 20


# ---- adjit: the user's code -------------------------------------------------------------------
# G2b's kernel and its store-all loss are bench_grad_workloads.py's (`reaction_diffusion`).
from bench_grad_workloads import reaction_diffusion as store_all  # noqa: E402
from bench_grad_workloads import reaction_diffusion_step  # noqa: E402


def checkpointed_loss(snapshots=None, every=None):
    """G2b's loss with its loop checkpointed so (None: a schedule not given)."""
    @adjit.jit
    def loss(u0, steps: int):
        u = u0.copy()
        v = adjit.empty_like(u)
        for _ in adjit.checkpointed(range(steps), snapshots=snapshots, every=every):
            reaction_diffusion_step(u, v, ndrange=u.shape)
            u, v = v, u
        return adjit.sum(u * u)
    return loss


revolve_10 = checkpointed_loss(snapshots=10)
revolve_32 = checkpointed_loss(snapshots=32)
periodic_32 = checkpointed_loss(every=BLOCK)


# (row name, function, Revolve snapshots or None)
VARIANTS = (("store-all (plain `for`)", store_all, None),
            ("checkpointed snapshots=10", revolve_10, 10),
            ("checkpointed snapshots=32", revolve_32, 32),
            ("checkpointed every=32", periodic_32, None))


def revolve_optimum(steps: int, snapshots: int) -> int:
    """The fewest steps run again after the loop's own forward run (which advances steps - 1
    of them in the schedule's sweep) to reverse `steps` steps keeping at most `snapshots`
    states (the initial one included): opt[f][n] = min_j j + opt[f-1][n-j] + opt[f][j], f
    states beside the kept one (tests/autodiff/test_checkpoint.py's recursion, vectorised),
    less steps - 1."""
    n = np.arange(steps + 1, dtype=np.int64)
    prev = np.maximum(n * (n - 1) // 2, 0)           # no state to spare: rerun from the start
    for _ in range(snapshots - 1):
        cur = np.zeros(steps + 1, dtype=np.int64)
        for m in range(2, steps + 1):
            j = np.arange(1, m)
            cur[m] = np.min(j + prev[m - j] + cur[j])
        prev = cur
    return int(prev[steps]) - max(steps - 1, 0)


def adjit_gradient(f, u0, g, steps: int) -> None:
    g.fill(0.0)
    adjit.autodiff(adjit.Reverse, f, adjit.Duplicated(u0, g), steps)


def measure_adjit(f, u0, steps: int):
    """(gradient, peak extra bytes, steps recomputed, a thunk to time) of one variant."""
    g = np.zeros_like(u0)
    before = adjit.memory_stats()["checkpoint_steps_recomputed"]
    adjit_gradient(f, u0, g, steps)                  # compiles; its answer is checked
    recomputed = adjit.memory_stats()["checkpoint_steps_recomputed"] - before
    answer = g.copy()
    adjit.wait_for_builds()
    adjit.release_cached_memory()
    adjit.reset_peak_memory()
    base = adjit.memory_stats()["bytes_in_use"]
    adjit_gradient(f, u0, g, steps)
    peak = adjit.memory_stats()["peak_bytes"] - base
    return answer, peak, recomputed, lambda: adjit_gradient(f, u0, g, steps)


def interleaved_medians(thunks, repeat: int) -> list:
    """Median wall time of each thunk (each called once before: compiled, warm) over `repeat`
    rounds of one call of each, in seconds. Round-robin rather than one variant's calls in a
    row (timing.median_of): a load that comes and goes on the 2 cores while a gradient takes
    ~0.2 s falls on every variant alike (measured: one variant's median moved 2.5x between
    two sequential runs)."""
    adjit.wait_for_builds()
    times = [[] for _ in thunks]
    for _ in range(repeat):
        for fn, ts in zip(thunks, times):
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
    return [statistics.median(ts) for ts in times]


# ---- JAX: the same step in a fori_loop ------------------------------------------------------

def jax_side(u0, steps: int):
    """[(row name, gradient, thunk to time or None, XLA temp bytes or None, note)] or None
    without JAX. A variant whose temp buffers would not fit in the memory available is not run."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None

    def step(u):
        c = u[1:-1, 1:-1]
        lap = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4.0 * c
        return u.at[1:-1, 1:-1].set(c + 0.1 * lap + 0.05 * c * (1.0 - c))

    def loop(body, n, u):
        return jax.lax.fori_loop(0, n, lambda _, u: body(u), u)

    remat_step = jax.checkpoint(step)
    remat_block = jax.checkpoint(lambda u: loop(step, BLOCK, u))

    def blocks(u):     # steps // BLOCK remat'd blocks, the rest (< BLOCK steps) stored
        return loop(step, steps % BLOCK, loop(remat_block, steps // BLOCK, u))

    advances = (("JAX fori_loop (store-all)", lambda u: loop(step, steps, u)),
                ("JAX jax.checkpoint(step) in fori_loop", lambda u: loop(remat_step, steps, u)),
                (f"JAX jax.checkpoint({BLOCK}-step block)", blocks))
    try:
        available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        available = None
    uj = jnp.asarray(u0)
    rows = []
    for name, advance in advances:
        compiled = jax.jit(jax.grad(lambda u, advance=advance: jnp.sum(advance(u) ** 2))) \
            .lower(uj).compile()
        try:
            temp = compiled.memory_analysis().temp_size_in_bytes
        except Exception:                # (memory_analysis is None or absent on some backends)
            temp = None
        if temp is not None and available is not None and temp > 0.8 * available:
            rows.append((name, None, None, temp, "not run: does not fit in memory"))
            continue
        try:
            g = np.asarray(compiled(uj))
        except Exception as e:           # XlaRuntimeError RESOURCE_EXHAUSTED
            rows.append((name, None, None, temp, f"failed: {type(e).__name__}"))
            continue
        rows.append((name, g, lambda c=compiled: jax.block_until_ready(c(uj)), temp, ""))
    return rows


# ---- the run ------------------------------------------------------------------------------

def _ratio(x, ref) -> str:
    return "n/a" if x is None or not ref else f"{x / ref:.2f}x"


def _mib(b) -> str:
    return "n/a" if b is None else f"{b / MiB:.1f}"


def main(steps: int = STEPS, grid: int = GRID, repeat: int = REPEAT) -> None:
    u0 = np.random.default_rng(0).random((grid, grid), dtype=np.float32)
    state = 2 * u0.nbytes          # the loop carries two arrays (u, v = v, u)
    results = [(name, k, *measure_adjit(f, u0, steps)) for name, f, k in VARIANTS]
    ref = results[0][2]
    scale = max(float(np.abs(ref).max()), np.finfo(np.float32).tiny)

    def err(g) -> float:
        return float(np.abs(g - ref).max()) / scale
    for name, _, g, *_ in results[1:]:
        np.testing.assert_allclose(g, ref, rtol=RTOL, atol=RTOL * scale,
                                   err_msg=f"{name} vs store-all")
    jx = jax_side(u0, steps)
    for name, g, *_ in jx or ():
        if g is not None:
            assert err(g) < JAX_TOL, f"{name}: max|g - adjit| / max|adjit| = {err(g):.2e}"
    # timed once all are checked: adjit's and JAX's variants in the same rounds
    thunks = [r[5] for r in results] + [r[2] for r in jx or () if r[2] is not None]
    seconds = iter(interleaved_medians(thunks, repeat))
    results = [(name, k, g, next(seconds), peak, rerun)
               for name, k, g, peak, rerun, _ in results]
    jx = jx and [(name, g, None if fn is None else next(seconds), temp, note)
                 for name, g, fn, temp, note in jx]

    print(f"G2b reaction-diffusion {grid}^2 float32, {steps} steps: grad of sum(u_final^2) "
          f"w.r.t. u0; median of {repeat} interleaved rounds; one state = u, v = {state / MiB:.2f} MiB")
    print()
    print("| adjit | grad ms | vs store-all | peak extra MiB | vs store-all | states | "
          "steps rerun | rerun / steps | Revolve optimum | err |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    t0, m0 = results[0][3], results[0][4]
    for name, k, g, t, peak, rerun in results:
        optimum = "-" if k is None else str(revolve_optimum(steps, k))
        print(f"| {name} | {t * 1e3:.1f} | {_ratio(t, t0)} | {_mib(peak)} | {_ratio(peak, m0)} "
              f"| {peak / state:.1f} | {rerun} | {rerun / max(steps, 1):.2f} | {optimum} "
              f"| {err(g):.1e} |")
    print()
    if jx is None:
        print("JAX: not installed")
        return
    jt0, jm0 = jx[0][2], jx[0][3]
    print("| JAX (jit(grad), float32) | grad ms | vs JAX store-all | vs adjit store-all | "
          "XLA temp MiB | vs JAX store-all | states | rerun / steps | err |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for i, (name, g, t, temp, note) in enumerate(jx):
        rerun = "0" if i == 0 else "1 (by construction)"
        ms = note if t is None else f"{t * 1e3:.1f}"
        states = "n/a" if temp is None else f"{temp / state:.1f}"
        e = "n/a" if g is None else f"{err(g):.1e}"
        print(f"| {name} | {ms} | {_ratio(t, jt0)} | {_ratio(t, t0)} | {_mib(temp)} | "
              f"{_ratio(temp, jm0)} | {states} | {rerun} | {e} |")
    print()
    print("JAX's temp size is XLA's buffer assignment (compiled.memory_analysis()), adjit's "
          "the allocator's measured peak: both above the argument and the result. "
          "jax.checkpoint of one step in a fori_loop still keeps every step's carry (the "
          "loop's residuals): it drops the step's intermediates only. adjit's forward run is "
          "the schedule's sweep (it keeps the snapshots), so its steps rerun are Revolve's "
          "optimum less that sweep (every=32: each step about once more).")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--grid", type=int, default=GRID)
    parser.add_argument("--repeat", type=int, default=REPEAT)
    a = parser.parse_args()
    main(a.steps, a.grid, a.repeat)
