"""Helpers for autodiff tests: hand-written IR in, the pass run, generated functions compiled.

Requests in test IR carry `adj.entry` and `llvm.emit_c_interface`, which the pass copies onto
the functions it generates, so the runtime can call them directly.
"""
from __future__ import annotations

import numpy as np
from mlir import ir

from adjit.dialects import make_context
from adjit.core.types import ArrayType, ScalarType, bool_, f32, f64, i32, i64
from adjit.passes.autodiff import run_autodiff
from adjit.compiler.engine import compile_module

ENTRY = "adj.entry, llvm.emit_c_interface"
_CTX = make_context()
_SCALARS = {"f32": f32, "f64": f64, "i32": i32, "i64": i64, "i1": bool_, "index": i64}


def adjit_type(t: ir.Type) -> ScalarType | ArrayType:
    if isinstance(t, ir.MemRefType):
        return ArrayType(_SCALARS[str(t.element_type)], t.rank)
    return _SCALARS[str(t)]


def differentiate(text: str, rule_provider=None) -> ir.Module:
    """Parses `text` and runs the autodiff pass on it; the result verifies."""
    module = ir.Module.parse(text, _CTX)
    with _CTX, ir.Location.unknown():
        run_autodiff(module.operation, rule_provider)
    assert module.operation.verify()
    return module


class Compiled:
    """The generated functions of `text`, callable by name with NumPy arrays and scalars."""

    def __init__(self, text: str, rule_provider=None):
        self.module = differentiate(text, rule_provider)
        self.types: dict[str, ir.FunctionType] = {}
        for op in self.module.body.operations:
            op = op.operation
            if op.name == "func.func":
                name = ir.StringAttr(op.attributes["sym_name"]).value
                ftype = ir.TypeAttr(op.attributes["function_type"]).value
                self.types[name] = ir.FunctionType(ftype)
        self.compiled = compile_module(self.module)

    def __call__(self, name: str, *args):
        t = self.types[name]
        fn = self.compiled.function(name, [adjit_type(x) for x in t.inputs],
                                    [adjit_type(x) for x in t.results])
        out = fn(*args)
        if out is None:
            return ()
        return out if isinstance(out, tuple) else (out,)

    def n_results(self, name: str) -> int:
        return len(self.types[name].results)


def function(module: ir.Module, name: str) -> ir.Operation:
    for op in module.body.operations:
        if "sym_name" in op.attributes and ir.StringAttr(op.attributes["sym_name"]).value == name:
            return op.operation
    raise KeyError(name)


def request(fn: str, name: str, mode: str, activity: list[str], ret: str,
            with_primal: bool = False, overwritten: list[bool] | None = None) -> str:
    acts = ", ".join(f'"{a}"' for a in activity)
    over = ""
    if overwritten is not None:
        over = ", overwritten = [" + ", ".join("true" if o else "false" for o in overwritten) + "]"
    return (f'"adj.autodiff"() {{sym_name = "{name}", fn = @{fn}, mode = "{mode}", '
            f'activity = [{acts}], ret_activity = "{ret}", '
            f'with_primal = {"true" if with_primal else "false"}{over}, {ENTRY}}} : () -> ()')


def _copy(a):
    return a.copy() if isinstance(a, np.ndarray) else a


def _shift(a, d):
    return (a + d).astype(a.dtype) if isinstance(a, np.ndarray) else a + d


