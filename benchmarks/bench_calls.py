"""What a call costs beyond its loops (issue 30; docs/performance.md "Calls"), side by side:
adjit `@jit` (natively dispatched), the same compiled code through adjit's Python call path
(a copy of the function without a native dispatcher: what every `@jit` call returning an
array took before), with the profiler off (a copy called inside an `adjit.profile()` that has
closed: the dispatch figure must not move) and on (calls inside one, each recorded), an adjit
kernel into a preallocated array, NumPy, Numba (`@njit`) and
JAX (`jit`, `block_until_ready`). Rows: calls on 16 floats (a scalar result, an array
result, a gradient called from Python and from `@jit`), then `np.sqrt(x)` and `np.exp(x)` on
larger float32 arrays. Each row's NumPy and adjit candidates run interleaved (the peers
each in a block of its own after them), medians of REPEAT rounds, in us, after every result
was checked against NumPy's (a wrong one: status 1, not timed).

    python benchmarks/bench_calls.py                 # every row
    python benchmarks/bench_calls.py --small         # tiny sizes, few rounds (the test's)
    python benchmarks/bench_calls.py --peers ""      # adjit and NumPy only

tests/bench/test_bench_calls.py runs it at the small size.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time

import numpy as np

import adjit
from adjit.core.threads import default_num_threads


@adjit.jit
def total(x):
    return adjit.sum(x)


@adjit.jit
def doubled(x):
    return x * 2.0


@adjit.jit
def root(x):
    return np.sqrt(x)


@adjit.jit
def power(x):
    return np.exp(x)


@adjit.kernel
def root_into(x, out):
    i = adjit.index()
    out[i] = adjit.sqrt(x[i])


@adjit.kernel
def power_into(x, out):
    i = adjit.index()
    out[i] = adjit.exp(x[i])


@adjit.jit
def loss(x):
    return adjit.sum(x * x)


@adjit.jit
def loss_gradient(x):
    return adjit.grad(loss)(x)


PEERS = ("Numba", "JAX")
# Columns timed in a block of their own inside `adjit.profile()` (each call recorded, on the
# Python path: runtime/profiling.py).
PROFILED = ("@jit, profiler on",)


def python_path(fn):
    """A copy of `fn` whose calls all take the Python path."""
    copy = adjit.jit(fn.pyfn)
    copy._native = None
    return copy


def profiled_before(fn):
    """A copy of `fn` called once inside a profile, which has closed: its calls are natively
    dispatched again, the "profiler off" column (the same code as "@jit", by construction:
    a closed profile puts the dispatcher's methods back)."""
    copy = adjit.jit(fn.pyfn)
    with adjit.profile():
        copy(np.zeros(16))
    return copy


def _peers(peers: list[str]) -> dict:
    out = {}
    if "numba" in peers:
        import numba
        out["Numba"] = {"total": numba.njit(lambda x: x.sum()),
                        "doubled": numba.njit(lambda x: x * 2.0),
                        "root": numba.njit(lambda x: np.sqrt(x)),
                        "power": numba.njit(lambda x: np.exp(x))}
    if "jax" in peers:
        import jax
        import jax.numpy as jnp
        jitted = {"total": jax.jit(jnp.sum), "doubled": jax.jit(lambda x: x * 2.0),
                  "root": jax.jit(jnp.sqrt), "power": jax.jit(jnp.exp),
                  "grad": jax.jit(jax.grad(lambda x: jnp.sum(x * x)))}
        out["JAX"] = {k: (lambda f: lambda x: f(x).block_until_ready())(f)
                      for k, f in jitted.items()}
    return out


def _rows(n_small: int, sizes: list[int], peers: dict) -> list[tuple[str, object, dict]]:
    """(row name, the NumPy reference, {column: call})."""
    rng = np.random.default_rng(0)
    x = rng.random(n_small)
    rows = [("16 floats: scalar result", lambda: x.sum(),
             {"@jit": lambda: total(x), "@jit, Python path": lambda f=python_path(total): f(x),
              "@jit, profiler off": lambda f=profiled_before(total): f(x),
              "@jit, profiler on": lambda: total(x),
              **{p: (lambda f=fns["total"]: f(x)) for p, fns in peers.items()}}),
            ("16 floats: array result", lambda: x * 2.0,
             {"@jit": lambda: doubled(x),
              "@jit, Python path": lambda f=python_path(doubled): f(x),
              **{p: (lambda f=fns["doubled"]: f(x)) for p, fns in peers.items()}}),
            ("16 floats: gradient", lambda: 2 * x,
             {"@jit": lambda: loss_gradient(x),
              "grad from Python": lambda g=adjit.grad(loss): g(x),
              **{p: (lambda f=fns["grad"]: f(x)) for p, fns in peers.items() if "grad" in fns}})]
    for n in sizes:
        for name, jit, kernel, ufunc in (("root", root, root_into, np.sqrt),
                                         ("power", power, power_into, np.exp)):
            xs = rng.random(n).astype(np.float32)
            out = np.empty_like(xs)
            rows.append((f"np.{ufunc.__name__}, {n} float32", lambda u=ufunc, a=xs: u(a),
                         {"@jit": lambda f=jit, a=xs: f(a),
                          "@jit, Python path": lambda f=python_path(jit), a=xs: f(a),
                          "kernel": lambda k=kernel, a=xs, o=out: (k(a, o, ndrange=a.size), o)[1],
                          **{p: (lambda f=fns[name], a=xs: f(a)) for p, fns in peers.items()}}))
    return rows


def _wrong(got, want) -> str | None:
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return f"shape {got.shape}, NumPy's {want.shape}"
    return None if np.allclose(got, want, rtol=1e-5, atol=1e-6) else "values differ"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="tiny sizes, 5 rounds")
    parser.add_argument("--peers", default="numba,jax", help="comma-separated: numba, jax")
    args = parser.parse_args(argv)
    sizes, repeat = ([1024], 5) if args.small else ([1 << 14, 1 << 18, 1 << 20], 201)
    peer_names = [p for p in args.peers.split(",") if p]
    if "jax" in peer_names:
        import jax
        jax.config.update("jax_enable_x64", True)
    rows = _rows(16, sizes, _peers(peer_names))
    print(f"medians of {repeat} interleaved rounds, in us; {default_num_threads()} adjit "
          f"threads; load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    ok = True
    for name, reference, calls in rows:
        want = reference()
        candidates = {"NumPy": reference}
        for column, call in calls.items():
            try:
                problem = _wrong(call(), want)
                call()                          # a second call: the native path's
                problem = problem or _wrong(call(), want)
            except Exception as e:              # a peer that cannot compile it
                problem = f"failed ({type(e).__name__}: {e})"
            if problem is None:
                candidates[column] = call
            else:
                print(f"{name}: {column} {problem}")
                ok &= column not in ("@jit", "@jit, Python path", "kernel", "grad from Python")
        if "@jit" not in candidates:
            continue
        adjit.wait_for_builds()
        for call in candidates.values():        # after the builds: each on its final code
            call()
        times = {c: [] for c in candidates}
        # NumPy and adjit's columns interleaved (paired); each peer in a block of its own
        # after them: JAX's threads spin on after its call, which slowed whichever
        # parallel loop came next (an adjit call at 1 MiB: 27 -> 92 us).
        paired = [c for c in candidates if c not in PEERS + PROFILED]
        for _ in range(repeat):
            for column in paired:
                call = candidates[column]
                t = time.perf_counter()
                call()
                times[column].append(time.perf_counter() - t)
        for column in [c for c in candidates if c in PEERS + PROFILED]:
            call = candidates[column]
            with adjit.profile() if column in PROFILED else contextlib.nullcontext():
                for _ in range(repeat):
                    t = time.perf_counter()
                    call()
                    times[column].append(time.perf_counter() - t)
        medians = {c: statistics.median(v) * 1e6 for c, v in times.items()}
        base = medians["@jit"]
        cells = ", ".join(f"{c} {m:.2f} ({m / base:.2f}x)" for c, m in medians.items())
        print(f"{name}: {cells}", flush=True)
    print(f"(ratios: to adjit @jit) load average after: "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
