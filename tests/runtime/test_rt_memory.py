"""Arrays compiled code allocates: returned as owned NumPy arrays, freed otherwise, counted."""
import numpy as np
import pytest

from adjit.core.types import ArrayType, f32, f64, i32, i64
from adjit.runtime.memory import allocate, memory_stats, reset_peak_memory
from rt_helpers import bytes_in_use

MODULE = """
func.func @iota_k(%x: memref<?x?xf64>) attributes {adj.kernel, adj.ndim = 2 : i64} {
  %i = "adj.global_id"() {dim = 0 : i64} : () -> index
  %j = "adj.global_id"() {dim = 1 : i64} : () -> index
  %l = "adj.index"() : () -> index
  %li = arith.index_cast %l : index to i64
  %v = arith.sitofp %li : i64 to f64
  memref.store %v, %x[%i, %j] : memref<?x?xf64>
  return
}
func.func @iota(%n: i64, %m: i64) -> memref<?x?xf64> attributes {adj.entry, llvm.emit_c_interface} {
  %ni = arith.index_cast %n : i64 to index
  %mi = arith.index_cast %m : i64 to index
  %x = memref.alloc(%ni, %mi) : memref<?x?xf64>
  "adj.launch"(%ni, %mi) ({
    func.call @iota_k(%x) : (memref<?x?xf64>) -> ()
    gpu.yield
  }) {kernel = @iota_k} : (index, index) -> ()
  return %x : memref<?x?xf64>
}
// A temporary that is not returned: compiled code must free it.
func.func @temp_sum(%n: i64) -> f64 attributes {adj.entry, llvm.emit_c_interface} {
  %x = func.call @iota(%n, %n) : (i64, i64) -> memref<?x?xf64>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %last = arith.index_cast %n : i64 to index
  %k = arith.subi %last, %c1 : index
  %v = memref.load %x[%k, %k] : memref<?x?xf64>
  return %v : f64
}
// u, v = v, u in a loop: which buffer is returned is known only at run time.
func.func @pingpong(%u0: memref<?xf32>, %steps: i64) -> (memref<?xf32>, i32)
    attributes {adj.entry, llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %u0, %c0 : memref<?xf32>
  %u = memref.alloc(%n) : memref<?xf32>
  memref.copy %u0, %u : memref<?xf32> to memref<?xf32>
  %v = memref.alloc(%n) : memref<?xf32>
  %s = arith.index_cast %steps : i64 to index
  %r:2 = scf.for %k = %c0 to %s step %c1 iter_args(%a = %u, %b = %v) -> (memref<?xf32>, memref<?xf32>) {
    %one = arith.constant 1.0 : f32
    scf.for %i = %c0 to %n step %c1 {
      %x = memref.load %a[%i] : memref<?xf32>
      %y = arith.addf %x, %one : f32
      memref.store %y, %b[%i] : memref<?xf32>
    }
    scf.yield %b, %a : memref<?xf32>, memref<?xf32>
  }
  %seven = arith.constant 7 : i32
  return %r#0, %seven : memref<?xf32>, i32
}
func.func @same_twice(%n: index) -> (memref<?xi64>, memref<?xi64>) attributes {adj.entry, llvm.emit_c_interface} {
  %x = memref.alloc(%n) : memref<?xi64>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %v = arith.constant 42 : i64
  scf.for %i = %c0 to %n step %c1 {
    memref.store %v, %x[%i] : memref<?xi64>
  }
  return %x, %x : memref<?xi64>, memref<?xi64>
}
func.func @identity(%x: memref<?xi32>) -> memref<?xi32> attributes {adj.entry, llvm.emit_c_interface} {
  return %x : memref<?xi32>
}
func.func @scalar_box(%v: f64) -> memref<f64> attributes {adj.entry, llvm.emit_c_interface} {
  %x = memref.alloc() : memref<f64>
  memref.store %v, %x[] : memref<f64>
  return %x : memref<f64>
}
"""


@pytest.fixture(scope="module")
def cm(compile_text):
    return compile_text(MODULE)


def test_returned_array_is_owned_and_counted(cm):
    iota = cm.function("iota", [i64, i64], [ArrayType(f64, 2)])
    before = bytes_in_use()
    x = iota(300, 7)
    assert x.shape == (300, 7) and x.dtype == np.float64 and x.flags.c_contiguous
    np.testing.assert_array_equal(x.ravel(), np.arange(2100.0))
    assert bytes_in_use() - before == x.nbytes
    view = x[10:]
    del x
    assert bytes_in_use() - before == 2100 * 8   # the view keeps the block alive
    del view
    assert bytes_in_use() == before


def test_zero_size_and_rank0_results(cm):
    before = bytes_in_use()
    empty = cm.function("iota", [i64, i64], [ArrayType(f64, 2)])(0, 5)
    assert empty.shape == (0, 5)
    box = cm.function("scalar_box", [f64], [ArrayType(f64, 0)])(2.5)
    assert box.shape == () and box[()] == 2.5
    del empty, box
    assert bytes_in_use() == before


def test_temporaries_are_freed(cm):
    temp_sum = cm.function("temp_sum", [i64], [f64])
    before = bytes_in_use()
    reset_peak_memory()
    assert temp_sum(100) == 100 * 100 - 1
    assert bytes_in_use() == before
    assert memory_stats()["peak_bytes"] >= before + 100 * 100 * 8


def test_buffers_swapped_in_a_loop(cm):
    pingpong = cm.function("pingpong", [ArrayType(f32, 1), i64], [ArrayType(f32, 1), i32])
    u0 = np.arange(5, dtype=np.float32)
    before = bytes_in_use()
    for steps in (0, 1, 4):
        u, seven = pingpong(u0, steps)
        np.testing.assert_array_equal(u, u0 + steps)
        assert seven == 7 and not np.shares_memory(u, u0)
        del u
        assert bytes_in_use() == before


def test_one_array_returned_twice_is_freed_once(cm):
    before = bytes_in_use()
    a, b = cm.function("same_twice", [i64], [ArrayType(i64, 1)] * 2)(6)
    assert np.shares_memory(a, b)
    np.testing.assert_array_equal(a, np.full(6, 42))
    del a
    np.testing.assert_array_equal(b, np.full(6, 42))
    del b
    assert bytes_in_use() == before


def test_returned_argument_is_a_fresh_copy(cm):
    x = np.arange(4, dtype=np.int32)
    y = cm.function("identity", [ArrayType(i32, 1)], [ArrayType(i32, 1)])(x)
    np.testing.assert_array_equal(x, y)
    assert not np.shares_memory(x, y)


def test_allocate_counts_until_freed():
    before = bytes_in_use()
    reset_peak_memory()
    a = allocate((10, 3), np.float32)
    b = allocate(7, np.int64)
    assert a.shape == (10, 3) and a.dtype == np.float32 and a.flags.c_contiguous and a.flags.writeable
    a[:] = 1.0
    assert bytes_in_use() - before == 120 + 56
    del a
    stats = memory_stats()
    assert stats["bytes_in_use"] - before == 56 and stats["peak_bytes"] == before + 176
    reset_peak_memory()
    assert memory_stats()["peak_bytes"] == before + 56
    del b
    assert bytes_in_use() == before


def test_allocate_takes_adjit_types_and_refuses_negative_shapes():
    assert allocate((2, 2), f32).dtype == np.float32
    assert allocate((), i64).shape == ()
    with pytest.raises(ValueError, match="negative"):
        allocate((2, -1), f64)
