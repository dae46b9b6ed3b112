"""Math in kernels: adjit.* functions, the math module's names, Python's abs/min/max and
float()/int(), on f32 (which stays f32) and f64, against NumPy."""
from __future__ import annotations

import math

import numpy as np
import pytest

import adjit
from fe_helpers import FLOATS, assert_same, sample

UNARY = {   # adjit name -> NumPy reference
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "exp": np.exp, "exp2": np.exp2,
    "expm1": np.expm1, "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p,
    "sqrt": np.sqrt, "tanh": np.tanh, "sinh": np.sinh, "cosh": np.cosh, "asin": np.arcsin,
    "acos": np.arccos, "atan": np.arctan, "erf": np.vectorize(math.erf),
    "rsqrt": lambda x: 1 / np.sqrt(x), "cbrt": np.cbrt, "floor": np.floor, "ceil": np.ceil,
    "abs": np.abs,
}


@adjit.kernel
def adjit_unary(x, out):
    i = adjit.index()
    v = x[i]
    out[0, i] = adjit.sin(v)
    out[1, i] = adjit.cos(v)
    out[2, i] = adjit.tan(v)
    out[3, i] = adjit.exp(v)
    out[4, i] = adjit.exp2(v)
    out[5, i] = adjit.expm1(v)
    out[6, i] = adjit.log(v)
    out[7, i] = adjit.log2(v)
    out[8, i] = adjit.log10(v)
    out[9, i] = adjit.log1p(v)
    out[10, i] = adjit.sqrt(v)
    out[11, i] = adjit.tanh(v)
    out[12, i] = adjit.sinh(v)
    out[13, i] = adjit.cosh(v)
    out[14, i] = adjit.asin(v)
    out[15, i] = adjit.acos(v)
    out[16, i] = adjit.atan(v)
    out[17, i] = adjit.erf(v)
    out[18, i] = adjit.rsqrt(v)
    out[19, i] = adjit.cbrt(v)
    out[20, i] = adjit.floor(v * 10.0)
    out[21, i] = adjit.ceil(v * 10.0)
    out[22, i] = adjit.abs(-v)


def _expected(x: np.ndarray) -> np.ndarray:
    rows = []
    for name, ref in UNARY.items():
        arg = x * x.dtype.type(10) if name in ("floor", "ceil") else -x if name == "abs" else x
        rows.append(np.asarray(ref(arg), dtype=x.dtype))
    return np.stack(rows)


@pytest.mark.parametrize("dtype", FLOATS)
def test_adjit_math_functions(dtype):
    x = np.linspace(0.05, 0.95, 64, dtype=dtype)
    out = np.zeros((len(UNARY), len(x)), dtype=dtype)
    adjit_unary(x, out, ndrange=len(x))
    want = _expected(x)
    for k, name in enumerate(UNARY):
        assert_same(out[k], want[k], rtol=1e-5 if dtype == np.float32 else 1e-12)


@adjit.kernel
def math_module(x, out):
    i = adjit.index()
    v = x[i]
    out[0, i] = math.sin(v)
    out[1, i] = math.cos(v)
    out[2, i] = math.exp(v)
    out[3, i] = math.log(v)
    out[4, i] = math.sqrt(v)
    out[5, i] = math.tanh(v)
    out[6, i] = math.floor(v * 10.0)
    out[7, i] = math.fabs(-v)
    out[8, i] = math.pow(v, 1.5)
    out[9, i] = math.atan2(v, 0.5)
    out[10, i] = v * math.pi + math.e
    out[11, i] = math.log1p(v) + math.expm1(v) + math.atan(v) + math.asin(v)


@pytest.mark.parametrize("dtype", FLOATS)
def test_math_module_functions(dtype):
    x = np.linspace(0.05, 0.95, 33, dtype=dtype)
    out = np.zeros((12, len(x)), dtype=dtype)
    math_module(x, out, ndrange=len(x))
    t = dtype
    want = np.stack([np.sin(x), np.cos(x), np.exp(x), np.log(x), np.sqrt(x), np.tanh(x),
                     np.floor(x * t(10)), np.abs(x), x ** t(1.5), np.arctan2(x, t(0.5)),
                     x * t(math.pi) + t(math.e),
                     np.log1p(x) + np.expm1(x) + np.arctan(x) + np.arcsin(x)])
    assert_same(out, want.astype(dtype), rtol=1e-5 if dtype == np.float32 else 1e-12)


