"""First calls (issue 30, item 4): the compile-time budget of a first call with an empty
cache, stage by stage, beside JAX's and Numba's cold first calls of the same workload.

Every sample is a NEW process with an empty cache folder (ADJIT_CACHE_DIR, NUMBA_CACHE_DIR
fresh; JAX's persistent cache is off by default), which:
- imports the framework (timed: `import`),
- for adjit, imports the compiler (the MLIR bindings and adjit's frontend and passes, which a
  first call imports on its own; timed apart: `mlir import`),
- makes the first call (timed: `first`, the `mlir import` added for adjit, so that it is what
  a user's first call costs), and checks its result against NumPy right after.
adjit's `first` is split by timers around the compiler's stages: `autodiff` (the autodiff
pass), `mlir` (the CPU lowering to the LLVM dialect, passes/pipeline.py), `llvm` (translation
to LLVM IR, the ExecutionEngine's optimisation and code generation, `opt`/`llc`/`cc` where a
module is built at once), `load` (loading a shared object); `frontend` is the rest (Python to
adj IR, specialisation, cache keys, calling). `hit` is a first call in a second process once
the first has filled the cache.

Workloads (each as its peers write it):
  K   saxpy kernel (Numba: a loop; JAX: a jitted expression)
  J   @jit least-squares loss sum((a*x + b - y)^2)
  G   its gradient in a (adjit.grad; JAX jit(grad))
  H   the heat equation's gradient: 10 kernel launches in a @jit loop (JAX: jit(grad) of the
      same steps written with slices)
  GG  grad of grad of a scalar cubic
  JF  jacfwd of an element-wise vector function

    python benchmarks/bench_first_call.py             # 5 processes per cell
    python benchmarks/bench_first_call.py --quick     # 1 process per cell
    python benchmarks/bench_first_call.py --tiers     # adjit only: ADJIT_COMPILE_TIER=3 (O3
                                                      # first, as before tiers) against the
                                                      # default, alternating, paired
    python benchmarks/bench_first_call.py --against=DIR  # adjit only: the checkout in DIR
                                                      # (its adjit first on PYTHONPATH)
                                                      # against this one, alternating,
                                                      # paired, first calls and hits
    python benchmarks/bench_first_call.py --tiny      # adjit, K and G, once (the test)
    python benchmarks/bench_first_call.py K G         # only those rows

tests/bench/test_bench_first_call.py runs --tiny.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

WORKLOADS = ("K", "J", "G", "H", "GG", "JF")
STAGES = ("frontend", "autodiff", "mlir", "llvm", "load")

# ---- the child processes' code --------------------------------------------------------------

# adjit's compiler stages, timed by wrapping the functions that run them (their module
# attributes: the engine and the service look them up at call time).
_ADJIT_TIMERS = '''
import os, time
from collections import defaultdict
STAGE, CPU = defaultdict(float), defaultdict(float)
def _timed(owner, name, stage):
    inner = getattr(owner, name)
    def wrapper(*args, **kwargs):
        t, c = time.perf_counter(), time.thread_time()
        try:
            return inner(*args, **kwargs)
        finally:
            STAGE[stage] += time.perf_counter() - t
            CPU[stage] += time.thread_time() - c
    setattr(owner, name, wrapper)
def _timers():
    t = time.perf_counter()
    import adjit.compiler.unit, adjit.compiler.derivative, adjit.compiler.engine as E
    import adjit.passes.autodiff as AD, mlir.dialects.llvm as ML
    from adjit.runtime import cpu_cache as C
    took = time.perf_counter() - t
    _timed(AD, "run_autodiff", "autodiff")
    _timed(E, "lower_to_llvm", "mlir")
    _timed(E, "ExecutionEngine", "llvm")
    _timed(E, "lookup", "llvm")
    _timed(ML, "translate_module_to_llvmir", "llvm")
    _timed(C, "build_shared_object", "llvm")
    _timed(C, "load_built", "load")
    return took
# A hit (the second process on the cache the first filled) imports no MLIR: it is not timed.
MLIR_IMPORT = 0.0 if os.environ.get("BENCH_HIT") == "1" else _timers()
'''

_PRELUDE = {
    "adjit": '''
import time; t0 = time.perf_counter()
import numpy as np, adjit
IMPORT = time.perf_counter() - t0
''' + ('{timers}'),
    "jax": '''
import time; t0 = time.perf_counter()
import numpy as np, jax, jax.numpy as jnp
jax.config.update("jax_platforms", "cpu")
IMPORT = time.perf_counter() - t0
''',
    "numba": '''
import time; t0 = time.perf_counter()
import numpy as np
from numba import njit
IMPORT = time.perf_counter() - t0
''',
}

# Per workload and framework: code defining `run()` (the first call) and `ref` (NumPy's answer).
_DATA = '''
n = {n}
rng = np.random.default_rng(0)
x = rng.random(n).astype(np.float32); y = rng.random(n).astype(np.float32)
a, b = np.float32(1.5), np.float32(0.25)
u0 = rng.random(({grid}, {grid})).astype(np.float32)
def heat_np(u, steps):
    for _ in range(steps):
        v = u.copy()
        v[1:-1, 1:-1] = u[1:-1, 1:-1] + 0.1 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2]
                                                + u[1:-1, 2:] - 4.0 * u[1:-1, 1:-1])
        u = v
    return u
def heat_grad_np(u, steps):
    us = heat_np(u.astype(np.float64), steps)
    g = 2.0 * us
    for _ in range(steps):            # the step is linear and self-adjoint in the interior
        h = g.copy()
        inner = g[1:-1, 1:-1]
        h[1:-1, 1:-1] = inner - 0.4 * inner
        h[:-2, 1:-1] += 0.1 * inner; h[2:, 1:-1] += 0.1 * inner
        h[1:-1, :-2] += 0.1 * inner; h[1:-1, 2:] += 0.1 * inner
        g = h
    return g
'''

_CODE = {
    ("adjit", "K"): '''
@adjit.kernel
def saxpy(a: adjit.f32, x, y):
    i = adjit.index()
    y[i] = a * x[i] + y[i]
out = y.copy()
def run():
    saxpy(a, x, out, ndrange=n)
    return out
ref = a * x + y
''',
    ("numba", "K"): '''
@njit
def saxpy(a, x, y):
    for i in range(x.shape[0]):
        y[i] = a * x[i] + y[i]
out = y.copy()
def run():
    saxpy(a, x, out)
    return out
ref = a * x + y
''',
    ("jax", "K"): '''
saxpy = jax.jit(lambda a, x, y: a * x + y)
def run():
    return np.asarray(saxpy(a, x, y).block_until_ready())
ref = a * x + y
''',
    ("adjit", "J"): '''
@adjit.jit
def loss(a: adjit.f32, b: adjit.f32, x, y):
    r = a * x + b - y
    return adjit.sum(r * r)
run = lambda: loss(a, b, x, y)
ref = np.sum((a * x + b - y) ** 2)
''',
    ("numba", "J"): '''
@njit
def loss(a, b, x, y):
    s = np.float32(0.0)
    for i in range(x.shape[0]):
        r = a * x[i] + b - y[i]
        s += r * r
    return s
run = lambda: loss(a, b, x, y)
ref = np.sum((a * x + b - y) ** 2)
''',
    ("jax", "J"): '''
loss = jax.jit(lambda a, b, x, y: jnp.sum((a * x + b - y) ** 2))
run = lambda: loss(a, b, x, y).block_until_ready()
ref = np.sum((a * x + b - y) ** 2)
''',
    ("adjit", "G"): '''
@adjit.jit
def loss(a: adjit.f32, b: adjit.f32, x, y):
    r = a * x + b - y
    return adjit.sum(r * r)
run = lambda: adjit.grad(loss)(a, b, x, y)
ref = np.sum(2 * (a * x + b - y) * x)
''',
    ("jax", "G"): '''
g = jax.jit(jax.grad(lambda a, b, x, y: jnp.sum((a * x + b - y) ** 2)))
run = lambda: g(a, b, x, y).block_until_ready()
ref = np.sum(2 * (a * x + b - y) * x)
''',
    ("adjit", "H"): '''
@adjit.kernel
def heat_step(u, v):
    i, j = adjit.index_nd()
    n, m = u.shape[0], u.shape[1]
    if 0 < i < n - 1 and 0 < j < m - 1:
        c = u[i, j]
        lap = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * c
        v[i, j] = c + 0.1 * lap
    else:
        v[i, j] = u[i, j]
@adjit.jit
def heat(u0, steps: int):
    u = u0.copy()
    v = adjit.empty_like(u)
    for _ in range(steps):
        heat_step(u, v, ndrange=u.shape)
        u, v = v, u
    return adjit.sum(u * u)
run = lambda: adjit.grad(heat)(u0, 10)
ref = heat_grad_np(u0, 10)
''',
    ("jax", "H"): '''
def heat(u, steps):
    for _ in range(steps):
        lap = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4.0 * u[1:-1, 1:-1]
        u = u.at[1:-1, 1:-1].add(0.1 * lap)
    return jnp.sum(u * u)
g = jax.jit(jax.grad(heat), static_argnums=1)
run = lambda: g(u0, 10).block_until_ready()
ref = heat_grad_np(u0, 10)
''',
    ("adjit", "GG"): '''
@adjit.jit
def cubic(x: adjit.f64):
    return x * x * x + 2.0 * x
run = lambda: adjit.grad(adjit.grad(cubic))(1.25)
ref = 6.0 * 1.25
''',
    ("jax", "GG"): '''
jax.config.update("jax_enable_x64", True)
gg = jax.jit(jax.grad(jax.grad(lambda x: x * x * x + 2.0 * x)))
run = lambda: gg(1.25).block_until_ready()
ref = 6.0 * 1.25
''',
    ("adjit", "JF"): '''
@adjit.jit
def resid(x):
    return x * x * 0.5 + x
xs = x[:16].copy()
run = lambda: adjit.jacfwd(resid)(xs)
ref = np.diag(xs + 1.0)
''',
    ("jax", "JF"): '''
jf = jax.jit(jax.jacfwd(lambda x: x * x * 0.5 + x))
xs = x[:16].copy()
run = lambda: jf(xs).block_until_ready()
ref = np.diag(xs + 1.0)
''',
}

_TIMED = '''
t = time.perf_counter()
out = run()
first = time.perf_counter() - t
ok = bool(np.allclose(np.asarray(out, np.float64), np.asarray(ref, np.float64), rtol=2e-4,
                      atol=1e-4 * float(np.max(np.abs(ref)) + 1)))
result = {{"import": IMPORT, "first": first, "ok": ok}}
if "{framework}" == "adjit":
    result["first"] += MLIR_IMPORT
    result["mlir import"] = MLIR_IMPORT
    result.update({{s: STAGE[s] for s in ("autodiff", "mlir", "llvm", "load")}})
    # The calling thread's CPU time in LLVM: less disturbed by a busy machine than its wall
    # time (the --tiers comparison).
    result["llvm cpu"] = CPU["llvm"]
    result["frontend"] = first - sum(STAGE.values())
    adjit.wait_for_builds()     # the next process's cache entry (and the O3 tier)
import json; print(json.dumps(result))
'''


def script(framework: str, workload: str, n: int, grid: int) -> str:
    """The child program timing `workload`'s first call in `framework`."""
    prelude = _PRELUDE[framework].replace("{timers}", _ADJIT_TIMERS)
    data = _DATA.format(n=n, grid=grid)
    return (textwrap.dedent(prelude) + data + _CODE[framework, workload]
            + _TIMED.format(framework=framework))


