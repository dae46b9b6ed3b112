"""The CPU pass pipeline: its text, thread settings, bool memrefs, IR stages; engines."""
import gc
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from mlir import ir

from adjit.frontend.types import ArrayType, i64
from adjit.passes.pipeline import (cpu_pipeline, default_num_threads, llvm_dialect_text, llvm_ir_text,
                                   lower_to_llvm, widen_bool_memrefs)

MODULE = """
func.func @k(%x: memref<?xi64>) attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.global_id"() {dim = 0 : i64} : () -> index
  %v = arith.index_cast %i : index to i64
  memref.store %v, %x[%i] : memref<?xi64>
  return
}
func.func @iota(%x: memref<?xi64>) attributes {adj.entry, llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xi64>
  "adj.launch"(%n) ({
    func.call @k(%x) : (memref<?xi64>) -> ()
    gpu.yield
  }) {kernel = @k} : (index) -> ()
  return
}
"""


def test_thread_count_sets_async_workers(monkeypatch):
    assert "async-parallel-for{async-dispatch=true num-workers=3}" in cpu_pipeline(3)
    assert "async" not in cpu_pipeline(1)
    monkeypatch.setenv("ADJIT_NUM_THREADS", "5")
    assert default_num_threads() == 5 and "num-workers=5" in cpu_pipeline()
    monkeypatch.setenv("ADJIT_NUM_THREADS", "zero")
    with pytest.raises(ValueError, match="ADJIT_NUM_THREADS"):
        default_num_threads()
    monkeypatch.delenv("ADJIT_NUM_THREADS")
    assert default_num_threads() >= 1


@pytest.mark.parametrize("threads", ["1", "2"])
def test_compiles_and_runs_with_any_thread_count(compile_text, monkeypatch, threads):
    monkeypatch.setenv("ADJIT_NUM_THREADS", threads)
    iota = compile_text(MODULE).function("iota", [ArrayType(i64, 1)], [])
    x = np.zeros(100_000, np.int64)
    iota(x)
    np.testing.assert_array_equal(x, np.arange(x.size))


def test_lowering_stages(ctx):
    module = ir.Module.parse(MODULE, ctx)
    before = str(module)
    llvm_ir = llvm_ir_text(module, num_threads=2)
    assert "define void @_mlir_ciface_iota(ptr" in llvm_ir and "mlirAsyncRuntimeExecute" in llvm_ir
    assert "llvm.func @_mlir_ciface_iota" in llvm_dialect_text(module, num_threads=1)
    assert str(module) == before
    lower_to_llvm(module, num_threads=1)
    names = {op.operation.name for op in module.body.operations}
    assert names <= {"llvm.func", "llvm.mlir.global"}
    assert "adj.kernel" not in str(module)   # kernels are inlined, not compiled on their own


def test_bool_memrefs_become_bytes(ctx):
    module = ir.Module.parse("""
func.func @f(%x: memref<?xi1>, %v: i1) -> (i1, memref<?xi1>) {
  %c0 = arith.constant 0 : index
  %old = memref.load %x[%c0] : memref<?xi1>
  memref.store %v, %x[%c0] : memref<?xi1>
  return %old, %x : i1, memref<?xi1>
}""", ctx)
    with ctx, ir.Location.unknown():
        widen_bool_memrefs(module.operation)
    assert module.operation.verify()
    text = str(module)
    assert "i1>" not in text
    assert "@f(%arg0: memref<?xi8>, %arg1: i1) -> (i1, memref<?xi8>)" in text
    assert "arith.cmpi ne" in text and "arith.extui" in text


def test_callable_outlives_the_module_object(compile_text):
    iota = compile_text(MODULE).function("iota", [ArrayType(i64, 1)], [])
    gc.collect()
    x = np.zeros(50_000, np.int64)
    iota(x)
    np.testing.assert_array_equal(x, np.arange(x.size))


def test_calls_from_several_threads(compile_text):
    iota = compile_text(MODULE).function("iota", [ArrayType(i64, 1)], [])
    arrays = [np.zeros(20_000 + k, np.int64) for k in range(16)]
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(iota, arrays))
    for x in arrays:
        np.testing.assert_array_equal(x, np.arange(x.size))
