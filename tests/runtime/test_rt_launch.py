"""Kernels launched over 1-D, 2-D and 3-D ndranges write arrays of every dtype."""
import numpy as np
import pytest

from adjit.core.types import SCALARS, ArrayType
from rt_helpers import MLIR_TYPES, memref

NDIMS = (1, 2, 3)
# How each kernel turns the linear index (i64) into its element type.
CONVERT = {"f32": "arith.sitofp %l : i64 to f32", "f64": "arith.sitofp %l : i64 to f64",
           "i32": "arith.trunci %l : i64 to i32", "i64": "arith.addi %l, %zero : i64",
           "bool": "arith.trunci %l : i64 to i1"}   # the low bit: odd indices are True


def fill_kernel(elem: str, ndim: int) -> str:
    t = memref(elem, ndim)
    ids = "\n".join(f'  %i{d} = "adj.global_id"() {{dim = {d} : i64}} : () -> index' for d in range(ndim))
    idx = ", ".join(f"%i{d}" for d in range(ndim))
    dims = "\n".join(f"  %c{d} = arith.constant {d} : index\n  %n{d} = memref.dim %x, %c{d} : {t}"
                     for d in range(ndim))
    ns = ", ".join(f"%n{d}" for d in range(ndim))
    return f"""
func.func @k_{elem}_{ndim}(%x: {t}) attributes {{adj.kernel, adj.ndim = {ndim} : i64}} {{
{ids}
  %li = "adj.index"() : () -> index
  %l = arith.index_cast %li : index to i64
  %zero = arith.constant 0 : i64
  %v = {CONVERT[elem]}
  memref.store %v, %x[{idx}] : {t}
  return
}}
func.func @fill_{elem}_{ndim}(%x: {t}) attributes {{adj.entry, llvm.emit_c_interface}} {{
{dims}
  "adj.launch"({ns}) ({{
    func.call @k_{elem}_{ndim}(%x) : ({t}) -> ()
    gpu.yield
  }}) {{kernel = @k_{elem}_{ndim}}} : ({', '.join(['index'] * ndim)}) -> ()
  return
}}"""


@pytest.fixture(scope="module")
def fills(compile_text):
    return compile_text("\n".join(fill_kernel(t.name, n) for t in SCALARS for n in NDIMS))


@pytest.mark.parametrize("ndim", NDIMS)
@pytest.mark.parametrize("t", SCALARS, ids=lambda t: t.name)
def test_fill(fills, t, ndim):
    fill = fills.function(f"fill_{t.name}_{ndim}", [ArrayType(t, ndim)], [])
    shape = (37, 5, 3)[:ndim]
    x = np.zeros(shape, t.np_dtype)
    assert fill(x) is None
    index = np.arange(x.size).reshape(shape)
    np.testing.assert_array_equal(x, (index % 2 == 1) if t.name == "bool" else index.astype(t.np_dtype))


def test_large_launch_on_the_thread_pool(fills):
    # Big enough for async-parallel-for to split it over every worker.
    fill = fills.function("fill_f64_2", [ArrayType(SCALARS[1], 2)], [])
    x = np.zeros((1000, 1003))
    fill(x)
    np.testing.assert_array_equal(x.ravel(), np.arange(x.size, dtype=np.float64))


def test_zero_size_launch(fills):
    fill = fills.function("fill_i32_2", [ArrayType(SCALARS[2], 2)], [])
    x = np.zeros((0, 4), np.int32)
    fill(x)
    assert x.shape == (0, 4)


def test_bool_array_read_and_write(compile_text):
    b = memref("bool", 1)
    cm = compile_text(f"""
func.func @k(%x: {b}, %y: {b}) attributes {{adj.kernel, adj.ndim = 1 : i64}} {{
  %i = "adj.global_id"() {{dim = 0 : i64}} : () -> index
  %v = memref.load %x[%i] : {b}
  %t = arith.constant true
  %n = arith.xori %v, %t : i1
  memref.store %n, %y[%i] : {b}
  return
}}
func.func @negate(%x: {b}, %y: {b}) attributes {{adj.entry, llvm.emit_c_interface}} {{
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : {b}
  "adj.launch"(%n) ({{
    func.call @k(%x, %y) : ({b}, {b}) -> ()
    gpu.yield
  }}) {{kernel = @k}} : (index) -> ()
  return
}}""")
    bools = ArrayType(SCALARS[4], 1)
    negate = cm.function("negate", [bools, bools], [])
    x = np.array([True, False, False, True, True])
    y = np.zeros_like(x)
    negate(x, y)
    np.testing.assert_array_equal(y, ~x)


@pytest.mark.parametrize("elem, kind", [("f32", "addf"), ("f64", "addf"), ("i32", "addi"), ("i64", "addi")])
def test_atomic_add_from_every_work_item(compile_text, elem, kind):
    v, acc = memref(elem, 1), memref(elem, 1)
    cm = compile_text(f"""
func.func @k(%x: {v}, %acc: {acc}) attributes {{adj.kernel, adj.ndim = 1 : i64}} {{
  %i = "adj.global_id"() {{dim = 0 : i64}} : () -> index
  %c0 = arith.constant 0 : index
  %e = memref.load %x[%i] : {v}
  %old = memref.atomic_rmw {kind} %e, %acc[%c0] : ({MLIR_TYPES[elem]}, {acc}) -> {MLIR_TYPES[elem]}
  return
}}
func.func @total(%x: {v}, %acc: {acc}) attributes {{adj.entry, llvm.emit_c_interface}} {{
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : {v}
  "adj.launch"(%n) ({{
    func.call @k(%x, %acc) : ({v}, {acc}) -> ()
    gpu.yield
  }}) {{kernel = @k}} : (index) -> ()
  return
}}""")
    t = next(s for s in SCALARS if s.name == elem)
    total = cm.function("total", [ArrayType(t, 1)] * 2, [])
    x = np.ones(200_000, t.np_dtype)
    acc = np.zeros(1, t.np_dtype)
    total(x, acc)
    assert acc[0] == x.size