def _run(path: Path, folder: Path, env: dict) -> dict:
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          env=env, cwd=folder)
    if done.returncode:
        tail = (done.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": tail}
    return json.loads(done.stdout.strip().splitlines()[-1])


def sample(framework: str, workload: str, n: int, grid: int, tier: str | None = None,
           hit: bool = False, tree: str | None = None) -> dict:
    """One new process's first call of `workload` with an empty cache (and, with `hit`,
    a second process's with the cache it filled); `tree`: another checkout's adjit (its
    folder first on PYTHONPATH)."""
    with tempfile.TemporaryDirectory(prefix="adjit-first-") as tmp:
        folder = Path(tmp)
        # Bytecode as an installed package has it (PYTHONDONTWRITEBYTECODE would make every
        # new process compile the frameworks' Python sources again).
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONDONTWRITEBYTECODE", "ADJIT_DISK_CACHE", "ADJIT_COMPILE_TIER")}
        env.update({"ADJIT_CACHE_DIR": str(folder / "cache"),
                    "NUMBA_CACHE_DIR": str(folder / "numba"),
                    "JAX_PLATFORMS": "cpu"})
        if tier is not None:
            env["ADJIT_COMPILE_TIER"] = tier
        if tree is not None:
            env["PYTHONPATH"] = os.pathsep.join([tree, *filter(None, [env.get("PYTHONPATH")])])
        path = folder / "first_call.py"   # the same file twice: its source key is the same
        path.write_text(script(framework, workload, n, grid))
        out = _run(path, folder, env)
        if hit and "error" not in out:
            again = _run(path, folder, {**env, "BENCH_HIT": "1"})
            out["hit"] = again.get("first", float("nan"))
        return out


def _median(samples: list[dict], field: str) -> float | None:
    values = [s[field] for s in samples if field in s]
    return statistics.median(values) if values else None


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1e3:.0f}"


