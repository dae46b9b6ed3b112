"""Runs a generated program (diff_programs.Program) by adjit, by JAX (float64 enabled) and by
NumPy, and classifies the outcome of each check:

- "clean": adjit's values agree with JAX's (the float64 oracle), and the value's dtype with
  NumPy 2's (NEP 50: Python scalars are weak); derivatives are compared with JAX's, dtype
  included for array arguments.
- "refused": adjit raised a *clear* refusal (see `is_clear_refusal`).
- "defect": anything else: a wrong value or dtype, an internal error, an unclear error, a
  crash of the process or a hang.
- "invalid": JAX or NumPy itself rejects the program or the two disagree with each other:
  a fault of the generator, never blamed on adjit (tallied so that it stays rare).

adjit runs in a worker process (`Worker`, a spawned process pool of one), so that a crash
of compiled code or of MLIR is a defect of that program, and the next program gets a fresh
worker; JAX and NumPy run in the calling process.
"""
from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import importlib.util
import multiprocessing
import os
import re
import shutil
import tempfile
import threading
import time
import traceback

import numpy as np

from diff_programs import Program, arguments

CHECKS = ("value", "grad", "value_and_grad", "jvp", "jvp2", "vjp", "hvp", "jacfwd",
          "jacfwd2", "jacrev", "hessian", "dloss")

# Names a user never wrote: MLIR dialects' ops and types, the runtime's symbols, Python
# internals. A message that shows one is not a clear refusal.
INTERNAL = re.compile(r"\b(scf|memref|arith|llvm|affine|linalg|tensor|cf|func|math|gpu|adj)"
                      r"\.[a-z_]+|\badj_\w+|memref<|tensor<|!llvm|units=|ArrayType\(|"
                      r"Traceback|object at 0x|\bNone(Type)?\b has no")


def is_clear_refusal(error: dict, path: str) -> bool:
    """What counts as adjit refusing a program clearly: a message that shows no internal
    symbol (INTERNAL), and is either an adjit error class (`CompilationError`, not its
    subclass `InternalCompilerError`) at a line of the generated program's file; or a
    ValueError / TypeError / IndexError / NotImplementedError that compiled code raised at
    run time naming a line of the program's file (a run-time check of a documented rule, a
    shape say); or a TypeError / ValueError / NotImplementedError raised by adjit's
    derivative API itself (adjit/frontend/autodiff*.py, modes.py) about the arguments of
    the call. Everything else an adjit call raises is a defect."""
    msg = error["message"]
    if INTERNAL.search(msg):
        return False
    at_line = bool(re.search(re.escape(os.path.basename(path)) + r":\d+", msg))
    if error["type"] == "CompilationError":
        return at_line
    if error["type"] in ("TypeError", "ValueError", "NotImplementedError", "IndexError"):
        return at_line or (error["type"] != "IndexError" and
                           error["origin"] in ("autodiff.py", "autodiff_checks.py", "modes.py"))
    return False


# ---- the adjit side: in the worker process ---------------------------------------------------
def _import(source: str, folder: str, name: str):
    path = os.path.join(folder, f"{name}.py")
    with open(path, "w") as fh:
        fh.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, path


def _error(e: BaseException) -> dict:
    import adjit
    frames = traceback.extract_tb(e.__traceback__)
    origin = os.path.basename(frames[-1].filename) if frames else ""
    kind = ("InternalCompilerError" if isinstance(e, adjit.InternalCompilerError) else
            "CompilationError" if isinstance(e, adjit.CompilationError) else type(e).__name__)
    return {"type": kind, "message": str(e), "origin": origin,
            "traceback": "".join(traceback.format_exception(e))[-3000:]}


def _plain(v):
    """A result as plain NumPy (tuples kept), for pickling back to the parent."""
    if isinstance(v, (tuple, list)):
        return tuple(_plain(x) for x in v)
    if isinstance(v, float):
        return v
    return np.array(v, copy=True) if isinstance(v, np.ndarray) else np.asarray(v)[()]


