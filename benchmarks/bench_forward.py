"""Forward code and call costs beside the peers (issue 11): W1-W5 and first-call times.

    python benchmarks/bench_forward.py [--quick]

Each framework runs in a process of its own (their thread pools would compete), one after
the other, on the same data; the parent prints a markdown table of medians and the ratio of
each peer to adjit (above 1: adjit is faster). NumPy always runs; Numba
(`parallel=True, fastmath=True`) and JAX (`jax.jit`, CPU) where installed (`pip install -e
'.[bench]'`), a row saying so where not.

- W1 saxpy `y = a*x + y`, 10M f32, in place (JAX: a new array);
- W2 `sin(exp(x))*z + 0.5*x*x`, 4M f32;
- W3 5-point stencil 1024^2 f32, 20 steps with a buffer swap, in one compiled function;
- W4 `sum(x*x)` 10M f32 in compiled array code; W4a the same as a kernel adding into
  `out[0]` with `atomic_add` (Numba: a `prange` reduction);
- W5 saxpy of 16 floats: the cost of a call, in microseconds;
- first call of a small kernel in a new process with an empty cache (compile), and with the
  cache an earlier process filled (adjit's disk cache, Numba's `cache=True`; JAX's
  persistent compilation cache is off by default and left so).
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

N1, N2, GRID, STEPS, N4 = 10_000_000, 4_000_000, 1024, 20, 10_000_000
ROWS = ["W1", "W2", "W3", "W4", "W4a", "W5", "first", "hit"]
NAMES = {"W1": "W1 saxpy 10M f32, in place (ms)", "W2": "W2 sin(exp(x))*z + 0.5x^2 4M f32 (ms)",
         "W3": "W3 5-point stencil 1024^2 x 20 (ms)", "W4": "W4 sum(x*x) 10M f32 (ms)",
         "W4a": "W4a sum as an atomic_add kernel (ms)", "W5": "W5 saxpy of 16 floats, per call (us)",
         "first": "first call, new process, empty cache (ms)",
         "hit": "first call, new process, cache filled (ms)"}


def _median(fn, repeat: int, warmup: int = 2) -> float:
    # Not timing.median_of: that waits for adjit's builds, and the peers' processes run
    # without adjit imported.
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _per_call(fn, calls: int = 20000) -> float:
    """Median over 7 batches of the time of one call, in seconds."""
    for _ in range(1000):
        fn()
    batches = []
    for _ in range(7):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        batches.append((time.perf_counter() - t) / calls)
    return statistics.median(batches)


def _data():
    import numpy as np
    rng = np.random.default_rng(0)
    return {"x1": rng.random(N1, dtype=np.float32), "y1": rng.random(N1, dtype=np.float32),
            "x2": rng.random(N2, dtype=np.float32), "z2": rng.random(N2, dtype=np.float32),
            "u": rng.random((GRID, GRID), dtype=np.float32),
            "x4": rng.random(N4, dtype=np.float32),
            "xs": rng.random(16, dtype=np.float32), "ys": rng.random(16, dtype=np.float32)}


# -- one framework per process ---------------------------------------------------------------
def run_adjit(repeat: int) -> dict:
    sys.path.insert(0, str(Path(__file__).parent))
    import numpy as np

    import adjit
    import forward_kernels as K
    d = _data()
    out = {}
    y = d["y1"].copy()
    out["W1"] = _median(lambda: K.saxpy(np.float32(2.0), d["x1"], y, ndrange=N1), repeat)
    out["W2"] = _median(lambda: K.transcendental(d["x2"], d["z2"]), repeat)
    out["W3"] = _median(lambda: K.stencil(d["u"], STEPS), repeat)
    out["W4"] = _median(lambda: K.sum_squares(d["x4"]), repeat)
    acc = np.zeros(1, np.float32)

    def atomic():
        acc[0] = 0.0
        K.sum_squares_atomic(d["x4"], acc, ndrange=N4)
    out["W4a"] = _median(atomic, max(3, repeat // 4), warmup=1)
    xs, ys = d["xs"], d["ys"].copy()
    a = np.float32(2.0)
    out["W5"] = _per_call(lambda: K.saxpy(a, xs, ys, ndrange=16))
    adjit.wait_for_builds()
    return out


def run_numpy(repeat: int) -> dict:
    import numpy as np
    d = _data()
    out = {}
    y = d["y1"].copy()
    a = np.float32(2.0)

    def saxpy():
        y[:] += a * d["x1"]
    out["W1"] = _median(saxpy, repeat)
    out["W2"] = _median(lambda: np.sin(np.exp(d["x2"])) * d["z2"] + 0.5 * d["x2"] * d["x2"],
                        repeat)

    def stencil():
        u = d["u"].copy()
        v = np.empty_like(u)
        for _ in range(STEPS):
            v[:] = u
            v[1:-1, 1:-1] = u[1:-1, 1:-1] + 0.1 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2]
                                                   + u[1:-1, 2:] - 4.0 * u[1:-1, 1:-1])
            u, v = v, u
        return u
    out["W3"] = _median(stencil, repeat)
    out["W4"] = _median(lambda: np.dot(d["x4"], d["x4"]), repeat)
    xs, ys = d["xs"], d["ys"].copy()

    def small():
        ys[:] += a * xs
    out["W5"] = _per_call(small)
    return out


def run_numba(repeat: int) -> dict:
    try:
        import numba  # noqa: F401
    except ImportError:
        return {"missing": "numba is not installed (pip install -e '.[bench]')"}
    import numpy as np
    from numba import njit, prange
    d = _data()

    @njit(parallel=True, fastmath=True)
    def saxpy(a, x, y):
        for i in prange(x.shape[0]):
            y[i] = a * x[i] + y[i]

    @njit(parallel=True, fastmath=True)
    def transcendental(x, z):
        out = np.empty_like(x)
        for i in prange(x.shape[0]):
            out[i] = np.sin(np.exp(x[i])) * z[i] + np.float32(0.5) * x[i] * x[i]
        return out

    @njit(parallel=True, fastmath=True)
    def stencil(u0, steps):
        u = u0.copy()
        v = np.empty_like(u)
        n, m = u.shape
        for _ in range(steps):
            for i in prange(n):
                for j in range(m):
                    if 0 < i < n - 1 and 0 < j < m - 1:
                        v[i, j] = u[i, j] + np.float32(0.1) * (
                            u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]
                            - np.float32(4.0) * u[i, j])
                    else:
                        v[i, j] = u[i, j]
            u, v = v, u
        return u

    @njit(parallel=True, fastmath=True)
    def sum_squares(x):
        s = np.float32(0.0)
        for i in prange(x.shape[0]):
            s += x[i] * x[i]
        return s

    @njit(fastmath=True)
    def saxpy_serial(a, x, y):
        for i in range(x.shape[0]):
            y[i] = a * x[i] + y[i]

    out = {}
    y = d["y1"].copy()
    a = np.float32(2.0)
    out["W1"] = _median(lambda: saxpy(a, d["x1"], y), repeat)
    out["W2"] = _median(lambda: transcendental(d["x2"], d["z2"]), repeat)
    out["W3"] = _median(lambda: stencil(d["u"], STEPS), repeat)
    out["W4"] = _median(lambda: sum_squares(d["x4"]), repeat)
    out["W4a"] = out["W4"]          # Numba's reduction is its form of the atomic kernel
    xs, ys = d["xs"], d["ys"].copy()
    out["W5"] = _per_call(lambda: saxpy_serial(a, xs, ys))
    return out


def run_jax(repeat: int) -> dict:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return {"missing": "jax is not installed (pip install -e '.[bench]')"}
    d = _data()
    put = {k: jnp.asarray(v) for k, v in d.items()}
    saxpy = jax.jit(lambda a, x, y: a * x + y)
    trans = jax.jit(lambda x, z: jnp.sin(jnp.exp(x)) * z + 0.5 * x * x)

    def steps(u):
        for _ in range(STEPS):
            c = u[1:-1, 1:-1]
            u = u.at[1:-1, 1:-1].set(c + 0.1 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2]
                                                + u[1:-1, 2:] - 4.0 * c))
        return u
    stencil = jax.jit(steps)
    sumsq = jax.jit(lambda x: jnp.sum(x * x))
    a = jnp.float32(2.0)
    out = {}
    out["W1"] = _median(lambda: saxpy(a, put["x1"], put["y1"]).block_until_ready(), repeat)
    out["W2"] = _median(lambda: trans(put["x2"], put["z2"]).block_until_ready(), repeat)
    out["W3"] = _median(lambda: stencil(put["u"]).block_until_ready(), repeat)
    out["W4"] = _median(lambda: sumsq(put["x4"]).block_until_ready(), repeat)
    xs, ys = d["xs"], d["ys"]
    out["W5"] = _per_call(lambda: saxpy(a, xs, ys).block_until_ready(), 5000)
    return out


# -- first calls: each in a new process ------------------------------------------------------
FIRST = {
    "adjit": '''
import time; t0 = time.perf_counter()
import numpy as np, adjit
@adjit.kernel
def saxpy(a: adjit.f32, x, y):
    i = adjit.index()
    y[i] = a * x[i] + y[i]
x = np.ones(16, np.float32); y = np.ones(16, np.float32)
t = time.perf_counter(); saxpy(2.0, x, y, ndrange=16); t = time.perf_counter() - t
adjit.wait_for_builds()
print(t)
''',
    "numba": '''
import time, numpy as np
from numba import njit
@njit(cache=True)
def saxpy(a, x, y):
    for i in range(x.shape[0]):
        y[i] = a * x[i] + y[i]
x = np.ones(16, np.float32); y = np.ones(16, np.float32)
t = time.perf_counter(); saxpy(np.float32(2.0), x, y); print(time.perf_counter() - t)
''',
    "jax": '''
import time, numpy as np, jax
saxpy = jax.jit(lambda a, x, y: a * x + y)
x = np.ones(16, np.float32); y = np.ones(16, np.float32)
t = time.perf_counter(); saxpy(np.float32(2.0), x, y).block_until_ready()
print(time.perf_counter() - t)
''',
}


def first_calls(framework: str, runs: int) -> dict:
    """(empty cache, filled cache) first-call seconds, medians over `runs` pairs."""
    if framework == "numpy":
        return {}
    cold, hit = [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as folder:
            script = Path(folder) / "first_call.py"
            script.write_text(FIRST[framework])
            # Bytecode as an installed package has it (PYTHONDONTWRITEBYTECODE would make
            # every new process compile the frameworks' Python sources again).
            env = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
                   "ADJIT_CACHE_DIR": str(Path(folder) / "cache"),
                   "NUMBA_CACHE_DIR": str(Path(folder) / "numba")}
            for into in (cold, hit):
                done = subprocess.run([sys.executable, str(script)], capture_output=True,
                                      text=True, env=env, cwd=folder)
                if done.returncode:
                    return {"missing": done.stderr.strip().splitlines()[-1]}
                into.append(float(done.stdout.strip().splitlines()[-1]))
    return {"first": statistics.median(cold), "hit": statistics.median(hit)}


def child(framework: str, repeat: int, runs: int) -> None:
    out = {"numpy": run_numpy, "adjit": run_adjit, "numba": run_numba, "jax": run_jax}[
        framework](repeat)
    if "missing" not in out:
        out.update(first_calls(framework, runs))
    print(json.dumps(out))


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--child":
        child(argv[1], int(argv[2]), int(argv[3]))
        return 0
    quick = "--quick" in argv
    repeat, runs = (5, 1) if quick else (21, 3)
    results = {}
    for fw in ("adjit", "numpy", "numba", "jax"):
        done = subprocess.run([sys.executable, __file__, "--child", fw, str(repeat), str(runs)],
                              capture_output=True, text=True)
        if done.returncode:
            results[fw] = {"missing": f"failed: {done.stderr.strip().splitlines()[-1:]}"}
        else:
            results[fw] = json.loads(done.stdout.strip().splitlines()[-1])
    load = os.getloadavg()
    print(f"{os.cpu_count()} cores, load {load[0]:.2f}; medians ({repeat} runs; W5: 7 batches; "
          f"first calls: {runs} new processes); ratio = peer / adjit (above 1: adjit faster)")
    peers = ["numpy", "numba", "jax"]
    print("| workload | adjit | " + " | ".join(f"{p} | ratio" for p in peers) + " |")
    print("|---|---|" + "---|---|" * len(peers))
    for row in ROWS:
        scale = 1e6 if row == "W5" else 1e3
        ours = results["adjit"].get(row)
        cells = [f"{ours * scale:.3g}" if ours is not None else "-"]
        for p in peers:
            v = results[p].get(row)
            cells += [f"{v * scale:.3g}", f"{v / ours:.2f}"] if v is not None and ours else ["-", "-"]
        print(f"| {NAMES[row]} | " + " | ".join(cells) + " |")
    for fw, r in results.items():
        if "missing" in r:
            print(f"{fw}: {r['missing']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
