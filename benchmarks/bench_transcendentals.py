"""Every math builtin on a 1024x256 array, float32 and float64, side by side (issue 30: `np.tanh`
in `@jit` ran 55x NumPy before libmvec's variants of every function were offered to LLVM's
vectoriser, runtime/vector_math.py): adjit `@jit` (`np.tanh(x)`), adjit `@kernel` (one item a
element), NumPy, Numba (`@njit` loop of `math.tanh`) and JAX (`jit(jnp.tanh)`). Medians of
REPEAT runs after a warm-up, in ms, then adjit @jit's ratio to NumPy and to JAX.

Before a row is timed every result is checked against NumPy's float64 result rounded to the
type: more than TOLERANCE (relative, or absolute near 0) off is reported as wrong, not timed,
and the script exits with status 1.

    python benchmarks/bench_transcendentals.py              # every builtin
    python benchmarks/bench_transcendentals.py tanh erf     # only those
    python benchmarks/bench_transcendentals.py --small      # 64x32, 3 runs (the test's size)
    python benchmarks/bench_transcendentals.py --peers ""   # adjit and NumPy only

tests/bench/test_transcendentals_bench.py runs it at the small size.
"""
from __future__ import annotations

import argparse
import importlib.util
import math
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from adjit.core.threads import default_num_threads
from timing import median_of

TOLERANCE = {np.float32: 1e-5, np.float64: 1e-12}
UNARY = ("sin", "cos", "tan", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt",
         "rsqrt", "tanh", "sinh", "cosh", "asin", "acos", "atan", "erf", "cbrt", "asinh",
         "acosh", "atanh")
BINARY = ("pow", "atan2", "hypot")
# The inputs each function is timed on: inside its domain, away from overflow.
DOMAIN = {"log": (0.01, 10), "log2": (0.01, 10), "log10": (0.01, 10), "log1p": (-0.9, 10),
          "sqrt": (0.0, 10), "rsqrt": (0.01, 10), "asin": (-0.99, 0.99),
          "acos": (-0.99, 0.99), "pow": (0.1, 10), "cbrt": (-10, 10), "acosh": (1.0, 10),
          "atanh": (-0.99, 0.99)}
_NUMPY = {"asin": "arcsin", "acos": "arccos", "atan": "arctan", "pow": "power",
          "atan2": "arctan2", "asinh": "arcsinh", "acosh": "arccosh", "atanh": "arctanh"}


def numpy_function(name: str):
    if name == "rsqrt":
        return lambda x: 1 / np.sqrt(x)
    if name == "erf":
        try:
            from scipy.special import erf
            return erf
        except ImportError:
            return np.vectorize(math.erf, otypes=[np.float64])
    return getattr(np, _NUMPY.get(name, name))


def _generated(names: list[str]):
    """adjit's functions, one @jit and one kernel a builtin, from a generated source file
    (adjit compiles from source)."""
    lines = ["import adjit", "import numpy as np"]
    for n in names:
        args = "x, y" if n in BINARY else "x"
        items = "x[i, j], y[i, j]" if n in BINARY else "x[i, j]"
        call = f"np.{_NUMPY.get(n, n)}({args})" if n not in ("erf", "rsqrt") else \
            f"adjit.{n}({args})"
        lines += ["", "", "@adjit.jit", f"def jit_{n}({args}):", f"    return {call}",
                  "", "", "@adjit.kernel", f"def kernel_{n}({args}, out):",
                  "    i, j = adjit.index_nd()", f"    out[i, j] = adjit.{n}({items})"]
    path = Path(tempfile.mkdtemp(prefix="adjit-bench-")) / "transcendental_fns.py"
    path.write_text("\n".join(lines) + "\n")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _numba_function(name: str):
    import numba
    scalar = {"rsqrt": lambda v: 1.0 / math.sqrt(v), "exp2": lambda v: 2.0 ** v,
              "cbrt": lambda v: np.cbrt(v)}
    fn = numba.njit(scalar[name]) if name in scalar else getattr(math, name)
    if name in BINARY:
        @numba.njit
        def loop2(x, y, out):
            for k in range(x.size):
                out.flat[k] = fn(x.flat[k], y.flat[k])
        return lambda x, y: (loop2(x, y, o := np.empty_like(x)), o)[1]

    @numba.njit
    def loop(x, out):
        for k in range(x.size):
            out.flat[k] = fn(x.flat[k])
    return lambda x: (loop(x, o := np.empty_like(x)), o)[1]


