"""Issue 30, the table's first two rows: parallel loops on a machine whose cores are not free.

Rows, each beside Numba (`parallel=True`, `prange`):
  stencil  20 steps of a 512^2 five-point stencil (kernel launches in a `@jit` loop:
           forward_kernels.stencil; Numba: a prange over rows in a loop of steps)
  jacobi   a Jacobi solve of a 48x48 diagonally dominant system by adjit.fixed_point, each
           sweep one kernel launch of unknown cost (many small parallel loops, each handed
           to the pool), and its gradient (adjit.grad); Numba: prange sweeps until the same
           tolerance
Scenarios:
  free     nothing else runs (beyond whatever the machine runs)
  busy     another process spins on one of this process's CPUs, pinned there
  pinned   this process (all its threads) pinned to one CPU, with two threads
Each scenario times each form with the default threads and with one thread, interleaved
(default, one, default, one, ...; medians of `repeat`), and prints the ratio default / one:
the issue's target is <= 1.1 in every scenario. adjit's one-thread form is the same module
with the pool limited to one thread (adj_set_thread_limit), Numba's numba.set_num_threads(1).
Results are checked before timing (the stencil against NumPy, the solve against
numpy.linalg.solve, the gradient against central differences). /proc/loadavg is printed:
on a shared machine the figures move with it.

    python benchmarks/bench_contention.py [--small] [--repeat N] [--scenarios free,busy,pinned]

Old pool A/B: run it with PYTHONPATH pointing at a tree with the old extension; where
adj_set_thread_limit is missing it times the default threads alone (run it again with
ADJIT_NUM_THREADS=1 for the one-thread figures).
"""
from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import adjit  # noqa: E402
from adjit.core.threads import default_num_threads  # noqa: E402
from adjit.runtime import extension  # noqa: E402
from forward_kernels import stencil  # noqa: E402

try:
    import numba
except ImportError:      # the rows run without their peer
    numba = None

try:
    _set_limit = ctypes.CFUNCTYPE(None, ctypes.c_int64)(extension.address("adj_set_thread_limit"))
except AttributeError:   # the old pool (one block per thread): no run-time limit
    _set_limit = None


@adjit.kernel
def jacobi_row(x, a, b, y):
    """Row i of a Jacobi sweep: its inner loop's trip count is known at run time only, so the
    launch's cost is unknown and it goes to the pool whatever its size (small_loops.py)."""
    i = adjit.index()
    n = x.shape[0]
    s = b[i]
    for j in range(n):
        if j != i:
            s -= a[i, j] * x[j]
    y[i] = s / a[i, i]


@adjit.jit
def jacobi(x, a, b):
    """One Jacobi sweep for A x = b: one launch."""
    y = adjit.empty_like(x)
    jacobi_row(x, a, b, y, ndrange=x.shape)
    return y


@adjit.jit
def solve_loss(a, b, c):
    x = adjit.fixed_point(jacobi, adjit.zeros_like(b), a, b, tol=1e-12, max_iter=2000)
    return adjit.sum(x * c)


solve_grad = adjit.grad(solve_loss, argnums=1)


if numba is not None:
    @numba.njit(parallel=True, cache=True)
    def nb_stencil(u0, steps):
        u = u0.copy()
        v = np.empty_like(u)
        n, m = u.shape
        for _ in range(steps):
            for i in numba.prange(n):
                for j in range(m):
                    if 0 < i < n - 1 and 0 < j < m - 1:
                        v[i, j] = u[i, j] + 0.1 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1]
                                                   + u[i, j + 1] - 4.0 * u[i, j])
                    else:
                        v[i, j] = u[i, j]
            u, v = v, u
        return u

    @numba.njit(parallel=True, cache=True)
    def nb_solve(a, b, c):
        n = b.shape[0]
        x = np.zeros_like(b)
        y = np.empty_like(b)
        for _ in range(2000):
            for i in numba.prange(n):
                s = b[i]
                for j in range(n):
                    if j != i:
                        s -= a[i, j] * x[j]
                y[i] = s / a[i, i]
            change = np.max(np.abs(y - x))
            x[:] = y
            if change <= 1e-12:
                break
        return np.sum(x * c)


def numpy_stencil(u0, steps):
    u = u0.copy()
    for _ in range(steps):
        v = u.copy()
        v[1:-1, 1:-1] = u[1:-1, 1:-1] + 0.1 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2]
                                               + u[1:-1, 2:] - 4.0 * u[1:-1, 1:-1])
        u = v
    return u


def system(n, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n)) + 2.0 * n * np.eye(n)
    return a, rng.standard_normal(n), rng.standard_normal(n)


def _threads_of_this_process() -> list[int]:
    return [int(t) for t in os.listdir("/proc/self/task")]