def run_adjit(source: str, name: str, program: Program, seed: int, checks: tuple) -> dict:
    """The worker's job: compiles `source` (the adjit rendering) and runs `checks`."""
    import adjit
    folder = os.environ.get("ADJIT_DIFFERENTIAL_DIR") or tempfile.mkdtemp(prefix="adjit-diff-")
    out = {"path": os.path.join(folder, f"{name}.py"), "results": {}}
    try:
        m, out["path"] = _import(source, folder, name)
    except Exception as e:     # noqa: BLE001 (an import error of a generated module: a defect)
        out["results"] = {c: ("error", _error(e)) for c in checks}
        return out
    args = arguments(program, seed)
    floats = [v for v, a in zip(args, program.args) if a.kind != "int"]
    tangents, tangents2 = _directions(program, seed + 1), _directions(program, seed + 2)
    nums = tuple(range(len(floats)))
    for check in checks:
        try:
            if check == "value":
                r = m.f(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
            elif check == "grad":
                r = adjit.grad(m.loss, argnums=nums)(*floats)
            elif check == "value_and_grad":
                r = adjit.value_and_grad(m.loss, argnums=nums)(*floats)
            elif check == "jvp":
                r = adjit.jvp(m.fd, floats, tangents)
            elif check == "jvp2":
                r = adjit.jvp(m.fd, floats, [(t, u) for t, u in zip(tangents, tangents2)],
                              width=2)
            elif check == "vjp":
                value, pullback = adjit.vjp(m.fd, *floats)
                ct = _cotangent(value, seed + 3)
                out["cotangent"] = ct
                r = pullback(ct)
            elif check == "hvp":
                r = adjit.hvp(m.loss, floats, tangents)
            elif check == "jacfwd":
                r = adjit.jacfwd(m.fd, argnums=0)(*floats)
            elif check == "jacfwd2":
                r = adjit.jacfwd(m.fd, argnums=0, width=2)(*floats)
            elif check == "jacrev":
                r = adjit.jacrev(m.fd, argnums=0)(*floats)
            elif check == "hessian":
                r = adjit.hessian(m.loss, argnums=0)(*floats)
            elif check == "dloss":
                r = m.dloss(*floats)
            out["results"][check] = ("ok", _plain(r))
        except Exception as e:     # noqa: BLE001 (every error is classified by the parent)
            out["results"][check] = ("error", _error(e))
    return out


def _directions(program: Program, seed: int) -> list:
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1.0, 1.0, a.shape).astype(a.dtype) if a.kind == "array"
            else float(rng.uniform(-1.0, 1.0)) for a in program.float_args]


def _cotangent(value, seed: int):
    rng = np.random.default_rng(seed)
    if isinstance(value, np.ndarray):
        return rng.uniform(-1.0, 1.0, value.shape).astype(value.dtype)
    return float(rng.uniform(-1.0, 1.0))


class Worker:
    """adjit's side of every program, in a spawned process: a crash or a hang is reported
    as the program's outcome, and a fresh process serves the next one."""

    def __init__(self, timeout: float = 300.0):
        self.timeout = timeout
        self.pool = None
        # the generated modules, one folder for the worker processes of this run
        self.folder = tempfile.mkdtemp(prefix="adjit-diff-")

    def _start(self):
        ctx = multiprocessing.get_context("spawn")
        self.pool = cf.ProcessPoolExecutor(max_workers=1, mp_context=ctx,
                                           max_tasks_per_child=200,
                                           initializer=_watch_parent,
                                           initargs=(os.getpid(), self.folder))

    def run(self, *job) -> dict:
        return self.call(run_adjit, *job)

    def call(self, fn, *args) -> dict:
        """fn(*args) in the worker: its result, or {"crash": why} if the process died or
        hung."""
        if self.pool is None:
            self._start()
        future = self.pool.submit(fn, *args)
        try:
            return future.result(timeout=self.timeout)
        except cf.process.BrokenProcessPool as e:
            self.close()
            return {"crash": f"the worker process died: {e}"}
        except cf.TimeoutError:
            self.close(kill=True)
            return {"crash": f"no result after {self.timeout} s (a hang)"}

    def close(self, kill: bool = False):
        if self.pool is None:
            return
        if kill:
            for p in list(getattr(self.pool, "_processes", {}).values()):
                p.kill()     # only the worker this object started
        self.pool.shutdown(wait=not kill, cancel_futures=True)
        self.pool = None
        if not kill:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = tempfile.mkdtemp(prefix="adjit-diff-")


def _watch_parent(parent: int, folder: str) -> None:
    """In the worker: generated modules go to `folder`, and the worker ends when the
    process that started it has gone (a killed test run leaves no worker behind)."""
    os.environ["ADJIT_DIFFERENTIAL_DIR"] = folder

    def watch():
        while os.getppid() == parent:
            time.sleep(2.0)
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


# ---- the references: JAX (float64 enabled) and NumPy -----------------------------------------
def _jax():
    import jax
    jax.config.update("jax_enable_x64", True)
    return jax