def table(names: list[str], frameworks: list[str], runs: int, n: int, grid: int) -> int:
    """Prints the stage budget and the peers' cold times; 1 if a result was wrong."""
    status = 0
    print(f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; medians of {runs} new "
          f"processes, empty caches; ms. first = what the first call costs after the import "
          f"(adjit: MLIR's import included); ratio = peer cold / adjit cold")
    head = (f"{'row':4} {'import':>6} {'mlir imp':>8} " + " ".join(f"{s:>8}" for s in STAGES)
            + f" {'first':>6} {'hit':>5}" + "".join(f" {fw + ' first':>11} {'ratio':>6}"
                                                    for fw in frameworks if fw != "adjit"))
    print(head)
    imports: dict[str, list] = {}
    for name in names:
        cells = {}
        for fw in frameworks:
            if (fw, name) not in _CODE:
                continue
            samples = [sample(fw, name, n, grid, hit=fw == "adjit") for _ in range(runs)]
            bad = [s for s in samples if "error" in s or not s.get("ok")]
            if bad:
                print(f"{name} {fw}: {bad[0].get('error', 'wrong result')}")
                status = 1
                continue
            cells[fw] = samples
        a = cells.get("adjit", [])
        row = (f"{name:4} {_ms(_median(a, 'import')):>6} {_ms(_median(a, 'mlir import')):>8} "
               + " ".join(f"{_ms(_median(a, s)):>8}" for s in STAGES)
               + f" {_ms(_median(a, 'first')):>6} {_ms(_median(a, 'hit')):>5}")
        mine = _median(a, "first")
        for fw in frameworks:
            if fw == "adjit":
                continue
            peer = _median(cells.get(fw, []), "first")
            ratio = "-" if peer is None or not mine else f"{peer / mine:.2f}"
            row += f" {_ms(peer):>11} {ratio:>6}"
        print(row)
        for fw, samples in cells.items():
            imports.setdefault(fw, []).extend(samples)
    print("import (ms): " + ", ".join(f"{fw} {_ms(_median(s, 'import'))}"
                                      for fw, s in imports.items()))
    return status


