"""`adj.check` failures in compiled code raise the named Python exception after the call."""
import numpy as np
import pytest

from adjit.core.types import ArrayType, f64, i64
from rt_helpers import bytes_in_use

MODULE = """
func.func @k(%x: memref<?xf64>, %limit: index) attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.global_id"() {dim = 0 : i64} : () -> index
  %ok = arith.cmpi ult, %i, %limit : index
  "adj.check"(%ok) {error = "IndexError", message = "index out of bounds (kernel.py:3:5)"} : (i1) -> ()
  scf.if %ok {
    %one = arith.constant 1.0 : f64
    memref.store %one, %x[%i] : memref<?xf64>
  }
  return
}
func.func @bounded(%x: memref<?xf64>, %limit: i64) attributes {adj.entry, llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf64>
  %l = arith.index_cast %limit : i64 to index
  "adj.launch"(%n) ({
    func.call @k(%x, %l) : (memref<?xf64>, index) -> ()
    gpu.yield
  }) {kernel = @k} : (index) -> ()
  return
}
func.func @checked_alloc(%n: i64) -> memref<?xf64> attributes {adj.entry, llvm.emit_c_interface} {
  %zero = arith.constant 0 : i64
  %ok = arith.cmpi sge, %n, %zero : i64
  "adj.check"(%ok) {error = "ValueError", message = "negative dimensions are not allowed"} : (i1) -> ()
  %c0 = arith.constant 0 : index
  %size = arith.index_cast %n : i64 to index
  %safe = arith.maxsi %size, %c0 : index
  %x = memref.alloc(%safe) : memref<?xf64>
  return %x : memref<?xf64>
}
func.func @odd(%v: i64) -> i64 attributes {adj.entry, llvm.emit_c_interface} {
  %zero = arith.constant 0 : i64
  %ok = arith.cmpi ne, %v, %zero : i64
  "adj.check"(%ok) {error = "NoSuchError", message = "custom failure"} : (i1) -> ()
  return %v : i64
}
"""


@pytest.fixture(scope="module")
def cm(compile_text):
    return compile_text(MODULE)


def test_failed_check_in_a_kernel_raises_index_error(cm):
    bounded = cm.function("bounded", [ArrayType(f64, 1), i64], [])
    x = np.zeros(1000)
    with pytest.raises(IndexError, match=r"index out of bounds \(kernel.py:3:5\)"):
        bounded(x, 990)
    assert x.sum() == 990          # the other work items ran
    bounded(x, 1000)               # the error was reset
    assert x.sum() == 1000


def test_value_error_and_its_result_is_freed(cm):
    checked_alloc = cm.function("checked_alloc", [i64], [ArrayType(f64, 1)])
    assert checked_alloc(3).shape == (3,)
    before = bytes_in_use()
    with pytest.raises(ValueError, match="negative dimensions"):
        checked_alloc(-1)
    assert bytes_in_use() == before


def test_unknown_error_kind_raises_runtime_error(cm):
    odd = cm.function("odd", [i64], [i64])
    assert odd(5) == 5
    with pytest.raises(RuntimeError, match="custom failure"):
        odd(0)
