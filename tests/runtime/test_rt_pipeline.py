"""The CPU pass pipeline: its text, thread settings, bool memrefs, IR stages; engines."""
import gc
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from mlir import ir

from adjit.core.types import ArrayType, i64
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


def test_thread_count_is_passed_to_the_pool(ctx, monkeypatch):
    assert "async" not in cpu_pipeline()
    for threads in (1, 3):
        llvm_ir = llvm_ir_text(ir.Module.parse(MODULE, ctx), num_threads=threads)
        assert (f"i64 {threads}, i64 %" in llvm_ir) == (threads > 1)
        assert ("@adj_parallel_for(" in llvm_ir) == (threads > 1)
    monkeypatch.setenv("ADJIT_NUM_THREADS", "5")
    assert default_num_threads() == 5
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
    assert "define void @_mlir_ciface_iota(ptr" in llvm_ir and "@adj_parallel_for(" in llvm_ir
    assert "llvm.func @_mlir_ciface_iota" in llvm_dialect_text(module, num_threads=1)
    assert str(module) == before
    lower_to_llvm(module, num_threads=1)
    names = {op.operation.name for op in module.body.operations}
    assert names <= {"llvm.func", "llvm.mlir.global"}
    assert "adj.kernel" not in str(module)   # kernels are inlined, not compiled on their own


SHARED = """
func.func @body(%x: memref<?xf64>) -> f64 {
  %c0 = arith.constant 0 : index
  %v = memref.load %x[%c0] : memref<?xf64>
  %s = math.sin %v : f64
  return %s : f64
}
func.func @first(%x: memref<?xf64>) -> f64 attributes {adj.entry, llvm.emit_c_interface} {
  %r = func.call @body(%x) : (memref<?xf64>) -> f64
  return %r : f64
}
func.func @second(%x: memref<?xf64>) -> f64 attributes {adj.entry, llvm.emit_c_interface} {
  %r = func.call @body(%x) : (memref<?xf64>) -> f64
  %d = arith.addf %r, %r : f64
  return %d : f64
}
func.func @third(%x: memref<?xf64>) -> f64 attributes {adj.entry, llvm.emit_c_interface} {
  %r = func.call @only_here(%x) : (memref<?xf64>) -> f64
  return %r : f64
}
func.func @only_here(%x: memref<?xf64>) -> f64 {
  %c0 = arith.constant 0 : index
  %v = memref.load %x[%c0] : memref<?xf64>
  return %v : f64
}
"""


def test_a_body_two_entries_call_is_compiled_once(ctx):
    # A derivative's rev_all, aug and rev entries call its augmented and reverse bodies:
    # called, not inlined into each entry (compiled once: the heat gradient's JIT 2.1 -> 1.1 s).
    module = ir.Module.parse(SHARED, ctx)
    text = llvm_dialect_text(module, num_threads=1)
    assert "llvm.func @body(" in text and text.count("llvm.call @body(") == 2
    assert "@only_here" not in text             # one caller: inlined as before


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


CAP_SCRIPT = """
import os, numpy as np
from mlir import ir
from adjit.dialects import make_context
from adjit.core.types import ArrayType, i64
from adjit.compiler.engine import compile_module
iota = compile_module(ir.Module.parse(MODULE, make_context())).function("iota", [ArrayType(i64, 1)], [])
before = len(os.listdir("/proc/self/task"))
for _ in range(20):
    iota(np.zeros(2_000_000, np.int64))
print(len(os.listdir("/proc/self/task")) - before)
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc")
def test_num_threads_caps_the_threads_a_launch_uses():
    # A fresh process: the pool starts a worker per thread a launch uses, beyond the caller.
    threads = 2 if len(os.sched_getaffinity(0)) > 2 else 1
    out = subprocess.run([sys.executable, "-c", f"MODULE = {MODULE!r}\n{CAP_SCRIPT}"], check=True,
                         capture_output=True, text=True, env={**os.environ, "ADJIT_NUM_THREADS": str(threads)})
    assert 0 <= int(out.stdout) <= threads


def test_compiled_module_gives_its_llvm_ir(compile_text):
    from adjit.compiler.engine import llvm_text
    module = compile_text(MODULE)
    assert "define void @_mlir_ciface_iota(ptr" in llvm_text(module.source, module.num_threads)


def test_adjit_opt_runs_the_runtimes_pipeline_as_text(ctx, tmp_path, capsys):
    # The CPU lowering is one pipeline string (adjit's passes among upstream ones): the tool
    # given that string produces what the runtime compiles.
    from adjit.passes import opt
    from adjit.passes.pipeline import cpu_pipeline
    path = tmp_path / "iota.mlir"
    path.write_text(MODULE)
    text = cpu_pipeline(2)
    assert text.startswith("builtin.module(adj-lower-cpu{threads=2},")
    assert "adj-parallel-for" in text and "adj-define-launchers{threads=2}" in text
    assert opt.main([str(path), f"--pass-pipeline={text}"]) == 0
    expected = llvm_dialect_text(ir.Module.parse(MODULE, ctx), num_threads=2)
    assert capsys.readouterr().out.strip() == expected.strip()
