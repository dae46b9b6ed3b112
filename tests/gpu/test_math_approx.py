"""Accuracy of the libdevice-free math expansions (passes/math_approx.py) against NumPy.

The expansions are plain arith, so their arithmetic is the same on any target: they are run
here on the CPU through MLIR's ExecutionEngine. (On the GPU, NVPTX fuses mul+add into fma,
which only removes roundings.)
"""
from __future__ import annotations

import ctypes
import math

import numpy as np
import pytest

mlir = pytest.importorskip("mlir")
from mlir import ir, passmanager                          # noqa: E402
from mlir.execution_engine import ExecutionEngine         # noqa: E402
from mlir.runtime import get_ranked_memref_descriptor     # noqa: E402

from adjit.dialects import make_context                   # noqa: E402
from adjit.passes.math_approx import expand_math          # noqa: E402

_CPU = ("builtin.module(convert-scf-to-cf,convert-arith-to-llvm,convert-cf-to-llvm,"
        "finalize-memref-to-llvm,convert-func-to-llvm,reconcile-unrealized-casts)")


def run_elementwise(op: str, dtype, *inputs: np.ndarray, out_dtype=None) -> np.ndarray:
    """Applies `op` (e.g. "math.sin") elementwise after expand_math, compiled for the CPU."""
    t = {np.float32: "f32", np.float64: "f64", np.int32: "i32", np.int64: "i64"}
    ins = [np.ascontiguousarray(x) for x in inputs]
    out = np.empty_like(ins[0], dtype=out_dtype or dtype)
    mt = [f"memref<?x{t[x.dtype.type]}>" for x in ins]
    args = ", ".join(f"%x{k}: {m}" for k, m in enumerate(mt))
    loads = "\n".join(f"%a{k} = memref.load %x{k}[%i] : {m}" for k, m in enumerate(mt))
    operands = ", ".join(f"%a{k}" for k in range(len(ins)))
    types = ", ".join(t[x.dtype.type] for x in ins)
    rt = t[out.dtype.type]
    text = f"""
    func.func @f({args}, %y: memref<?x{rt}>) attributes {{llvm.emit_c_interface}} {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %n = memref.dim %x0, %c0 : {mt[0]}
      scf.for %i = %c0 to %n step %c1 {{
        {loads}
        %b = "{op}"({operands}) : ({types}) -> {rt}
        memref.store %b, %y[%i] : memref<?x{rt}>
      }}
      return
    }}"""
    with make_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        expand_math(module.operation)
        module.operation.verify()
        passmanager.PassManager.parse(_CPU).run(module.operation)
        engine = ExecutionEngine(module, opt_level=2)
        descs = [ctypes.pointer(ctypes.pointer(get_ranked_memref_descriptor(a)))
                 for a in (*ins, out)]
        engine.invoke("f", *descs)
    return out


def ulp_error(got: np.ndarray, ref: np.ndarray, dtype) -> float:
    """Worst error in units of the last place of the correctly rounded `ref`."""
    with np.errstate(all="ignore"):
        return _ulp_error(got, ref, dtype)


def _ulp_error(got, ref, dtype):
    ref_t = ref.astype(dtype)
    both_nan = np.isnan(got) & np.isnan(ref_t)
    same_inf = np.isinf(ref_t) & (got == ref_t)
    ok = both_nan | same_inf
    assert not np.any(np.isnan(got) != np.isnan(ref_t)), "NaN where NumPy has none, or reverse"
    diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    ulp = np.spacing(np.abs(ref_t)).astype(np.float64)
    return float(np.max(np.where(ok, 0.0, diff / ulp), initial=0.0))


def _points(dtype, lo, hi, n=20000, signed=True):
    rng = np.random.default_rng(0)
    mag = np.exp(rng.uniform(np.log(lo), np.log(hi), n))
    if signed:
        mag *= rng.choice([-1.0, 1.0], n)
    return mag.astype(dtype)


SPECIALS = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, np.inf, -np.inf, np.nan]


def _with_specials(x, dtype):
    return np.concatenate([x, np.array(SPECIALS, dtype=dtype)])