class _JaxAdjit:
    """adjit's names in the JAX rendering."""

    def __init__(self, jax):
        import jax.scipy.special as special
        self.erf = special.erf
        self.rsqrt = jax.lax.rsqrt
        self.grad = jax.grad


def jax_namespace(program: Program) -> dict:
    jax = _jax()
    ns = {"np": jax.numpy, "adjit": _JaxAdjit(jax)}
    exec(compile(program.source(jax=True), "<jax program>", "exec"), ns)
    return ns


def run_jax(program: Program, seed: int, checks: tuple, cotangent=None,
            upcast: bool = False) -> dict:
    """JAX's results of `checks` (upcast: with every array argument in float64)."""
    jax = _jax()
    jnp = jax.numpy
    ns = jax_namespace(program)
    args = arguments(program, seed)
    ints = [a.name for a in program.args if a.kind == "int"]

    def cast(v):
        return jnp.asarray(v, jnp.float64 if upcast else v.dtype) \
            if isinstance(v, np.ndarray) else v

    args = [cast(v) for v in args]
    floats = [v for v, a in zip(args, program.args) if a.kind != "int"]
    tangents = [cast(t) for t in _directions(program, seed + 1)]
    tangents2 = [cast(t) for t in _directions(program, seed + 2)]
    nums = tuple(range(len(floats)))
    f, fd, loss = ns["f"], ns["fd"], ns["loss"]
    out = {}
    for check in checks:
        try:
            if check == "value":
                r = jax.jit(f, static_argnames=ints)(*args)
            elif check in ("grad", "dloss"):
                r = jax.grad(loss, argnums=nums)(*floats)
            elif check == "value_and_grad":
                r = jax.value_and_grad(loss, argnums=nums)(*floats)
            elif check == "jvp":
                r = jax.jvp(fd, floats, tangents)
            elif check == "jvp2":
                p, t1 = jax.jvp(fd, floats, tangents)
                r = (p, (t1, jax.jvp(fd, floats, tangents2)[1]))
            elif check == "vjp":
                value, pullback = jax.vjp(fd, *floats)
                ct = cotangent if cotangent is not None else _cotangent(
                    np.asarray(value), seed + 3)
                r = pullback(jnp.asarray(ct, value.dtype))
            elif check == "hvp":
                r = jax.jvp(jax.grad(loss, argnums=nums if len(nums) > 1 else 0), floats,
                            tangents)[1]
            elif check in ("jacfwd", "jacfwd2"):
                r = jax.jacfwd(fd, argnums=0)(*floats)
            elif check == "jacrev":
                r = jax.jacrev(fd, argnums=0)(*floats)
            elif check == "hessian":
                r = jax.hessian(loss, argnums=0)(*floats)
            out[check] = ("ok", _to_numpy(r))
        except Exception as e:     # noqa: BLE001 (the generator's fault: "invalid")
            out[check] = ("error", f"{type(e).__name__}: {e}"[:500])
    return out


def _to_numpy(v):
    if isinstance(v, (tuple, list)):
        return tuple(_to_numpy(x) for x in v)
    return v if isinstance(v, float) else np.asarray(v)


def run_numpy(program: Program, seed: int):
    """The value by NumPy itself (the program run as Python): the dtype authority."""
    import adjit
    source = program.source().replace("@adjit.jit\n", "")
    ns = {}
    exec(compile(source, "<numpy program>", "exec"), ns)
    ns["adjit"] = _NumpyAdjit(adjit)
    with np.errstate(all="ignore"):
        return ns["f"](*arguments(program, seed))


class _NumpyAdjit:
    def __init__(self, adjit):
        from scipy.special import erf     # (keeps float32; np.vectorize fails on size 0)
        self.erf = erf
        self.rsqrt = lambda x: 1 / np.sqrt(x)
        self.checkpointed = lambda r, **kw: r
        self._adjit = adjit

    def __getattr__(self, name):
        return getattr(self._adjit, name)


# ---- comparison ------------------------------------------------------------------------------
def _flat(v) -> list:
    if isinstance(v, (tuple, list)):
        return [x for item in v for x in _flat(item)]
    return [v]


