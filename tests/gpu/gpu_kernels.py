"""The GPU test kernels: adj-level IR text, inputs, and a NumPy reference for each.

Pure Python and NumPy (no MLIR): test_ptx.py compiles every case to PTX for ptxas; on a GPU
machine, test_gpu_exec.py launches them from a kernel cache that `scripts/gpu_check.sh`
filled where MLIR is (`python gpu_kernels.py DIR` writes that cache).
"""
from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass
from typing import Callable

import numpy as np

KERNEL_ATTRS = "attributes {{adj.kernel, adj.ndim = {ndim} : i64}}"
T = {np.float32: "f32", np.float64: "f64", np.int32: "i32", np.int64: "i64"}


@dataclass(frozen=True)
class Case:
    name: str                                   # the kernel's symbol
    text: str                                   # its module, adj-level IR
    inputs: Callable[[np.random.Generator], tuple[list, tuple[int, ...]]]   # (args, ndrange)
    reference: Callable[[list], None]           # what the kernel does, on NumPy copies, in place
    rtol: float = 0.0
    atol: float = 0.0


def _kernel(name: str, ndim: int, params: str, body: str, extra: str = "") -> str:
    attrs = KERNEL_ATTRS.format(ndim=ndim)
    return f"module {{\n{extra}\nfunc.func @{name}({params}) {attrs} {{\n{body}\nreturn\n}}\n}}"


def _saxpy(dt) -> Case:
    t = T[dt]
    text = _kernel(f"saxpy_{t}", 1, f"%a: {t}, %x: memref<?x{t}>, %y: memref<?x{t}>", f"""
      %i = "adj.index"() : () -> index
      %xi = memref.load %x[%i] : memref<?x{t}>
      %yi = memref.load %y[%i] : memref<?x{t}>
      %m = arith.mulf %a, %xi : {t}
      %s = arith.addf %m, %yi : {t}
      memref.store %s, %y[%i] : memref<?x{t}>""")

    def inputs(rng):
        n = 1_000_003                        # not a multiple of any block: exercises the guard
        return [dt(2.5), rng.standard_normal(n).astype(dt), rng.standard_normal(n).astype(dt)], (n,)

    def reference(args):
        a, x, y = args
        y[:] = a * x + y

    return Case(f"saxpy_{t}", text, inputs, reference, rtol=1e-6 if dt == np.float32 else 1e-15)