def tiers(names: list[str], runs: int, n: int, grid: int) -> int:
    """adjit's first calls with ADJIT_COMPILE_TIER=3 (O3 at once, as before tiers) and with
    the default, alternating in new processes: paired medians per stage."""
    print(f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; {runs} pairs, alternating; "
          f"ms (O3 first -> default)")
    for name in names:
        old, new = [], []
        for _ in range(runs):
            old.append(sample("adjit", name, n, grid, tier="3"))
            new.append(sample("adjit", name, n, grid))
        if any("error" in s or not s.get("ok") for s in old + new):
            print(f"{name}: {next(s.get('error', 'wrong result') for s in old + new if 'error' in s or not s.get('ok'))}")
            return 1
        cols = " ".join(f"{s} {_ms(_median(old, s))}->{_ms(_median(new, s))}"
                        for s in ("llvm cpu", "llvm", "first"))
        print(f"{name:4} {cols}")
    return 0


def against(names: list[str], runs: int, n: int, grid: int, tree: str) -> int:
    """adjit's first calls and hits from checkout `tree` (before) and from this one (after),
    alternating in new processes: paired medians per stage."""
    print(f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; {runs} pairs, alternating; "
          f"ms ({tree} -> this checkout)")
    for name in names:
        old, new = [], []
        for _ in range(runs):
            old.append(sample("adjit", name, n, grid, hit=True, tree=tree))
            new.append(sample("adjit", name, n, grid, hit=True))
        if any("error" in s or not s.get("ok") for s in old + new):
            print(f"{name}: {next(s.get('error', 'wrong result') for s in old + new if 'error' in s or not s.get('ok'))}")
            return 1
        cols = " ".join(f"{s} {_ms(_median(old, s))}->{_ms(_median(new, s))}"
                        for s in ("mlir import", *STAGES, "first", "hit"))
        print(f"{name:4} {cols}", flush=True)
    print(f"load after {os.getloadavg()[0]:.2f}")
    return 0


def main(argv: list[str]) -> int:
    names = [a for a in argv if not a.startswith("--")] or list(WORKLOADS)
    if "--tiny" in argv:
        names = [a for a in argv if not a.startswith("--")] or ["K", "G"]
        return table(names, ["adjit"], 1, 256, 8)
    runs = 1 if "--quick" in argv else 5
    runs = int(os.environ.get("BENCH_RUNS", runs))
    if "--tiers" in argv:
        return tiers(names, runs, 1 << 16, 64)
    tree = next((a.split("=", 1)[1] for a in argv if a.startswith("--against=")), None)
    if tree is not None:
        return against(names, runs, 1 << 16, 64, tree)
    return table(names, ["adjit", "jax", "numba"], runs, 1 << 16, 64)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