def _close(a, ref, f32: bool) -> bool:
    a, ref = np.asarray(a, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    if a.shape != ref.shape:
        return False
    if a.size == 0:
        return True
    rtol = 2e-3 if f32 else 1e-7
    scale = max(1.0, float(np.nanmax(np.abs(ref), initial=0.0)))
    return bool(np.allclose(a, ref, rtol=rtol, atol=rtol * scale, equal_nan=True))


@dataclasses.dataclass
class Outcome:
    check: str
    verdict: str          # clean | refused | defect | invalid
    detail: str = ""


def compare(program: Program, seed: int, check: str, got, ref, ref64,
            dtypes: bool = True) -> Outcome:
    """adjit's `got` against JAX's `ref` (and, for float32 programs, JAX's all-float64
    `ref64`, so that float32 rounding in a long chain is not called a defect). `dtypes`:
    compare the results' dtypes with JAX's (not where JAX's value has another dtype than
    NumPy's: np.cos(s) of a Python float is a float64 NumPy scalar, a weak one in JAX)."""
    f32 = any(a.dtype == "float32" for a in program.args if a.kind == "array")
    g, r = _flat(got), _flat(ref)
    if len(g) != len(r):
        return Outcome(check, "defect", f"{len(g)} results, JAX has {len(r)}")
    for k, (x, y) in enumerate(zip(g, r)):
        if np.shape(x) != np.shape(y):
            return Outcome(check, "defect", f"result {k} has shape {np.shape(x)}, "
                                            f"JAX's {np.shape(y)}")
        if isinstance(x, np.ndarray) and x.ndim and isinstance(y, np.ndarray) \
                and check != "value" and dtypes and x.dtype != y.dtype:
            return Outcome(check, "defect", f"result {k} has dtype {x.dtype}, JAX's {y.dtype}")
    if all(_close(x, y, f32) for x, y in zip(g, r)):
        return Outcome(check, "clean")
    if ref64 is not None and all(_close(x, y, f32) for x, y in zip(g, _flat(ref64()))):
        return Outcome(check, "clean")
    worst = max(float(np.nanmax(np.abs(np.asarray(x, np.float64) - np.asarray(y, np.float64)),
                                initial=0.0)) for x, y in zip(g, r))
    return Outcome(check, "defect", f"wrong value: max abs difference {worst:.3g}\n"
                                    f"adjit: {got!r}\nJAX:   {ref!r}")


def dtype_of(v) -> str:
    return str(np.asarray(v).dtype)


def check_program(worker: Worker, program: Program, seed: int, checks: tuple,
                  name: str) -> list[Outcome]:
    """Every check of one program: the outcomes, one per check (or one for a crash)."""
    try:
        np_value = run_numpy(program, seed)
    except Exception as e:     # noqa: BLE001
        return [Outcome("value", "invalid", f"NumPy rejects the program: {e}")]
    ref = run_jax(program, seed, checks)
    if ref["value"][0] != "ok":
        return [Outcome("value", "invalid", f"JAX rejects the program: {ref['value'][1]}")]
    f32 = any(a.dtype == "float32" for a in program.args if a.kind == "array")
    if not _close(np_value, ref["value"][1], f32):
        return [Outcome("value", "invalid", "NumPy and JAX disagree")]
    result = worker.run(program.source(), name, program, seed, checks)
    if "crash" in result:
        return [Outcome("value", "defect", result["crash"])]
    outcomes = []
    ref64_cache = {}
    for check in checks:
        status, got = result["results"][check]
        if status == "error":
            clear = is_clear_refusal(got, result["path"])
            outcomes.append(Outcome(check, "refused" if clear else "defect",
                                    f"{got['type']}: {got['message']}"
                                    + ("" if clear else "\n" + got["traceback"])))
            continue
        if ref[check][0] != "ok":
            outcomes.append(Outcome(check, "invalid", f"JAX: {ref[check][1]}"))
            continue
        if check == "vjp" and "cotangent" in result:
            ref[check] = run_jax(program, seed, ("vjp",), result["cotangent"])["vjp"]

        def ref64(check=check):
            if check not in ref64_cache:
                ref64_cache[check] = run_jax(program, seed, (check,), result.get("cotangent"),
                                             upcast=True)[check][1]
            return ref64_cache[check]

        outcome = compare(program, seed, check, got, ref[check][1], ref64 if f32 else None,
                          dtypes=dtype_of(np_value) == dtype_of(ref["value"][1]))
        if check == "value" and outcome.verdict == "clean" and \
                dtype_of(got) != dtype_of(np_value):
            outcome = Outcome(check, "defect", f"dtype {dtype_of(got)}, NumPy's "
                                               f"{dtype_of(np_value)} (NEP 50)")
        outcomes.append(outcome)
    return outcomes
