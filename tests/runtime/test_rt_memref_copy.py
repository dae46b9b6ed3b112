"""memrefCopy in adjit's native extension (runtime/native/memref_copy.cpp), which compiled
code calls for copies between memrefs that are not one block, in place of MLIR's
c_runner_utils (which links libMLIR): checked against NumPy's own copies through views of
every layout (strided, reversed, transposed, rank 0, empty, beyond 16 dimensions), and
through compiled code."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

from adjit.runtime import extension

copy = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p)(
    extension.address("memrefCopy"))


def descriptor(a: np.ndarray):
    """An UnrankedMemRefType over `a` (aligned pointer at the array's base, strides in
    elements), and what keeps it alive."""
    rank = a.ndim
    fields = [("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p),
              ("offset", ctypes.c_int64), ("sizes_strides", ctypes.c_int64 * (2 * rank))]
    ranked = type("Ranked", (ctypes.Structure,), {"_fields_": fields})()
    base = a.__array_interface__["data"][0]
    # Point `aligned` one element before the data and give offset 1: offsets must count.
    ranked.allocated = ranked.aligned = base - a.itemsize
    ranked.offset = 1
    for k in range(rank):
        assert a.strides[k] % a.itemsize == 0
        ranked.sizes_strides[k] = a.shape[k]
        ranked.sizes_strides[rank + k] = a.strides[k] // a.itemsize
    unranked = (ctypes.c_int64 * 2)(rank, ctypes.addressof(ranked))
    return unranked, ranked


def copy_with_memref_copy(src: np.ndarray, dst: np.ndarray) -> None:
    s, keep_s = descriptor(src)
    d, keep_d = descriptor(dst)
    copy(src.itemsize, ctypes.addressof(s), ctypes.addressof(d))


VIEWS = {
    "contiguous": lambda a: a,
    "rows reversed": lambda a: a[::-1],
    "every other column": lambda a: a[:, ::2],
    "transposed": lambda a: a.T,
    "columns reversed, rows stepped": lambda a: a[::3, ::-1],
    "inner block": lambda a: a[1:-1, 2:-3],
}


@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.complex128])
def test_copies_between_views_as_numpy(view, dtype):
    rng = np.random.default_rng(0)
    src_base = (rng.standard_normal((9, 14)) * 100).astype(dtype)
    src = VIEWS[view](src_base)
    dst_base = np.zeros((src.shape[1], src.shape[0]), dtype).T   # a transposed destination
    before = dst_base.copy()
    copy_with_memref_copy(src, dst_base)
    np.testing.assert_array_equal(dst_base, src)
    assert not np.array_equal(before, dst_base) or not src.size


def test_rank_zero_empty_and_many_dimensions():
    src, dst = np.array(3.5), np.array(0.0)
    copy_with_memref_copy(src, dst)
    assert dst == 3.5
    empty_src, empty_dst = np.ones((3, 0, 2)), np.zeros((3, 0, 2))
    copy_with_memref_copy(empty_src, empty_dst)           # nothing to do, nothing touched
    big = np.arange(2 ** 18, dtype=np.float64).reshape((2,) * 18)[..., ::-1]
    out = np.zeros((2,) * 18)
    copy_with_memref_copy(big, out)
    np.testing.assert_array_equal(out, big)


def test_the_engine_and_the_process_resolve_the_extensions_copy():
    lib = ctypes.CDLL(None)          # the global scope shared objects of the cache resolve in
    assert ctypes.cast(lib.memrefCopy, ctypes.c_void_p).value == extension.address("memrefCopy")
    assert extension.runtime_symbols()["memrefCopy"] == extension.address("memrefCopy")


# Every other column of `a` into `b`: a copy between a strided view and a block, which the
# lowering leaves to memrefCopy.
STRIDED_COPY = """
func.func @odd_columns(%a: memref<?x?xf64>, %b: memref<?x?xf64>)
    attributes {adj.entry, llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %b, %c0 : memref<?x?xf64>
  %m = memref.dim %b, %c1 : memref<?x?xf64>
  %v = memref.subview %a[0, 1] [%n, %m] [1, 2]
      : memref<?x?xf64> to memref<?x?xf64, strided<[?, 2], offset: 1>>
  memref.copy %v, %b : memref<?x?xf64, strided<[?, 2], offset: 1>> to memref<?x?xf64>
  return
}
"""


def test_compiled_code_copies_through_it():
    from mlir import ir

    from adjit.dialects import make_context
    from adjit.core.types import ArrayType, f64
    from adjit.passes.pipeline import llvm_ir_text
    from adjit.compiler import engine

    module = ir.Module.parse(STRIDED_COPY, make_context())
    assert "@memrefCopy" in llvm_ir_text(ir.Module.parse(STRIDED_COPY, make_context()))
    f = engine.compile_module(module).function(
        "odd_columns", [ArrayType(f64, 2), ArrayType(f64, 2)], [])
    a = np.arange(7 * 10, dtype=np.float64).reshape(7, 10)
    b = np.zeros((7, 5))
    f(a, b)
    np.testing.assert_array_equal(b, a[:, 1::2])