def _jax_function(name: str):
    import jax
    import jax.numpy as jnp
    special = {"rsqrt": jax.lax.rsqrt, "erf": jax.scipy.special.erf}
    fn = special.get(name) or getattr(jnp, _NUMPY.get(name, name))
    jitted = jax.jit(fn)
    return lambda *a: jitted(*a).block_until_ready()


def _inputs(name: str, shape, dtype, rng) -> list[np.ndarray]:
    lo, hi = DOMAIN.get(name, (-5.0, 5.0))
    x = rng.uniform(lo, hi, shape).astype(dtype)
    if name not in BINARY:
        return [x]
    y = rng.uniform(-3, 3, shape).astype(dtype)
    return [x, y]


def _wrong(got, want, dtype) -> str | None:
    got = np.asarray(got)
    if got.dtype != want.dtype:
        return f"dtype {got.dtype}, NumPy's {want.dtype}"
    scale = np.maximum(np.abs(want.astype(np.float64)), 1e-3)
    err = float(np.max(np.abs(got.astype(np.float64) - want) / scale))
    return None if err <= TOLERANCE[dtype] else f"off by {err:.2g} (relative)"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="builtins to time (all by default)")
    parser.add_argument("--small", action="store_true", help="64x32 arrays, 3 runs")
    parser.add_argument("--peers", default="numba,jax", help="comma-separated: numba, jax")
    args = parser.parse_args(argv)
    names = args.names or list(UNARY + BINARY)
    unknown = [n for n in names if n not in UNARY + BINARY]
    if unknown:
        parser.error(f"unknown builtins: {unknown}")
    shape, repeat = ((64, 32), 3) if args.small else ((1024, 256), 21)
    peers = [p for p in args.peers.split(",") if p]
    if "jax" in peers:
        import jax
        jax.config.update("jax_enable_x64", True)
    fns = _generated(names)
    rng = np.random.default_rng(0)
    columns = ["NumPy", "adjit @jit", "adjit kernel", *(p.capitalize() if p != "jax" else "JAX"
                                                        for p in peers)]
    print(f"{shape[0]}x{shape[1]}, medians of {repeat} runs in ms; {default_num_threads()} "
          f"adjit threads; load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    header = ["builtin", "dtype", *columns, "@jit / NumPy",
              *(["@jit / JAX"] if "jax" in peers else [])]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    ok = True
    for name in names:
        for dtype in (np.float32, np.float64):
            inputs = _inputs(name, shape, dtype, rng)
            want = numpy_function(name)(*[a.astype(np.float64) for a in inputs]).astype(dtype)
            kernel = getattr(fns, f"kernel_{name}")

            def run_kernel(kernel=kernel, inputs=inputs):
                out = np.empty_like(inputs[0])
                kernel(*inputs, out, ndrange=shape)
                return out
            candidates = {"NumPy": lambda f=numpy_function(name), a=inputs: f(*a),
                          "adjit @jit": lambda f=getattr(fns, f"jit_{name}"), a=inputs: f(*a),
                          "adjit kernel": run_kernel}
            for peer in peers:
                make = _numba_function if peer == "numba" else _jax_function
                try:
                    candidates["JAX" if peer == "jax" else "Numba"] = (
                        lambda f=make(name), a=inputs: f(*a))
                except (AttributeError, ImportError) as e:
                    print(f"({peer} has no {name}: {e})")
            times = {}
            for column, fn in candidates.items():
                try:
                    problem = _wrong(fn(), want, dtype)
                except Exception as e:      # a peer that cannot compile the function
                    problem = f"failed ({type(e).__name__})"
                if problem is not None:
                    times[column] = problem
                    ok &= not column.startswith("adjit")
                    continue
                times[column] = median_of(fn, repeat) * 1e3
            cells = [f"{times[c]:.3f}" if isinstance(times.get(c), float) else
                     str(times.get(c, "n/a")) for c in columns]

            def ratio(a, b):
                ta, tb = times.get(a), times.get(b)
                return f"{ta / tb:.2f}x" if isinstance(ta, float) and isinstance(tb, float) \
                    else "-"
            row = [f"`{name}`", np.dtype(dtype).name, *cells, ratio("adjit @jit", "NumPy"),
                   *([ratio("adjit @jit", "JAX")] if "jax" in peers else [])]
            print("| " + " | ".join(row) + " |", flush=True)
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
