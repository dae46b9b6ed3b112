"""Scalars and arrays in and out of entry functions, argument checks, errors, call cost."""
import time

import numpy as np
import pytest

from adjit.core.types import SCALARS, ArrayType, bool_, f32, f64, i32, i64
from rt_helpers import MLIR_TYPES

# `@next_T(a, b) -> (T)`: b + 1 (or `not b` for bool) and also checks `a` arrived intact.
ONE = {"f32": "1.0 : f32", "f64": "1.0 : f64", "i32": "1 : i32", "i64": "1 : i64", "bool": "true"}
ADD = {"f32": "arith.addf", "f64": "arith.addf", "i32": "arith.addi", "i64": "arith.addi", "bool": "arith.xori"}

SCALAR_MODULE = "\n".join(f"""
func.func @next_{t}(%a: {m}) -> {m} attributes {{adj.entry, llvm.emit_c_interface}} {{
  %one = arith.constant {ONE[t]}
  %r = {ADD[t]} %a, %one : {m}
  return %r : {m}
}}""" for t, m in MLIR_TYPES.items()) + """
func.func @many(%a: f32, %b: i32, %c: i1, %d: f64, %e: i64) -> (i64, f64, i1, i32, f32)
    attributes {adj.entry, llvm.emit_c_interface} {
  return %e, %d, %c, %b, %a : i64, f64, i1, i32, f32
}
func.func @nothing() attributes {adj.entry, llvm.emit_c_interface} {
  return
}
func.func @sum3(%x: memref<?xf32>, %y: memref<?xf32>, %z: memref<?xf32>, %s: f32) -> f32
    attributes {adj.entry, llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %a = memref.load %x[%c0] : memref<?xf32>
  %b = memref.load %y[%c0] : memref<?xf32>
  %c = memref.load %z[%c0] : memref<?xf32>
  %ab = arith.addf %a, %b : f32
  %abc = arith.addf %ab, %c : f32
  %r = arith.addf %abc, %s : f32
  return %r : f32
}
func.func @scalar_rank0(%x: memref<f64>) -> f64 attributes {adj.entry, llvm.emit_c_interface} {
  %v = memref.load %x[] : memref<f64>
  return %v : f64
}
"""


@pytest.fixture(scope="module")
def cm(compile_text):
    return compile_text(SCALAR_MODULE)


@pytest.mark.parametrize("t", SCALARS, ids=lambda t: t.name)
def test_scalar_arg_and_result(cm, t):
    f = cm.function(f"next_{t.name}", [t], [t])
    value = True if t is bool_ else 41
    r = f(value)
    assert type(r) is t.np_dtype.type
    assert r == (not value if t is bool_ else value + 1)


def test_scalars_convert_to_the_parameter_type(cm):
    assert cm.function("next_f32", [f32], [f32])(np.float64(0.5)) == np.float32(1.5)
    assert cm.function("next_f64", [f64], [f64])(2) == 3.0
    assert cm.function("next_i32", [i32], [i32])(np.int64(-5)) == -4
    assert cm.function("next_i64", [i64], [i64])(np.int32(2**31 - 1)) == 2**31
    assert cm.function("next_bool", [bool_], [bool_])(np.False_) is np.True_


def test_bad_scalars_are_refused(cm):
    with pytest.raises(TypeError, match="argument 1 of next_i64 must be an integer"):
        cm.function("next_i64", [i64], [i64])(1.5)
    with pytest.raises(OverflowError, match="does not fit"):
        cm.function("next_i32", [i32], [i32])(2**31)
    with pytest.raises(TypeError, match="must be a bool"):
        cm.function("next_bool", [bool_], [bool_])(1)
    with pytest.raises(TypeError, match="must be a real number"):
        cm.function("next_f64", [f64], [f64])("1.0")
    with pytest.raises(TypeError, match="takes 1 arguments, got 2"):
        cm.function("next_f64", [f64], [f64])(1.0, 2.0)


def test_multiple_and_no_results(cm):
    many = cm.function("many", [f32, i32, bool_, f64, i64], [i64, f64, bool_, i32, f32])
    assert many(1.5, 2, True, 3.25, 2**40) == (2**40, 3.25, True, 2, 1.5)
    assert [type(v) for v in many(1.5, 2, True, 3.25, 4)] == [np.int64, np.float64, np.bool_,
                                                              np.int32, np.float32]
    assert cm.function("nothing", [], [])() is None


def test_unknown_function(cm):
    with pytest.raises(KeyError, match="no_such"):
        cm.function("no_such", [], [])


def test_array_arguments_are_checked(cm):
    vec = ArrayType(f32, 1)
    sum3 = cm.function("sum3", [vec] * 3 + [f32], [f32])
    x = np.ones(4, np.float32)
    assert sum3(x, x, x, 0.5) == 3.5
    with pytest.raises(TypeError, match=r"argument 2 of sum3 must be a 1-D NumPy array of float32, "
                                        r"got a 1-D array of float64"):
        sum3(x, np.ones(4), x, 0.5)
    with pytest.raises(TypeError, match="got a 2-D array"):
        sum3(x, x, np.ones((2, 2), np.float32), 0.5)
    with pytest.raises(TypeError, match="got list"):
        sum3([1.0], x, x, 0.5)
    with pytest.raises(ValueError, match="C-contiguous"):
        sum3(np.ones(8, np.float32)[::2], x, x, 0.5)
    readonly = np.ones(4, np.float32)
    readonly.flags.writeable = False
    assert sum3(readonly, x, x, 0.0) == 3.0


def test_rank0_array_argument(cm):
    assert cm.function("scalar_rank0", [ArrayType(f64, 0)], [f64])(np.array(2.5)) == 2.5


def test_compiled_modules_are_cached(compile_text, cm):
    assert compile_text(SCALAR_MODULE) is cm
    assert compile_text(SCALAR_MODULE, opt_level=2) is not cm


def test_call_overhead(cm):
    """Prints the cost of a call; asserts nothing about it."""
    nothing = cm.function("nothing", [], [])
    next_f64 = cm.function("next_f64", [f64], [f64])
    sum3 = cm.function("sum3", [ArrayType(f32, 1)] * 3 + [f32], [f32])
    many = cm.function("many", [f32, i32, bool_, f64, i64], [i64, f64, bool_, i32, f32])
    x, y, z = (np.ones(1000, np.float32) for _ in range(3))
    cases = {"f()": lambda: nothing(), "f(float) -> float": lambda: next_f64(1.0),
             "f(3 arrays, float) -> float": lambda: sum3(x, y, z, 1.0),
             "f(5 scalars) -> 5 scalars": lambda: many(1.0, 2, True, 3.0, 4)}
    n = 20000
    for label, call in cases.items():
        call()
        start = time.perf_counter()
        for _ in range(n):
            call()
        print(f"call overhead {label}: {(time.perf_counter() - start) / n * 1e6:.2f} us")