@adjit.func
def float32_stays_float32(v):
    return adjit.sin(v) * 0.5 + math.exp(v) + adjit.pow(v, 2.0) + abs(v)


def test_math_on_f32_gives_f32():
    assert_same(float32_stays_float32(np.float32(0.3)),
                np.float32(np.sin(np.float32(0.3)) * np.float32(0.5) + np.exp(np.float32(0.3))
                           + np.float32(0.3) ** 2 + np.float32(0.3)), rtol=1e-6)


@adjit.func
def math_of_ints(n):
    return adjit.sqrt(n), math.exp(n), adjit.floor(n), abs(-n)


def test_math_of_integers_is_f64_except_floor_and_abs():
    s, e, f, a = math_of_ints(4)
    assert_same(s, np.float64(2.0))
    assert_same(e, np.float64(math.exp(4)))
    assert_same(f, np.int64(4))
    assert_same(a, np.int64(4))


@adjit.func
def python_builtins(a, b, c):
    return abs(a), min(a, b), max(a, b), min(a, b, c), max(c, a, b), float(a), int(b)


@pytest.mark.parametrize("a, b, c", [(-3, 5, 1), (2.5, -1.5, 0.0), (7, 7, -7)])
def test_abs_min_max_float_int(a, b, c):
    got = python_builtins(a, b, c)
    want = (abs(a), min(a, b), max(a, b), min(a, b, c), max(c, a, b), float(a), int(b))
    for g, w in zip(got, want):
        assert_same(g, np.asarray(w)[()])


@adjit.func
def mixed_min_max(i, x):
    return min(i, x), max(i, x), adjit.min(x, 0.0), adjit.max(i, 3)


def test_min_max_of_mixed_types_promote():
    lo, hi, m0, m3 = mixed_min_max(2, np.float32(1.5))
    # a Python int is weak (NEP 50): with f32 it gives f32, as np.minimum(2, np.float32(1.5))
    assert_same(lo, np.float32(1.5))
    assert_same(hi, np.float32(2.0))
    assert_same(m0, np.float32(0.0))
    assert_same(m3, np.int64(3))


@adjit.func
def nan_min_max(a, b):
    return min(a, b), max(a, b)


def test_min_max_treat_nan_as_python_does():
    nan = float("nan")
    for a, b in ((nan, 1.0), (1.0, nan)):
        lo, hi = nan_min_max(a, b)
        assert np.isnan(lo) == math.isnan(min(a, b))
        assert np.isnan(hi) == math.isnan(max(a, b))


@adjit.func
def constant_math():
    return adjit.sin(0.5) + math.cos(0.25), math.sqrt(16), abs(-3), min(2, 9)


def test_math_of_constants_is_folded_as_python():
    s, r, a, m = constant_math()
    assert_same(s, np.float64(math.sin(0.5) + math.cos(0.25)))
    assert_same(r, np.float64(4.0))
    assert (int(a), int(m)) == (3, 2)


@adjit.kernel
def negative_inputs(x, out):
    i = adjit.index()
    out[0, i] = adjit.abs(x[i])
    out[1, i] = math.floor(x[i])
    out[2, i] = math.ceil(x[i])
    out[3, i] = adjit.cbrt(x[i])
    out[4, i] = int(x[i])
    out[5, i] = adjit.atan2(x[i], -1.0)


def test_functions_of_negative_values():
    x = sample(40, np.float64, seed=8)
    out = np.zeros((6, 40))
    negative_inputs(x, out, ndrange=40)
    want = np.stack([np.abs(x), np.floor(x), np.ceil(x), np.cbrt(x), np.trunc(x),
                     np.arctan2(x, -1.0)])
    assert_same(out, want)


@adjit.kernel
def int_abs_min_max(x, out):
    i = adjit.index()
    out[0, i] = abs(x[i])
    out[1, i] = min(x[i], 0)
    out[2, i] = max(x[i], -2, 3 - x[i])


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_abs_min_max(dtype):
    x = sample(30, dtype, seed=9)
    out = np.zeros((3, 30), dtype=dtype)
    int_abs_min_max(x, out, ndrange=30)
    want = np.stack([np.abs(x), np.minimum(x, 0), np.maximum(np.maximum(x, -2), 3 - x)])
    assert_same(out, want.astype(dtype))