def _int_ops(dt) -> Case:
    t = T[dt]
    text = _kernel(f"int_ops_{t}", 1, f"%c: {t}, %x: memref<?x{t}>, %y: memref<?x{t}>", f"""
      %i = "adj.index"() : () -> index
      %xi = memref.load %x[%i] : memref<?x{t}>
      %k1 = arith.constant 1 : {t}
      %k3 = arith.constant 3 : {t}
      %k7 = arith.constant 7 : {t}
      %m = arith.muli %xi, %k3 : {t}
      %s = arith.addi %m, %c : {t}
      %q = arith.floordivsi %s, %k7 : {t}
      %r = arith.remsi %s, %k7 : {t}
      %r3 = arith.muli %r, %k3 : {t}
      %o = arith.addi %q, %r3 : {t}
      %sh = arith.shli %o, %k1 : {t}
      %ax = math.absi %xi : {t}
      %mx = arith.maxsi %sh, %ax : {t}
      memref.store %mx, %y[%i] : memref<?x{t}>""")

    def inputs(rng):
        n = 4099
        return [dt(-5), rng.integers(-1000, 1000, n).astype(dt), np.zeros(n, dt)], (n,)

    def reference(args):
        c, x, y = args
        s = x * 3 + c
        y[:] = np.maximum(((s // 7) + np.fmod(s, 7) * 3) << 1, np.abs(x))

    return Case(f"int_ops_{t}", text, inputs, reference)


def _select_bool() -> Case:
    text = _kernel("select_bool", 1,
                   "%flag: i1, %mask: memref<?xi1>, %x: memref<?xf64>, %out: memref<?xf64>", """
      %i = "adj.index"() : () -> index
      %m = memref.load %mask[%i] : memref<?xi1>
      %c = arith.xori %m, %flag : i1
      %v = memref.load %x[%i] : memref<?xf64>
      %n = arith.negf %v : f64
      %r = arith.select %c, %v, %n : f64
      memref.store %r, %out[%i] : memref<?xf64>""")

    def inputs(rng):
        n = 3000
        return [True, rng.random(n) < 0.3, rng.standard_normal(n), np.zeros(n)], (n,)

    def reference(args):
        flag, mask, x, out = args
        out[:] = np.where(mask ^ flag, x, -x)

    return Case("select_bool", text, inputs, reference)


def _grid2d() -> Case:
    text = _kernel("grid2d_f32", 2, "%x: memref<?x?xf32>, %out: memref<?x?xf32>", """
      %i = "adj.global_id"() {dim = 0 : i64} : () -> index
      %j = "adj.global_id"() {dim = 1 : i64} : () -> index
      %v = memref.load %x[%i, %j] : memref<?x?xf32>
      %ii = arith.index_cast %i : index to i64
      %jj = arith.index_cast %j : index to i64
      %fi = arith.sitofp %ii : i64 to f32
      %fj = arith.sitofp %jj : i64 to f32
      %c2 = arith.constant 2.0 : f32
      %c10 = arith.constant 10.0 : f32
      %a = arith.mulf %v, %c2 : f32
      %b = arith.mulf %fi, %c10 : f32
      %s = arith.addf %a, %b : f32
      %r = arith.addf %s, %fj : f32
      memref.store %r, %out[%i, %j] : memref<?x?xf32>""")

    def inputs(rng):
        x = rng.standard_normal((37, 1001)).astype(np.float32)
        return [x, np.zeros_like(x)], x.shape

    def reference(args):
        x, out = args
        i, j = np.indices(x.shape, dtype=np.float32)
        out[:] = x * 2 + i * 10 + j

    return Case("grid2d_f32", text, inputs, reference, rtol=1e-6)


def _grid3d() -> Case:
    text = _kernel("grid3d_i64", 3, "%out: memref<?x?x?xi64>", """
      %lin = "adj.index"() : () -> index
      %i = "adj.global_id"() {dim = 0 : i64} : () -> index
      %j = "adj.global_id"() {dim = 1 : i64} : () -> index
      %k = "adj.global_id"() {dim = 2 : i64} : () -> index
      %n1 = "adj.global_size"() {dim = 1 : i64} : () -> index
      %n2 = "adj.global_size"() {dim = 2 : i64} : () -> index
      %a = arith.muli %i, %n1 : index
      %b = arith.addi %a, %j : index
      %c = arith.muli %b, %n2 : index
      %d = arith.addi %c, %k : index
      %same = arith.cmpi eq, %d, %lin : index
      %l = arith.index_cast %lin : index to i64
      %bad = arith.constant -1 : i64
      %v = arith.select %same, %l, %bad : i64
      memref.store %v, %out[%i, %j, %k] : memref<?x?x?xi64>""")

    def inputs(rng):
        shape = (5, 7, 300)
        return [np.zeros(shape, np.int64)], shape

    def reference(args):
        (out,) = args
        out[:] = np.arange(out.size).reshape(out.shape)

    return Case("grid3d_i64", text, inputs, reference)


# op -> (NumPy reference, input sampler)
UNARY_MATH = {
    "sin": (np.sin, lambda r, n: r.uniform(-100, 100, n)),
    "cos": (np.cos, lambda r, n: r.uniform(-100, 100, n)),
    "tan": (np.tan, lambda r, n: r.uniform(-1.5, 1.5, n)),
    "exp": (np.exp, lambda r, n: r.uniform(-80, 80, n)),
    "exp2": (np.exp2, lambda r, n: r.uniform(-120, 120, n)),
    "expm1": (np.expm1, lambda r, n: r.uniform(-5, 5, n)),
    "log": (np.log, lambda r, n: np.exp(r.uniform(-80, 80, n))),
    "log2": (np.log2, lambda r, n: np.exp(r.uniform(-80, 80, n))),
    "log10": (np.log10, lambda r, n: np.exp(r.uniform(-80, 80, n))),
    "log1p": (np.log1p, lambda r, n: np.exp(r.uniform(-20, 20, n))),
    "sqrt": (np.sqrt, lambda r, n: np.exp(r.uniform(-80, 80, n))),
    "rsqrt": (lambda x: 1 / np.sqrt(x), lambda r, n: np.exp(r.uniform(-80, 80, n))),
    "tanh": (np.tanh, lambda r, n: r.uniform(-10, 10, n)),
    "sinh": (np.sinh, lambda r, n: r.uniform(-50, 50, n)),
    "cosh": (np.cosh, lambda r, n: r.uniform(-50, 50, n)),
    "floor": (np.floor, lambda r, n: r.uniform(-1e3, 1e3, n)),
    "ceil": (np.ceil, lambda r, n: r.uniform(-1e3, 1e3, n)),
    "trunc": (np.trunc, lambda r, n: r.uniform(-1e3, 1e3, n)),
    "round": (lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5),
              lambda r, n: np.round(r.uniform(-1e3, 1e3, n) * 2) / 2),
    "absf": (np.abs, lambda r, n: r.uniform(-1e3, 1e3, n)),
    "atan": (np.arctan, lambda r, n: r.standard_normal(n) * np.exp(r.uniform(-10, 10, n))),
    "asin": (np.arcsin, lambda r, n: r.uniform(-1, 1, n)),
    "acos": (np.arccos, lambda r, n: r.uniform(-1, 1, n)),
    "cbrt": (np.cbrt, lambda r, n: r.standard_normal(n) * np.exp(r.uniform(-80, 80, n))),
    "erf": (np.vectorize(math.erf), lambda r, n: r.uniform(-6, 6, n)),
    "asinh": (np.arcsinh, lambda r, n: r.standard_normal(n) * np.exp(r.uniform(-20, 20, n))),
    "acosh": (np.arccosh, lambda r, n: 1 + np.exp(r.uniform(-20, 20, n))),
    "atanh": (np.arctanh, lambda r, n: r.uniform(-1, 1, n)),
}


def _unary_math(op: str, dt) -> Case:
    t = T[dt]
    ref, sample = UNARY_MATH[op]
    name = f"math_{op}_{t}"
    text = _kernel(name, 1, f"%x: memref<?x{t}>, %y: memref<?x{t}>", f"""
      %i = "adj.index"() : () -> index
      %v = memref.load %x[%i] : memref<?x{t}>
      %r = math.{op} %v : {t}
      memref.store %r, %y[%i] : memref<?x{t}>""")

    def inputs(rng):
        x = sample(rng, 10_000).astype(dt)
        return [x, np.zeros_like(x)], x.shape

    def reference(args):
        x, y = args
        y[:] = ref(x.astype(np.float64))

    f32 = dt == np.float32
    return Case(name, text, inputs, reference, rtol=4e-6 if f32 else 1e-13, atol=1e-6 if f32 else 1e-13)


def _binary_math(dt) -> Case:
    t = T[dt]
    name = f"math_binary_{t}"
    text = _kernel(name, 1, f"%x: memref<?x{t}>, %z: memref<?x{t}>, %n: memref<?xi32>, "
                            f"%out: memref<?x5x{t}>", f"""
      %i = "adj.index"() : () -> index
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c3 = arith.constant 3 : index
      %c4 = arith.constant 4 : index
      %a = memref.load %x[%i] : memref<?x{t}>
      %b = memref.load %z[%i] : memref<?x{t}>
      %k = memref.load %n[%i] : memref<?xi32>
      %p = math.powf %a, %b : {t}
      %q = math.fpowi %a, %k : {t}, i32
      %mx = arith.maximumf %a, %b : {t}
      %mn = arith.minimumf %a, %b : {t}
      %at = math.atan2 %b, %a : {t}
      memref.store %p, %out[%i, %c0] : memref<?x5x{t}>
      memref.store %q, %out[%i, %c1] : memref<?x5x{t}>
      memref.store %mx, %out[%i, %c2] : memref<?x5x{t}>
      memref.store %mn, %out[%i, %c3] : memref<?x5x{t}>
      memref.store %at, %out[%i, %c4] : memref<?x5x{t}>""")

    def inputs(rng):
        n = 5000
        return [rng.uniform(0.01, 10, n).astype(dt), rng.uniform(-8, 8, n).astype(dt),
                rng.integers(-8, 9, n).astype(np.int32), np.zeros((n, 5), dt)], (n,)

    def reference(args):
        x, z, n, out = args
        xd = x.astype(np.float64)
        out[:] = np.stack([xd ** z, xd ** n.astype(np.float64), np.maximum(x, z),
                           np.minimum(x, z), np.arctan2(z.astype(np.float64), xd)], axis=1)

    f32 = dt == np.float32
    return Case(name, text, inputs, reference, rtol=4e-6 if f32 else 1e-12)


def _ipowi() -> Case:
    text = _kernel("ipowi_i64", 1, "%b: memref<?xi64>, %e: memref<?xi64>, %out: memref<?xi64>", """
      %i = "adj.index"() : () -> index
      %x = memref.load %b[%i] : memref<?xi64>
      %y = memref.load %e[%i] : memref<?xi64>
      %r = math.ipowi %x, %y : i64
      memref.store %r, %out[%i] : memref<?xi64>""")

    def inputs(rng):
        n = 1000
        return [rng.integers(-9, 10, n), rng.integers(0, 15, n), np.zeros(n, np.int64)], (n,)

    def reference(args):
        b, e, out = args
        out[:] = b ** e

    return Case("ipowi_i64", text, inputs, reference)


def _histogram(dt) -> Case:
    t = T[dt]
    floating = dt in (np.float32, np.float64)
    kind = "addf" if floating else "addi"
    text = _kernel(f"histogram_{t}", 1,
                   f"%bins: memref<?xi64>, %w: memref<?x{t}>, %out: memref<?x{t}>", f"""
      %i = "adj.index"() : () -> index
      %b = memref.load %bins[%i] : memref<?xi64>
      %bi = arith.index_cast %b : i64 to index
      %v = memref.load %w[%i] : memref<?x{t}>
      %old = memref.atomic_rmw {kind} %v, %out[%bi] : ({t}, memref<?x{t}>) -> {t}""")

    def inputs(rng):
        n = 100_000
        w = rng.random(n).astype(dt) if floating else rng.integers(-50, 50, n).astype(dt)
        return [rng.integers(0, 64, n), w, np.zeros(64, dt)], (n,)

    def reference(args):
        bins, w, out = args
        np.add.at(out, bins, w)

    return Case(f"histogram_{t}", text, inputs, reference,
                rtol={np.float32: 1e-4, np.float64: 1e-12}.get(dt, 0.0))


def _row_sum() -> Case:
    text = _kernel("row_sum_f64", 1, "%x: memref<?x?xf64>, %out: memref<?xf64>", """
      %i = "adj.index"() : () -> index
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %n = memref.dim %x, %c1 : memref<?x?xf64>
      %z = arith.constant 0.0 : f64
      %s = scf.for %j = %c0 to %n step %c1 iter_args(%acc = %z) -> (f64) {
        %v = memref.load %x[%i, %j] : memref<?x?xf64>
        %a = arith.addf %acc, %v : f64
        scf.yield %a : f64
      }
      memref.store %s, %out[%i] : memref<?xf64>""")

    def inputs(rng):
        x = rng.standard_normal((777, 129))
        return [x, np.zeros(777)], (777,)

    def reference(args):
        x, out = args
        out[:] = x.sum(axis=1)

    return Case("row_sum_f64", text, inputs, reference, rtol=1e-12, atol=1e-12)


def _collatz() -> Case:
    text = _kernel("collatz_i64", 1, "%steps: memref<?xi64>", """
      %i = "adj.index"() : () -> index
      %ii = arith.index_cast %i : index to i64
      %zero = arith.constant 0 : i64
      %one = arith.constant 1 : i64
      %two = arith.constant 2 : i64
      %three = arith.constant 3 : i64
      %n0 = arith.addi %ii, %one : i64
      %r:2 = scf.while (%n = %n0, %k = %zero) : (i64, i64) -> (i64, i64) {
        %more = arith.cmpi sgt, %n, %one : i64
        scf.condition(%more) %n, %k : i64, i64
      } do {
      ^bb0(%n: i64, %k: i64):
        %bit = arith.andi %n, %one : i64
        %odd = arith.cmpi ne, %bit, %zero : i64
        %half = arith.divsi %n, %two : i64
        %n3 = arith.muli %n, %three : i64
        %t = arith.addi %n3, %one : i64
        %next = arith.select %odd, %t, %half : i64
        %k1 = arith.addi %k, %one : i64
        scf.yield %next, %k1 : i64, i64
      }
      memref.store %r#1, %steps[%i] : memref<?xi64>""")

    def inputs(rng):
        return [np.zeros(2000, np.int64)], (2000,)

    def reference(args):
        (steps,) = args
        for i in range(len(steps)):
            n, k = i + 1, 0
            while n > 1:
                n, k = (3 * n + 1 if n % 2 else n // 2), k + 1
            steps[i] = k

    return Case("collatz_i64", text, inputs, reference)


def _device_call() -> Case:
    helper = """
    func.func @norm_and_square(%x: f64, %y: f64) -> (f64, f64) attributes {adj.func} {
      %xx = arith.mulf %x, %x : f64
      %yy = arith.mulf %y, %y : f64
      %s = arith.addf %xx, %yy : f64
      %r = math.sqrt %s : f64
      return %r, %s : f64, f64
    }"""
    text = _kernel("device_call_f64", 1,
                   "%x: memref<?xf64>, %y: memref<?xf64>, %out: memref<?xf64>", """
      %i = "adj.index"() : () -> index
      %a = memref.load %x[%i] : memref<?xf64>
      %b = memref.load %y[%i] : memref<?xf64>
      %r:2 = func.call @norm_and_square(%a, %b) : (f64, f64) -> (f64, f64)
      %s = arith.addf %r#0, %r#1 : f64
      memref.store %s, %out[%i] : memref<?xf64>""", extra=helper)

    def inputs(rng):
        n = 4096
        return [rng.standard_normal(n), rng.standard_normal(n), np.zeros(n)], (n,)

    def reference(args):
        x, y, out = args
        out[:] = np.hypot(x, y) + (x * x + y * y)

    return Case("device_call_f64", text, inputs, reference, rtol=1e-14)


CHECK_MESSAGE = "gather index out of range"


def _gather_checked() -> Case:
    text = _kernel("gather_checked_f32", 1,
                   "%idx: memref<?xi64>, %x: memref<?xf32>, %out: memref<?xf32>", f"""
      %i = "adj.index"() : () -> index
      %c0 = arith.constant 0 : index
      %k = memref.load %idx[%i] : memref<?xi64>
      %ki = arith.index_cast %k : i64 to index
      %n = memref.dim %x, %c0 : memref<?xf32>
      %ok = arith.cmpi ult, %ki, %n : index
      "adj.check"(%ok) {{error = "IndexError", message = "{CHECK_MESSAGE}"}} : (i1) -> ()
      scf.if %ok {{
        %v = memref.load %x[%ki] : memref<?xf32>
        memref.store %v, %out[%i] : memref<?xf32>
      }}""")

    def inputs(rng):
        n = 3000
        return [rng.integers(0, 100, n), rng.standard_normal(100).astype(np.float32),
                np.zeros(n, np.float32)], (n,)

    def reference(args):
        idx, x, out = args
        out[:] = x[idx]

    return Case("gather_checked_f32", text, inputs, reference)


def _heat() -> Case:
    text = _kernel("heat_f32", 2, "%u: memref<?x?xf32>, %v: memref<?x?xf32>, %dt: f32", """
      %i = "adj.global_id"() {dim = 0 : i64} : () -> index
      %j = "adj.global_id"() {dim = 1 : i64} : () -> index
      %n0 = "adj.global_size"() {dim = 0 : i64} : () -> index
      %n1 = "adj.global_size"() {dim = 1 : i64} : () -> index
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %ip = arith.addi %i, %c1 : index
      %jp = arith.addi %j, %c1 : index
      %a = arith.cmpi ugt, %i, %c0 : index
      %b = arith.cmpi ugt, %j, %c0 : index
      %c = arith.cmpi ult, %ip, %n0 : index
      %d = arith.cmpi ult, %jp, %n1 : index
      %ab = arith.andi %a, %b : i1
      %cd = arith.andi %c, %d : i1
      %inside = arith.andi %ab, %cd : i1
      %center = memref.load %u[%i, %j] : memref<?x?xf32>
      %new = scf.if %inside -> (f32) {
        %im = arith.subi %i, %c1 : index
        %jm = arith.subi %j, %c1 : index
        %n = memref.load %u[%im, %j] : memref<?x?xf32>
        %s = memref.load %u[%ip, %j] : memref<?x?xf32>
        %w = memref.load %u[%i, %jm] : memref<?x?xf32>
        %e = memref.load %u[%i, %jp] : memref<?x?xf32>
        %ns = arith.addf %n, %s : f32
        %we = arith.addf %w, %e : f32
        %sum = arith.addf %ns, %we : f32
        %four = arith.constant 4.0 : f32
        %c4 = arith.mulf %center, %four : f32
        %lap = arith.subf %sum, %c4 : f32
        %step = arith.mulf %dt, %lap : f32
        %r = arith.addf %center, %step : f32
        scf.yield %r : f32
      } else {
        scf.yield %center : f32
      }
      memref.store %new, %v[%i, %j] : memref<?x?xf32>""")

    def inputs(rng):
        u = rng.random((300, 517)).astype(np.float32)
        return [u, np.zeros_like(u), np.float32(0.1)], u.shape

    def reference(args):
        u, v, dt = args
        v[:] = u
        lap = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * u[1:-1, 1:-1]
        v[1:-1, 1:-1] = u[1:-1, 1:-1] + dt * lap

    return Case("heat_f32", text, inputs, reference, rtol=1e-5, atol=1e-6)


def _casts() -> Case:
    text = _kernel("casts", 1, "%x: memref<?xf32>, %out: memref<?xf64>, %iout: memref<?xi32>", """
      %i = "adj.index"() : () -> index
      %v = memref.load %x[%i] : memref<?xf32>
      %d = arith.extf %v : f32 to f64
      %t = arith.fptosi %v : f32 to i32
      %l = arith.extsi %t : i32 to i64
      %f = arith.sitofp %l : i64 to f64
      %s = arith.addf %d, %f : f64
      memref.store %s, %out[%i] : memref<?xf64>
      memref.store %t, %iout[%i] : memref<?xi32>""")

    def inputs(rng):
        n = 2048
        return [rng.uniform(-1e4, 1e4, n).astype(np.float32), np.zeros(n), np.zeros(n, np.int32)], (n,)

    def reference(args):
        x, out, iout = args
        out[:] = x.astype(np.float64) + np.trunc(x).astype(np.float64)
        iout[:] = x.astype(np.int32)

    return Case("casts", text, inputs, reference)


def derivative_text(case: Case, name: str, mode: str, activity: list[str]) -> str:
    """`case`'s module plus an autodiff request (compile_text runs the autodiff pass)."""
    acts = ", ".join(f'"{a}"' for a in activity)
    request = (f'"adj.autodiff"() {{sym_name = "{name}", fn = @{case.name}, mode = "{mode}", '
               f'activity = [{acts}], ret_activity = "const"}} : () -> ()')
    return case.text.rstrip().removesuffix("}") + request + "\n}"


def _d_saxpy_forward() -> Case:
    def inputs(rng):
        n = 10_001
        x, dx, y, dy = (rng.standard_normal(n).astype(np.float32) for _ in range(4))
        return [np.float32(1.5), np.float32(-0.5), x, dx, y, dy], (n,)

    def reference(args):
        a, da, x, dx, y, dy = args
        y[:] = a * x + y
        dy[:] = da * x + a * dx + dy

    text = derivative_text(_saxpy(np.float32), "d_saxpy_f32", "forward", ["active", "dup", "dup"])
    return Case("d_saxpy_f32", text, inputs, reference, rtol=1e-5, atol=1e-6)


def _d_saxpy_reverse() -> Case:
    def inputs(rng):
        n = 10_001
        x, dx, y, dy = (rng.standard_normal(n).astype(np.float32) for _ in range(4))
        return [np.float32(1.5), x, dx, y, dy, np.zeros(n, np.float32)], (n,)

    def reference(args):             # the reverse kernel alone: the primal ran in _aug
        a, x, dx, y, dy, da_items = args
        dx += a * dy
        da_items[:] = x * dy

    text = derivative_text(_saxpy(np.float32), "d_saxpy_f32", "reverse", ["active", "dup", "dup"])
    return Case("d_saxpy_f32_rev", text, inputs, reference, rtol=1e-6, atol=1e-7)


def _d_heat_reverse() -> Case:
    def inputs(rng):
        shape = (67, 129)
        u, du, v, dv = (rng.standard_normal(shape).astype(np.float32) for _ in range(4))
        return [u, du, v, dv, np.float32(0.1), np.zeros(u.size, np.float32)], shape

    def reference(args):
        u, du, v, dv, dt, ddt_items = args
        inner = dv[1:-1, 1:-1]
        du += dv
        du[1:-1, 1:-1] -= 4 * dt * inner
        du[:-2, 1:-1] += dt * inner
        du[2:, 1:-1] += dt * inner
        du[1:-1, :-2] += dt * inner
        du[1:-1, 2:] += dt * inner
        lap = np.zeros_like(u)
        lap[1:-1, 1:-1] = (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]
                           - 4 * u[1:-1, 1:-1])
        ddt_items[:] = (dv * lap).ravel()
        dv[:] = 0                        # v was overwritten: its adjoint is consumed

    text = derivative_text(_heat(), "d_heat_f32", "reverse", ["dup", "dup", "active"])
    return Case("d_heat_f32_rev", text, inputs, reference, rtol=1e-5, atol=1e-5)


CASES: dict[str, Case] = {c.name: c for c in [
    _saxpy(np.float32), _saxpy(np.float64), _int_ops(np.int32), _int_ops(np.int64),
    _select_bool(), _grid2d(), _grid3d(),
    *[_unary_math(op, dt) for op in UNARY_MATH for dt in (np.float32, np.float64)],
    _binary_math(np.float32), _binary_math(np.float64), _ipowi(),
    *[_histogram(dt) for dt in (np.float32, np.float64, np.int32, np.int64)],
    _row_sum(), _collatz(), _device_call(), _gather_checked(), _casts(), _heat(),
    _d_saxpy_forward(), _d_saxpy_reverse(), _d_heat_reverse(),
]}


def kernel_dir() -> str | None:
    """The precompiled kernel cache named by ADJIT_GPU_TEST_KERNELS (set by gpu_check.sh)."""
    return os.environ.get("ADJIT_GPU_TEST_KERNELS")


def get_kernel(name: str, chip: str = "sm_90"):
    """The case's GpuKernel: from the test cache, compiling (MLIR) on a miss where the
    compiler is installed."""
    from adjit.runtime import kernel_cache
    try:
        from adjit.passes.lower_gpu import compile_text
    except ImportError:          # a GPU machine: no MLIR, the kernels come from the cache
        compile_text = None
    case = CASES[name]
    return kernel_cache.get_or_compile(case.text, case.name, chip, kernel_dir(), compile_text)


if __name__ == "__main__":     # python gpu_kernels.py DIR: compile every case into DIR
    os.environ["ADJIT_GPU_TEST_KERNELS"] = sys.argv[1]
    for case_name in CASES:
        get_kernel(case_name)
    print(f"compiled {len(CASES)} kernels into {sys.argv[1]}")