@contextlib.contextmanager
def scenario(name: str):
    """Sets up a scenario (the module docstring) and undoes it."""
    cpus = sorted(os.sched_getaffinity(0))
    if name == "free":
        yield
    elif name == "busy":
        spin = subprocess.Popen([sys.executable, "-c",
                                 f"import os; os.sched_setaffinity(0, {{{cpus[-1]}}})\n"
                                 "while True: pass"])
        time.sleep(0.2)    # running
        try:
            yield
        finally:
            spin.kill()
            spin.wait()
    elif name == "pinned":
        # os.sched_setaffinity(0) pins the calling thread only: pin every thread there is
        # (the pool's and Numba's workers, started during the warm-up).
        for tid in _threads_of_this_process():
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, {cpus[0]})
        try:
            yield
        finally:
            for tid in _threads_of_this_process():
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(tid, cpus)
    else:
        raise ValueError(f"unknown scenario {name!r}")


def set_threads(adjit_threads: int | None, numba_threads: int | None) -> None:
    if _set_limit is not None and adjit_threads is not None:
        _set_limit(adjit_threads)
    if numba is not None and numba_threads is not None:
        numba.set_num_threads(numba_threads)


def interleaved(forms: dict[str, callable], threads: int, repeat: int) -> dict[str, tuple]:
    """{form: (median with `threads`, median with one thread)} per call. The two alternate
    (their order swapped each round, since the first after a switch pays for cold caches),
    each sample a batch of calls lasting ~2 ms (a single call of a few microseconds after
    another form is mostly cache misses)."""
    times = {name: ([], []) for name in forms}
    batch = {}
    for name, (fn, _) in forms.items():
        t = time.perf_counter()
        fn()
        batch[name] = max(1, int(0.002 / max(time.perf_counter() - t, 1e-7)))
    for r in range(repeat):
        for name, (fn, kind) in forms.items():
            order = ((0, threads), (1, 1)) if r % 2 == 0 else ((1, 1), (0, threads))
            for k, count in order:
                set_threads(count if kind == "adjit" else None,
                            count if kind == "numba" else None)
                fn()
                t = time.perf_counter()
                for _ in range(batch[name]):
                    fn()
                times[name][k].append((time.perf_counter() - t) / batch[name])
    set_threads(threads, threads)
    return {name: (statistics.median(a), statistics.median(b)) for name, (a, b) in times.items()}


def main(small: bool = False, repeat: int = 15, scenarios=("free", "busy", "pinned"),
         peers: bool = True) -> None:
    """`peers`: Numba's forms too (they take seconds when pinned: its workers wait in turn)."""
    size, steps, n = (64, 4, 12) if small else (512, 20, 48)
    threads = max(default_num_threads(), 2)    # the contention cases are about more threads than free cores
    rng = np.random.default_rng(1)
    u0 = rng.standard_normal((size, size))
    a, b, c = system(n)

    # Checked before timing.
    np.testing.assert_allclose(stencil(u0, steps), numpy_stencil(u0, steps), rtol=1e-12)
    exact = float(np.linalg.solve(a, b) @ c)
    assert abs(solve_loss(a, b, c) - exact) <= 1e-9 * max(1.0, abs(exact))
    g = solve_grad(a, b, c)
    e = np.zeros_like(b)
    e[0] = 1e-6
    fd = (np.linalg.solve(a, b + e) @ c - np.linalg.solve(a, b - e) @ c) / 2e-6
    assert abs(g[0] - fd) <= 1e-6 * max(1.0, abs(fd)), (g[0], fd)
    forms = {"adjit stencil": (lambda: stencil(u0, steps), "adjit"),
             "adjit jacobi": (lambda: solve_loss(a, b, c), "adjit"),
             "adjit jacobi grad": (lambda: solve_grad(a, b, c), "adjit")}
    if numba is not None and peers:
        assert np.allclose(nb_stencil(u0, steps), numpy_stencil(u0, steps), rtol=1e-12)
        assert abs(nb_solve(a, b, c) - exact) <= 1e-9 * max(1.0, abs(exact))
        forms["numba stencil"] = (lambda: nb_stencil(u0, steps), "numba")
        forms["numba jacobi"] = (lambda: nb_solve(a, b, c), "numba")
    set_threads(threads, threads)
    for fn, _ in forms.values():       # warm: compiled, workers started
        fn()
    adjit.wait_for_builds()

    print(f"# contention: stencil {size}^2 x {steps} steps, jacobi n={n}; {threads} threads "
          f"vs 1; medians of {repeat}, interleaved"
          + ("" if _set_limit else " (old pool: default threads only, the 1-thread column "
             "is the default again)"))
    print("| scenario | form | threads | 1 thread | ratio | loadavg |")
    print("|---|---|---|---|---|---|")
    for name in scenarios:
        with scenario(name):
            if name == "pinned":
                set_threads(2, 2)
            result = interleaved(forms, 2 if name == "pinned" else threads, repeat)
            load = open("/proc/loadavg").read().split()[0]
        for form, (t_many, t_one) in result.items():
            print(f"| {name} | {form} | {t_many * 1e3:.3f} ms | {t_one * 1e3:.3f} ms | "
                  f"{t_many / t_one:.2f}x | {load} |")
    set_threads(threads, threads)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--small", action="store_true", help="tiny sizes (the test's)")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--scenarios", default="free,busy,pinned")
    args = parser.parse_args()
    main(args.small, args.repeat, tuple(args.scenarios.split(",")))