class GradCheck:
    """Checks forward and reverse mode of `fn` in `text` against central differences of

        L(args) = sum of fn's float results + sum_k weights[k] . (array k after the call)

    i.e. the shadows of duplicated arrays are seeded with `weights` (reverse) and the
    direction's tangents flow out through them (forward). `fn` must be an entry function.
    """

    def __init__(self, text: str, fn: str, activity: list[str], ret: str = "active",
                 rule_provider=None, overwritten=None):
        fwd_acts = ["dup" if a == "active" else a for a in activity]
        fwd_ret = "dup" if ret == "active" else ret
        self.text = (text + request(fn, "rv", "reverse", activity, ret, True, overwritten)
                     + request(fn, "fw", "forward", fwd_acts, fwd_ret, True))
        self.fn, self.activity, self.ret = fn, activity, ret
        self.c = Compiled(self.text, rule_provider)
        self.n_primal = len(self.c.types[fn].results)

    def loss(self, args: list, weights: list) -> float:
        copies = [_copy(a) for a in args]
        out = self.c(self.fn, *copies)
        total = sum(float(r) for r in out if np.issubdtype(np.asarray(r).dtype, np.floating))
        for a, w in zip(copies, weights):
            if w is not None:
                total += float(np.sum(w * a))
        return total

    def reverse(self, args: list, weights: list, repeats: int = 1):
        """(scalar adjoints, shadows) from aug then rev (`repeats` rev calls on one tape)."""
        flat, shadows = [], []
        for a, act, w in zip(args, self.activity, weights):
            flat.append(_copy(a))
            if act in ("dup", "dupnoneed"):
                shadows.append(np.array(w, dtype=a.dtype))
                flat.append(shadows[-1])
        aug = self.c("rv_aug", *flat)
        tape = aug[self.n_primal:]
        dret = [1.0 for t in self.c.types[self.fn].results
                if str(t) in ("f32", "f64")] if self.ret == "active" else []
        grads = None
        for _ in range(repeats):
            grads = self.c("rv_rev", *flat, *dret, *tape)
        return list(grads), shadows, aug[:self.n_primal]

    def forward(self, args: list, weights: list, direction: list) -> float:
        flat, shadows = [], []
        for a, act, w, d in zip(args, self.activity, weights, direction):
            flat.append(_copy(a))
            if act != "const":
                if isinstance(a, np.ndarray):
                    shadows.append((np.array(d, dtype=a.dtype), w))
                    flat.append(shadows[-1][0])
                else:
                    flat.append(d)
        out = self.c("fw", *flat)
        tangents = out[self.n_primal:]
        return sum(float(t) for t in tangents) + sum(float(np.sum(w * s)) for s, w in shadows)

    def check(self, args: list, weights: list | None = None, h: float = 1e-6,
              rtol: float = 1e-6, atol: float = 1e-9, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        if weights is None:
            weights = [rng.standard_normal(a.shape) if isinstance(a, np.ndarray) and act != "const"
                       else None for a, act in zip(args, self.activity)]
        grads, shadows, _ = self.reverse(args, weights)
        fd_scalars, fd_arrays = [], []
        for k, (a, act) in enumerate(zip(args, self.activity)):
            if act == "active":
                plus, minus = list(args), list(args)
                plus[k], minus[k] = a + h, a - h
                fd_scalars.append((self.loss(plus, weights) - self.loss(minus, weights)) / (2 * h))
            elif act in ("dup", "dupnoneed"):
                fd = np.zeros(a.shape)
                for i in np.ndindex(a.shape):
                    plus, minus = list(args), list(args)
                    plus[k], minus[k] = a.copy(), a.copy()
                    plus[k][i] += h
                    minus[k][i] -= h
                    fd[i] = (self.loss(plus, weights) - self.loss(minus, weights)) / (2 * h)
                fd_arrays.append(fd)
        np.testing.assert_allclose(np.array(grads, dtype=float), fd_scalars, rtol=rtol, atol=atol,
                                   err_msg="reverse mode, active scalars")
        for s, fd in zip(shadows, fd_arrays):
            np.testing.assert_allclose(s, fd, rtol=rtol, atol=atol, err_msg="reverse mode, shadows")
        direction = [rng.standard_normal(a.shape) if isinstance(a, np.ndarray) else
                     float(rng.standard_normal()) for a in args]
        along = [_shift(a, h * d) if act != "const" else a
                 for a, d, act in zip(args, direction, self.activity)]
        back = [_shift(a, -h * d) if act != "const" else a
                for a, d, act in zip(args, direction, self.activity)]
        fd_dir = (self.loss(along, weights) - self.loss(back, weights)) / (2 * h)
        np.testing.assert_allclose(self.forward(args, weights, direction), fd_dir, rtol=rtol,
                                   atol=atol, err_msg="forward mode")


def vectorised_launch_loops(ll_text: str, tmp_path, cpu: str = "x86-64-v3") -> tuple[set, set]:
    """(the launch loops of LLVM IR `ll_text`, those LLVM's loop vectoriser vectorised or
    replaced by a memset/memcpy call), optimised as the runtime builds a module (opt -O3,
    libmvec), for `cpu` (AVX2 by default)."""
    import re
    import subprocess
    from pathlib import Path
    import llvm
    ll = tmp_path / "m.ll"
    ll.write_text(ll_text)
    remarks = tmp_path / "remarks.yaml"
    opt = Path(list(llvm.__path__)[0]) / "bin" / "opt"
    subprocess.run([str(opt), "-O3", "-mtriple=x86_64-unknown-linux-gnu", f"-mcpu={cpu}",
                    "-vector-library=LIBMVEC", str(ll), "-o", "/dev/null",
                    f"-pass-remarks-output={remarks}",
                    "-pass-remarks-filter=loop-vectorize|loop-idiom"], check=True)
    # Each launch loop is a body function (passes/parallel_for.py), which LLVM inlines into
    # its thunk: a remark names either.
    loops = set(re.findall(r"define internal void @__adj_thunk_(\w+)\(", ll_text))
    done = {name.removeprefix("__adj_thunk_") for name in
            re.findall(r"Name:\s+(?:Vectorized|ProcessLoopStridedStore|"
                       r"ProcessLoopStoreOfLoopLoad)\nFunction:\s+(\w+)", remarks.read_text())}
    return loops, done & loops