# (op, numpy reference, input magnitude range, signed inputs, max ulp for f32, for f64)
UNARY = [
    ("math.exp", np.exp, (1e-8, 750), True, 2, 2),
    ("math.exp2", np.exp2, (1e-8, 1100), True, 2, 2),
    ("math.expm1", np.expm1, (1e-12, 750), True, 2, 2),
    ("math.log", np.log, (1e-300, 1e300), False, 2, 2),
    ("math.log2", np.log2, (1e-300, 1e300), False, 2, 2),
    ("math.log10", np.log10, (1e-300, 1e300), False, 3, 3),
    ("math.log1p", np.log1p, (1e-12, 1e30), False, 3, 3),
    ("math.sin", np.sin, (1e-8, 1e5), True, 2, 2),
    ("math.cos", np.cos, (1e-8, 1e5), True, 2, 2),
    ("math.tan", np.tan, (1e-8, 1e5), True, 4, 3),
    ("math.tanh", np.tanh, (1e-10, 40), True, 3, 3),
    ("math.sinh", np.sinh, (1e-10, 700), True, 3, 3),
    ("math.cosh", np.cosh, (1e-10, 700), True, 3, 3),
    ("math.sqrt", np.sqrt, (1e-300, 1e300), False, 0.5, 0.5),
    ("math.rsqrt", lambda x: 1 / np.sqrt(x), (1e-30, 1e30), False, 2, 2),
    ("math.floor", np.floor, (1e-3, 1e20), True, 0, 0),
    ("math.ceil", np.ceil, (1e-3, 1e20), True, 0, 0),
    ("math.trunc", np.trunc, (1e-3, 1e20), True, 0, 0),
    ("math.roundeven", np.rint, (1e-3, 1e20), True, 0, 0),
    ("math.absf", np.abs, (1e-30, 1e30), True, 0, 0),
    ("math.atan", np.arctan, (1e-10, 1e30), True, 1, 1),
    ("math.asin", np.arcsin, (1e-10, 1), True, 2, 2),
    ("math.acos", np.arccos, (1e-10, 1), True, 2, 2),
    ("math.cbrt", np.cbrt, (1e-300, 1e300), True, 1, 1),
    ("math.erf", np.vectorize(math.erf), (1e-10, 10), True, 1, 6),
    ("math.asinh", np.arcsinh, (1e-10, 1e30), True, 3, 3),
    ("math.acosh", np.arccosh, (1, 1e30), False, 3, 3),
    ("math.atanh", np.arctanh, (1e-10, 1), True, 3, 3),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("op,ref,rng,signed,tol32,tol64", UNARY, ids=[u[0] for u in UNARY])
def test_unary_accuracy(op, ref, rng, signed, tol32, tol64, dtype):
    lo, hi = rng
    if dtype == np.float32:
        lo, hi = max(lo, 1e-37), min(hi, 3e38)
    x = _with_specials(_points(dtype, lo, hi, signed=signed), dtype)
    with np.errstate(all="ignore"):
        expected = ref(x.astype(np.float64))
    got = run_elementwise(op, dtype, x)
    tol = tol32 if dtype == np.float32 else tol64
    assert ulp_error(got, expected, dtype) <= tol


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_subnormal_log_and_exp(dtype):
    tiny = np.finfo(dtype).smallest_subnormal
    x = np.array([tiny, tiny * 3, np.finfo(dtype).tiny / 2], dtype=dtype)
    assert ulp_error(run_elementwise("math.log", dtype, x), np.log(x.astype(np.float64)), dtype) <= 2
    y = np.log(x.astype(np.float64)).astype(dtype)
    assert ulp_error(run_elementwise("math.exp", dtype, y), np.exp(y.astype(np.float64)), dtype) <= 2**12


def test_round_is_half_away_from_zero():
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 3.2], dtype=np.float64)
    np.testing.assert_array_equal(run_elementwise("math.round", np.float64, x),
                                  np.sign(x) * np.floor(np.abs(x) + 0.5))


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_pow(dtype):
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 10, 5000).astype(dtype)
    y = rng.uniform(-30, 30, 5000).astype(dtype)
    with np.errstate(all="ignore"):
        expected = np.power(x.astype(np.float64), y.astype(np.float64))
    tol = 1 if dtype == np.float32 else 2**10      # f64: exp(y*log x) amplifies log's rounding
    assert ulp_error(run_elementwise("math.powf", dtype, x, y), expected, dtype) <= tol
    # C99 special cases, which NumPy follows
    s = np.array(SPECIALS + [-2.0, -3.0, -0.5])
    xs, ys = (a.ravel().astype(dtype) for a in np.meshgrid(s, s))
    with np.errstate(all="ignore"):
        expected = np.power(xs.astype(np.float64), ys.astype(np.float64))
    assert ulp_error(run_elementwise("math.powf", dtype, xs, ys), expected, dtype) <= 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_atan2(dtype):
    rng = np.random.default_rng(2)
    y = rng.standard_normal(20000) * np.exp(rng.uniform(-20, 20, 20000))
    x = rng.standard_normal(20000) * np.exp(rng.uniform(-20, 20, 20000))
    s = np.array(SPECIALS)
    ys, xs = (a.ravel() for a in np.meshgrid(s, s))
    y, x = np.concatenate([y, ys]).astype(dtype), np.concatenate([x, xs]).astype(dtype)
    got = run_elementwise("math.atan2", dtype, y, x)
    expected = np.arctan2(y.astype(np.float64), x.astype(np.float64))
    assert ulp_error(got, expected, dtype) <= 2
    special = slice(20000, None)        # signs of zeros and quadrants, as C99 says
    assert np.array_equal(np.signbit(got[special]), np.signbit(expected[special].astype(dtype)))


def test_fpowi_and_ipowi():
    x = np.array([2.0, -3.0, 0.5, -1.0, 0.0], dtype=np.float64)
    n = np.array([10, 3, -4, 7, 0], dtype=np.int32)
    np.testing.assert_allclose(run_elementwise("math.fpowi", np.float64, x, n), x ** n, rtol=1e-15)
    b = np.array([3, -2, 7, 1, -1, -1, 5, 0], dtype=np.int64)
    e = np.array([5, 3, 0, -3, -3, -4, -1, 0], dtype=np.int64)
    expected = np.array([243, -8, 1, 1, -1, 1, 0, 1], dtype=np.int64)
    np.testing.assert_array_equal(run_elementwise("math.ipowi", np.int64, b, e), expected)
